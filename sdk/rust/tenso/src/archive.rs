//! Files of many named tensors: tenso archives (`.tenso`), safetensors and bintensors, over
//! `tenso/archive.h`. [`Archive`] reads, [`ArchiveWriter`] writes.
use std::any::Any;
use std::ffi::{c_int, c_void, CStr};
use std::fmt;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr::{self, NonNull};

use tenso_sys as sys;

use crate::composite::slice_from;
use crate::dtype::{Dtype, Kind};
use crate::encode::{path_cstring, Encode};
use crate::error::{check, Error, ErrorKind, Result};
use crate::io::Packet;
use crate::options::{DecodeOptions, Options};
use crate::value::with_value;

/// A file format of [`Archive`] and [`ArchiveWriter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// A tenso archive (`.tenso`): every tensor a Tenso packet at an aligned offset, a hash
    /// index, metadata, optional XXH3 per tensor.
    Archive,
    /// safetensors (`.safetensors`).
    Safetensors,
    /// bintensors (`.bt`).
    Bintensors,
    /// One Tenso packet (a dense tensor, or a bundle whose entries are the tensors); read only.
    Packet,
}

impl Format {
    fn code(self) -> sys::tenso_format {
        match self {
            Format::Archive => sys::TENSO_FORMAT_ARCHIVE,
            Format::Safetensors => sys::TENSO_FORMAT_SAFETENSORS,
            Format::Bintensors => sys::TENSO_FORMAT_BINTENSORS,
            Format::Packet => sys::TENSO_FORMAT_PACKET,
        }
    }

    fn from_code(code: sys::tenso_format) -> Option<Format> {
        match code {
            sys::TENSO_FORMAT_ARCHIVE => Some(Format::Archive),
            sys::TENSO_FORMAT_SAFETENSORS => Some(Format::Safetensors),
            sys::TENSO_FORMAT_BINTENSORS => Some(Format::Bintensors),
            sys::TENSO_FORMAT_PACKET => Some(Format::Packet),
            _ => None,
        }
    }

    /// libtenso's short name: `"tenso"`, `"safetensors"`, `"bintensors"`, `"packet"`.
    pub fn name(self) -> &'static str {
        // SAFETY: static NUL-terminated ASCII storage.
        unsafe { CStr::from_ptr(sys::tenso_format_name(self.code())) }.to_str().unwrap_or("")
    }
}

fn utf8<'x>(p: *const std::ffi::c_char, n: usize) -> &'x str {
    // SAFETY (callers): p..p+n is owned by the archive handle, borrowed for 'x.
    let bytes = unsafe { slice_from(p.cast::<u8>(), n) };
    // libtenso refuses names and metadata that are not UTF-8 (TENSO_E_BAD_UTF8) when it
    // opens a file, so this only fails on a library bug.
    std::str::from_utf8(bytes).expect("libtenso returned an archive string that is not UTF-8")
}

// ============================================================================================
// Reading
// ============================================================================================

/// How to open an [`Archive`]. The default detects the format from the file's first bytes,
/// verifies each stored hash on a tensor's first [`get`](Archive::get), and caps the index at
/// 10^8 bytes and 10^7 tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveOptions {
    raw: sys::tenso_archive_options,
}

impl Default for ArchiveOptions {
    fn default() -> ArchiveOptions {
        ArchiveOptions { raw: sys::TENSO_ARCHIVE_OPTIONS_INIT }
    }
}

