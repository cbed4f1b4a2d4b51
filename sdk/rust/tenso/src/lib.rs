//! Zero-copy tensor packets (the Tenso wire protocol v4, byte-compatible with the PyPI
//! package `tenso` 0.24) over libtenso's stable C ABI.
//!
//! A Tenso packet is a small header, the shape, padding to an alignment boundary and the raw
//! little-endian body. Decoding is a pointer into the bytes: [`loads`] returns a [`View`]
//! that borrows them, and [`ViewRef::as_slice`] hands out the elements as `&[T]` without a
//! copy. Encoding is one pass over each body ([`dumps`], [`dumps_into`]) or none at all with
//! vectored I/O ([`write_fd`]).
//!
//! ```
//! // Encode a 2x3 float32 tensor (the same bytes as upstream `tenso.dumps(x)`).
//! let x: Vec<f32> = (0..6).map(|i| i as f32 * 0.5).collect();
//! let packet = tenso::dumps(&tenso::Tensor::new(&x, &[2, 3])?)?;
//!
//! // Decode: no copy, the slice points into `packet`.
//! let view = tenso::loads(&packet)?;
//! assert_eq!(view.shape(), &[2, 3]);
//! assert_eq!(view.as_slice::<f32>()?, &x[..]);
//! # Ok::<(), tenso::Error>(())
//! ```
//!
//! # What is where
//!
//! - Encoding: [`Tensor`] (borrowed elements), your own types through the open [`Encode`]
//!   trait, `ndarray` arrays (feature `ndarray`), [`Bundle`] (string keys to values, nested),
//!   [`Value`] (sparse COO/CSR/CSC, quantized, strings, ragged, GPU IPC references,
//!   pre-encoded packets), [`quantize`]; [`Options`] for integrity footers, LZ4 compression
//!   and alignment; [`dumps`], [`dumps_into`], [`save`] (atomic), [`write_fd`], [`write_to`].
//! - Decoding: [`loads`] → [`View`] (borrows the input) → [`ViewRef`] (dtype, shape, typed
//!   slices, [`values`](ViewRef::values), bundle [`entries`](ViewRef::entries), [`sparse`](ViewRef::sparse),
//!   [`quantized`](ViewRef::quantized), [`strings`](ViewRef::strings),
//!   [`ragged`](ViewRef::ragged), [`ipc_ref`](ViewRef::ipc_ref),
//!   [`to_dlpack`](ViewRef::to_dlpack)); [`DecodeOptions`] for limits.
//! - Owned packets: [`load`] (mmap), [`read_fd`], [`read_from`] / [`Packets`] (any `Read`),
//!   [`Decoder`] (push-style: feed bytes in any pieces), [`Packet::from_vec`] (keeps your
//!   buffer, zero copy) return a [`Packet`], which owns its memory and is `'static`. Every
//!   stream reader runs on libtenso's stream decoder: no framing code in this crate.
//! - Framing without decoding: [`packet_length`], [`inspect`].
//! - Shared memory (libtenso 1.1): [`Shm`] (one packet in a named segment, the layout of
//!   upstream's `TensoShm`) and [`Cache`] (a tensor cache shared by every process on the
//!   host: LRU eviction, time-to-live, pinned zero-copy [`CacheView`]s).
//! - Files of many tensors (libtenso 1.1): [`Archive`] reads tenso archives, safetensors and
//!   bintensors files by mapping them (O(1) lookup, zero-copy [`Packet`]s, `pread` slices,
//!   hash verification); [`ArchiveWriter`] streams them to disk atomically.
//!
//! # Element types
//!
//! The 15 dense dtypes map to `f32`, `f64`, `i8`..`i64`, `u8`..`u64`, `bool` (copied and
//! checked to be 0 or 1, never borrowed: shared memory could change a checked byte), [`F16`] and [`Bf16`] (`#[repr(transparent)]` `u16`
//! newtypes with `f32` conversions, no dependency; their layout is that of `half::f16` /
//! `half::bf16`), and [`Complex<f32>`](Complex) / [`Complex<f64>`](Complex) (`re`, `im`).
//!
//! # Alignment
//!
//! A top-level body is aligned (64 bytes by default) relative to the packet start, so it is
//! aligned in memory when the packet's buffer is (a [`Buffer`], a [`Packet`], or any heap
//! `Vec<u8>` for element types up to 16 bytes). Bodies inside bundles are aligned relative to
//! their own sub-packet and may sit at any address: [`ViewRef::as_slice`] then returns
//! [`ErrorKind::Misaligned`] instead of creating an unaligned reference;
//! [`ViewRef::values`] borrows when it can and copies when it must (the `Cow` says which),
//! [`ViewRef::to_vec`] always copies.
//!
//! # Lifetimes
//!
//! A [`View<'a>`](View) hands out its body for the input's lifetime `'a`
//! ([`View::as_slice`], [`View::bytes`], [`View::values`]), so decoded slices may outlive the
//! view; bundle entries ([`ViewRef`]) lend theirs for the borrow of the view. To keep a
//! decoded packet in a struct together with its bytes, give the bytes to
//! [`Packet::from_vec`] (zero copy). Shapes are `usize` in and out (the crate needs a 64-bit
//! target, where they cross the ABI as they are).
//!
//! # Threads and errors
//!
//! Views and packets are immutable and `Send + Sync`; [`Value`] and [`Bundle`] are `Send`
//! but not `Sync`, as libtenso requires. Failures are [`Error`]s carrying the libtenso status
//! ([`ErrorKind`]) and the message of `tenso_last_error()`, copied right after the failing
//! call. Nothing in this API is `unsafe` but [`Shm::bytes_mut`] (a `&mut` over a segment
//! other handles map; [`Shm::write_at`] is the safe writer).
#![deny(missing_debug_implementations)]
#![warn(missing_docs)]

