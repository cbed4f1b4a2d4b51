//! Decoding: [`loads`], [`View`] / [`ViewRef`], packet inspection and framing.
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::Deref;
use std::ptr::{self, NonNull};

use tenso_sys as sys;

use crate::composite::{slice_from, IpcRef, Quantized, Ragged, Sparse, Strings};
use crate::dtype::{Dtype, Element, Kind};
use crate::error::{check, Error, ErrorKind, Result};
use crate::options::DecodeOptions;
use crate::tensor::Tensor;

/// A decoded packet that owns its libtenso view and borrows the bytes it was decoded from for
/// `'a` (zero copy: a dense view's data points into those bytes, unless the body was
/// compressed). Everything about the packet is read through [`ViewRef`], which `View`
/// dereferences to.
///
/// Views are immutable: `View` is `Send` and `Sync`.
///
/// ```
/// let data = [1i32, 2, 3, 4];
/// let packet = tenso::dumps(&tenso::Tensor::new(&data, &[2, 2])?)?;
/// let view = tenso::loads(&packet)?;
/// assert_eq!(view.kind(), tenso::Kind::Dense);
/// assert_eq!(view.dtype(), Some(tenso::Dtype::Int32));
/// assert_eq!(view.shape(), &[2, 2]);
/// // Zero copy: the slice points into `packet`.
/// let s = view.as_slice::<i32>()?;
/// assert_eq!(s, &data);
/// assert!(packet.as_ptr_range().contains(&(s.as_ptr() as *const u8)));
/// # Ok::<(), tenso::Error>(())
/// ```
pub struct View<'a> {
    raw: NonNull<sys::tenso_view>,
    /// The memory borrowed for 'a (the input bytes, a shared-memory mapping): data inside it
    /// can be handed out for 'a; data elsewhere (a decompressed body) lives with the view.
    input: (usize, usize),
    _bytes: PhantomData<&'a [u8]>,
}

// SAFETY: libtenso views are immutable and may be read from any thread; freeing from another
// thread is fine; the borrowed bytes are `&[u8]` (Send + Sync).
unsafe impl Send for View<'_> {}
unsafe impl Sync for View<'_> {}

impl Drop for View<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own the root view (children are freed with it).
        unsafe { sys::tenso_view_free(self.raw.as_ptr()) }
    }
}