impl ArchiveOptions {
    /// The defaults.
    pub fn new() -> ArchiveOptions {
        ArchiveOptions::default()
    }
    fn set(mut self, bit: u32, on: bool) -> ArchiveOptions {
        if on {
            self.raw.flags |= bit;
        } else {
            self.raw.flags &= !bit;
        }
        self
    }
    /// Verify every stored hash while opening (O(file)).
    pub fn verify_all(self, on: bool) -> ArchiveOptions {
        self.set(sys::TENSO_ARCHIVE_VERIFY_ALL, on)
    }
    /// Never verify stored hashes.
    pub fn no_verify(self, on: bool) -> ArchiveOptions {
        self.set(sys::TENSO_ARCHIVE_NO_VERIFY, on)
    }
    /// Read the file as this format instead of detecting it.
    pub fn format(mut self, format: Format) -> ArchiveOptions {
        self.raw.format = format.code();
        self
    }
    /// The largest index / JSON / bincode header accepted (0: 10^8 bytes).
    pub fn max_index_bytes(mut self, n: u64) -> ArchiveOptions {
        self.raw.max_index_bytes = n;
        self
    }
    /// The most tensors accepted (0: 10^7).
    pub fn max_tensors(mut self, n: u64) -> ArchiveOptions {
        self.raw.max_tensors = n;
        self
    }

    /// Opens the file at `path` and reads its index (the data is not touched).
    /// [`ErrorKind::NotFound`] / [`ErrorKind::Io`] from the system; [`ErrorKind::Corrupt`],
    /// [`ErrorKind::Limit`], [`ErrorKind::BadOffset`], [`ErrorKind::DuplicateKey`],
    /// [`ErrorKind::BadUtf8`], [`ErrorKind::Truncated`], [`ErrorKind::BadDtype`] for files
    /// that are not valid for their format.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Archive> {
        let c = path_cstring(path.as_ref())?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::tenso_archive_open(&mut out, c.as_ptr(), &self.raw) })?;
        let raw =
            NonNull::new(out).ok_or_else(|| Error::new(ErrorKind::Internal, "libtenso returned a NULL archive"))?;
        Ok(Archive { raw })
    }
}

/// A file of named tensors, mapped read-only: a tenso archive, a safetensors or bintensors
/// file, or one packet. Opening reads only the index; [`get`](Archive::get) returns a
/// zero-copy [`Packet`] into the mapping, which stays valid after the `Archive` is dropped.
///
/// `Send + Sync`: gets, reads and verification may run from several threads at once.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("tenso-doc-archive-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("model.tenso");
///
/// let (w, b) = (vec![0.25f32; 6], [1i64, 2, 3]);
/// let mut out = tenso::ArchiveWriter::create(&path)?;
/// out.add("w", &tenso::Tensor::new(&w, &[2, 3])?)?;
/// out.add("b", &tenso::Tensor::from_slice(&b))?;
/// out.set_metadata("framework", "rust")?;
/// out.finish()?;                                    // index, fsync, rename
///
/// let a = tenso::Archive::open(&path)?;
/// assert_eq!(a.format(), tenso::Format::Archive);
/// let names: Vec<&str> = a.entries().map(|e| e.name()).collect();
/// assert_eq!(names, ["w", "b"]);
/// assert_eq!(a.get("w")?.as_slice::<f32>()?, &w[..]); // zero copy from the mapping
/// assert_eq!(a.get(1)?.to_vec::<i64>()?, b);
/// let mut first = [0u8; 8];
/// a.read("b", 0, &mut first)?;                      // pread, no mapping touched
/// assert_eq!(i64::from_le_bytes(first), 1);
/// assert_eq!(a.metadata_get("framework"), Some("rust"));
/// a.verify()?;
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), tenso::Error>(())
/// ```
pub struct Archive {
    raw: NonNull<sys::tenso_archive>,
}

// SAFETY: archive.h: gets are thread-safe; the other calls only read the index.
unsafe impl Send for Archive {}
unsafe impl Sync for Archive {}

