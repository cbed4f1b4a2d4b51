//! Shared memory: single-packet segments ([`Shm`]) and the multi-process tensor cache
//! ([`Cache`]), over `tenso/shm.h`.
use std::ffi::{c_char, c_int, c_void, CStr};
use std::fmt;
use std::ops::Deref;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::time::Duration;

use tenso_sys as sys;

use crate::composite::slice_from;
use crate::encode::Encode;
use crate::error::{c_name, check, Error, ErrorKind, Result};
use crate::options::{DecodeOptions, Options};
use crate::value::with_value;
use crate::view::{PacketInfo, View, ViewRef};

/// What to do when the name of a segment or cache to be created is taken (typically a
/// leftover of a crashed run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IfExists {
    /// Fail with [`ErrorKind::Exists`].
    #[default]
    Fail,
    /// Unlink the old segment and create a fresh one (`TENSO_SHM_REPLACE`).
    Replace,
}

impl IfExists {
    fn flags(self) -> u32 {
        match self {
            IfExists::Fail => 0,
            IfExists::Replace => sys::TENSO_SHM_REPLACE,
        }
    }
}

fn handle_name(p: *const c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    // SAFETY: a NUL-terminated string owned by the handle; callers narrow the lifetime to
    // the handle's borrow. Names come from &str, so they are UTF-8.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
}

// ============================================================================================
// Segments
// ============================================================================================

/// One packet in one named POSIX shared-memory segment (`/dev/shm/<name>` on Linux), the
/// layout of the upstream Python `TensoShm`: the packet starts at byte 0 and the segment may
/// be larger. "weights" and "/weights" name the same segment.
///
/// [`get`](Shm::get) decodes without copying: the [`View`] points into the mapping and
/// borrows the `Shm`, so this process cannot [`put`](Shm::put) over it meanwhile. Another
/// process can: a segment has no pinning, a reader sees whatever a writer puts there (use a
/// [`Cache`] when readers and writers run concurrently).
///
/// ```
/// let name = format!("/tenso-doc-shm-{}", std::process::id());
/// let w = [1.0f32, 2.0, 3.0];
/// let t = tenso::Tensor::from_slice(&w);
/// let shm = tenso::Shm::create_for(&name, &t, &tenso::Options::new(), tenso::IfExists::Fail)?;
///
/// // Any process: open by name and decode in place.
/// let reader = tenso::Shm::open(&name)?;
/// assert_eq!(reader.get()?.as_slice::<f32>()?, &w);
/// assert_eq!(tenso::Shm::create(&name, 64).unwrap_err().kind(), tenso::ErrorKind::Exists);
/// tenso::Shm::unlink(&name)?;
/// # drop(shm);
/// # Ok::<(), tenso::Error>(())
/// ```
pub struct Shm {
    raw: NonNull<sys::tenso_shm>,
    writable: bool,
}

// SAFETY: the handle is heap state libtenso allows any thread to use; everything that
// writes goes through &mut self, and tenso_shm_get/data/size/name only read.
unsafe impl Send for Shm {}
unsafe impl Sync for Shm {}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: we own the handle; views keep the mapping alive on their own.
        unsafe { sys::tenso_shm_close(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Shm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shm")
            .field("name", &self.name())
            .field("len", &self.len())
            .field("writable", &self.writable)
            .finish()
    }
}

/// How to open an existing [`Shm`]: by default read-only, and only a segment owned by this
/// process's effective uid; another uid's segment is refused with [`ErrorKind::Io`], as
/// whoever can write it controls every byte this process reads.
///
/// A segment truncated by another process gives [`ErrorKind::Truncated`] from then on; a
/// [`View`] of it reads zeros where the lost pages were instead of raising SIGBUS (see
/// "Truncation" in `tenso/shm.h` for the limits).
///
/// ```
/// let name = format!("/tenso-doc-shmopen-{}", std::process::id());
/// let _w = tenso::Shm::create(&name, 4096)?;
/// let mut shm = tenso::ShmOpenOptions::new().writable(true).any_owner(true).open(&name)?;
/// shm.put(&tenso::Tensor::from_slice(&[1u8, 2]))?;
/// tenso::Shm::unlink(&name)?;
/// # Ok::<(), tenso::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShmOpenOptions {
    flags: u32,
}