mod archive;
#[cfg(feature = "ndarray")]
mod array;
mod composite;
mod decoder;
mod dlpack;
mod dtype;
mod encode;
mod error;
pub mod gpu;
mod io;
mod net;
#[cfg(feature = "tokio")]
mod net_async;
mod options;
mod shm;
mod tensor;
mod value;
mod view;

pub use archive::{
    Archive, ArchiveEntries, ArchiveEntry, ArchiveKey, ArchiveOptions, ArchiveWriteOptions, ArchiveWriter, Format,
    Metadata,
};
pub use composite::{IpcRef, Quantized, Ragged, Scheme, Sparse, Strings};
pub use decoder::Decoder;
pub use dlpack::{DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLTensor, DlPack, DlPackLegacy};
pub use dtype::{Bf16, Complex, Dtype, Element, Kind, F16};
#[cfg(unix)]
pub use encode::write_fd;
pub use encode::{dumps, dumps_into, save, write_to, Buffer, Encode};
pub use error::{Error, ErrorKind, Result};
#[cfg(unix)]
pub use io::read_fd;
pub use io::{load, load_with, read_from, LoadMode, Packet, Packets};
pub use net::{AccessOp, CancelToken, Message, Node, NodeOptions, NodeStats};
#[cfg(feature = "tokio")]
pub use net_async::{AsyncNode, Completion};
pub use options::{DecodeOptions, Options};
pub use shm::{Cache, CacheEntryInfo, CacheOptions, CacheStats, CacheView, IfExists, Shm, ShmOpenOptions};
pub use tensor::Tensor;
pub use value::{quantize, Bundle, Value};
pub use view::{
    inspect, loads, loads_tensor, packet_length, Entries, PacketInfo, PacketLength, TensorView, View, ViewRef,
};

/// The raw declarations this crate is built on.
pub use tenso_sys as sys;

/// Header flag bits of [`ViewRef::flags`] / [`PacketInfo::flags`] (`TENSO_FLAG_*`).
pub mod flags {
    use tenso_sys as sys;
    /// The body is padded to 64 bytes.
    pub const ALIGNED: u32 = sys::TENSO_FLAG_ALIGNED;
    /// An XXH3-64 footer follows the body.
    pub const INTEGRITY: u32 = sys::TENSO_FLAG_INTEGRITY;
    /// The body is an LZ4 frame.
    pub const COMPRESSION: u32 = sys::TENSO_FLAG_COMPRESSION;
    /// A COO sparse container.
    pub const SPARSE_COO: u32 = sys::TENSO_FLAG_SPARSE_COO;
    /// A bundle.
    pub const BUNDLE: u32 = sys::TENSO_FLAG_BUNDLE;
    /// A CSR sparse container.
    pub const SPARSE_CSR: u32 = sys::TENSO_FLAG_SPARSE_CSR;
    /// A CSC sparse container.
    pub const SPARSE_CSC: u32 = sys::TENSO_FLAG_SPARSE_CSC;
    /// A one-byte alignment exponent follows the shape (an alignment other than 64).
    pub const CUST_ALIGN: u32 = sys::TENSO_FLAG_CUST_ALIGN;
    /// A string packet.
    pub const STRING: u32 = sys::TENSO_FLAG_STRING;
    /// A direct ragged packet.
    pub const RAGGED: u32 = sys::TENSO_FLAG_RAGGED;
    /// A GPU IPC reference packet.
    pub const GPU_IPC_REF: u32 = sys::TENSO_FLAG_GPU_IPC_REF;
}