impl Drop for Archive {
    fn drop(&mut self) {
        // SAFETY: we own the handle; packets from it keep the mapping alive.
        unsafe { sys::tenso_archive_close(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Archive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Archive").field("format", &self.format()).field("len", &self.len()).finish()
    }
}

/// Where a tensor is in an [`Archive`]: its index (`usize`) or its name (`&str`).
pub trait ArchiveKey: private::Sealed {
    #[doc(hidden)]
    fn index_in(&self, a: &Archive) -> Result<u64>;
}

mod private {
    pub trait Sealed {}
    impl Sealed for usize {}
    impl Sealed for &str {}
    impl Sealed for &String {}
}

impl ArchiveKey for usize {
    fn index_in(&self, _: &Archive) -> Result<u64> {
        Ok(*self as u64)
    }
}

impl ArchiveKey for &str {
    fn index_in(&self, a: &Archive) -> Result<u64> {
        let mut i = 0u64;
        check(unsafe { sys::tenso_archive_find(&mut i, a.raw.as_ptr(), self.as_ptr().cast(), self.len()) })?;
        Ok(i)
    }
}

impl ArchiveKey for &String {
    fn index_in(&self, a: &Archive) -> Result<u64> {
        self.as_str().index_in(a)
    }
}

/// A verify progress closure and the panic it raised, if any (parked until C returns).
struct Progress<'f> {
    f: &'f mut dyn FnMut(u64, u64) -> bool,
    panic: Option<Box<dyn Any + Send>>,
}

unsafe extern "C" fn progress_trampoline(done: u64, total: u64, user: *mut c_void) -> c_int {
    // SAFETY: `user` is the Progress of the verify call that is running.
    let p = unsafe { &mut *user.cast::<Progress<'_>>() };
    if p.panic.is_some() {
        return 1;
    }
    // Never unwind into C: catch the panic, stop the walk, re-raise after the call.
    match catch_unwind(AssertUnwindSafe(|| (p.f)(done, total))) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(payload) => {
            p.panic = Some(payload);
            1
        }
    }
}

impl Archive {
    /// Opens a file with the default options; see [`ArchiveOptions::open`].
    pub fn open(path: impl AsRef<Path>) -> Result<Archive> {
        ArchiveOptions::default().open(path)
    }

    fn ptr(&self) -> *mut sys::tenso_archive {
        self.raw.as_ptr()
    }

    /// The format that was opened.
    pub fn format(&self) -> Format {
        Format::from_code(unsafe { sys::tenso_archive_format(self.ptr()) }).unwrap_or(Format::Archive)
    }

    /// A tenso archive's alignment (64, or 4096 for O_DIRECT / GPUDirect Storage): every
    /// packet starts at a multiple of it in the file. 0 for safetensors, bintensors and
    /// packet files, which promise none.
    pub fn alignment(&self) -> u32 {
        unsafe { sys::tenso_archive_alignment(self.ptr()) }
    }

    /// Number of tensors.
    pub fn len(&self) -> usize {
        unsafe { sys::tenso_archive_count(self.ptr()) as usize }
    }

    /// Whether the file holds no tensor.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tensor `index` as the index describes it, in file order; `None` out of range.
    pub fn entry(&self, index: usize) -> Option<ArchiveEntry<'_>> {
        let mut raw = std::mem::MaybeUninit::<sys::tenso_archive_entry>::zeroed();
        let st = unsafe { sys::tenso_archive_entry_at(raw.as_mut_ptr(), self.ptr(), index as u64) };
        if st != sys::TENSO_OK {
            unsafe { sys::tenso_error_clear() };
            return None;
        }
        // SAFETY: zero-initialised plain data filled by libtenso; `name` is owned by the handle.
        Some(ArchiveEntry { raw: unsafe { raw.assume_init() }, _archive: PhantomData })
    }

