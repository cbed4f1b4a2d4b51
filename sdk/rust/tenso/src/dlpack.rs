//! DLPack export of dense views: owning wrappers that call the deleter on drop.
use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

use tenso_sys as sys;

pub use sys::{DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLTensor};

use crate::composite::slice_from;
use crate::error::{check, Error, ErrorKind, Result};
use crate::view::ViewRef;

fn tensor_bytes(t: &DLTensor) -> &[u8] {
    // Device memory (a GPU tensor's export under CUDA) cannot be read from the host.
    assert!(t.device.device_type == sys::kDLCPU, "DLPack bytes(): the tensor is not in host memory");
    let numel: u64 = (0..t.ndim.max(0) as usize)
        // SAFETY: libtenso's shape array has ndim entries.
        .map(|i| unsafe { *t.shape.add(i) } as u64)
        .product();
    let bits = t.dtype.bits as u64 * t.dtype.lanes as u64;
    let n = (numel * bits).div_ceil(8) as usize;
    if t.data.is_null() {
        return &[];
    }
    // SAFETY: the exported tensor aliases the view's body: n bytes after byte_offset.
    unsafe { slice_from((t.data as *const u8).add(t.byte_offset as usize), n) }
}

fn tensor_shape(t: &DLTensor) -> &[i64] {
    // SAFETY: ndim entries owned by the managed tensor.
    unsafe { slice_from(t.shape, t.ndim.max(0) as usize) }
}

/// A dense view exported as a DLPack 1.1 `DLManagedTensorVersioned` (device CPU, flagged
/// read-only), aliasing the view's data. Dropping it calls the deleter once;
/// [`into_raw`](DlPack::into_raw) hands that duty to a consumer instead.
///
/// It holds its own reference to what the view owns, but may alias the bytes the view was
/// decoded from, so it borrows the view (`'v`).
///
/// ```
/// let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
/// let packet = tenso::dumps(&tenso::Tensor::new(&data, &[2, 3])?)?;
/// let view = tenso::loads(&packet)?;
/// let dl = view.to_dlpack()?;
/// assert_eq!(dl.shape(), &[2, 3]);
/// assert_eq!((dl.dtype().code, dl.dtype().bits, dl.dtype().lanes), (2, 32, 1)); // kDLFloat
/// assert!(dl.is_read_only());
/// assert_eq!(dl.bytes(), view.bytes()?);
/// # Ok::<(), tenso::Error>(())
/// ```
pub struct DlPack<'v> {
    raw: NonNull<DLManagedTensorVersioned>,
    _view: PhantomData<&'v ViewRef>,
}

// SAFETY: the managed tensor is immutable bookkeeping plus shared ownership (atomic
// reference counts inside libtenso); the deleter may run on any thread.
unsafe impl Send for DlPack<'_> {}
unsafe impl Sync for DlPack<'_> {}

impl Drop for DlPack<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the managed tensor; its deleter is called exactly once.
        unsafe {
            if let Some(deleter) = (*self.raw.as_ptr()).deleter {
                deleter(self.raw.as_ptr());
            }
        }
    }
}

impl fmt::Debug for DlPack<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DlPack")
            .field("version", &self.managed().version)
            .field("dtype", &self.dtype())
            .field("shape", &self.shape())
            .field("flags", &self.flags())
            .finish()
    }
}

