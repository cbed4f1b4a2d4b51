//! Packets to and from GPU device memory (libtenso 1.4, `tenso/gpu.h`).
//!
//! libtenso decodes a packet straight into device memory through pinned, double-buffered
//! staging (GPUDirect Storage for files where cuFile is present), bundle member by member,
//! quantized packets dequantized on the device; and encodes device tensors back into packets.
//! This module wraps those calls; every transfer is libtenso's.
//!
//! Backends: CUDA (the default; libtenso loads its CUDA plugin at the first GPU call, and
//! without a driver or device every call returns [`ErrorKind::GpuUnavailable`]) or an
//! emulated device in host memory ([`Backend::Host`]: `TENSO_GPU_BACKEND=host` or
//! [`select_backend`]), which runs the same transfer code on machines without a GPU.
//!
//! ```
//! use tenso::gpu::{self, Backend, GpuOptions};
//! // The host backend: an emulated device, so this runs anywhere.
//! gpu::select_backend(Backend::Host)?;
//! let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
//! let packet = tenso::dumps(&tenso::Tensor::new(&x, &[2, 3])?)?;
//!
//! let value = gpu::loads(&packet, &GpuOptions::new())?;   // packet -> device memory
//! let t = value.into_tensor()?;
//! assert_eq!(t.shape(), &[2, 3]);
//! assert_eq!(t.download::<f32>()?, x);                     // device -> host copy
//! assert_eq!(&gpu::dumps(&t, &tenso::Options::new(), &GpuOptions::new())?[..], &packet[..]);
//! # Ok::<(), tenso::Error>(())
//! ```
//!
//! Ownership: a [`DeviceTensor`] owns its device memory (or, from [`DeviceTensor::wrap`] and
//! [`DeviceTensor::from_dlpack`], borrows the caller's and releases it once) and frees it on
//! drop. Tensors and values are `Send + Sync`: libtenso's calls are thread-safe, and the borrow
//! checker keeps a tensor from being dropped while a call uses it.
use std::ffi::{c_void, CStr};
use std::fmt;
use std::path::Path;
use std::ptr::{self, NonNull};

use tenso_sys as sys;

use crate::dlpack::DlPack;
use crate::dtype::{as_bytes, Dtype, Element};
use crate::encode::{path_cstring, Buffer};
use crate::error::{check, Error, ErrorKind, Result};
use crate::options::{DecodeOptions, Options};
use crate::tensor::{dims, wire_dims};
use crate::view::ViewRef;

/// A device backend of libtenso.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Real devices through the CUDA runtime (libtenso's plugin `libtenso_cuda.so`).
    Cuda,
    /// An emulated device in host memory (tests, CI, machines without a GPU).
    Host,
}

impl Backend {
    fn code(self) -> u32 {
        match self {
            Backend::Cuda => sys::TENSO_GPU_BACKEND_CUDA,
            Backend::Host => sys::TENSO_GPU_BACKEND_HOST,
        }
    }
    fn from_code(code: u32) -> Option<Backend> {
        match code {
            sys::TENSO_GPU_BACKEND_CUDA => Some(Backend::Cuda),
            sys::TENSO_GPU_BACKEND_HOST => Some(Backend::Host),
            _ => None,
        }
    }
    /// libtenso's name: `"cuda"` or `"host"`.
    pub fn name(self) -> &'static str {
        // SAFETY: static NUL-terminated ASCII storage.
        unsafe { CStr::from_ptr(sys::tenso_gpu_backend_name(self.code())) }.to_str().unwrap_or("unknown")
    }
}

/// Chooses the backend for this process, before the first other GPU call (or again with the
/// same one). [`ErrorKind::InvalidArgument`] for a different one after first use.
pub fn select_backend(backend: Backend) -> Result<()> {
    // SAFETY: plain value.
    check(unsafe { sys::tenso_gpu_select_backend(backend.code()) })
}

/// The backend in use; `None` before the first GPU call chose one.
pub fn backend() -> Option<Backend> {
    // SAFETY: no arguments.
    Backend::from_code(unsafe { sys::tenso_gpu_backend() })
}

/// `Ok` when the backend loaded and has a device; else [`ErrorKind::GpuUnavailable`] with
/// the reason (the CUDA runtime's own message where it got that far).
///
/// ```
/// tenso::gpu::select_backend(tenso::gpu::Backend::Host)?;
/// tenso::gpu::available()?;
/// assert!(tenso::gpu::device_count()? >= 1);
/// # Ok::<(), tenso::Error>(())
/// ```
pub fn available() -> Result<()> {
    // SAFETY: no arguments.
    check(unsafe { sys::tenso_gpu_available() })
}