    /// The tensors as the index describes them, in file order.
    pub fn entries(&self) -> ArchiveEntries<'_> {
        ArchiveEntries { archive: self, front: 0, back: self.len() }
    }

    /// The index of the tensor named `name` (O(1) in tenso archives); `None` when there is none.
    pub fn find(&self, name: &str) -> Option<usize> {
        match name.index_in(self) {
            Ok(i) => Some(i as usize),
            Err(_) => None,
        }
    }

    /// A tensor, by index or name, as a zero-copy [`Packet`] into the mapping (LZ4 bodies
    /// decompressed). A stored hash is verified on each tensor's first get (unless opened with
    /// [`no_verify`](ArchiveOptions::no_verify)): [`ErrorKind::Checksum`] when the bytes do not
    /// match. [`ErrorKind::NotFound`] for an unknown name.
    pub fn get<K: ArchiveKey>(&self, key: K) -> Result<Packet> {
        self.get_with(key, &DecodeOptions::default())
    }

    /// [`get`](Archive::get) under decode limits.
    pub fn get_with<K: ArchiveKey>(&self, key: K, opts: &DecodeOptions) -> Result<Packet> {
        let index = key.index_in(self)?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::tenso_archive_get(&mut out, self.ptr(), index, opts.ptr()) })?;
        // SAFETY: the view owns a reference to the mapping (or its decompressed body).
        unsafe { Packet::from_owning_view(out) }
    }

    /// Copies `dst.len()` body bytes of a tensor, starting `offset` bytes into its body, with
    /// `pread(2)` (only those bytes are read; slices of tensors larger than memory). Only for
    /// tensors stored raw ([`ArchiveEntry::data_offset`] is `Some`): otherwise
    /// [`ErrorKind::UnsupportedKind`]; a range outside the body is
    /// [`ErrorKind::InvalidArgument`].
    pub fn read<K: ArchiveKey>(&self, key: K, offset: u64, dst: &mut [u8]) -> Result<()> {
        let index = key.index_in(self)?;
        // SAFETY: dst is writable for its length.
        check(unsafe { sys::tenso_archive_read(dst.as_mut_ptr().cast(), self.ptr(), index, offset, dst.len() as u64) })
    }

    /// The string metadata pairs, in the order stored.
    pub fn metadata(&self) -> Metadata<'_> {
        let n = unsafe { sys::tenso_archive_metadata_count(self.ptr()) } as usize;
        Metadata { archive: self, front: 0, back: n }
    }

    /// The metadata value for `key`.
    pub fn metadata_get(&self, key: &str) -> Option<&str> {
        let (mut v, mut n) = (ptr::null(), 0usize);
        let st =
            unsafe { sys::tenso_archive_metadata_find(&mut v, &mut n, self.ptr(), key.as_ptr().cast(), key.len()) };
        if st != sys::TENSO_OK {
            unsafe { sys::tenso_error_clear() };
            return None;
        }
        Some(utf8(v, n))
    }

    fn metadata_at(&self, index: usize) -> Option<(&str, &str)> {
        let (mut k, mut kn, mut v, mut vn) = (ptr::null(), 0usize, ptr::null(), 0usize);
        let st = unsafe { sys::tenso_archive_metadata_at(&mut k, &mut kn, &mut v, &mut vn, self.ptr(), index as u64) };
        if st != sys::TENSO_OK {
            unsafe { sys::tenso_error_clear() };
            return None;
        }
        Some((utf8(k, kn), utf8(v, vn)))
    }

    /// Verifies every stored hash (and, for archives, that every packet decodes). On failure
    /// the error is the first failing tensor's ([`ErrorKind::Checksum`] or the decode kind),
    /// with its index in [`Error::index`].
    pub fn verify(&self) -> Result<()> {
        self.verify_impl(None)
    }

    /// [`verify`](Archive::verify), calling `progress(done, total)` (bytes) as it goes;
    /// returning `false` stops it with [`ErrorKind::User`]. A panic in `progress` stops the
    /// walk and is resumed once libtenso has returned.
    ///
    /// ```no_run
    /// # let a = tenso::Archive::open("model.tenso")?;
    /// a.verify_with_progress(|done, total| {
    ///     eprint!("\r{:.0}%", 100.0 * done as f64 / total.max(1) as f64);
    ///     true
    /// })?;
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn verify_with_progress(&self, mut progress: impl FnMut(u64, u64) -> bool) -> Result<()> {
        self.verify_impl(Some(&mut progress))
    }

    fn verify_impl(&self, f: Option<&mut dyn FnMut(u64, u64) -> bool>) -> Result<()> {
        let mut bad = u64::MAX;
        let st = match f {
            None => unsafe { sys::tenso_archive_verify(&mut bad, self.ptr(), None, ptr::null_mut()) },
            Some(f) => {
                let mut p = Progress { f, panic: None };
                let user: *mut Progress<'_> = &mut p;
                // SAFETY: `p` outlives the call; the trampoline is the only user of it.
                let st =
                    unsafe { sys::tenso_archive_verify(&mut bad, self.ptr(), Some(progress_trampoline), user.cast()) };
                if let Some(payload) = p.panic.take() {
                    unsafe { sys::tenso_error_clear() };
                    resume_unwind(payload);
                }
                st
            }
        };
        match check(st) {
            Err(e) if bad != u64::MAX && e.kind() != ErrorKind::User => Err(e.with_index(bad)),
            other => other,
        }
    }
}