impl ShmOpenOptions {
    /// Read-only, own segments only.
    pub fn new() -> ShmOpenOptions {
        ShmOpenOptions::default()
    }
    /// Map the segment read-write (needed by [`Shm::put`]).
    pub fn writable(self, yes: bool) -> ShmOpenOptions {
        self.flag(sys::TENSO_SHM_WRITABLE, yes)
    }
    /// Also open a segment owned by another uid (`TENSO_SHM_ANY_OWNER`): only for a peer you
    /// trust with this process's reads.
    pub fn any_owner(self, yes: bool) -> ShmOpenOptions {
        self.flag(sys::TENSO_SHM_ANY_OWNER, yes)
    }
    fn flag(mut self, bit: u32, yes: bool) -> ShmOpenOptions {
        self.flags = if yes { self.flags | bit } else { self.flags & !bit };
        self
    }
    /// Opens the segment named `name`. [`ErrorKind::NotFound`] when there is none.
    pub fn open(&self, name: &str) -> Result<Shm> {
        let c = c_name(name, "segment name")?;
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers for the call.
        check(unsafe { sys::tenso_shm_open_flags(&mut out, c.as_ptr(), self.flags) })?;
        wrap_shm(out, self.flags & sys::TENSO_SHM_WRITABLE != 0)
    }
}

fn wrap_shm(out: *mut sys::tenso_shm, writable: bool) -> Result<Shm> {
    let raw = NonNull::new(out).ok_or_else(|| Error::new(ErrorKind::Internal, "libtenso returned a NULL segment"))?;
    Ok(Shm { raw, writable })
}

impl Shm {
    /// Creates a zero-filled segment of `size` bytes (at least 1) and maps it read-write.
    /// [`ErrorKind::Exists`] when the name is taken; [`ErrorKind::InvalidArgument`] for a bad
    /// name (more than 255 bytes, or a `/` after the leading one) or size 0.
    pub fn create(name: &str, size: u64) -> Result<Shm> {
        Shm::create_with(name, size, IfExists::Fail)
    }

    /// [`create`](Shm::create), replacing an existing segment of that name if asked to.
    pub fn create_with(name: &str, size: u64, if_exists: IfExists) -> Result<Shm> {
        let c = c_name(name, "segment name")?;
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers for the call.
        check(unsafe { sys::tenso_shm_create(&mut out, c.as_ptr(), size, if_exists.flags()) })?;
        wrap_shm(out, true)
    }

    /// Creates a segment sized exactly for `value` under `opts` (an upper bound when
    /// compressing) and encodes `value` into it: one copy of each body, straight into shared
    /// memory. [`packet_len`](Shm::packet_len) is the packet's length.
    pub fn create_for<'a, E: Encode<'a> + ?Sized>(
        name: &str,
        value: &E,
        opts: &Options,
        if_exists: IfExists,
    ) -> Result<Shm> {
        let c = c_name(name, "segment name")?;
        let mut out = ptr::null_mut();
        let mut written = 0u64;
        // SAFETY: valid pointers; the value's memory is alive for the call.
        check(with_value(value, |v| unsafe {
            sys::tenso_shm_create_for(&mut out, &mut written, c.as_ptr(), v, &opts.raw, if_exists.flags())
        })?)?;
        wrap_shm(out, true)
    }

    /// Opens an existing segment read-only. [`ErrorKind::NotFound`] when there is none,
    /// [`ErrorKind::Io`] when another uid owns it (see [`ShmOpenOptions::any_owner`]).
    pub fn open(name: &str) -> Result<Shm> {
        ShmOpenOptions::new().open(name)
    }