impl Deref for View<'_> {
    type Target = ViewRef;
    #[inline]
    fn deref(&self) -> &ViewRef {
        // SAFETY: live view for as long as self is borrowed.
        unsafe { ViewRef::from_ptr(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for View<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl AsRef<ViewRef> for View<'_> {
    fn as_ref(&self) -> &ViewRef {
        self
    }
}

/// Borrowing for the input's lifetime `'a`, as the `safetensors` crate's `TensorView::data()`
/// does: the slices outlive the `View`, so a function can decode and return them.
///
/// ```
/// fn values(packet: &[u8]) -> tenso::Result<&[f32]> {
///     tenso::loads(packet)?.as_slice()
/// }
/// let data = [1.0f32, 2.0, 3.0];
/// let packet = tenso::dumps(&tenso::Tensor::from_slice(&data))?;
/// assert_eq!(values(&packet)?, &data);
/// # Ok::<(), tenso::Error>(())
/// ```
impl<'a> View<'a> {
    /// The body's bytes, borrowed from the input for `'a` (see [`ViewRef::bytes`]).
    /// [`ErrorKind::UnsupportedKind`] when they are not in the input (an LZ4-compressed
    /// body, decompressed into memory the view frees): read that through
    /// [`values`](View::values) or [`to_vec`](ViewRef::to_vec), or borrow it from the view
    /// with `view.as_ref().bytes()`.
    pub fn bytes(&self) -> Result<&'a [u8]> {
        let view: &ViewRef = self;
        let data = view.bytes();
        if data.is_empty() {
            return Ok(&[]);
        }
        let input = self.input.0..self.input.0 + self.input.1;
        let range = data.as_ptr() as usize..data.as_ptr() as usize + data.len();
        if range.start < input.start || range.end > input.end {
            return Err(Error::new(
                ErrorKind::UnsupportedKind,
                "the body was decompressed into memory the view owns and cannot be borrowed for the input's \
                 lifetime: use values() or to_vec(), or view.as_ref().bytes()",
            ));
        }
        // SAFETY: the data lies inside the memory borrowed for 'a (the PhantomData), which
        // views never change.
        Ok(unsafe { slice_from(data.as_ptr(), data.len()) })
    }

    /// The elements of a dense view borrowed from the input as `&'a [T]`, without copying:
    /// [`ViewRef::as_slice`] with the input's lifetime (and its errors), plus
    /// [`ErrorKind::UnsupportedKind`] for a compressed body (see [`bytes`](View::bytes)).
    pub fn as_slice<T: Element>(&self) -> Result<&'a [T]> {
        let view: &ViewRef = self;
        view.check_dtype::<T>()?;
        typed_slice(self.bytes()?)
    }

    /// The elements of a dense view for `'a`: borrowed from the input when they are aligned
    /// for `T` there, copied otherwise (a compressed body, or a misaligned input buffer).
    /// Never fails for alignment; errors as [`to_vec`](ViewRef::to_vec).
    ///
    /// ```
    /// use std::borrow::Cow;
    /// let packet = tenso::dumps(&tenso::Tensor::from_slice(&[1u16, 2]))?;
    /// let view = tenso::loads(&packet)?;
    /// assert!(matches!(view.values::<u16>()?, Cow::Borrowed(&[1, 2])));
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn values<T: Element>(&self) -> Result<Cow<'a, [T]>> {
        let view: &ViewRef = self;
        match self.bytes() {
            Ok(bytes) => cow_slice(view, bytes),
            Err(_) => Ok(Cow::Owned(view.to_vec()?)),
        }
    }

    /// SAFETY: `p` is a root view whose data points into `input` (alive for 'a) or memory
    /// the view owns.
    #[inline]
    pub(crate) unsafe fn from_raw(p: *mut sys::tenso_view, input: &'a [u8]) -> Result<View<'a>> {
        let raw = NonNull::new(p).ok_or_else(|| Error::new(ErrorKind::Internal, "libtenso returned a NULL view"))?;
        Ok(View::from_root(raw, input))
    }

    /// SAFETY: as [`from_raw`](View::from_raw).
    #[inline]
    unsafe fn from_root(raw: NonNull<sys::tenso_view>, input: &'a [u8]) -> View<'a> {
        View { raw, input: (input.as_ptr() as usize, input.len()), _bytes: PhantomData }
    }
}

/// Decodes the packet at the start of `bytes` (trailing bytes are ignored) with the default
/// limits. Without integrity footer or compression this is O(ndim + bundle entries),
/// independent of the body size; footers are verified, LZ4 bodies decompressed.
///
/// ```
/// let err = tenso::loads(b"TNSO").unwrap_err();
/// assert_eq!(err.kind(), tenso::ErrorKind::Truncated);
/// ```
#[inline]
pub fn loads(bytes: &[u8]) -> Result<View<'_>> {
    DecodeOptions::default().loads(bytes)
}

impl DecodeOptions {
    /// Decodes the packet at the start of `bytes` under these options; see [`loads`].
    // Inline, so that the caller keeps the View in registers: returned through memory, its
    // words were stored separately and read back as one (a stalled store forward).
    #[inline]
    pub fn loads<'a>(&self, bytes: &'a [u8]) -> Result<View<'a>> {
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers; the view borrows `bytes`, tied to 'a.
        let st = unsafe { sys::tenso_loads(&mut out, bytes.as_ptr().cast(), bytes.len(), self.ptr()) };
        match NonNull::new(out) {
            // SAFETY: success gives a root view over `bytes`.
            Some(raw) if st == sys::TENSO_OK => Ok(unsafe { View::from_root(raw, bytes) }),
            _ => Err(loads_failed(st)),
        }
    }
}

/// The error of a `tenso_loads` that returned `status` (a NULL view with TENSO_OK is libtenso's
/// fault). Out of line: the caller's success path then keeps its `View` in registers.
#[cold]
#[inline(never)]
fn loads_failed(status: i32) -> Error {
    if status == sys::TENSO_OK {
        Error::new(ErrorKind::Internal, "libtenso returned a NULL view")
    } else {
        Error::last(status)
    }
}

/// A dense tensor decoded by [`loads_tensor`]: a plain value (no libtenso allocation, nothing to
/// free) whose data borrows the packet bytes for `'a`.
///
/// ```
/// let data = [1.5f32, 2.5, 3.5, 4.5];
/// let packet = tenso::dumps(&tenso::Tensor::new(&data, &[2, 2])?)?;
/// let t = tenso::loads_tensor(&packet)?;
/// assert_eq!(t.dtype(), Some(tenso::Dtype::Float32));
/// assert_eq!(t.shape(), &[2, 2]);
/// assert_eq!(t.as_slice::<f32>()?, &data);
/// # Ok::<(), tenso::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct TensorView<'a> {
    raw: sys::tenso_tensor_view,
    _bytes: PhantomData<&'a [u8]>,
}