/// The number of devices (never 0 with `Ok`).
pub fn device_count() -> Result<usize> {
    let mut n = 0i32;
    // SAFETY: valid out pointer.
    check(unsafe { sys::tenso_gpu_device_count(&mut n) })?;
    Ok(n.max(0) as usize)
}

/// A device's properties ([`device_info`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The ordinal.
    pub device: i32,
    /// The device's name.
    pub name: String,
    /// The device UUID (the host backend: one per process).
    pub uuid: [u8; 16],
    /// Bytes of device memory.
    pub total_memory: u64,
    /// (major, minor).
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub multiprocessors: i32,
    /// (domain, bus, device).
    pub pci: (i32, i32, i32),
    /// The backend that reports it.
    pub backend: Option<Backend>,
    /// GPUDirect Storage (cuFile) can reach the device.
    pub gds: bool,
    /// CUDA IPC handles can be exported from the device.
    pub ipc: bool,
}

/// The properties of device `device`.
pub fn device_info(device: i32) -> Result<DeviceInfo> {
    // SAFETY: a zeroed plain-data struct is valid; version set as the ABI requires.
    let mut raw: sys::tenso_gpu_device_info = unsafe { std::mem::zeroed() };
    raw.version = sys::TENSO_GPU_DEVICE_INFO_VERSION;
    // SAFETY: valid out pointer.
    check(unsafe { sys::tenso_gpu_device_info_get(&mut raw, device) })?;
    let name_bytes: Vec<u8> = raw.name.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    Ok(DeviceInfo {
        device: raw.device,
        name: String::from_utf8_lossy(&name_bytes).into_owned(),
        uuid: raw.uuid,
        total_memory: raw.total_memory,
        compute_capability: (raw.compute_major, raw.compute_minor),
        multiprocessors: raw.multiprocessors,
        pci: (raw.pci_domain, raw.pci_bus, raw.pci_device),
        backend: Backend::from_code(raw.backend),
        gds: raw.flags & sys::TENSO_GPU_DEVICE_GDS != 0,
        ipc: raw.flags & sys::TENSO_GPU_DEVICE_IPC != 0,
    })
}

/// The pinned staging pool's counters ([`pool_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Pinned buffers held now.
    pub buffers: u64,
    /// Their total size.
    pub bytes: u64,
    /// Requests served by a kept buffer.
    pub hits: u64,
    /// Requests that pinned a new one.
    pub misses: u64,
    /// The most bytes kept.
    pub limit_bytes: u64,
}

/// The pinned pool's counters.
pub fn pool_stats() -> Result<PoolStats> {
    let mut s = sys::tenso_gpu_pool_stats::default();
    // SAFETY: valid out pointer.
    check(unsafe { sys::tenso_gpu_pool_stats_get(&mut s) })?;
    Ok(PoolStats { buffers: s.buffers, bytes: s.bytes, hits: s.hits, misses: s.misses, limit_bytes: s.limit_bytes })
}

/// How many bytes of pinned buffers the pool keeps (default 256 MiB); 0 unpins the idle ones.
pub fn set_pool_limit(limit_bytes: u64) -> Result<()> {
    // SAFETY: plain value.
    check(unsafe { sys::tenso_gpu_pool_set_limit(limit_bytes) })
}

/// How a packet reached the device ([`DeviceValueRef::path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransferPath {
    /// Source -> pinned staging -> device, overlapped.
    Staged,
    /// cuFile: NVMe -> device DMA.
    Gds,
    /// cuFile in compatibility mode (it stages internally).
    GdsCompat,
    /// An IPC reference opened; nothing copied.
    Ipc,
}

/// Options of the packet <-> device calls (`tenso_gpu_options`): target device, device
/// dequantize, GPUDirect Storage, staging chunk size and depth, the caller's stream, limits.
#[derive(Debug, Clone)]
pub struct GpuOptions {
    raw: sys::tenso_gpu_options,
    decode: Option<DecodeOptions>,
}

// SAFETY: the only pointer is the caller's CUDA stream handle (an opaque token CUDA accepts
// from any thread), set through the unsafe `stream`; `decode` is rebuilt per call.
unsafe impl Send for GpuOptions {}
unsafe impl Sync for GpuOptions {}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions::new()
    }
}