    /// Opens an existing segment read-write (needed by [`put`](Shm::put)).
    pub fn open_writable(name: &str) -> Result<Shm> {
        ShmOpenOptions::new().writable(true).open(name)
    }

    /// Encodes `value` at the start of the segment with the default options; returns the
    /// packet length. See [`put_with`](Shm::put_with).
    pub fn put<'a, E: Encode<'a> + ?Sized>(&mut self, value: &E) -> Result<u64> {
        self.put_with(value, &Options::default())
    }

    /// Encodes `value` at the start of the segment under `opts`. When the packet does not fit,
    /// [`ErrorKind::BufferTooSmall`] with [`Error::needed`] (the segment is unchanged);
    /// [`ErrorKind::InvalidArgument`] for a segment opened read-only.
    pub fn put_with<'a, E: Encode<'a> + ?Sized>(&mut self, value: &E, opts: &Options) -> Result<u64> {
        let mut written = 0u64;
        let raw = self.raw.as_ptr();
        // SAFETY: a live handle, borrowed mutably (no view of this handle is alive).
        let st = with_value(value, |v| unsafe { sys::tenso_shm_put(&mut written, raw, v, &opts.raw) })?;
        match check(st) {
            Err(e) if e.kind() == ErrorKind::BufferTooSmall => Err(e.with_needed(written)),
            other => other.map(|()| written),
        }
    }

    /// Decodes the packet at the start of the segment (zero copy: the view points into the
    /// mapping, except for LZ4 bodies). [`ErrorKind::Truncated`] when it holds no whole packet.
    pub fn get(&self) -> Result<View<'_>> {
        self.get_with(&DecodeOptions::default())
    }

    /// [`get`](Shm::get) under decode limits.
    pub fn get_with(&self, opts: &DecodeOptions) -> Result<View<'_>> {
        let mut out = ptr::null_mut();
        // SAFETY: a live handle; the view keeps the mapping alive and is tied to &self.
        check(unsafe { sys::tenso_shm_get(&mut out, self.raw.as_ptr(), opts.ptr()) })?;
        unsafe { View::from_raw(out, self.bytes()) }
    }

    /// The length of the packet at the start of the segment, from its headers; `None` when it
    /// holds no whole packet.
    pub fn packet_len(&self) -> Option<u64> {
        match crate::view::packet_length(self.bytes()) {
            Ok(crate::PacketLength::Complete(n)) => Some(n as u64),
            _ => None,
        }
    }

    /// The whole segment. Another process may write it while it is borrowed: treat the bytes
    /// as shared, not as a stable snapshot.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is len() bytes and lives as long as the handle.
        unsafe { slice_from(sys::tenso_shm_data(self.raw.as_ptr()).cast::<u8>(), self.len() as usize) }
    }

    /// Copies `data` into the segment at `offset`, as another process's writer would: no
    /// `&mut` to the mapping is made, so views and [`bytes`](Shm::bytes) of other handles stay
    /// sound (they see the new bytes; decoded views re-check what they read).
    /// [`ErrorKind::InvalidArgument`] when the segment was opened read-only or the range is
    /// outside it.
    ///
    /// ```
    /// let name = format!("/tenso-doc-write-at-{}", std::process::id());
    /// let mut w = tenso::Shm::create(&name, 64)?;
    /// w.write_at(8, &[1, 2, 3])?;
    /// assert_eq!(&w.bytes()[8..11], &[1, 2, 3]);
    /// assert_eq!(w.write_at(62, &[0; 3]).unwrap_err().kind(), tenso::ErrorKind::InvalidArgument);
    /// tenso::Shm::unlink(&name)?;
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn write_at(&mut self, offset: usize, data: &[u8]) -> Result<()> {
        let (p, n) = self.writable_mapping()?;
        if !matches!(offset.checked_add(data.len()), Some(end) if end <= n) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("{} bytes at {offset} are outside the {n}-byte segment", data.len()),
            ));
        }
        if !data.is_empty() {
            // SAFETY: inside a writable mapping of n bytes; a raw copy, no reference to it.
            unsafe { ptr::copy_nonoverlapping(data.as_ptr(), p.add(offset), data.len()) };
        }
        Ok(())
    }

    /// The whole segment, writable; [`ErrorKind::InvalidArgument`] when it was opened
    /// read-only (writing a read-only mapping would crash the process). Use
    /// [`write_at`](Shm::write_at) unless you need the slice.
    ///
    /// # Safety
    ///
    /// A `&mut [u8]` promises that nothing else reads or writes those bytes while it lives,
    /// but any other handle of the same segment - in this process or another - can: while the
    /// slice is alive, no other handle may use the segment (no view from its `get`, no
    /// `bytes()`, no `put`), here or in another process.
    pub unsafe fn bytes_mut(&mut self) -> Result<&mut [u8]> {
        let (p, n) = self.writable_mapping()?;
        if n == 0 || p.is_null() {
            return Ok(&mut []);
        }
        // SAFETY: a writable mapping of n bytes, borrowed mutably with the handle; exclusive
        // access to the segment is the caller's promise.
        Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
    }

    /// The mapping and its length; InvalidArgument for a read-only one.
    fn writable_mapping(&mut self) -> Result<(*mut u8, usize)> {
        if !self.writable {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("segment {:?} was opened read-only", self.name()),
            ));
        }
        let n = self.len() as usize;
        // SAFETY: a live handle.
        let p = unsafe { sys::tenso_shm_data(self.raw.as_ptr()) }.cast::<u8>();
        Ok((p, if p.is_null() { 0 } else { n }))
    }

    /// The segment's size in bytes.
    pub fn len(&self) -> u64 {
        unsafe { sys::tenso_shm_size(self.raw.as_ptr()) }
    }

    /// Whether the segment has no bytes (never, for a segment libtenso created).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the mapping is writable.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// The name as given to create/open.
    pub fn name(&self) -> &str {
        handle_name(unsafe { sys::tenso_shm_name(self.raw.as_ptr()) })
    }

    /// Removes the name; mappings (handles and views) stay valid.
    /// [`ErrorKind::NotFound`] when there is no such segment.
    pub fn unlink(name: &str) -> Result<()> {
        let c = c_name(name, "segment name")?;
        check(unsafe { sys::tenso_shm_unlink(c.as_ptr()) })
    }
}