// SAFETY: a plain description of immutable bytes borrowed for 'a.
unsafe impl Send for TensorView<'_> {}
unsafe impl Sync for TensorView<'_> {}

impl fmt::Debug for TensorView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TensorView")
            .field("dtype", &self.dtype())
            .field("shape", &self.shape())
            .field("nbytes", &self.raw.nbytes)
            .finish()
    }
}

impl<'a> TensorView<'a> {
    /// The element type.
    #[inline]
    pub fn dtype(&self) -> Option<Dtype> {
        Dtype::from_code(self.raw.dtype)
    }
    /// The dimensions.
    #[inline]
    pub fn shape(&self) -> &[usize] {
        crate::tensor::dims(&self.raw.shape[..self.raw.ndim as usize])
    }
    /// The body bytes, borrowed from the packet.
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        // SAFETY: libtenso checked that nbytes bytes at data lie inside the packet borrowed for 'a.
        unsafe { slice_from(self.raw.data.cast::<u8>(), self.raw.nbytes as usize) }
    }
    /// The elements as `&[T]`, borrowed (errors as [`View::as_slice`]).
    pub fn as_slice<T: Element>(&self) -> Result<&'a [T]> {
        match self.dtype() {
            Some(d) if d == T::DTYPE => typed_slice(self.bytes()),
            other => Err(Error::new(
                ErrorKind::BadDtype,
                format!("tensor holds {}, not {}", other.map_or("unknown", |d| d.name()), T::DTYPE),
            )),
        }
    }
    /// Header flags as on the wire (`TENSO_FLAG_*`).
    pub fn flags(&self) -> u32 {
        self.raw.flags
    }
    /// Wire version the packet was written with (1 to 4).
    pub fn version(&self) -> u32 {
        self.raw.version
    }
    /// Exact length of the packet, footer included.
    pub fn packet_size(&self) -> u64 {
        self.raw.packet_size
    }
    /// A [`Tensor`] over the same data, to encode again.
    pub fn tensor(&self) -> Result<Tensor<'a>> {
        let dtype = self.dtype().ok_or_else(|| Error::new(ErrorKind::BadDtype, "unknown dtype"))?;
        Tensor::from_bytes(dtype, self.bytes(), self.shape())
    }
}

/// Decodes a dense tensor packet into a [`TensorView`] with the default limits: what
/// [`loads`] checks, without allocating a libtenso view (the fast path for small packets).
/// Other kinds, and compressed bodies, are [`ErrorKind::UnsupportedKind`]: use [`loads`].
#[inline]
pub fn loads_tensor(bytes: &[u8]) -> Result<TensorView<'_>> {
    DecodeOptions::default().loads_tensor(bytes)
}

impl DecodeOptions {
    /// Decodes a dense tensor packet under these options; see [`loads_tensor`].
    // Inline, so that the caller's optimiser sees which fields it reads: the struct is 300
    // bytes, mostly the 32-dim shape array, and moving it out was a fifth of a small decode.
    #[inline]
    pub fn loads_tensor<'a>(&self, bytes: &'a [u8]) -> Result<TensorView<'a>> {
        let mut raw = MaybeUninit::<sys::tenso_tensor_view>::uninit();
        // SAFETY: valid pointers; the struct is written on success.
        check(unsafe { sys::tenso_loads_tensor(raw.as_mut_ptr(), bytes.as_ptr().cast(), bytes.len(), self.ptr()) })?;
        // SAFETY: written by the successful call; its data points into `bytes`, tied to 'a.
        Ok(TensorView { raw: unsafe { raw.assume_init() }, _bytes: PhantomData })
    }
}

/// A decoded packet or a part of one (a bundle entry, a sparse component), borrowed from the
/// [`View`], [`Packet`](crate::Packet) or parent that owns it. Never owned by value: only
/// `&ViewRef` exists.
#[repr(transparent)]
pub struct ViewRef(sys::tenso_view);

// SAFETY: libtenso views are immutable and thread-safe to read.
unsafe impl Sync for ViewRef {}
unsafe impl Send for ViewRef {}