impl GpuOptions {
    /// Device 0, no dequantize, GPUDirect Storage allowed, 8 MiB chunks, double buffering,
    /// tenso's own stream (synchronized before each call returns), default limits.
    pub fn new() -> GpuOptions {
        GpuOptions { raw: sys::TENSO_GPU_OPTIONS_INIT, decode: None }
    }
    /// The target device ordinal.
    pub fn device(mut self, device: i32) -> GpuOptions {
        self.raw.device = device;
        self
    }
    /// Dequantize quantized packets on the device into `dtype` (Float32, Float16 or Bfloat16);
    /// without it they are refused ([`ErrorKind::UnsupportedKind`]).
    pub fn dequantize_to(mut self, dtype: Dtype) -> GpuOptions {
        self.raw.dequantize_to = dtype.code();
        self
    }
    /// Never use GPUDirect Storage for files (always stage).
    pub fn no_gds(mut self, on: bool) -> GpuOptions {
        self.raw.flags =
            if on { self.raw.flags | sys::TENSO_GPU_NO_GDS } else { self.raw.flags & !sys::TENSO_GPU_NO_GDS };
        self
    }
    /// The staging chunk size (0: 8 MiB).
    pub fn chunk_bytes(mut self, bytes: u64) -> GpuOptions {
        self.raw.chunk_bytes = bytes;
        self
    }
    /// Chunks in flight (0: 2, double buffering).
    pub fn staging_buffers(mut self, n: u32) -> GpuOptions {
        self.raw.staging_buffers = n;
        self
    }
    /// Limits for the packet.
    pub fn decode(mut self, decode: DecodeOptions) -> GpuOptions {
        self.decode = Some(decode);
        self
    }
    /// Runs the copies on the caller's stream (a `cudaStream_t` under CUDA, or one from
    /// [`Stream::new`]); the calls then return before the copies finish.
    ///
    /// # Safety
    /// `stream` must be a live stream of the target device for as long as these options are
    /// used, and the caller must synchronize it before reading the results.
    pub unsafe fn stream(mut self, stream: *mut c_void) -> GpuOptions {
        self.raw.stream = stream;
        self
    }
    fn with_raw<R>(&self, f: impl FnOnce(*const sys::tenso_gpu_options) -> R) -> R {
        let mut raw = self.raw;
        raw.decode = self.decode.as_ref().map_or(ptr::null(), |d| d.ptr());
        f(&raw)
    }
}

/// A stream of libtenso's (`cudaStream_t` under CUDA, a worker queue under the host backend),
/// freed on drop.
#[derive(Debug)]
pub struct Stream(NonNull<c_void>);

// SAFETY: streams may be used and freed from any thread (CUDA's rules).
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

impl Stream {
    /// A new stream on `device`.
    pub fn new(device: i32) -> Result<Stream> {
        let mut out = ptr::null_mut();
        // SAFETY: valid out pointer.
        check(unsafe { sys::tenso_gpu_stream_new(&mut out, device) })?;
        NonNull::new(out).map(Stream).ok_or_else(|| Error::new(ErrorKind::Internal, "NULL stream"))
    }
    /// Waits for everything queued on the stream.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: a live stream.
        check(unsafe { sys::tenso_gpu_stream_synchronize(self.0.as_ptr()) })
    }
    /// The handle, for [`GpuOptions::stream`].
    pub fn as_ptr(&self) -> *mut c_void {
        self.0.as_ptr()
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: ours, freed once.
        unsafe { sys::tenso_gpu_stream_free(self.0.as_ptr()) }
    }
}

// ---- device tensors ------------------------------------------------------------------------

/// A device tensor, borrowed: the members of a [`DeviceValue`], or any [`DeviceTensor`]
/// (through `Deref`).
#[repr(transparent)]
pub struct DeviceTensorRef(sys::tenso_gpu_tensor);

// SAFETY: libtenso's tensor calls are thread-safe; a shared reference never frees it.
unsafe impl Send for DeviceTensorRef {}
unsafe impl Sync for DeviceTensorRef {}