// ============================================================================================
// The cache
// ============================================================================================

/// How to create or attach to a [`Cache`]. Zero (the default) means libtenso's default in
/// every field: 256 MiB, one entry slot per 16 KiB, 256 clients, 16384 pins, a 10 s lock
/// timeout.
///
/// ```
/// use std::time::Duration;
/// let name = format!("/tenso-doc-cacheopts-{}", std::process::id());
/// let cache = tenso::CacheOptions::new()
///     .size(4 << 20)
///     .max_entries(128)
///     .lock_timeout(Duration::from_secs(2))
///     .if_exists(tenso::IfExists::Replace)
///     .create(&name)?;
/// assert_eq!(cache.stats()?.max_entries, 128);
/// tenso::Cache::unlink(&name)?;
/// # Ok::<(), tenso::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheOptions {
    raw: sys::tenso_cache_options,
}

impl Default for CacheOptions {
    fn default() -> CacheOptions {
        CacheOptions { raw: sys::TENSO_CACHE_OPTIONS_INIT }
    }
}

impl CacheOptions {
    /// The defaults.
    pub fn new() -> CacheOptions {
        CacheOptions::default()
    }
    /// Create: the pool's bytes, header and tables included (0: 256 MiB).
    pub fn size(mut self, bytes: u64) -> CacheOptions {
        self.raw.size = bytes;
        self
    }
    /// Create: entry slots (0: one per 16 KiB, at least 64, at most 2^20).
    pub fn max_entries(mut self, n: u32) -> CacheOptions {
        self.raw.max_entries = n;
        self
    }
    /// Create: handles attached at once (0: 256).
    pub fn max_clients(mut self, n: u32) -> CacheOptions {
        self.raw.max_clients = n;
        self
    }
    /// Create: distinct (handle, entry) pins at once (0: 16384).
    pub fn max_pins(mut self, n: u32) -> CacheOptions {
        self.raw.max_pins = n;
        self
    }
    /// This handle: wait for the pool's lock at most this long (rounded up to a millisecond;
    /// zero: 10 s).
    pub fn lock_timeout(mut self, t: Duration) -> CacheOptions {
        let ms = t.as_nanos().div_ceil(1_000_000);
        self.raw.lock_timeout_ms = u32::try_from(ms).unwrap_or(u32::MAX);
        self
    }
    /// Create: what to do when the name is taken.
    pub fn if_exists(mut self, e: IfExists) -> CacheOptions {
        self.raw.flags = (self.raw.flags & !sys::TENSO_SHM_REPLACE) | e.flags();
        self
    }
    /// Open: also attach to a pool owned by another uid (`TENSO_SHM_ANY_OWNER`). By default
    /// another uid's pool is refused with [`ErrorKind::Io`]: every attached process can write
    /// every byte of it. Only for peers you trust.
    pub fn any_owner(mut self, yes: bool) -> CacheOptions {
        let bit = sys::TENSO_SHM_ANY_OWNER;
        self.raw.flags = if yes { self.raw.flags | bit } else { self.raw.flags & !bit };
        self
    }