impl fmt::Debug for ViewRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("ViewRef");
        d.field("kind", &self.kind());
        if let Some(dt) = self.dtype() {
            d.field("dtype", &dt);
        }
        d.field("shape", &self.shape());
        if self.kind() == Kind::Bundle {
            d.field("entries", &self.bundle_len());
        }
        d.field("nbytes", &self.nbytes()).finish()
    }
}

/// Copies `bytes` (a whole number of `T`s of view `v`) into a vector, at any alignment. The
/// copy is validated, not the source: shared memory can change between a check and a copy.
pub(crate) fn copy_elements<T: Element>(v: &ViewRef, bytes: &[u8]) -> Result<Vec<T>> {
    v.check_dtype::<T>()?;
    let n = bytes.len() / std::mem::size_of::<T>();
    let len = n * std::mem::size_of::<T>();
    let mut out = Vec::<T>::with_capacity(n);
    // SAFETY: len <= bytes.len() bytes are copied into capacity for n Ts, then read back as
    // bytes (initialised now); set_len only once every byte pattern is a valid T (bool
    // checked on the copy, which nobody else can write).
    unsafe {
        ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), len);
        if !T::valid_bytes(std::slice::from_raw_parts(out.as_ptr().cast::<u8>(), len)) {
            return Err(Error::new(ErrorKind::Malformed, format!("{} body holds invalid values", T::DTYPE)));
        }
        out.set_len(n);
    }
    Ok(out)
}

/// `bytes` (a body whose dtype the caller checked to be `T`'s) as `&[T]`, refusing
/// misaligned data and `bool` bodies.
///
/// A `bool` is never borrowed: views of shared memory ([`Shm`](crate::Shm), the cache) and
/// of memory another handle maps can change after a check, and a `&[bool]` holding a byte
/// other than 0 or 1 is undefined behaviour. A view cannot tell where its memory came from,
/// so every `bool` body is copied and validated ([`ViewRef::to_vec`], [`ViewRef::values`]).
fn typed_slice<T: Element>(bytes: &[u8]) -> Result<&[T]> {
    if T::DTYPE == Dtype::Bool {
        return Err(Error::new(
            ErrorKind::UnsupportedKind,
            "bool bodies are not borrowed (memory another handle or process writes could hold other bytes \
             than 0 and 1): use values() or to_vec(), which copy and validate",
        ));
    }
    if bytes.is_empty() {
        return Ok(&[]);
    }
    let align = std::mem::align_of::<T>();
    if (bytes.as_ptr() as usize) % align != 0 {
        return Err(Error::new(
            ErrorKind::Misaligned,
            format!(
                "{} data at {:p} is not {align}-byte aligned; copy it with values() or to_vec()",
                T::DTYPE,
                bytes.as_ptr()
            ),
        ));
    }
    // SAFETY: dtype checked by the caller (so the length is a whole number of T), aligned,
    // not bool (every byte pattern of the other element types is valid); borrowed
    // as long as `bytes`.
    Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / std::mem::size_of::<T>()) })
}

/// `bytes` (the body of `v`) borrowed as `&[T]` when aligned, copied otherwise.
fn cow_slice<'x, T: Element>(v: &ViewRef, bytes: &'x [u8]) -> Result<Cow<'x, [T]>> {
    v.check_dtype::<T>()?;
    if T::DTYPE != Dtype::Bool && (bytes.as_ptr() as usize) % std::mem::align_of::<T>() == 0 {
        typed_slice(bytes).map(Cow::Borrowed)
    } else {
        copy_elements(v, bytes).map(Cow::Owned)
    }
}

impl ViewRef {
    /// SAFETY: `p` is a live view; the reference must not outlive it.
    #[inline]
    pub(crate) unsafe fn from_ptr<'x>(p: *const sys::tenso_view) -> &'x ViewRef {
        &*(p as *const ViewRef)
    }

    #[inline]
    fn as_ptr(&self) -> *const sys::tenso_view {
        &self.0
    }

    /// What the packet holds.
    #[inline]
    pub fn kind(&self) -> Kind {
        // SAFETY: live view (all accessors below likewise).
        Kind::from_code(unsafe { sys::tenso_view_kind(self.as_ptr()) })
    }

    /// The dtype; `None` for bundles, sparse containers and IPC references.
    #[inline]
    pub fn dtype(&self) -> Option<Dtype> {
        Dtype::from_code(unsafe { sys::tenso_view_dtype(self.as_ptr()) })
    }