/// One tensor as an [`Archive`]'s index describes it; borrows the archive (for the name).
#[derive(Clone, Copy)]
pub struct ArchiveEntry<'a> {
    raw: sys::tenso_archive_entry,
    _archive: PhantomData<&'a Archive>,
}

// SAFETY: plain data plus a pointer to the archive's immutable name table.
unsafe impl Send for ArchiveEntry<'_> {}
unsafe impl Sync for ArchiveEntry<'_> {}

impl fmt::Debug for ArchiveEntry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArchiveEntry")
            .field("name", &self.name())
            .field("kind", &self.kind())
            .field("dtype", &self.dtype())
            .field("shape", &self.shape())
            .field("offset", &self.offset())
            .field("stored_bytes", &self.stored_bytes())
            .field("xxh3", &self.xxh3())
            .finish()
    }
}

impl<'a> ArchiveEntry<'a> {
    /// The tensor's name (unique in the file).
    pub fn name(&self) -> &'a str {
        utf8(self.raw.name, self.raw.name_len)
    }
    /// What the tensor is ([`Kind::Dense`] for safetensors and bintensors).
    pub fn kind(&self) -> Kind {
        Kind::from_code(self.raw.kind)
    }
    /// The dtype; `None` for containers.
    pub fn dtype(&self) -> Option<Dtype> {
        Dtype::from_code(self.raw.dtype)
    }
    /// The shape.
    pub fn shape(&self) -> &[usize] {
        crate::tensor::dims(&self.raw.shape[..(self.raw.ndim as usize).min(self.raw.shape.len())])
    }
    /// Absolute file offset of the stored bytes (a packet for archives, the raw body for
    /// safetensors and bintensors).
    pub fn offset(&self) -> u64 {
        self.raw.offset
    }
    /// Length of the stored bytes.
    pub fn stored_bytes(&self) -> u64 {
        self.raw.stored_bytes
    }
    /// Body bytes once decoded.
    pub fn nbytes(&self) -> u64 {
        self.raw.nbytes
    }
    /// Absolute file offset of the raw body; `None` when it is not stored raw (compressed
    /// bodies, containers), which [`Archive::read`] then refuses.
    pub fn data_offset(&self) -> Option<u64> {
        (self.raw.data_offset != 0).then_some(self.raw.data_offset)
    }
    /// The XXH3-64 of the stored bytes, when the index holds one.
    pub fn xxh3(&self) -> Option<u64> {
        (self.raw.flags & sys::TENSO_ENTRY_HASHED != 0).then_some(self.raw.xxh3)
    }
}