    /// Creates a pool named `name` and attaches to it. [`ErrorKind::Exists`] when the name is
    /// taken; [`ErrorKind::InvalidArgument`] when the size cannot hold the tables and a packet.
    pub fn create(&self, name: &str) -> Result<Cache> {
        let c = c_name(name, "cache name")?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::tenso_cache_create(&mut out, c.as_ptr(), &self.raw) })?;
        Cache::wrap(out)
    }

    /// Attaches to an existing pool (only the lock timeout and [`any_owner`](CacheOptions::any_owner)
    /// apply). [`ErrorKind::NotFound`] when there is none, [`ErrorKind::Io`] when another uid
    /// owns it (without `any_owner`), [`ErrorKind::Corrupt`] for a segment that is not a tenso
    /// cache, [`ErrorKind::Full`] when `max_clients` handles are attached. A pool truncated by
    /// another process gives [`ErrorKind::Truncated`] from then on; a [`CacheView`] read or
    /// dropped after it reads zeros where the lost pages were instead of raising SIGBUS (see
    /// "Truncation" in `tenso/shm.h` for the limits).
    pub fn open(&self, name: &str) -> Result<Cache> {
        let c = c_name(name, "cache name")?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::tenso_cache_open(&mut out, c.as_ptr(), &self.raw) })?;
        Cache::wrap(out)
    }
}

/// A tensor cache in shared memory: string keys to packets, shared by every process on the
/// host that opens the same name, with LRU eviction, time-to-live, and zero-copy reads that
/// pin their entry (see [`CacheView`]). A process that dies holding the pool's lock does not
/// wedge the others: the next one rebuilds the pool's tables.
///
/// A handle may be used from several threads at once (`Send + Sync`); dropping it detaches.
///
/// ```
/// use std::time::Duration;
/// let name = format!("/tenso-doc-cache-{}", std::process::id());
/// let cache = tenso::CacheOptions::new().size(8 << 20).create(&name)?;
///
/// let w: Vec<f32> = (0..1024).map(|i| i as f32).collect();
/// cache.put("layer0/w", &tenso::Tensor::new(&w, &[32, 32])?, None)?;
/// cache.put("tmp", &tenso::Tensor::from_slice(&[1u8]), Some(Duration::from_secs(60)))?;
///
/// // Another process would `tenso::Cache::open(&name)`; this one reads its own handle.
/// let v = cache.get("layer0/w")?.expect("present");
/// assert_eq!(v.shape(), &[32, 32]);
/// assert_eq!(v.as_slice::<f32>()?, &w[..]);       // zero copy, pinned while `v` lives
/// assert!(cache.delete("layer0/w")?);             // hidden at once ...
/// assert_eq!(v.as_slice::<f32>()?[1023], 1023.0); // ... but the pinned bytes stay
/// drop(v);                                        // the pin goes, the space is freed
///
/// assert!(cache.get("layer0/w")?.is_none());
/// assert_eq!(cache.keys()?, ["tmp"]);
/// let s = cache.stats()?;
/// assert_eq!((s.hits, s.misses), (1, 1));
/// cache.check()?;
/// tenso::Cache::unlink(&name)?;
/// # Ok::<(), tenso::Error>(())
/// ```
pub struct Cache {
    raw: NonNull<sys::tenso_cache>,
}