    /// The dimensions (empty for scalars and bundles).
    #[inline]
    pub fn shape(&self) -> &[usize] {
        crate::tensor::dims(unsafe {
            slice_from(sys::tenso_view_shape(self.as_ptr()), sys::tenso_view_ndim(self.as_ptr()) as usize)
        })
    }

    /// Number of elements: the product of the shape.
    pub fn numel(&self) -> u64 {
        self.shape().iter().map(|&d| d as u64).product()
    }

    /// Body bytes (decompressed size for LZ4 packets).
    #[inline]
    pub fn nbytes(&self) -> u64 {
        unsafe { sys::tenso_view_nbytes(self.as_ptr()) }
    }

    /// The body's bytes: the elements of a dense view, the packed codes of a quantized one,
    /// the payload of a string view. Empty for containers.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        unsafe { slice_from(sys::tenso_view_data(self.as_ptr()).cast::<u8>(), self.nbytes() as usize) }
    }

    /// Header flags as on the wire (`TENSO_FLAG_*`).
    #[inline]
    pub fn flags(&self) -> u32 {
        unsafe { sys::tenso_view_flags(self.as_ptr()) }
    }

    /// Wire version the packet was written with (1 to 4).
    #[inline]
    pub fn version(&self) -> u32 {
        unsafe { sys::tenso_view_version(self.as_ptr()) }
    }

    /// Declared body alignment, relative to the packet start (1 when unpadded).
    #[inline]
    pub fn alignment(&self) -> u32 {
        unsafe { sys::tenso_view_alignment(self.as_ptr()) }
    }

    /// Exact length of the packet the view was decoded from.
    #[inline]
    pub fn packet_size(&self) -> u64 {
        unsafe { sys::tenso_view_packet_size(self.as_ptr()) }
    }

    /// Whether the data lives in memory the view owns (a decompressed body, a stream buffer,
    /// a mapping) rather than in the caller's bytes.
    #[inline]
    pub fn owns_data(&self) -> bool {
        unsafe { sys::tenso_view_owns_data(self.as_ptr()) != 0 }
    }

    fn check_dtype<T: Element>(&self) -> Result<()> {
        if self.kind() != Kind::Dense {
            return Err(Error::new(ErrorKind::UnsupportedKind, format!("a {:?} view has no elements", self.kind())));
        }
        match self.dtype() {
            Some(d) if d == T::DTYPE => Ok(()),
            other => Err(Error::new(
                ErrorKind::BadDtype,
                format!("view holds {}, not {}", other.map_or("unknown", |d| d.name()), T::DTYPE),
            )),
        }
    }

    /// The elements of a dense view borrowed as `&[T]`, without copying. Errors:
    /// [`ErrorKind::UnsupportedKind`] for views that are not dense, [`ErrorKind::BadDtype`]
    /// when `T` is not the view's dtype, [`ErrorKind::Misaligned`] when the data is not
    /// aligned for `T` in memory (bundle entries and byte-aligned input buffers can be:
    /// [`values`](ViewRef::values) borrows or copies as needed, [`to_vec`](ViewRef::to_vec)
    /// always copies), and [`ErrorKind::UnsupportedKind`] for `bool`: a `bool` body is never
    /// borrowed, since shared memory could change a checked byte into an invalid `bool` -
    /// [`values`](ViewRef::values) and [`to_vec`](ViewRef::to_vec) copy it and check that every
    /// byte is 0 or 1 ([`ErrorKind::Malformed`] otherwise).
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        self.check_dtype::<T>()?;
        typed_slice(self.bytes())
    }

    /// The elements of a dense view: borrowed when aligned for `T` in memory (top-level
    /// bodies), copied into a `Vec` otherwise (bundle entries usually, since the wire aligns
    /// them only within their sub-packet). Which one happened is visible in the `Cow`.
    /// Errors as [`to_vec`](ViewRef::to_vec).
    ///
    /// ```
    /// use std::borrow::Cow;
    /// let x = [1.5f64, 2.5];
    /// let b = tenso::Bundle::new().with("a", &tenso::Tensor::from_slice(&[1u8]))?.with("x", &tenso::Tensor::from_slice(&x))?;
    /// let packet = tenso::dumps(&b)?;
    /// let view = tenso::loads(&packet)?;
    /// let got: Cow<[f64]> = view.get("x").unwrap().values()?;
    /// assert_eq!(&*got, &x);
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn values<T: Element>(&self) -> Result<Cow<'_, [T]>> {
        cow_slice(self, self.bytes())
    }

    /// The elements of a dense view copied into a `Vec<T>`, at any alignment (errors as
    /// [`as_slice`](ViewRef::as_slice), except `Misaligned` and the `bool` refusal).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        copy_elements::<T>(self, self.bytes())
    }

    /// A dense view as a [`Tensor`] to encode again (borrowing the view's data).
    ///
    /// ```
    /// let packet = tenso::dumps(&tenso::Tensor::from_slice(&[1u8, 2, 3]))?;
    /// let view = tenso::loads(&packet)?;
    /// let again = tenso::dumps(&view.as_tensor()?)?;
    /// assert_eq!(again, packet);
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn as_tensor(&self) -> Result<Tensor<'_>> {
        if self.kind() != Kind::Dense {
            return Err(Error::new(
                ErrorKind::UnsupportedKind,
                format!("a {:?} view is not a dense tensor", self.kind()),
            ));
        }
        let dtype = self.dtype().ok_or_else(|| Error::new(ErrorKind::BadDtype, "unknown dtype"))?;
        Tensor::from_bytes(dtype, self.bytes(), self.shape())
    }

    // ---- bundles

    /// Number of entries of a bundle view; 0 for other kinds.
    pub fn bundle_len(&self) -> usize {
        unsafe { sys::tenso_view_bundle_count(self.as_ptr()) as usize }
    }

    /// Entry `index` of a bundle view: its key and its view. `None` out of range or when the
    /// view is not a bundle; [`ErrorKind::Malformed`] if the key is not UTF-8 (libtenso checked
    /// it when decoding, but shared memory may have changed since).
    pub fn entry(&self, index: usize) -> Option<Result<(&str, &ViewRef)>> {
        let index = u32::try_from(index).ok()?;
        let (mut k, mut klen, mut child) = (ptr::null(), 0usize, ptr::null());
        // SAFETY: valid out pointers, live view.
        let st = unsafe { sys::tenso_view_bundle_entry(&mut k, &mut klen, &mut child, self.as_ptr(), index) };
        if st != sys::TENSO_OK {
            unsafe { sys::tenso_error_clear() };
            return None;
        }
        // SAFETY: the key and child are owned by this view.
        let key = unsafe { slice_from(k.cast::<u8>(), klen) };
        let key = match std::str::from_utf8(key) {
            Ok(key) => key,
            Err(e) => return Some(Err(Error::new(ErrorKind::Malformed, format!("bundle key {index}: {e}")))),
        };
        Some(Ok((key, unsafe { ViewRef::from_ptr(child) })))
    }

    /// The entries of a bundle view, in wire order (empty for other kinds).
    pub fn entries(&self) -> Entries<'_> {
        Entries { view: self, front: 0, back: self.bundle_len() }
    }

    /// The first entry of a bundle view with this key.
    pub fn get(&self, key: &str) -> Option<&ViewRef> {
        let mut child = ptr::null();
        // SAFETY: valid pointers, live view.
        let st = unsafe { sys::tenso_view_bundle_find(&mut child, self.as_ptr(), key.as_ptr().cast(), key.len()) };
        if st != sys::TENSO_OK {
            unsafe { sys::tenso_error_clear() };
            return None;
        }
        Some(unsafe { ViewRef::from_ptr(child) })
    }

    // ---- composite kinds

    /// Component 0, 1 or 2 of a sparse view (see [`Sparse`]).
    pub fn component(&self, index: u32) -> Result<&ViewRef> {
        let mut child = ptr::null();
        check(unsafe { sys::tenso_view_component(&mut child, self.as_ptr(), index) })?;
        Ok(unsafe { ViewRef::from_ptr(child) })
    }

    /// The components of a sparse matrix view; [`ErrorKind::UnsupportedKind`] otherwise.
    pub fn sparse(&self) -> Result<Sparse<'_>> {
        let kind = self.kind();
        if !matches!(kind, Kind::SparseCoo | Kind::SparseCsr | Kind::SparseCsc) {
            return Err(Error::new(ErrorKind::UnsupportedKind, format!("a {kind:?} view is not sparse")));
        }
        let s = self.shape();
        let shape = [s.first().copied().unwrap_or(0), s.get(1).copied().unwrap_or(0)];
        let (a, b, c) = (self.component(0)?, self.component(1)?, self.component(2)?);
        Ok(match kind {
            Kind::SparseCoo => Sparse::Coo { shape, data: a, row: b, col: c },
            Kind::SparseCsr => Sparse::Csr { shape, data: a, indices: b, indptr: c },
            _ => Sparse::Csc { shape, data: a, indices: b, indptr: c },
        })
    }

    /// The parts of a quantized view (scales and zero points are aligned copies the view
    /// owns; the codes point into the packet).
    pub fn quantized(&self) -> Result<Quantized<'_>> {
        let mut q = MaybeUninit::<sys::tenso_quantized>::uninit();
        check(unsafe { sys::tenso_view_quantized(q.as_mut_ptr(), self.as_ptr()) })?;
        // SAFETY: filled on success; borrowed from this view.
        unsafe { Quantized::from_raw(&q.assume_init()) }
    }

    /// The strings of a string view (or the rows of a direct ragged packet).
    pub fn strings(&self) -> Result<Strings<'_>> {
        let (mut offs, mut payload) = (ptr::null(), ptr::null());
        check(unsafe { sys::tenso_view_string_offsets(&mut offs, &mut payload, self.as_ptr()) })?;
        let count = self.shape().first().copied().unwrap_or(0);
        // SAFETY: count + 1 aligned offsets owned by the view; the payload is the body.
        let offsets = unsafe { slice_from(offs, count + 1) };
        let payload = unsafe { slice_from(payload.cast::<u8>(), self.nbytes() as usize) };
        Strings::new(offsets, payload)
    }

    /// A bundle view read as a ragged array (upstream's form, checked);
    /// [`ErrorKind::UnsupportedKind`] when it is not one.
    pub fn ragged(&self) -> Result<Ragged<'_>> {
        let (mut flat, mut offs) = (ptr::null(), ptr::null());
        check(unsafe { sys::tenso_view_ragged(&mut flat, &mut offs, self.as_ptr()) })?;
        Ok(Ragged::new(unsafe { ViewRef::from_ptr(flat) }, unsafe { ViewRef::from_ptr(offs) }))
    }

    /// The reference held by a GPU IPC reference view.
    pub fn ipc_ref(&self) -> Result<IpcRef> {
        let mut r = MaybeUninit::<sys::tenso_ipc_ref>::uninit();
        check(unsafe { sys::tenso_view_ipc_ref(r.as_mut_ptr(), self.as_ptr()) })?;
        Ok(IpcRef::from_raw(unsafe { &r.assume_init() }))
    }

    pub(crate) fn raw_ptr(&self) -> *const sys::tenso_view {
        self.as_ptr()
    }
}