/// `for entry in &archive` walks the index in file order, as [`Archive::entries`].
///
/// ```
/// let dir = std::env::temp_dir().join(format!("tenso-doc-iter-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("m.tenso");
/// let mut w = tenso::ArchiveWriter::create(&path)?;
/// w.add("a", &tenso::Tensor::from_slice(&[1u8, 2]))?;
/// w.add("b", &tenso::Tensor::new(&[0f32; 6], &[2, 3])?)?;
/// w.finish()?;
/// let archive = tenso::Archive::open(&path)?;
/// let mut shapes = Vec::new();
/// for entry in &archive {
///     shapes.push((entry.name().to_owned(), entry.shape().to_vec()));
/// }
/// assert_eq!(shapes, [("a".to_owned(), vec![2]), ("b".to_owned(), vec![2, 3])]);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), tenso::Error>(())
/// ```
impl<'a> IntoIterator for &'a Archive {
    type Item = ArchiveEntry<'a>;
    type IntoIter = ArchiveEntries<'a>;
    fn into_iter(self) -> ArchiveEntries<'a> {
        self.entries()
    }
}

/// Iterator over an [`Archive`]'s entries, in file order.
#[derive(Debug, Clone)]
pub struct ArchiveEntries<'a> {
    archive: &'a Archive,
    front: usize,
    back: usize,
}

impl<'a> Iterator for ArchiveEntries<'a> {
    type Item = ArchiveEntry<'a>;
    fn next(&mut self) -> Option<ArchiveEntry<'a>> {
        if self.front >= self.back {
            return None;
        }
        self.front += 1;
        self.archive.entry(self.front - 1)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for ArchiveEntries<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        self.back -= 1;
        self.archive.entry(self.back)
    }
}

impl ExactSizeIterator for ArchiveEntries<'_> {}

/// Iterator over an [`Archive`]'s metadata: `(key, value)` in the order stored.
#[derive(Debug, Clone)]
pub struct Metadata<'a> {
    archive: &'a Archive,
    front: usize,
    back: usize,
}

impl<'a> Iterator for Metadata<'a> {
    type Item = (&'a str, &'a str);
    fn next(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        self.front += 1;
        self.archive.metadata_at(self.front - 1)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Metadata<'_> {}

// ============================================================================================
// Writing
// ============================================================================================

/// How to write an archive. The default picks the format from the extension (`.safetensors`,
/// `.bt`, else a tenso archive), aligns packets to 64 bytes and stores an XXH3 per tensor.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("tenso-doc-st-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("weights.bin");
/// let x = [1.0f64, 2.0];
/// let mut w = tenso::ArchiveWriteOptions::new().format(tenso::Format::Safetensors).create(&path)?;
/// w.add("x", &tenso::Tensor::from_slice(&x))?;
/// w.finish()?;
/// let a = tenso::Archive::open(&path)?;               // detected from the bytes
/// assert_eq!(a.format(), tenso::Format::Safetensors);
/// assert_eq!(a.get("x")?.to_vec::<f64>()?, x);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), tenso::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveWriteOptions {
    raw: sys::tenso_archive_write_options,
}

impl Default for ArchiveWriteOptions {
    fn default() -> ArchiveWriteOptions {
        ArchiveWriteOptions { raw: sys::TENSO_ARCHIVE_WRITE_OPTIONS_INIT }
    }
}

impl ArchiveWriteOptions {
    /// The defaults.
    pub fn new() -> ArchiveWriteOptions {
        ArchiveWriteOptions::default()
    }
    /// Write this format whatever the extension ([`Format::Packet`] is read only).
    pub fn format(mut self, format: Format) -> ArchiveWriteOptions {
        self.raw.format = format.code();
        self
    }
    /// Archives: packet offsets and bodies aligned to 64 (the default) or 4096 bytes (for
    /// O_DIRECT and GPUDirect Storage readers).
    pub fn alignment(mut self, alignment: u32) -> ArchiveWriteOptions {
        self.raw.alignment = alignment;
        self
    }
    /// Archives: store an XXH3-64 of every tensor in the index (the default).
    pub fn hash(mut self, on: bool) -> ArchiveWriteOptions {
        if on {
            self.raw.flags &= !sys::TENSO_ARCHIVE_NO_HASH;
        } else {
            self.raw.flags |= sys::TENSO_ARCHIVE_NO_HASH;
        }
        self
    }
    /// Archives: how each packet is encoded (integrity footers, LZ4).
    pub fn encode(mut self, opts: Options) -> ArchiveWriteOptions {
        self.raw.encode = opts.raw;
        self
    }