/// The loaded libtenso's version, e.g. `"1.4.0"`.
///
/// ```
/// assert!(tenso::library_version().starts_with("1."));
/// assert_eq!(tenso::protocol_version(), 4);
/// ```
pub fn library_version() -> &'static str {
    // SAFETY: static NUL-terminated ASCII storage.
    unsafe { std::ffi::CStr::from_ptr(sys::tenso_version_string()) }.to_str().unwrap_or("unknown")
}

/// The loaded libtenso's `TENSO_VERSION_NUMBER` (major * 10000 + minor * 100 + patch).
pub fn library_version_number() -> u32 {
    // SAFETY: no arguments.
    unsafe { sys::tenso_version_number() }
}

/// The wire protocol version libtenso writes (4).
pub fn protocol_version() -> u32 {
    // SAFETY: no arguments.
    unsafe { sys::tenso_protocol_version() }
}

/// What the compiler enforces: each example below must fail to compile (they run as
/// `compile_fail` doctests, with the expected error code).
///
/// A view cannot outlive the bytes it was decoded from:
/// ```compile_fail,E0597
/// let view = {
///     let bytes = tenso::dumps(&tenso::Tensor::from_slice(&[1u8])).unwrap();
///     tenso::loads(&bytes).unwrap()
/// };
/// drop(view);
/// ```
///
/// A typed slice of a `View` borrows the input bytes (it may outlive the view), so it cannot
/// outlive the bytes:
/// ```compile_fail,E0505
/// let bytes = tenso::dumps(&tenso::Tensor::from_slice(&[1u8])).unwrap();
/// let slice = tenso::loads(&bytes).unwrap().as_slice::<u8>().unwrap();
/// drop(bytes);
/// assert_eq!(slice, &[1]);
/// ```
///
/// A slice borrowed through `ViewRef` (bundle entries, `view.as_ref()`) cannot outlive its
/// view:
/// ```compile_fail,E0597
/// let bytes = tenso::dumps(&tenso::Tensor::from_slice(&[1u8])).unwrap();
/// let slice = {
///     let view = tenso::loads(&bytes).unwrap();
///     view.as_ref().as_slice::<u8>().unwrap()
/// };
/// drop(slice);
/// ```
///
/// A bundle entry cannot outlive the bundle view:
/// ```compile_fail,E0597
/// let b = tenso::Bundle::new().with("x", &tenso::Tensor::from_slice(&[1u8])).unwrap();
/// let bytes = tenso::dumps(&b).unwrap();
/// let child = {
///     let view = tenso::loads(&bytes).unwrap();
///     view.get("x").unwrap()
/// };
/// drop(child);
/// ```
///
/// A bundle cannot outlive the elements it borrows:
/// ```compile_fail,E0597
/// let mut b = tenso::Bundle::new();
/// {
///     let data = vec![1.0f32; 4];
///     b.insert("x", &tenso::Tensor::from_slice(&data)).unwrap();
/// }
/// tenso::dumps(&b).unwrap();
/// ```
///
/// A DLPack export cannot outlive its view:
/// ```compile_fail,E0597
/// let bytes = tenso::dumps(&tenso::Tensor::from_slice(&[1u8])).unwrap();
/// let dl = {
///     let view = tenso::loads(&bytes).unwrap();
///     view.to_dlpack().unwrap()
/// };
/// drop(dl);
/// ```
///
/// A value or bundle is `Send` but not `Sync`:
/// ```compile_fail,E0277
/// fn shared<T: Sync>(_: &T) {}
/// shared(&tenso::Bundle::new());
/// ```
///
/// The element type trait is sealed:
/// ```compile_fail,E0277
/// #[derive(Clone, Copy)]
/// struct Mine(u32);
/// let v = [Mine(1)];
/// tenso::Tensor::from_slice(&v);
/// ```
#[allow(dead_code)]
mod compile_fail {}

/// The README's examples run as doctests too.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