impl DeviceTensorRef {
    /// SAFETY: `p` is a live tensor; the reference must not outlive it.
    unsafe fn from_ptr<'x>(p: *const sys::tenso_gpu_tensor) -> &'x DeviceTensorRef {
        &*(p as *const DeviceTensorRef)
    }
    fn as_ptr(&self) -> *const sys::tenso_gpu_tensor {
        &self.0
    }
    /// The element type.
    pub fn dtype(&self) -> Dtype {
        // SAFETY: live tensor.
        let code = unsafe { sys::tenso_gpu_tensor_dtype(self.as_ptr()) };
        Dtype::from_code(code).expect("libtenso device tensors have dense dtypes")
    }
    /// The shape.
    pub fn shape(&self) -> &[usize] {
        // SAFETY: live tensor; ndim entries it owns.
        unsafe {
            let n = sys::tenso_gpu_tensor_ndim(self.as_ptr()) as usize;
            let p = sys::tenso_gpu_tensor_shape(self.as_ptr());
            if n == 0 || p.is_null() {
                return &[];
            }
            dims(std::slice::from_raw_parts(p, n))
        }
    }
    /// Bytes of device memory.
    pub fn nbytes(&self) -> u64 {
        // SAFETY: live tensor.
        unsafe { sys::tenso_gpu_tensor_nbytes(self.as_ptr()) }
    }
    /// The device ordinal.
    pub fn device(&self) -> i32 {
        // SAFETY: live tensor.
        unsafe { sys::tenso_gpu_tensor_device(self.as_ptr()) }
    }
    /// The device address (valid while the tensor lives; for CUDA kernels and libraries).
    pub fn data_ptr(&self) -> *mut c_void {
        // SAFETY: live tensor.
        unsafe { sys::tenso_gpu_tensor_data(self.as_ptr()) }
    }
    /// Copies the whole tensor into `dst` (exactly [`nbytes`](Self::nbytes) long) through the
    /// pinned pool.
    pub fn download_into(&self, dst: &mut [u8]) -> Result<()> {
        // SAFETY: live tensor, dst.len() writable bytes.
        check(unsafe {
            sys::tenso_gpu_tensor_download(dst.as_mut_ptr().cast(), dst.len(), self.as_ptr(), ptr::null_mut())
        })
    }
    /// The elements copied to the host. [`ErrorKind::BadDtype`] when `T` is not the dtype.
    pub fn download<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype() {
            return Err(Error::new(
                ErrorKind::BadDtype,
                format!("the tensor holds {}, not {}", self.dtype().name(), T::DTYPE.name()),
            ));
        }
        let mut bytes = vec![0u8; self.nbytes() as usize];
        self.download_into(&mut bytes)?;
        if !T::valid_bytes(&bytes) {
            return Err(Error::new(ErrorKind::Malformed, "bool elements other than 0 or 1"));
        }
        let n = bytes.len() / std::mem::size_of::<T>().max(1);
        let mut out = Vec::<T>::with_capacity(n);
        // SAFETY: T is plain data without padding and the bytes are valid T values; the
        // capacity holds n elements.
        unsafe {
            ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), bytes.len());
            out.set_len(n);
        }
        Ok(out)
    }
    /// Exports the tensor as DLPack 1.1 (kDLCUDA with its device; the host backend exports
    /// kDLCPU). The export holds its own reference: it stays valid after the tensor is dropped.
    pub fn to_dlpack(&self) -> Result<DlPack<'static>> {
        let mut out = ptr::null_mut();
        // SAFETY: live tensor, valid out pointer.
        check(unsafe { sys::tenso_gpu_tensor_to_dlpack(&mut out, self.as_ptr()) })?;
        let raw = NonNull::new(out).ok_or_else(|| Error::new(ErrorKind::Internal, "NULL DLPack tensor"))?;
        // SAFETY: the export owns its reference to the memory ('static).
        Ok(unsafe { DlPack::from_owned(raw) })
    }
    /// The 106-byte GPU IPC reference packet for this tensor (its memory must be tenso's
    /// own). Keep the tensor alive while other processes use the reference.
    pub fn ipc_export(&self) -> Result<Buffer> {
        let mut v = ptr::null_mut();
        // SAFETY: live tensor, valid out pointer.
        check(unsafe { sys::tenso_gpu_ipc_export(&mut v, self.as_ptr()) })?;
        let mut buf = Buffer::empty();
        // SAFETY: a value we own, freed once; an initialised buffer.
        let st = unsafe { sys::tenso_value_dumps(buf.raw_mut(), v, ptr::null()) };
        // SAFETY: ours.
        unsafe { sys::tenso_value_free(v) };
        check(st)?;
        Ok(buf)
    }
}

impl fmt::Debug for DeviceTensorRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceTensor")
            .field("dtype", &self.dtype())
            .field("shape", &self.shape())
            .field("device", &self.device())
            .finish()
    }
}

/// A device tensor that owns its memory (or a borrow of the caller's it releases once), freed
/// on drop. Derefs to [`DeviceTensorRef`] for its properties, downloads and exports.
///
/// ```
/// use tenso::gpu::{self, DeviceTensor};
/// gpu::select_backend(gpu::Backend::Host)?;
/// let t = DeviceTensor::from_slice(&[1i32, 2, 3, 4], &[2, 2], 0)?;   // upload
/// assert_eq!((t.dtype(), t.shape(), t.nbytes()), (tenso::Dtype::Int32, &[2usize, 2][..], 16));
/// assert_eq!(t.download::<i32>()?, [1, 2, 3, 4]);
/// # Ok::<(), tenso::Error>(())
/// ```
pub struct DeviceTensor(NonNull<sys::tenso_gpu_tensor>);

// SAFETY: as DeviceTensorRef; dropping frees once, with no call in progress (we own it).
unsafe impl Send for DeviceTensor {}
unsafe impl Sync for DeviceTensor {}

impl std::ops::Deref for DeviceTensor {
    type Target = DeviceTensorRef;
    fn deref(&self) -> &DeviceTensorRef {
        // SAFETY: alive until drop.
        unsafe { DeviceTensorRef::from_ptr(self.0.as_ptr()) }
    }
}