// SAFETY: shm.h: "A handle may be used from several threads at once."
unsafe impl Send for Cache {}
unsafe impl Sync for Cache {}

impl Drop for Cache {
    fn drop(&mut self) {
        // SAFETY: we own the handle; CacheViews stay valid and pinned on their own.
        unsafe { sys::tenso_cache_close(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache").field("name", &self.name()).finish()
    }
}

fn key_len(key: &str) -> Result<()> {
    // libtenso checks too; this keeps the message specific (and Rust strings are UTF-8).
    if key.is_empty() || key.len() > sys::TENSO_CACHE_MAX_KEY_BYTES as usize {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("cache keys are 1 to {} bytes, got {}", sys::TENSO_CACHE_MAX_KEY_BYTES, key.len()),
        ));
    }
    Ok(())
}

/// `Ok(false)` for `TENSO_E_NOT_FOUND` (message cleared), `Ok(true)` for success.
fn found(st: i32) -> Result<bool> {
    if st == sys::TENSO_E_NOT_FOUND {
        unsafe { sys::tenso_error_clear() };
        return Ok(false);
    }
    check(st).map(|()| true)
}

unsafe extern "C" fn collect_key(key: *const c_char, len: usize, user: *mut c_void) -> c_int {
    // A panic must not unwind into C: any failure stops the walk (TENSO_E_USER).
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `user` is the Vec passed by Cache::keys; the key is valid during the call.
        let keys = unsafe { &mut *user.cast::<Vec<String>>() };
        let bytes = unsafe { slice_from(key.cast::<u8>(), len) };
        keys.push(String::from_utf8_lossy(bytes).into_owned());
    }))
    .map_or(1, |()| 0)
}

impl Cache {
    fn wrap(out: *mut sys::tenso_cache) -> Result<Cache> {
        let raw = NonNull::new(out).ok_or_else(|| Error::new(ErrorKind::Internal, "libtenso returned a NULL cache"))?;
        Ok(Cache { raw })
    }

    fn ptr(&self) -> *mut sys::tenso_cache {
        self.raw.as_ptr()
    }

    /// Creates a pool with the default options; see [`CacheOptions::create`].
    pub fn create(name: &str) -> Result<Cache> {
        CacheOptions::default().create(name)
    }

    /// Attaches to an existing pool with the default lock timeout; see [`CacheOptions::open`].
    pub fn open(name: &str) -> Result<Cache> {
        CacheOptions::default().open(name)
    }

    /// Removes a pool's name; attached handles keep working. [`ErrorKind::NotFound`].
    pub fn unlink(name: &str) -> Result<()> {
        let c = c_name(name, "cache name")?;
        check(unsafe { sys::tenso_cache_unlink(c.as_ptr()) })
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        handle_name(unsafe { sys::tenso_cache_name(self.ptr()) })
    }

    /// Stores `value` under `key` with the default encode options; see
    /// [`put_with`](Cache::put_with).
    pub fn put<'a, E: Encode<'a> + ?Sized>(&self, key: &str, value: &E, ttl: Option<Duration>) -> Result<u64> {
        self.put_with(key, value, ttl, &Options::default())
    }