/// The elements copied out, as [`ViewRef::to_vec`].
///
/// ```
/// let packet = tenso::dumps(&tenso::Tensor::from_slice(&[3i64, 4]))?;
/// let v: Vec<i64> = (&*tenso::loads(&packet)?).try_into()?;
/// assert_eq!(v, [3, 4]);
/// # Ok::<(), tenso::Error>(())
/// ```
impl<T: Element> TryFrom<&ViewRef> for Vec<T> {
    type Error = Error;
    fn try_from(v: &ViewRef) -> Result<Vec<T>> {
        v.to_vec()
    }
}

/// The elements copied out, as [`ViewRef::to_vec`].
impl<T: Element> TryFrom<&View<'_>> for Vec<T> {
    type Error = Error;
    fn try_from(v: &View<'_>) -> Result<Vec<T>> {
        v.to_vec()
    }
}

/// Iterator over the entries of a bundle view: `(key, view)` in wire order (each as
/// [`ViewRef::entry`] gives it).
#[derive(Debug, Clone)]
pub struct Entries<'v> {
    view: &'v ViewRef,
    front: usize,
    back: usize,
}

impl<'v> Iterator for Entries<'v> {
    type Item = Result<(&'v str, &'v ViewRef)>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        self.front += 1;
        self.view.entry(self.front - 1)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Entries<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        self.back -= 1;
        self.view.entry(self.back)
    }
}