impl Drop for DeviceTensor {
    fn drop(&mut self) {
        // SAFETY: ours, freed once.
        unsafe { sys::tenso_gpu_tensor_free(self.0.as_ptr()) }
    }
}

impl fmt::Debug for DeviceTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

fn tensor_from(out: *mut sys::tenso_gpu_tensor) -> Result<DeviceTensor> {
    NonNull::new(out).map(DeviceTensor).ok_or_else(|| Error::new(ErrorKind::Internal, "NULL device tensor"))
}

/// The release callback of [`DeviceTensor::wrap`], boxed for the C trampoline.
type Release = Box<dyn FnOnce(*mut c_void) + Send>;

unsafe extern "C" fn release_trampoline(user: *mut c_void, device_ptr: *mut c_void) {
    // SAFETY: `user` is the Box<Release> leaked by wrap(), called once by libtenso.
    let f = Box::from_raw(user.cast::<Release>());
    f(device_ptr);
}

impl DeviceTensor {
    /// A new C-contiguous tensor on `device` (contents undefined until written).
    pub fn new(device: i32, dtype: Dtype, shape: &[usize]) -> Result<DeviceTensor> {
        let mut out = ptr::null_mut();
        let s = wire_dims(shape);
        // SAFETY: valid pointers; ndim entries.
        check(unsafe { sys::tenso_gpu_tensor_new(&mut out, device, dtype.code(), s.len() as u32, s.as_ptr()) })?;
        tensor_from(out)
    }

    /// A new tensor on `device` holding a copy of `data` (C order, `shape`).
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize], device: i32) -> Result<DeviceTensor> {
        let mut t = DeviceTensor::new(device, T::DTYPE, shape)?;
        t.upload_bytes(as_bytes(data))?;
        Ok(t)
    }

    /// Overwrites the whole tensor with `src` (exactly nbytes long) through the pinned pool.
    pub fn upload_bytes(&mut self, src: &[u8]) -> Result<()> {
        // SAFETY: a tensor we own exclusively; src.len() readable bytes.
        check(unsafe { sys::tenso_gpu_tensor_upload(self.0.as_ptr(), src.as_ptr().cast(), src.len(), ptr::null_mut()) })
    }

    /// Wraps the caller's device memory (C-contiguous, product(shape) x itemsize bytes) without
    /// copying; `release` runs once when the tensor is freed.
    ///
    /// # Safety
    /// `device_ptr` must be device memory of `device` (host memory under the host backend) of
    /// at least that size, valid until `release` runs.
    pub unsafe fn wrap(
        device_ptr: *mut c_void,
        device: i32,
        dtype: Dtype,
        shape: &[usize],
        release: Option<Box<dyn FnOnce(*mut c_void) + Send>>,
    ) -> Result<DeviceTensor> {
        let s = wire_dims(shape);
        let (cb, user): (sys::tenso_gpu_release_fn, *mut c_void) = match release {
            Some(f) => (Some(release_trampoline), Box::into_raw(Box::new(f)).cast()),
            None => (None, ptr::null_mut()),
        };
        let mut out = ptr::null_mut();
        let st = sys::tenso_gpu_tensor_wrap(
            &mut out,
            device_ptr,
            device,
            dtype.code(),
            s.len() as u32,
            s.as_ptr(),
            cb,
            user,
        );
        if st != sys::TENSO_OK && !user.is_null() {
            // Not wrapped: the callback was not taken; drop it unrun.
            drop(Box::from_raw(user.cast::<Release>()));
        }
        check(st)?;
        tensor_from(out)
    }

    /// Imports a DLPack tensor (kDLCUDA on the CUDA backend, kDLCPU on the host backend;
    /// compact row-major) without copying; its deleter runs when the tensor is dropped. On
    /// failure the export is dropped (its deleter runs) and the error returned.
    ///
    /// ```
    /// use tenso::gpu::{self, DeviceTensor};
    /// gpu::select_backend(gpu::Backend::Host)?;
    /// let t = DeviceTensor::from_slice(&[1.5f64, 2.5], &[2], 0)?;
    /// let again = DeviceTensor::from_dlpack(t.to_dlpack()?)?;     // same memory, no copy
    /// assert_eq!(again.data_ptr(), t.data_ptr());
    /// drop(t);                                                    // the import keeps it
    /// assert_eq!(again.download::<f64>()?, [1.5, 2.5]);
    /// # Ok::<(), tenso::Error>(())
    /// ```
    pub fn from_dlpack(dl: DlPack<'static>) -> Result<DeviceTensor> {
        let raw = dl.into_raw();
        let mut out = ptr::null_mut();
        // SAFETY: a managed tensor we own; on success libtenso owns it.
        let st = unsafe { sys::tenso_gpu_tensor_from_dlpack(&mut out, raw) };
        if st != sys::TENSO_OK {
            let err = Error::last(st);
            // SAFETY: still ours on failure: hand it back to its wrapper, which drops it.
            drop(unsafe { DlPack::from_owned(NonNull::new_unchecked(raw)) });
            return Err(err);
        }
        tensor_from(out)
    }

    /// Imports a raw DLPack tensor from another library (torch, cupy, jax through their C
    /// APIs) without copying.
    ///
    /// # Safety
    /// `m` must be a valid managed tensor that the caller owns; on `Ok` libtenso owns it (and
    /// calls its deleter once), on `Err` the caller still does.
    pub unsafe fn from_dlpack_raw(m: *mut sys::DLManagedTensorVersioned) -> Result<DeviceTensor> {
        let mut out = ptr::null_mut();
        check(sys::tenso_gpu_tensor_from_dlpack(&mut out, m))?;
        tensor_from(out)
    }

    /// Opens another process's device memory from a GPU IPC reference packet
    /// ([`DeviceTensorRef::ipc_export`]) as a tensor of `dtype` and `shape` (whose size must be
    /// the reference's nbytes: else [`ErrorKind::InvalidArgument`]). Dropping it closes it.
    pub fn ipc_open(ipc_ref: &ViewRef, dtype: Dtype, shape: &[usize]) -> Result<DeviceTensor> {
        let s = wire_dims(shape);
        let mut out = ptr::null_mut();
        // SAFETY: live view, valid pointers.
        check(unsafe {
            sys::tenso_gpu_ipc_open(&mut out, ipc_ref.raw_ptr(), dtype.code(), s.len() as u32, s.as_ptr())
        })?;
        tensor_from(out)
    }

    /// Gives up ownership (free it with `tenso_gpu_tensor_free`).
    pub fn into_raw(self) -> *mut sys::tenso_gpu_tensor {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }
}