    /// Starts writing `path`: a temporary file next to it is created now and renamed over
    /// `path` by [`ArchiveWriter::finish`].
    pub fn create(&self, path: impl AsRef<Path>) -> Result<ArchiveWriter> {
        let c = path_cstring(path.as_ref())?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::tenso_archive_writer_open(&mut out, c.as_ptr(), &self.raw) })?;
        let raw =
            NonNull::new(out).ok_or_else(|| Error::new(ErrorKind::Internal, "libtenso returned a NULL writer"))?;
        Ok(ArchiveWriter { raw })
    }
}

/// Writes an archive, safetensors or bintensors file as a stream: each [`add`](Self::add)
/// writes that tensor's bytes before it returns (memory stays bounded by the index), and
/// [`finish`](Self::finish) writes the index, flushes and renames the temporary file over the
/// target. Dropping an unfinished writer discards the file: the target is never left
/// half-written. `Send`, not `Sync`.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("tenso-doc-writer-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("a.tenso");
/// let mut w = tenso::ArchiveWriter::create(&path)?;
/// w.add("x", &tenso::Tensor::from_slice(&[1u8]))?;
/// let err = w.add("x", &tenso::Tensor::from_slice(&[2u8])).unwrap_err();
/// assert_eq!(err.kind(), tenso::ErrorKind::DuplicateKey);
/// drop(w);                                     // not finished: nothing written
/// assert!(!path.exists());
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), tenso::Error>(())
/// ```
pub struct ArchiveWriter {
    raw: NonNull<sys::tenso_archive_writer>,
}

// SAFETY: a writer is used by one thread at a time (&mut self); moving it is fine.
unsafe impl Send for ArchiveWriter {}

impl Drop for ArchiveWriter {
    fn drop(&mut self) {
        // SAFETY: we own the writer; an unfinished file is discarded.
        unsafe { sys::tenso_archive_writer_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for ArchiveWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArchiveWriter").finish_non_exhaustive()
    }
}

impl ArchiveWriter {
    /// Starts writing `path` with the default options; see [`ArchiveWriteOptions::create`].
    pub fn create(path: impl AsRef<Path>) -> Result<ArchiveWriter> {
        ArchiveWriteOptions::default().create(path)
    }

    /// Appends a tensor (its bytes are written before this returns). [`ErrorKind::DuplicateKey`]
    /// for a name already added; safetensors and bintensors take dense tensors only
    /// ([`ErrorKind::UnsupportedKind`]) of dtypes they have ([`ErrorKind::BadDtype`]).
    pub fn add<'a, E: Encode<'a> + ?Sized>(&mut self, name: &str, value: &E) -> Result<()> {
        let w = self.raw.as_ptr();
        // SAFETY: valid pointers; the value's memory is alive for the call.
        check(with_value(value, |v| unsafe { sys::tenso_archive_writer_add(w, name.as_ptr().cast(), name.len(), v) })?)
    }

    /// Adds a metadata pair (a key set twice keeps the last value).
    pub fn set_metadata(&mut self, key: &str, value: &str) -> Result<()> {
        check(unsafe {
            sys::tenso_archive_writer_set_metadata(
                self.raw.as_ptr(),
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
            )
        })
    }

    /// Writes the index, flushes the file to disk and renames it over the target. After a
    /// failure the target is untouched.
    pub fn finish(self) -> Result<()> {
        // The writer is freed by Drop either way (after a successful finish nothing is
        // discarded).
        check(unsafe { sys::tenso_archive_writer_finish(self.raw.as_ptr()) })
    }
}