impl<'v> DlPack<'v> {
    /// SAFETY: `raw` is a managed tensor we own whose data stays valid for `'v` (until its
    /// deleter runs, for exports that hold their own reference).
    pub(crate) unsafe fn from_owned(raw: NonNull<DLManagedTensorVersioned>) -> DlPack<'v> {
        DlPack { raw, _view: PhantomData }
    }
    fn managed(&self) -> &DLManagedTensorVersioned {
        // SAFETY: alive until drop.
        unsafe { self.raw.as_ref() }
    }
    /// The `DLTensor`.
    pub fn tensor(&self) -> &DLTensor {
        &self.managed().dl_tensor
    }
    /// `(major, minor)` of the DLPack ABI (1, 1).
    pub fn version(&self) -> (u32, u32) {
        (self.managed().version.major, self.managed().version.minor)
    }
    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub fn flags(&self) -> u64 {
        self.managed().flags
    }
    /// Whether the consumer must not write through the data (always, for tenso exports).
    pub fn is_read_only(&self) -> bool {
        self.flags() & sys::DLPACK_FLAG_BITMASK_READ_ONLY != 0
    }
    /// The device: CPU for views; kDLCUDA for device tensors under the CUDA backend.
    pub fn device(&self) -> DLDevice {
        self.tensor().device
    }
    /// The element type.
    pub fn dtype(&self) -> DLDataType {
        self.tensor().dtype
    }
    /// The shape.
    pub fn shape(&self) -> &[i64] {
        tensor_shape(self.tensor())
    }
    /// The strides in elements: the compact row-major ones (`None` for a scalar, whose shape
    /// and strides are NULL).
    pub fn strides(&self) -> Option<&[i64]> {
        let t = self.tensor();
        // SAFETY: when present, ndim entries.
        (!t.strides.is_null()).then(|| unsafe { slice_from(t.strides, t.ndim.max(0) as usize) })
    }
    /// Pointer to the first element (`data + byte_offset`).
    pub fn data_ptr(&self) -> *const c_void {
        let t = self.tensor();
        (t.data as *const u8).wrapping_add(t.byte_offset as usize).cast()
    }
    /// The elements' bytes. Panics for a tensor in device memory (see [`device`](Self::device)).
    pub fn bytes(&self) -> &[u8] {
        tensor_bytes(self.tensor())
    }
    /// The managed tensor, still owned by `self`.
    pub fn as_raw(&self) -> *const DLManagedTensorVersioned {
        self.raw.as_ptr()
    }
    /// Gives up ownership: the consumer must call the deleter exactly once, and keep the
    /// bytes the view was decoded from alive until then (the wrapper's lifetime no longer
    /// guards them).
    pub fn into_raw(self) -> *mut DLManagedTensorVersioned {
        let p = self.raw.as_ptr();
        std::mem::forget(self);
        p
    }
}

/// A dense view exported as the pre-1.0 `DLManagedTensor` (no read-only flag: consumers
/// must not write through it). As [`DlPack`] otherwise.
pub struct DlPackLegacy<'v> {
    raw: NonNull<DLManagedTensor>,
    _view: PhantomData<&'v ViewRef>,
}

// SAFETY: as for DlPack.
unsafe impl Send for DlPackLegacy<'_> {}
unsafe impl Sync for DlPackLegacy<'_> {}

impl Drop for DlPackLegacy<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the managed tensor; its deleter is called exactly once.
        unsafe {
            if let Some(deleter) = (*self.raw.as_ptr()).deleter {
                deleter(self.raw.as_ptr());
            }
        }
    }
}

impl fmt::Debug for DlPackLegacy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DlPackLegacy").field("dtype", &self.tensor().dtype).field("shape", &self.shape()).finish()
    }
}

impl DlPackLegacy<'_> {
    /// The `DLTensor`.
    pub fn tensor(&self) -> &DLTensor {
        // SAFETY: alive until drop.
        unsafe { &self.raw.as_ref().dl_tensor }
    }
    /// The shape.
    pub fn shape(&self) -> &[i64] {
        tensor_shape(self.tensor())
    }
    /// The elements' bytes.
    pub fn bytes(&self) -> &[u8] {
        tensor_bytes(self.tensor())
    }
    /// Gives up ownership; see [`DlPack::into_raw`].
    pub fn into_raw(self) -> *mut DLManagedTensor {
        let p = self.raw.as_ptr();
        std::mem::forget(self);
        p
    }
}

impl ViewRef {
    /// Exports a dense view as DLPack 1.1 (never copies); [`ErrorKind::UnsupportedKind`] for
    /// other kinds.
    pub fn to_dlpack(&self) -> Result<DlPack<'_>> {
        let mut out = ptr::null_mut();
        // SAFETY: live view, valid out pointer.
        check(unsafe { sys::tenso_view_to_dlpack(&mut out, self.raw_ptr()) })?;
        let raw = NonNull::new(out).ok_or_else(|| Error::new(ErrorKind::Internal, "NULL DLPack tensor"))?;
        // SAFETY: ours; it aliases this view's data.
        Ok(unsafe { DlPack::from_owned(raw) })
    }

    /// Exports a dense view as a legacy `DLManagedTensor`.
    pub fn to_dlpack_legacy(&self) -> Result<DlPackLegacy<'_>> {
        let mut out = ptr::null_mut();
        // SAFETY: live view, valid out pointer.
        check(unsafe { sys::tenso_view_to_dlpack_legacy(&mut out, self.raw_ptr()) })?;
        let raw = NonNull::new(out).ok_or_else(|| Error::new(ErrorKind::Internal, "NULL DLPack tensor"))?;
        Ok(DlPackLegacy { raw, _view: PhantomData })
    }
}