// ---- decoded values ------------------------------------------------------------------------

/// What a packet became on the device, borrowed: a dense tensor or a bundle of named values.
#[repr(transparent)]
pub struct DeviceValueRef(sys::tenso_gpu_value);

// SAFETY: immutable after decoding; libtenso's calls are thread-safe.
unsafe impl Send for DeviceValueRef {}
unsafe impl Sync for DeviceValueRef {}

impl DeviceValueRef {
    /// SAFETY: `p` is a live value; the reference must not outlive it.
    unsafe fn from_ptr<'x>(p: *const sys::tenso_gpu_value) -> &'x DeviceValueRef {
        &*(p as *const DeviceValueRef)
    }
    fn as_ptr(&self) -> *const sys::tenso_gpu_value {
        &self.0
    }
    /// The dense tensor; `None` for a bundle.
    pub fn tensor(&self) -> Option<&DeviceTensorRef> {
        // SAFETY: live value; the tensor lives as long as it.
        let t = unsafe { sys::tenso_gpu_value_tensor(self.as_ptr()) };
        // SAFETY: owned by the value, borrowed for &self.
        (!t.is_null()).then(|| unsafe { DeviceTensorRef::from_ptr(t) })
    }
    /// Bundle entries (0 for a dense value).
    pub fn len(&self) -> usize {
        // SAFETY: live value.
        unsafe { sys::tenso_gpu_value_bundle_count(self.as_ptr()) as usize }
    }
    /// Whether there are no bundle entries (always, for a dense value).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Bundle entry `index` in packet order: (key bytes, value).
    pub fn entry(&self, index: usize) -> Result<(&[u8], &DeviceValueRef)> {
        let (mut key, mut key_len, mut child) = (ptr::null(), 0usize, ptr::null());
        let i = u32::try_from(index).map_err(|_| Error::new(ErrorKind::InvalidArgument, "index out of range"))?;
        // SAFETY: live value, valid out pointers.
        check(unsafe { sys::tenso_gpu_value_bundle_entry(&mut key, &mut key_len, &mut child, self.as_ptr(), i) })?;
        // SAFETY: key bytes and child are owned by the value, borrowed for &self.
        unsafe {
            let k = if key_len == 0 { &[][..] } else { std::slice::from_raw_parts(key.cast::<u8>(), key_len) };
            Ok((k, DeviceValueRef::from_ptr(child)))
        }
    }
    /// Bundle entries in packet order.
    pub fn entries(&self) -> DeviceEntries<'_> {
        DeviceEntries { value: self, next: 0, len: self.len() }
    }
    /// The bundle entry named `key`.
    pub fn get(&self, key: &str) -> Option<&DeviceValueRef> {
        self.entries().find(|(k, _)| *k == key.as_bytes()).map(|(_, v)| v)
    }
    /// How the packet reached the device.
    pub fn path(&self) -> Option<TransferPath> {
        // SAFETY: live value.
        match unsafe { sys::tenso_gpu_value_path(self.as_ptr()) } {
            sys::TENSO_GPU_PATH_STAGED => Some(TransferPath::Staged),
            sys::TENSO_GPU_PATH_GDS => Some(TransferPath::Gds),
            sys::TENSO_GPU_PATH_GDS_COMPAT => Some(TransferPath::GdsCompat),
            sys::TENSO_GPU_PATH_IPC => Some(TransferPath::Ipc),
            _ => None,
        }
    }
}