    /// Stores `value` under `key` (1 to 128 bytes), encoded straight into the pool, and
    /// returns the packet length. `ttl`: the entry expires that long after this put; `None`:
    /// never (a zero ttl is [`ErrorKind::InvalidArgument`]). [`ErrorKind::Full`] when no room
    /// is left after dropping expired and evicting unpinned entries; [`ErrorKind::Timeout`]
    /// when the lock was not obtained in time.
    pub fn put_with<'a, E: Encode<'a> + ?Sized>(
        &self,
        key: &str,
        value: &E,
        ttl: Option<Duration>,
        opts: &Options,
    ) -> Result<u64> {
        key_len(key)?;
        let ttl_seconds = match ttl {
            None => 0.0,
            Some(d) if d.is_zero() => {
                return Err(Error::new(ErrorKind::InvalidArgument, "a ttl must be positive (None: never expires)"))
            }
            Some(d) => d.as_secs_f64(),
        };
        let mut written = 0u64;
        let c = self.ptr();
        // SAFETY: valid pointers; the key and the value's memory are alive for the call.
        check(with_value(value, |v| unsafe {
            sys::tenso_cache_put(&mut written, c, key.as_ptr().cast(), key.len(), v, &opts.raw, ttl_seconds)
        })?)?;
        Ok(written)
    }

    /// The entry under `key` as a zero-copy view into the pool, pinned until the
    /// [`CacheView`] is dropped; `Ok(None)` when the key is absent or expired. Counts a hit
    /// (and marks the entry most recently used) or a miss.
    pub fn get(&self, key: &str) -> Result<Option<CacheView>> {
        self.get_with(key, &DecodeOptions::default())
    }

    /// [`get`](Cache::get) under decode limits.
    pub fn get_with(&self, key: &str, opts: &DecodeOptions) -> Result<Option<CacheView>> {
        key_len(key)?;
        let mut out = ptr::null_mut();
        let st = unsafe { sys::tenso_cache_get(&mut out, self.ptr(), key.as_ptr().cast(), key.len(), opts.ptr()) };
        if !found(st)? {
            return Ok(None);
        }
        // SAFETY: a root view that keeps the pool mapped and holds the pin until freed.
        Ok(Some(CacheView { view: unsafe { View::from_raw(out, &[]) }? }))
    }

    /// Removes `key`: `Ok(false)` when it was absent or expired. A pinned entry is hidden at
    /// once and its bytes released with the last pin.
    pub fn delete(&self, key: &str) -> Result<bool> {
        key_len(key)?;
        found(unsafe { sys::tenso_cache_delete(self.ptr(), key.as_ptr().cast(), key.len()) })
    }

    /// What the cache knows about `key` without decoding it (neither a hit nor a miss);
    /// `Ok(None)` when absent or expired.
    pub fn info(&self, key: &str) -> Result<Option<CacheEntryInfo>> {
        key_len(key)?;
        let mut raw = std::mem::MaybeUninit::<sys::tenso_cache_entry_info>::zeroed();
        let st = unsafe { sys::tenso_cache_info(raw.as_mut_ptr(), self.ptr(), key.as_ptr().cast(), key.len()) };
        if !found(st)? {
            return Ok(None);
        }
        // SAFETY: zero-initialised plain data, filled by libtenso.
        let raw = unsafe { raw.assume_init() };
        Ok(Some(CacheEntryInfo {
            packet: PacketInfo::from_raw(raw.packet),
            alloc_bytes: raw.alloc_bytes,
            ttl: (raw.ttl_seconds > 0.0).then(|| Duration::from_secs_f64(raw.ttl_seconds)),
            age: Duration::from_secs_f64(raw.age_seconds.max(0.0)),
            pins: raw.pins,
        }))
    }

    /// Whether `key` is present and not expired.
    pub fn contains(&self, key: &str) -> Result<bool> {
        key_len(key)?;
        let mut found_out: c_int = 0;
        check(unsafe { sys::tenso_cache_contains(&mut found_out, self.ptr(), key.as_ptr().cast(), key.len()) })?;
        Ok(found_out != 0)
    }