impl ExactSizeIterator for Entries<'_> {}

// ---- inspecting and framing

/// What a packet's header says, read without touching (or checking) its body.
#[derive(Clone, Copy)]
pub struct PacketInfo {
    raw: sys::tenso_packet_info,
}

impl fmt::Debug for PacketInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketInfo")
            .field("version", &self.version())
            .field("kind", &self.kind())
            .field("dtype", &self.dtype())
            .field("shape", &self.shape())
            .field("flags", &self.flags())
            .field("alignment", &self.alignment())
            .field("body_offset", &self.body_offset())
            .field("body_size", &self.body_size())
            .field("packet_size", &self.packet_size())
            .finish()
    }
}

impl PacketInfo {
    pub(crate) fn from_raw(raw: sys::tenso_packet_info) -> PacketInfo {
        PacketInfo { raw }
    }

    /// Wire version (1 to 4).
    pub fn version(&self) -> u32 {
        self.raw.version
    }
    /// `TENSO_FLAG_*` bits.
    pub fn flags(&self) -> u32 {
        self.raw.flags
    }
    /// The packet kind.
    pub fn kind(&self) -> Kind {
        Kind::from_code(self.raw.kind)
    }
    /// The dtype; `None` for containers and IPC references.
    pub fn dtype(&self) -> Option<Dtype> {
        Dtype::from_code(self.raw.dtype)
    }
    /// The shape (empty for bundles).
    pub fn shape(&self) -> &[usize] {
        crate::tensor::dims(&self.raw.shape[..(self.raw.ndim as usize).min(self.raw.shape.len())])
    }
    /// Number of entries of a bundle.
    pub fn entry_count(&self) -> u32 {
        self.raw.entry_count
    }
    /// Body alignment relative to the packet start.
    pub fn alignment(&self) -> u32 {
        self.raw.alignment
    }
    /// Where the body starts (0 for containers).
    pub fn body_offset(&self) -> u64 {
        self.raw.body_offset
    }
    /// Body bytes as stored (compressed size with LZ4); 0 if unknown.
    pub fn body_size(&self) -> u64 {
        self.raw.body_size
    }
    /// The exact packet length; `None` when the bytes given were too short to tell.
    pub fn packet_size(&self) -> Option<u64> {
        (self.raw.packet_size != 0).then_some(self.raw.packet_size)
    }
}