impl fmt::Debug for DeviceValueRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.tensor() {
            Some(t) => t.fmt(f),
            None => f
                .debug_map()
                .entries(self.entries().map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v)))
                .finish(),
        }
    }
}

/// Iterator over a device bundle's entries ([`DeviceValueRef::entries`]).
#[derive(Debug)]
pub struct DeviceEntries<'v> {
    value: &'v DeviceValueRef,
    next: usize,
    len: usize,
}

impl<'v> Iterator for DeviceEntries<'v> {
    type Item = (&'v [u8], &'v DeviceValueRef);
    fn next(&mut self) -> Option<Self::Item> {
        while self.next < self.len {
            self.next += 1;
            if let Ok(e) = self.value.entry(self.next - 1) {
                return Some(e);
            }
        }
        None
    }
}

/// A decoded packet on the device (owned): dense or a bundle. Derefs to [`DeviceValueRef`].
pub struct DeviceValue(NonNull<sys::tenso_gpu_value>);

// SAFETY: as DeviceValueRef; dropped once by its owner.
unsafe impl Send for DeviceValue {}
unsafe impl Sync for DeviceValue {}

impl std::ops::Deref for DeviceValue {
    type Target = DeviceValueRef;
    fn deref(&self) -> &DeviceValueRef {
        // SAFETY: alive until drop.
        unsafe { DeviceValueRef::from_ptr(self.0.as_ptr()) }
    }
}

impl Drop for DeviceValue {
    fn drop(&mut self) {
        // SAFETY: ours, freed once.
        unsafe { sys::tenso_gpu_value_free(self.0.as_ptr()) }
    }
}

impl fmt::Debug for DeviceValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl DeviceValue {
    fn from_out(out: *mut sys::tenso_gpu_value) -> Result<DeviceValue> {
        NonNull::new(out).map(DeviceValue).ok_or_else(|| Error::new(ErrorKind::Internal, "NULL device value"))
    }
    /// The dense tensor, owned ([`ErrorKind::UnsupportedKind`] style error for a bundle).
    pub fn into_tensor(self) -> Result<DeviceTensor> {
        let mut out = ptr::null_mut();
        // SAFETY: a value we own; the tensor moves out, the value is still freed on drop.
        check(unsafe { sys::tenso_gpu_value_take_tensor(&mut out, self.0.as_ptr()) })?;
        tensor_from(out)
    }
}

// ---- packets -> device -----------------------------------------------------------------------

/// Decodes a packet held in host memory into device memory: a dense tensor, a bundle member by
/// member, a quantized packet dequantized on the device ([`GpuOptions::dequantize_to`]), or an
/// IPC reference opened (as uint8 bytes).
pub fn loads(packet: &[u8], opts: &GpuOptions) -> Result<DeviceValue> {
    let mut out = ptr::null_mut();
    // SAFETY: packet.len() readable bytes; valid options for the call.
    check(opts.with_raw(|o| unsafe { sys::tenso_gpu_loads(&mut out, packet.as_ptr().cast(), packet.len(), o) }))?;
    DeviceValue::from_out(out)
}

/// Reads one packet from `fd` (socket, pipe or file) into device memory, overlapping reads with
/// host -> device copies. `None` at a clean end of stream.
///
/// ```
/// use std::io::Write;
/// use tenso::gpu::{self, GpuOptions};
/// gpu::select_backend(gpu::Backend::Host)?;
/// let packet = tenso::dumps(&tenso::Tensor::from_slice(&[7u16, 8, 9]))?;
/// let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
/// a.write_all(&packet).unwrap();
/// drop(a);
/// let t = gpu::read_fd(&b, &GpuOptions::new())?.unwrap().into_tensor()?;
/// assert_eq!(t.download::<u16>()?, [7, 8, 9]);
/// assert!(gpu::read_fd(&b, &GpuOptions::new())?.is_none());
/// # Ok::<(), tenso::Error>(())
/// ```
#[cfg(unix)]
pub fn read_fd(fd: impl std::os::fd::AsFd, opts: &GpuOptions) -> Result<Option<DeviceValue>> {
    use std::os::fd::AsRawFd;
    let raw = fd.as_fd().as_raw_fd();
    let mut out = ptr::null_mut();
    // SAFETY: a borrowed open fd; valid pointers.
    let st = opts.with_raw(|o| unsafe { sys::tenso_gpu_read_fd(&mut out, raw, o) });
    if st == sys::TENSO_E_END_OF_STREAM {
        // SAFETY: no arguments.
        unsafe { sys::tenso_error_clear() };
        return Ok(None);
    }
    check(st)?;
    DeviceValue::from_out(out).map(Some)
}