    /// Every live key, most recently used first.
    pub fn keys(&self) -> Result<Vec<String>> {
        let mut keys: Vec<String> = Vec::new();
        let user: *mut Vec<String> = &mut keys;
        // SAFETY: the callback only runs during the call and gets `user` back.
        check(unsafe { sys::tenso_cache_keys(self.ptr(), Some(collect_key), user.cast()) })?;
        Ok(keys)
    }

    /// Removes every entry (pinned ones are hidden and released with their pins).
    pub fn clear(&self) -> Result<()> {
        check(unsafe { sys::tenso_cache_clear(self.ptr()) })
    }

    /// Counters and occupancy of the pool.
    pub fn stats(&self) -> Result<CacheStats> {
        let mut s = sys::tenso_cache_stats::default();
        check(unsafe { sys::tenso_cache_stats_get(&mut s, self.ptr()) })?;
        Ok(CacheStats {
            entries: s.entries,
            max_entries: s.max_entries,
            pool_bytes: s.pool_bytes,
            data_bytes: s.data_bytes,
            used_bytes: s.used_bytes,
            free_bytes: s.free_bytes,
            hits: s.hits,
            misses: s.misses,
            evictions: s.evictions,
            expirations: s.expirations,
            pinned_entries: s.pinned_entries,
            recoveries: s.recoveries,
            clients: s.clients,
        })
    }

    /// Checks every invariant of the pool (O(entries); for tests and tooling):
    /// [`ErrorKind::Corrupt`] with the first broken one in the message.
    pub fn check(&self) -> Result<()> {
        check(unsafe { sys::tenso_cache_check(self.ptr()) })
    }
}

/// A cache entry read in place: a zero-copy view into the pool that pins the entry (it is
/// never evicted, expired, overwritten or reused while pinned; a delete or replace only hides
/// it). Dropping the `CacheView` releases the pin. It does not borrow the [`Cache`]: it stays
/// valid after the handle is dropped. Dereferences to [`ViewRef`]; `Send + Sync`.
pub struct CacheView {
    view: View<'static>,
}

impl Deref for CacheView {
    type Target = ViewRef;
    fn deref(&self) -> &ViewRef {
        &self.view
    }
}

impl fmt::Debug for CacheView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CacheView").field(&**self).finish()
    }
}

/// What a [`Cache`] knows about one entry ([`Cache::info`]).
#[derive(Debug, Clone, Copy)]
pub struct CacheEntryInfo {
    /// The stored packet's header.
    pub packet: PacketInfo,
    /// Space reserved for it in the pool.
    pub alloc_bytes: u64,
    /// Its time to live; `None` when it never expires.
    pub ttl: Option<Duration>,
    /// Time since it was put.
    pub age: Duration,
    /// Views holding it now, over all processes.
    pub pins: u32,
}

/// Counters and occupancy of a [`Cache`] pool ([`Cache::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Live keys.
    pub entries: u64,
    /// Entry slots.
    pub max_entries: u64,
    /// The whole segment.
    pub pool_bytes: u64,
    /// The data region.
    pub data_bytes: u64,
    /// Data bytes reserved by entries (pinned leftovers included).
    pub used_bytes: u64,
    /// Data bytes free.
    pub free_bytes: u64,
    /// Gets that found their key.
    pub hits: u64,
    /// Gets that did not.
    pub misses: u64,
    /// Entries dropped to make room.
    pub evictions: u64,
    /// Entries dropped because their ttl passed.
    pub expirations: u64,
    /// Entries with at least one pin.
    pub pinned_entries: u64,
    /// Times a lock holder died and the pool was rebuilt.
    pub recoveries: u64,
    /// Handles attached now.
    pub clients: u64,
}

impl CacheStats {
    /// hits / (hits + misses); 0 before any get.
    pub fn hit_rate(&self) -> f64 {
        let n = self.hits + self.misses;
        if n == 0 {
            0.0
        } else {
            self.hits as f64 / n as f64
        }
    }
}