/// Reads a packet's header (and shape and metadata) without touching its body; needs only the
/// header bytes ([`ErrorKind::Truncated`] if even those are missing).
///
/// ```
/// let packet = tenso::dumps(&tenso::Tensor::new(&[0u16; 12], &[3, 4])?)?;
/// let info = tenso::inspect(&packet[..20])?;
/// assert_eq!(info.shape(), &[3, 4]);
/// assert_eq!(info.dtype(), Some(tenso::Dtype::Uint16));
/// assert_eq!(info.body_offset(), 64);
/// # Ok::<(), tenso::Error>(())
/// ```
pub fn inspect(bytes: &[u8]) -> Result<PacketInfo> {
    let mut raw = MaybeUninit::<sys::tenso_packet_info>::zeroed();
    check(unsafe { sys::tenso_inspect(raw.as_mut_ptr(), bytes.as_ptr().cast(), bytes.len()) })?;
    // SAFETY: zero-initialised plain data, filled by libtenso.
    Ok(PacketInfo { raw: unsafe { raw.assume_init() } })
}

/// How much of a packet a buffer holds; see [`packet_length`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketLength {
    /// The packet is complete and this long (`<=` the bytes given).
    Complete(usize),
    /// More bytes are needed: read until the buffer holds `needed` bytes, then ask again.
    Incomplete {
        /// The total bytes to have before asking again.
        needed: usize,
    },
}

/// Works out the exact length of the packet that starts at `bytes` from its headers alone,
/// to frame packets in streams and buffers with slack (the protocol readers of this crate
/// use).
///
/// ```
/// use tenso::PacketLength;
/// let packet = tenso::dumps(&tenso::Tensor::from_slice(&[1.0f32; 100]))?;
/// assert_eq!(tenso::packet_length(&packet)?, PacketLength::Complete(packet.len()));
/// match tenso::packet_length(&packet[..3])? {
///     PacketLength::Incomplete { needed } => assert!(needed > 3),
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), tenso::Error>(())
/// ```
pub fn packet_length(bytes: &[u8]) -> Result<PacketLength> {
    let mut n = 0usize;
    let st = unsafe { sys::tenso_packet_length(&mut n, bytes.as_ptr().cast(), bytes.len(), std::ptr::null()) };
    match st {
        sys::TENSO_OK => Ok(PacketLength::Complete(n)),
        sys::TENSO_E_TRUNCATED => {
            unsafe { sys::tenso_error_clear() };
            Ok(PacketLength::Incomplete { needed: n })
        }
        _ => Err(Error::last(st)),
    }
}