/// Reads a packet file into device memory: GPUDirect Storage where cuFile is present and the
/// packet allows it, else staged ([`DeviceValueRef::path`] says which).
pub fn load_file(path: impl AsRef<Path>, opts: &GpuOptions) -> Result<DeviceValue> {
    let c = path_cstring(path.as_ref())?;
    let mut out = ptr::null_mut();
    // SAFETY: NUL-terminated path; valid pointers.
    check(opts.with_raw(|o| unsafe { sys::tenso_gpu_load_file(&mut out, c.as_ptr(), o) }))?;
    DeviceValue::from_out(out)
}

/// Decodes a dense packet into the caller's device memory (`capacity` bytes at `device_ptr`
/// on the options' device); returns the body size. [`ErrorKind::BufferTooSmall`] when it
/// does not fit.
///
/// # Safety
/// `device_ptr` must be `capacity` writable bytes of device memory on that device (host
/// memory under the host backend), not used by anything else during the call.
pub unsafe fn loads_into(device_ptr: *mut c_void, capacity: u64, packet: &[u8], opts: &GpuOptions) -> Result<u64> {
    let mut n = 0u64;
    check(opts.with_raw(|o| {
        sys::tenso_gpu_loads_into(device_ptr, capacity, &mut n, packet.as_ptr().cast(), packet.len(), o)
    }))?;
    Ok(n)
}

// ---- device -> packets -----------------------------------------------------------------------

/// Encodes a device tensor as a packet in host memory (downloaded through pinned staging;
/// integrity footer, compression and alignment as `enc` says): the same bytes
/// [`tenso::dumps`](crate::dumps) gives for its host copy.
pub fn dumps(t: &DeviceTensorRef, enc: &Options, opts: &GpuOptions) -> Result<Buffer> {
    let mut buf = Buffer::empty();
    // SAFETY: live tensor, an initialised buffer, valid options.
    check(opts.with_raw(|o| unsafe { sys::tenso_gpu_dumps(buf.raw_mut(), t.as_ptr(), &enc.raw, o) }))?;
    Ok(buf)
}

/// Writes a device tensor's packet to `fd`, overlapping device -> host copies with writes;
/// returns the bytes written.
#[cfg(unix)]
pub fn write_fd(fd: impl std::os::fd::AsFd, t: &DeviceTensorRef, enc: &Options, opts: &GpuOptions) -> Result<u64> {
    use std::os::fd::AsRawFd;
    let raw = fd.as_fd().as_raw_fd();
    let mut written = 0u64;
    // SAFETY: a borrowed open fd, live tensor, valid options.
    check(opts.with_raw(|o| unsafe { sys::tenso_gpu_write_fd(&mut written, raw, t.as_ptr(), &enc.raw, o) }))?;
    Ok(written)
}

/// Dequantizes a quantized view (a decoded quantized packet) on the device into `out_dtype`
/// (Float32, Float16 or Bfloat16): bit-exact with the host's dequantize for Float32.
///
/// ```
/// use tenso::gpu::{self, GpuOptions};
/// gpu::select_backend(gpu::Backend::Host)?;
/// let x = [0.5f32, -1.0, 2.0, 0.25];
/// let q = tenso::quantize(&tenso::Tensor::new(&x, &[4])?, tenso::Dtype::Qint8, tenso::Scheme::PerTensor)?;
/// let packet = tenso::dumps(&q)?;
/// let view = tenso::loads(&packet)?;
/// let t = gpu::dequantize(&view, tenso::Dtype::Float32, &GpuOptions::new())?;
/// assert_eq!(t.download::<f32>()?, view.quantized()?.dequantize()?);
/// # Ok::<(), tenso::Error>(())
/// ```
pub fn dequantize(quantized: &ViewRef, out_dtype: Dtype, opts: &GpuOptions) -> Result<DeviceTensor> {
    let mut out = ptr::null_mut();
    // SAFETY: live view, valid options.
    check(opts.with_raw(|o| unsafe { sys::tenso_gpu_dequantize(&mut out, quantized.raw_ptr(), out_dtype.code(), o) }))?;
    tensor_from(out)
}

// The thread-safety promises of this module, checked at compile time.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<DeviceTensor>();
    send_sync::<DeviceValue>();
    send_sync::<GpuOptions>();
    send_sync::<Stream>();
};
