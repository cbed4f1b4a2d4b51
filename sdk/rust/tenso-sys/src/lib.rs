//! Raw declarations of the libtenso C ABI (`tenso/tenso.h`, `tenso/errors.h`,
//! `tenso/version.h`, `tenso/dlpack.h`, `tenso/shm.h`, `tenso/archive.h`, `tenso/gpu.h`), written by hand
//! `tenso/version.h`, `tenso/dlpack.h`, `tenso/shm.h`, `tenso/archive.h`, `tenso/net.h`), written by hand
//! from the headers of libtenso 1.1.
//!
//! Everything here is `unsafe` and mirrors C exactly: the `tenso_*` functions, the structs a
//! caller fills or receives (`#[repr(C)]`, same field order and types), the opaque handles
//! (zero-sized `#[repr(C)]` structs that are neither `Send`, `Sync` nor `Unpin`, so they can
//! only be used behind pointers) and every constant of the headers. `tenso_status`,
//! `tenso_dtype` and `tenso_kind` are `i32` aliases, as in C (never C enums, whose size and
//! signedness vary); DLPack's two C enums are `u32` aliases plus constants.
//!
//! The `systest` crate of this workspace checks these declarations against the installed
//! headers: struct sizes, alignments and field offsets, every constant's value and every
//! function's signature (a mismatch fails to compile or fails the test).
//!
//! Use the safe crate (`libtenso`, `use tenso::...`) unless you need the raw ABI.
//!
//! With the `bundled` feature (the default) libtenso is compiled from the sources this crate
//! carries and linked statically; without it, the installed libtenso that pkg-config finds is
//! linked (see build.rs).
#![no_std]
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]

// The bundled engine's native dependencies: named so that rustc links their libraries (an
// extern crate nothing refers to would be dropped).
#[cfg(feature = "bundled")]
extern crate lz4_sys as _;
#[cfg(feature = "bundled")]
extern crate openssl_sys as _;

use core::ffi::{c_char, c_int, c_void};
use core::marker::{PhantomData, PhantomPinned};

// ============================================================================================
// version.h
// ============================================================================================

pub const TENSO_VERSION_MAJOR: u32 = 1;
pub const TENSO_VERSION_MINOR: u32 = 5;
pub const TENSO_VERSION_PATCH: u32 = 0;
/// The ABI major: the soname is libtenso.so.TENSO_SOVERSION.
pub const TENSO_SOVERSION: u32 = 1;
/// The wire protocol version the library writes (it reads v1 to v4).
pub const TENSO_PROTOCOL_VERSION: u32 = 4;
/// `MAJOR * 10000 + MINOR * 100 + PATCH` of the headers these declarations match; compare
/// with [`tenso_version_number`] at run time.
pub const TENSO_VERSION_NUMBER: u32 = TENSO_VERSION_MAJOR * 10000 + TENSO_VERSION_MINOR * 100 + TENSO_VERSION_PATCH;
/// `TENSO_VERSION_STRING`, NUL-terminated.
pub const TENSO_VERSION_STRING: &[u8] = b"1.5.0\0";

// ============================================================================================
// errors.h
// ============================================================================================

/// A status code: `TENSO_OK` or a negative `TENSO_E_*` value (pinned, never renumbered).
pub type tenso_status = i32;

pub const TENSO_OK: tenso_status = 0;
pub const TENSO_E_INVALID_ARGUMENT: tenso_status = -1;
pub const TENSO_E_BUFFER_TOO_SMALL: tenso_status = -2;
pub const TENSO_E_TRUNCATED: tenso_status = -3;
pub const TENSO_E_BAD_MAGIC: tenso_status = -4;
pub const TENSO_E_UNSUPPORTED_VERSION: tenso_status = -5;
pub const TENSO_E_BAD_DTYPE: tenso_status = -6;
pub const TENSO_E_TOO_MANY_DIMS: tenso_status = -7;
pub const TENSO_E_TOO_MANY_ELEMENTS: tenso_status = -8;
pub const TENSO_E_CHECKSUM: tenso_status = -9;
pub const TENSO_E_COMPRESSION: tenso_status = -10;
pub const TENSO_E_BAD_BUNDLE: tenso_status = -11;
pub const TENSO_E_MALFORMED: tenso_status = -12;
pub const TENSO_E_LIMIT: tenso_status = -13;
pub const TENSO_E_UNSUPPORTED_KIND: tenso_status = -14;
pub const TENSO_E_NO_MEMORY: tenso_status = -15;
pub const TENSO_E_IO: tenso_status = -16;
pub const TENSO_E_END_OF_STREAM: tenso_status = -17;
pub const TENSO_E_NOT_AVAILABLE: tenso_status = -18;
pub const TENSO_E_USER: tenso_status = -19;
pub const TENSO_E_INTERNAL: tenso_status = -20;
/// A key, tensor name or shared-memory segment that does not exist (or has expired). 1.1.
pub const TENSO_E_NOT_FOUND: tenso_status = -21;
/// A segment or file to be created exists already. 1.1.
pub const TENSO_E_EXISTS: tenso_status = -22;
/// A cache pool with no room left after expiry and eviction (or no free entry slot). 1.1.
pub const TENSO_E_FULL: tenso_status = -23;
/// A pool or file whose own structure is invalid or foreign. 1.1.
pub const TENSO_E_CORRUPT: tenso_status = -24;
/// A lock was not obtained in time. 1.1.
pub const TENSO_E_TIMEOUT: tenso_status = -25;
/// A tensor's byte range is out of the file, overlaps another, is misaligned or leaves a
/// forbidden hole. 1.1.
pub const TENSO_E_BAD_OFFSET: tenso_status = -26;
/// A name that occurs twice where names must be unique. 1.1.
pub const TENSO_E_DUPLICATE_KEY: tenso_status = -27;
/// A name, key or metadata string that is not valid UTF-8. 1.1.
pub const TENSO_E_BAD_UTF8: tenso_status = -28;
pub const TENSO_E_GPU_UNAVAILABLE: tenso_status = -29;
pub const TENSO_E_GPU: tenso_status = -30;
pub const TENSO_E_SHUTDOWN: tenso_status = -31;
pub const TENSO_E_CONNECTION: tenso_status = -32;
pub const TENSO_E_AUTH: tenso_status = -33;
pub const TENSO_E_BAD_ADDRESS: tenso_status = -34;
pub const TENSO_E_CANCELLED: tenso_status = -35;

// ============================================================================================
// tenso.h: dtypes, kinds, flags and limits
// ============================================================================================

/// A dtype code as stored in the packet header.
pub type tenso_dtype = i32;

pub const TENSO_DTYPE_FLOAT32: tenso_dtype = 1;
pub const TENSO_DTYPE_INT32: tenso_dtype = 2;
pub const TENSO_DTYPE_FLOAT64: tenso_dtype = 3;
pub const TENSO_DTYPE_INT64: tenso_dtype = 4;
pub const TENSO_DTYPE_UINT8: tenso_dtype = 5;
pub const TENSO_DTYPE_UINT16: tenso_dtype = 6;
pub const TENSO_DTYPE_BOOL: tenso_dtype = 7;
pub const TENSO_DTYPE_FLOAT16: tenso_dtype = 8;
pub const TENSO_DTYPE_INT8: tenso_dtype = 9;
pub const TENSO_DTYPE_INT16: tenso_dtype = 10;
pub const TENSO_DTYPE_UINT32: tenso_dtype = 11;
pub const TENSO_DTYPE_UINT64: tenso_dtype = 12;
pub const TENSO_DTYPE_COMPLEX64: tenso_dtype = 13;
pub const TENSO_DTYPE_COMPLEX128: tenso_dtype = 14;
pub const TENSO_DTYPE_BFLOAT16: tenso_dtype = 15;
pub const TENSO_DTYPE_QINT8: tenso_dtype = 16;
pub const TENSO_DTYPE_QUINT8: tenso_dtype = 17;
pub const TENSO_DTYPE_QINT4: tenso_dtype = 18;
pub const TENSO_DTYPE_QUINT4: tenso_dtype = 19;
pub const TENSO_DTYPE_STRING: tenso_dtype = 20;
pub const TENSO_DTYPE_BYTES: tenso_dtype = 21;

/// What a packet holds.
pub type tenso_kind = i32;

pub const TENSO_KIND_DENSE: tenso_kind = 1;
pub const TENSO_KIND_BUNDLE: tenso_kind = 2;
pub const TENSO_KIND_SPARSE_COO: tenso_kind = 3;
pub const TENSO_KIND_SPARSE_CSR: tenso_kind = 4;
pub const TENSO_KIND_SPARSE_CSC: tenso_kind = 5;
pub const TENSO_KIND_QUANTIZED: tenso_kind = 6;
pub const TENSO_KIND_STRING: tenso_kind = 7;
pub const TENSO_KIND_RAGGED: tenso_kind = 8;
pub const TENSO_KIND_GPU_IPC_REF: tenso_kind = 9;

pub const TENSO_FLAG_ALIGNED: u32 = 0x0001;
pub const TENSO_FLAG_INTEGRITY: u32 = 0x0002;
pub const TENSO_FLAG_COMPRESSION: u32 = 0x0004;
pub const TENSO_FLAG_SPARSE_COO: u32 = 0x0008;
pub const TENSO_FLAG_BUNDLE: u32 = 0x0010;
pub const TENSO_FLAG_SPARSE_CSR: u32 = 0x0020;
pub const TENSO_FLAG_SPARSE_CSC: u32 = 0x0040;
pub const TENSO_FLAG_CUST_ALIGN: u32 = 0x0080;
pub const TENSO_FLAG_STRING: u32 = 0x0100;
pub const TENSO_FLAG_RAGGED: u32 = 0x0200;
pub const TENSO_FLAG_GPU_IPC_REF: u32 = 0x0400;

pub const TENSO_MAX_NDIM: u32 = 32;
pub const TENSO_MAX_ELEMENTS: u64 = 1_000_000_000;
pub const TENSO_MAX_DEPTH: u32 = 64;
pub const TENSO_MAX_BUNDLE_ENTRIES: u32 = 255;
/// The longest bundle key, in bytes, read or written.
pub const TENSO_MAX_KEY_BYTES: u32 = 65536;
pub const TENSO_DEFAULT_ALIGNMENT: u32 = 64;
pub const TENSO_MAX_ALIGNMENT: u32 = 1 << 20;

// ============================================================================================
// tenso.h: buffers and options
// ============================================================================================

/// Bytes allocated by tenso on the caller's behalf (64-byte aligned); release the contents
/// with [`tenso_buffer_dispose`]. Start from [`TENSO_BUFFER_INIT`].
#[repr(C)]
#[derive(Debug)]
pub struct tenso_buffer {
    pub data: *mut u8,
    pub size: usize,
    /// The allocation's capacity; do not touch.
    pub reserved: usize,
}

/// `TENSO_BUFFER_INIT`.
pub const TENSO_BUFFER_INIT: tenso_buffer = tenso_buffer { data: core::ptr::null_mut(), size: 0, reserved: 0 };

pub const TENSO_ENCODE_INTEGRITY: u32 = 0x1;
pub const TENSO_ENCODE_COMPRESS: u32 = 0x2;

/// How to encode; zero means "default" in every field. Start from
/// [`TENSO_ENCODE_OPTIONS_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct tenso_encode_options {
    pub version: u32,
    pub flags: u32,
    pub alignment: u32,
    pub compression_level: i32,
    /// Since version 2 (1.3): threads that compress the 4 MiB LZ4 blocks of a large body;
    /// 0 = every core, 1 = the calling thread. The bytes do not depend on it.
    pub threads: u32,
}

pub const TENSO_ENCODE_OPTIONS_VERSION: u32 = 2;
/// `TENSO_ENCODE_OPTIONS_INIT`.
pub const TENSO_ENCODE_OPTIONS_INIT: tenso_encode_options = tenso_encode_options {
    version: TENSO_ENCODE_OPTIONS_VERSION,
    flags: 0,
    alignment: 0,
    compression_level: 0,
    threads: 0,
};

pub const TENSO_DECODE_SKIP_CHECKSUM: u32 = 0x1;
pub const TENSO_DECODE_VALIDATE_UTF8: u32 = 0x2;

/// Limits and switches for decoding; zero means "default" in every field. Start from
/// [`TENSO_DECODE_OPTIONS_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct tenso_decode_options {
    pub version: u32,
    pub flags: u32,
    pub max_ndim: u32,
    pub max_depth: u32,
    pub max_elements: u64,
    pub max_packet_bytes: u64,
    pub max_decoded_bytes: u64,
    pub max_entries: u64,
    /// Since version 3 (1.3): fd reads, the most a call may wait per packet, in total;
    /// 0 = no deadline of ours (writes honour the socket's SO_SNDTIMEO).
    pub timeout_ms: u64,
    /// Since version 3 (1.3): threads that decompress the LZ4 blocks of a large body;
    /// 0 = every core, 1 = the calling thread.
    pub threads: u32,
    /// Since version 4 (1.5): what LZ4 bodies may decompress to, in all, as a multiple of the
    /// bytes handed to the decode, counted as at least 4 MiB; 0 = no such bound.
    pub max_inflation: u32,
}
// The C layout (tenso.h): a field out of place would hand libtenso the wrong limits.
const _: () = assert!(core::mem::size_of::<tenso_decode_options>() == 64);
const _: () = assert!(core::mem::offset_of!(tenso_decode_options, max_decoded_bytes) == 32);
const _: () = assert!(core::mem::offset_of!(tenso_decode_options, threads) == 56);
const _: () = assert!(core::mem::offset_of!(tenso_decode_options, max_inflation) == 60);

pub const TENSO_DECODE_OPTIONS_VERSION: u32 = 4;
/// `TENSO_DECODE_OPTIONS_INIT`.
pub const TENSO_DECODE_OPTIONS_INIT: tenso_decode_options = tenso_decode_options {
    version: TENSO_DECODE_OPTIONS_VERSION,
    flags: 0,
    max_ndim: 0,
    max_depth: 0,
    max_elements: 0,
    max_packet_bytes: 0,
    max_decoded_bytes: 0,
    max_entries: 0,
    timeout_ms: 0,
    threads: 0,
    max_inflation: 0,
};

/// A dense tensor to encode (all memory borrowed for the duration of the call).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenso_tensor {
    pub data: *const c_void,
    pub nbytes: u64,
    pub shape: *const u64,
    pub ndim: u32,
    pub dtype: tenso_dtype,
}

// ============================================================================================
// tenso.h: opaque handles
// ============================================================================================

/// Something to encode: a tensor, bundle, pre-encoded packet or composite value. Opaque.
#[repr(C)]
pub struct tenso_value {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// A decoded packet. Opaque.
#[repr(C)]
pub struct tenso_view {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

// ---- stream decoder (libtenso 1.3)

/// A stream decoder (opaque). @since libtenso 1.3
#[repr(C)]
pub struct tenso_decoder {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Memory for one packet, asked for once its exact length is known; NULL refuses.
pub type tenso_alloc_fn = Option<unsafe extern "C" fn(user: *mut c_void, size: usize, alignment: usize) -> *mut c_void>;
/// Called when tenso no longer needs memory from a `tenso_alloc_fn` (possibly after the
/// decoder is freed, from any thread).
pub type tenso_release_fn = Option<unsafe extern "C" fn(user: *mut c_void, ptr: *mut c_void, size: usize)>;
/// Receives the packet of `tenso_value_write_cb` piece by piece (`borrowed` = 1: the caller's own
/// bytes, valid as long as that memory is; 0: library memory valid only during the call).
/// Return 0 to go on, anything else to stop with `TENSO_E_USER`.
pub type tenso_write_fn =
    Option<unsafe extern "C" fn(data: *const c_void, len: usize, borrowed: c_int, user: *mut c_void) -> c_int>;

/// `tenso_decoder_options.flags`: the decoder may read past the current packet from an fd.
pub const TENSO_DECODER_READ_AHEAD: u32 = 0x1;

/// Options for `tenso_decoder_new`; start from [`TENSO_DECODER_OPTIONS_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenso_decoder_options {
    pub version: u32,
    pub flags: u32,
    pub decode: *const tenso_decode_options,
    pub alloc: tenso_alloc_fn,
    pub release: tenso_release_fn,
    pub alloc_user: *mut c_void,
}
const _: () = assert!(core::mem::size_of::<tenso_decoder_options>() == 40);

pub const TENSO_DECODER_OPTIONS_VERSION: u32 = 1;
/// `TENSO_DECODER_OPTIONS_INIT`.
pub const TENSO_DECODER_OPTIONS_INIT: tenso_decoder_options = tenso_decoder_options {
    version: TENSO_DECODER_OPTIONS_VERSION,
    flags: 0,
    decode: core::ptr::null(),
    alloc: None,
    release: None,
    alloc_user: core::ptr::null_mut(),
};

// ============================================================================================
// tenso.h: composite kinds and inspection structs
// ============================================================================================

pub const TENSO_QUANT_PER_TENSOR: i32 = 0;
pub const TENSO_QUANT_PER_CHANNEL: i32 = 1;
pub const TENSO_QUANT_PER_GROUP: i32 = 2;

/// A quantized tensor, in parts (pointers borrowed).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenso_quantized {
    pub data: *const c_void,
    pub nbytes: u64,
    pub shape: *const u64,
    pub scales: *const f32,
    pub zero_points: *const f32,
    pub ndim: u32,
    pub dtype: tenso_dtype,
    pub scheme: i32,
    pub axis: i32,
    pub group_size: u32,
    pub num_scales: u32,
}

/// A GPU IPC reference (106 bytes on the wire).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct tenso_ipc_ref {
    pub handle: [u8; 64],
    pub byte_offset: u64,
    pub nbytes: u64,
    pub device_uuid: [u8; 16],
}

/// A dense tensor decoded into the caller's struct by `tenso_loads_tensor` (since 1.5).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenso_tensor_view {
    pub data: *const c_void,
    pub nbytes: u64,
    pub packet_size: u64,
    pub dtype: tenso_dtype,
    pub ndim: u32,
    pub flags: u32,
    pub version: u32,
    pub alignment: u32,
    pub reserved: u32,
    pub shape: [u64; TENSO_MAX_NDIM as usize],
}

/// What the header of a packet says, read without touching the body.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenso_packet_info {
    pub version: u32,
    pub flags: u32,
    pub kind: tenso_kind,
    pub dtype: tenso_dtype,
    pub ndim: u32,
    pub entry_count: u32,
    pub alignment: u32,
    pub reserved0: u32,
    pub shape: [u64; TENSO_MAX_NDIM as usize],
    pub body_offset: u64,
    pub body_size: u64,
    pub packet_size: u64,
    pub reserved: [u64; 4],
}

pub const TENSO_LOAD_READ: u32 = 0;
pub const TENSO_LOAD_MMAP: u32 = 1;

// ============================================================================================
// dlpack.h (DLPack 1.1)
// ============================================================================================

pub const DLPACK_MAJOR_VERSION: u32 = 1;
pub const DLPACK_MINOR_VERSION: u32 = 1;

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

/// The C enum `DLDeviceType` (all enumerators non-negative, so GCC/Clang make it an
/// `unsigned int`).
pub type DLDeviceType = u32;
pub const kDLCPU: DLDeviceType = 1;
pub const kDLCUDA: DLDeviceType = 2;
pub const kDLCUDAHost: DLDeviceType = 3;
pub const kDLOpenCL: DLDeviceType = 4;
pub const kDLVulkan: DLDeviceType = 7;
pub const kDLMetal: DLDeviceType = 8;
pub const kDLVPI: DLDeviceType = 9;
pub const kDLROCM: DLDeviceType = 10;
pub const kDLROCMHost: DLDeviceType = 11;
pub const kDLExtDev: DLDeviceType = 12;
pub const kDLCUDAManaged: DLDeviceType = 13;
pub const kDLOneAPI: DLDeviceType = 14;
pub const kDLWebGPU: DLDeviceType = 15;
pub const kDLHexagon: DLDeviceType = 16;
pub const kDLMAIA: DLDeviceType = 17;

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDevice {
    pub device_type: DLDeviceType,
    pub device_id: i32,
}

/// The C enum `DLDataTypeCode` (stored as a `u8` in [`DLDataType::code`]).
pub type DLDataTypeCode = u32;
pub const kDLInt: DLDataTypeCode = 0;
pub const kDLUInt: DLDataTypeCode = 1;
pub const kDLFloat: DLDataTypeCode = 2;
pub const kDLOpaqueHandle: DLDataTypeCode = 3;
pub const kDLBfloat: DLDataTypeCode = 4;
pub const kDLComplex: DLDataTypeCode = 5;
pub const kDLBool: DLDataTypeCode = 6;

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

/// The pre-1.0 managed tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(self_: *mut DLManagedTensor)>,
}

pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;
pub const DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

/// The DLPack >= 1.0 managed tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(self_: *mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

// ============================================================================================
// shm.h (1.1): segments and the multi-process cache
// ============================================================================================

/// A mapping of one named shared-memory segment. Opaque.
#[repr(C)]
pub struct tenso_shm {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// `tenso_shm_create` / cache create flag: replace a leftover segment of the same name.
pub const TENSO_SHM_REPLACE: u32 = 0x1;
/// `tenso_shm_open_flags` flag: map the segment read-write.
pub const TENSO_SHM_WRITABLE: u32 = 0x1;
/// `tenso_shm_open_flags` flag and cache open flag: also open an object another uid owns.
pub const TENSO_SHM_ANY_OWNER: u32 = 0x2;

/// An attached cache pool. Opaque.
#[repr(C)]
pub struct tenso_cache {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// The longest cache key, in bytes.
pub const TENSO_CACHE_MAX_KEY_BYTES: i32 = 128;

/// Options for creating or opening a cache; zero means "default" in every field.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct tenso_cache_options {
    pub version: u32,
    pub flags: u32,
    pub size: u64,
    pub max_entries: u32,
    pub max_clients: u32,
    pub max_pins: u32,
    pub lock_timeout_ms: u32,
}

pub const TENSO_CACHE_OPTIONS_VERSION: u32 = 1;
/// `TENSO_CACHE_OPTIONS_INIT`.
pub const TENSO_CACHE_OPTIONS_INIT: tenso_cache_options = tenso_cache_options {
    version: TENSO_CACHE_OPTIONS_VERSION,
    flags: 0,
    size: 0,
    max_entries: 0,
    max_clients: 0,
    max_pins: 0,
    lock_timeout_ms: 0,
};

/// What the cache knows about one entry.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenso_cache_entry_info {
    pub packet: tenso_packet_info,
    pub alloc_bytes: u64,
    pub ttl_seconds: f64,
    pub age_seconds: f64,
    pub pins: u32,
    pub reserved0: u32,
    pub reserved: [u64; 4],
}

/// `tenso_cache_keys` callback: non-zero stops the walk with `TENSO_E_USER`.
pub type tenso_cache_key_fn =
    Option<unsafe extern "C" fn(key: *const c_char, key_len: usize, user: *mut c_void) -> c_int>;

/// Counters and occupancy of a pool.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct tenso_cache_stats {
    pub entries: u64,
    pub max_entries: u64,
    pub pool_bytes: u64,
    pub data_bytes: u64,
    pub used_bytes: u64,
    pub free_bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub expirations: u64,
    pub pinned_entries: u64,
    pub recoveries: u64,
    pub clients: u64,
    pub reserved: [u64; 4],
}

// ============================================================================================
// archive.h (1.1): files of many named tensors
// ============================================================================================

/// A file format.
pub type tenso_format = i32;

pub const TENSO_FORMAT_AUTO: tenso_format = 0;
pub const TENSO_FORMAT_ARCHIVE: tenso_format = 1;
pub const TENSO_FORMAT_SAFETENSORS: tenso_format = 2;
pub const TENSO_FORMAT_BINTENSORS: tenso_format = 3;
pub const TENSO_FORMAT_PACKET: tenso_format = 4;

/// An open archive (read side). Opaque.
#[repr(C)]
pub struct tenso_archive {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

pub const TENSO_ARCHIVE_VERIFY_ALL: u32 = 0x1;
pub const TENSO_ARCHIVE_NO_VERIFY: u32 = 0x2;

/// Options for opening an archive; zero means "default" in every field.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct tenso_archive_options {
    pub version: u32,
    pub flags: u32,
    pub format: tenso_format,
    pub reserved0: u32,
    pub max_index_bytes: u64,
    pub max_tensors: u64,
}

pub const TENSO_ARCHIVE_OPTIONS_VERSION: u32 = 1;
/// `TENSO_ARCHIVE_OPTIONS_INIT`.
pub const TENSO_ARCHIVE_OPTIONS_INIT: tenso_archive_options = tenso_archive_options {
    version: TENSO_ARCHIVE_OPTIONS_VERSION,
    flags: 0,
    format: 0,
    reserved0: 0,
    max_index_bytes: 0,
    max_tensors: 0,
};

/// `tenso_archive_entry.flags`: the index holds an XXH3-64 of the stored bytes.
pub const TENSO_ENTRY_HASHED: u32 = 0x1;

/// One tensor as an archive's index describes it (`name` is owned by the archive handle).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenso_archive_entry {
    pub name: *const c_char,
    pub name_len: usize,
    pub kind: tenso_kind,
    pub dtype: tenso_dtype,
    pub ndim: u32,
    pub flags: u32,
    pub shape: [u64; TENSO_MAX_NDIM as usize],
    pub offset: u64,
    pub stored_bytes: u64,
    pub nbytes: u64,
    pub data_offset: u64,
    pub xxh3: u64,
    pub reserved: [u64; 4],
}

/// Progress callback: non-zero aborts with `TENSO_E_USER`.
pub type tenso_progress_fn = Option<unsafe extern "C" fn(done: u64, total: u64, user: *mut c_void) -> c_int>;

/// An archive being written. Opaque.
#[repr(C)]
pub struct tenso_archive_writer {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

pub const TENSO_ARCHIVE_NO_HASH: u32 = 0x1;

/// Options for writing an archive; zero means "default" in every field.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct tenso_archive_write_options {
    pub version: u32,
    pub flags: u32,
    pub format: tenso_format,
    pub alignment: u32,
    pub encode: tenso_encode_options,
}

/// Version 2 (1.3) embeds version 2 encode options (with `threads`).
pub const TENSO_ARCHIVE_WRITE_OPTIONS_VERSION: u32 = 2;
/// `TENSO_ARCHIVE_WRITE_OPTIONS_INIT`.
pub const TENSO_ARCHIVE_WRITE_OPTIONS_INIT: tenso_archive_write_options = tenso_archive_write_options {
    version: TENSO_ARCHIVE_WRITE_OPTIONS_VERSION,
    flags: 0,
    format: 0,
    alignment: 0,
    encode: TENSO_ENCODE_OPTIONS_INIT,
};

// ============================================================================================
// Functions, in the order of the headers.
// ============================================================================================

// ============================================================================================
// net.h (1.4): nodes that push and pull named values between peers
// ============================================================================================

/// A node. Opaque.
#[repr(C)]
pub struct tenso_node {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// A cancel token. Opaque.
#[repr(C)]
pub struct tenso_cancel {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// A received push. Opaque.
#[repr(C)]
pub struct tenso_node_message {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// `tenso_node_options.flags`: allow tcp:// and unix:// listeners and peers (no TLS).
pub const TENSO_NODE_ALLOW_PLAINTEXT: u32 = 0x1;
/// `tenso_node_options.flags`: never pass descriptors over Unix sockets.
pub const TENSO_NODE_NO_FD_PASSING: u32 = 0x2;
/// `tenso_node_options.flags`: do not listen at all.
pub const TENSO_NODE_NO_LISTEN: u32 = 0x4;
/// `tenso_node_options.flags`: no busy polling: a call waiting for a peer's answer, and the
/// node's event loop between requests, sleep at once instead of polling first (since 1.5).
pub const TENSO_NODE_NO_BUSY_POLL: u32 = 0x8;

/// Node options; zero means "default" in every field (see `tenso/net.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenso_node_options {
    pub version: u32,
    pub flags: u32,
    pub listen: *const c_char,
    pub cert_pem: *const c_char,
    pub key_pem: *const c_char,
    pub ca_pem: *const c_char,
    pub pinned_keys: *const *const c_char,
    pub pinned_key_count: u32,
    pub threads: u32,
    pub max_packet_bytes: u64,
    pub max_name_bytes: u32,
    pub max_queued: u32,
    pub max_queued_bytes: u64,
    pub max_connections: u32,
    pub max_pool_per_peer: u32,
    pub idle_timeout_ms: u64,
    pub io_timeout_ms: u64,
    pub fd_passing_min_bytes: u64,
}

pub const TENSO_NODE_OPTIONS_VERSION: u32 = 1;

/// Called once when the node no longer uses a published value.
pub type tenso_node_release_fn = Option<unsafe extern "C" fn(user: *mut c_void)>;

/// `tenso_node_access_fn`'s `op`: a peer pulls a published value. @since 1.5
pub const TENSO_NODE_ACCESS_GET: c_int = 1;
/// `tenso_node_access_fn`'s `op`: a peer pushes a value. @since 1.5
pub const TENSO_NODE_ACCESS_PUSH: c_int = 2;
/// A node's access hook: nonzero allows the peer's get or push of `name`. @since 1.5
pub type tenso_node_access_fn = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        op: c_int,
        peer: *const c_char,
        name: *const c_char,
        name_len: usize,
    ) -> c_int,
>;

/// A node's counters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct tenso_node_stats {
    pub version: u32,
    pub pool_size: u32,
    pub inbound_connections: u32,
    pub queued: u32,
    pub queued_bytes: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub connections_opened: u64,
    pub connections_reused: u64,
    pub refused: u64,
    /// TLS connections whose records the kernel handles (kTLS; since 1.5).
    pub tls_kernel: u64,
    /// TLS connections whose records OpenSSL handles in the process (since 1.5).
    pub tls_user: u64,
    /// Waits for a peer's answer that busy polled first (since 1.5).
    pub busy_polls: u64,
    /// Those whose answer came while polling (since 1.5).
    pub busy_poll_hits: u64,
}

pub const TENSO_NODE_STATS_VERSION: u32 = 1;

/// A completion queue (since 1.5). Opaque.
#[repr(C)]
pub struct tenso_node_queue {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// A completion-based call (since 1.5). Opaque.
#[repr(C)]
pub struct tenso_node_op {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Called per delivered completion on a callback-mode queue's thread (since 1.5).
pub type tenso_node_op_fn = Option<unsafe extern "C" fn(op: *mut tenso_node_op, payload: *mut c_void)>;

extern "C" {
    // ---- errors.h
    pub fn tenso_last_error() -> *const c_char;
    pub fn tenso_error_clear();
    pub fn tenso_status_name(status: tenso_status) -> *const c_char;

    // ---- version
    pub fn tenso_version_number() -> u32;
    pub fn tenso_version_string() -> *const c_char;
    pub fn tenso_protocol_version() -> u32;

    // ---- dtypes
    pub fn tenso_dtype_itemsize(dtype: tenso_dtype) -> usize;
    pub fn tenso_dtype_name(dtype: tenso_dtype) -> *const c_char;
    pub fn tenso_dtype_from_name(out: *mut tenso_dtype, name: *const c_char) -> tenso_status;
    /// Since 1.3: how many dtype codes the library knows; with `tenso_dtype_at`, lists them.
    pub fn tenso_dtype_count() -> u32;
    /// Since 1.3: the index-th known dtype code, ascending; 0 past the end.
    pub fn tenso_dtype_at(index: u32) -> tenso_dtype;
    /// Since 1.3: the kind a dtype belongs to (dense, quantized, string); 0 when unknown.
    pub fn tenso_dtype_kind(dtype: tenso_dtype) -> tenso_kind;
    /// Since 1.3: bits per element (4 for the 4-bit quantized dtypes); 0 when not fixed.
    pub fn tenso_dtype_bits(dtype: tenso_dtype) -> u32;
    /// Since 1.3: how many kinds the library knows.
    pub fn tenso_kind_count() -> u32;
    /// Since 1.3: the index-th known kind code, ascending; 0 past the end.
    pub fn tenso_kind_at(index: u32) -> tenso_kind;
    /// Since 1.3: a kind's name ("dense", "bundle", ...); "unknown" for others.
    pub fn tenso_kind_name(kind: tenso_kind) -> *const c_char;
    /// Since 1.3: the kind for a name; `TENSO_E_INVALID_ARGUMENT` when unknown.
    pub fn tenso_kind_from_name(out: *mut tenso_kind, name: *const c_char) -> tenso_status;

    // ---- buffers and options
    pub fn tenso_buffer_dispose(buf: *mut tenso_buffer);
    pub fn tenso_encode_options_init(opts: *mut tenso_encode_options, version: u32) -> tenso_status;
    pub fn tenso_decode_options_init(opts: *mut tenso_decode_options, version: u32) -> tenso_status;

    // ---- dense encoding
    pub fn tenso_dumps_bound(
        bound_out: *mut usize,
        t: *const tenso_tensor,
        opts: *const tenso_encode_options,
    ) -> tenso_status;
    pub fn tenso_dumps_into(
        dst: *mut c_void,
        dst_capacity: usize,
        written_out: *mut usize,
        t: *const tenso_tensor,
        opts: *const tenso_encode_options,
    ) -> tenso_status;
    pub fn tenso_dumps(
        out: *mut tenso_buffer,
        t: *const tenso_tensor,
        opts: *const tenso_encode_options,
    ) -> tenso_status;
    pub fn tenso_write_fd(
        written_out: *mut u64,
        fd: c_int,
        t: *const tenso_tensor,
        opts: *const tenso_encode_options,
    ) -> tenso_status;
    pub fn tenso_save_file(
        path: *const c_char,
        t: *const tenso_tensor,
        opts: *const tenso_encode_options,
    ) -> tenso_status;

    // ---- values
    pub fn tenso_value_new_tensor(out: *mut *mut tenso_value, t: *const tenso_tensor) -> tenso_status;
    pub fn tenso_value_new_packet(out: *mut *mut tenso_value, packet: *const c_void, len: usize) -> tenso_status;
    pub fn tenso_value_new_bundle(out: *mut *mut tenso_value) -> tenso_status;
    pub fn tenso_bundle_insert(
        bundle: *mut tenso_value,
        key: *const c_char,
        key_len: usize,
        child: *const tenso_value,
    ) -> tenso_status;
    pub fn tenso_bundle_count(bundle: *const tenso_value) -> u32;
    pub fn tenso_value_free(v: *mut tenso_value);
    pub fn tenso_value_dumps_bound(
        bound_out: *mut usize,
        v: *const tenso_value,
        opts: *const tenso_encode_options,
    ) -> tenso_status;
    pub fn tenso_value_dumps_into(
        dst: *mut c_void,
        dst_capacity: usize,
        written_out: *mut usize,
        v: *const tenso_value,
        opts: *const tenso_encode_options,
    ) -> tenso_status;
    pub fn tenso_value_dumps(
        out: *mut tenso_buffer,
        v: *const tenso_value,
        opts: *const tenso_encode_options,
    ) -> tenso_status;
    pub fn tenso_value_write_fd(
        written_out: *mut u64,
        fd: c_int,
        v: *const tenso_value,
        opts: *const tenso_encode_options,
    ) -> tenso_status;
    pub fn tenso_value_write_cb(
        written_out: *mut u64,
        v: *const tenso_value,
        opts: *const tenso_encode_options,
        write: tenso_write_fn,
        user: *mut c_void,
    ) -> tenso_status;
    pub fn tenso_value_save_file(
        path: *const c_char,
        v: *const tenso_value,
        opts: *const tenso_encode_options,
    ) -> tenso_status;

    // ---- composite kinds
    pub fn tenso_value_new_sparse(
        out: *mut *mut tenso_value,
        format: tenso_kind,
        ndim: u32,
        shape: *const u64,
        a: *const tenso_tensor,
        b: *const tenso_tensor,
        c: *const tenso_tensor,
    ) -> tenso_status;
    pub fn tenso_view_component(child_out: *mut *const tenso_view, v: *const tenso_view, index: u32) -> tenso_status;
    pub fn tenso_quantize(
        out: *mut *mut tenso_value,
        input: *const tenso_tensor,
        qdtype: tenso_dtype,
        scheme: i32,
        axis: i32,
        group_size: u32,
    ) -> tenso_status;
    pub fn tenso_value_new_quantized(out: *mut *mut tenso_value, q: *const tenso_quantized) -> tenso_status;
    pub fn tenso_value_quantized(out: *mut tenso_quantized, v: *const tenso_value) -> tenso_status;
    pub fn tenso_view_quantized(out: *mut tenso_quantized, v: *const tenso_view) -> tenso_status;
    pub fn tenso_dequantize(dst: *mut f32, dst_count: u64, q: *const tenso_quantized) -> tenso_status;
    pub fn tenso_value_new_strings(
        out: *mut *mut tenso_value,
        count: u64,
        offsets: *const u64,
        payload: *const c_void,
        payload_len: u64,
    ) -> tenso_status;
    pub fn tenso_view_string_offsets(
        offsets_out: *mut *const u64,
        payload_out: *mut *const c_char,
        v: *const tenso_view,
    ) -> tenso_status;
    pub fn tenso_value_new_ragged(
        out: *mut *mut tenso_value,
        flat: *const tenso_tensor,
        count: u64,
        row_offsets: *const u64,
    ) -> tenso_status;
    pub fn tenso_view_ragged(
        flat_out: *mut *const tenso_view,
        offsets_out: *mut *const tenso_view,
        v: *const tenso_view,
    ) -> tenso_status;
    pub fn tenso_value_new_ipc_ref(out: *mut *mut tenso_value, ref_: *const tenso_ipc_ref) -> tenso_status;
    pub fn tenso_view_ipc_ref(out: *mut tenso_ipc_ref, v: *const tenso_view) -> tenso_status;

    // ---- inspecting
    pub fn tenso_inspect(out: *mut tenso_packet_info, data: *const c_void, len: usize) -> tenso_status;
    pub fn tenso_packet_length(
        length_out: *mut usize,
        data: *const c_void,
        len: usize,
        opts: *const tenso_decode_options,
    ) -> tenso_status;

    // ---- views
    pub fn tenso_loads(
        out: *mut *mut tenso_view,
        data: *const c_void,
        len: usize,
        opts: *const tenso_decode_options,
    ) -> tenso_status;
    /// Since 1.5.
    pub fn tenso_loads_tensor(
        out: *mut tenso_tensor_view,
        data: *const c_void,
        len: usize,
        opts: *const tenso_decode_options,
    ) -> tenso_status;
    pub fn tenso_view_free(v: *mut tenso_view);
    pub fn tenso_view_kind(v: *const tenso_view) -> tenso_kind;
    pub fn tenso_view_dtype(v: *const tenso_view) -> tenso_dtype;
    pub fn tenso_view_ndim(v: *const tenso_view) -> u32;
    pub fn tenso_view_shape(v: *const tenso_view) -> *const u64;
    pub fn tenso_view_data(v: *const tenso_view) -> *const c_void;
    pub fn tenso_view_nbytes(v: *const tenso_view) -> u64;
    pub fn tenso_view_flags(v: *const tenso_view) -> u32;
    pub fn tenso_view_version(v: *const tenso_view) -> u32;
    pub fn tenso_view_alignment(v: *const tenso_view) -> u32;
    pub fn tenso_view_packet_size(v: *const tenso_view) -> u64;
    pub fn tenso_view_owns_data(v: *const tenso_view) -> c_int;
    pub fn tenso_view_bundle_count(v: *const tenso_view) -> u32;
    pub fn tenso_view_bundle_entry(
        key_out: *mut *const c_char,
        key_len_out: *mut usize,
        child_out: *mut *const tenso_view,
        v: *const tenso_view,
        index: u32,
    ) -> tenso_status;
    pub fn tenso_view_bundle_find(
        child_out: *mut *const tenso_view,
        v: *const tenso_view,
        key: *const c_char,
        key_len: usize,
    ) -> tenso_status;

    // ---- streams and files
    pub fn tenso_read_fd(out: *mut *mut tenso_view, fd: c_int, opts: *const tenso_decode_options) -> tenso_status;
    // ---- stream decoder (1.3)
    pub fn tenso_decoder_new(out: *mut *mut tenso_decoder, opts: *const tenso_decoder_options) -> tenso_status;
    pub fn tenso_decoder_free(d: *mut tenso_decoder);
    pub fn tenso_decoder_reset(d: *mut tenso_decoder);
    pub fn tenso_decoder_feed(
        d: *mut tenso_decoder,
        src: *const c_void,
        len: usize,
        consumed_out: *mut usize,
        out: *mut *mut tenso_view,
    ) -> tenso_status;
    pub fn tenso_decoder_buffer(d: *mut tenso_decoder, dst_out: *mut *mut c_void, len_out: *mut usize) -> tenso_status;
    pub fn tenso_decoder_commit(d: *mut tenso_decoder, n: usize, out: *mut *mut tenso_view) -> tenso_status;
    pub fn tenso_decoder_needed(d: *const tenso_decoder) -> usize;
    pub fn tenso_decoder_idle(d: *const tenso_decoder) -> c_int;
    pub fn tenso_decoder_finish(d: *mut tenso_decoder) -> tenso_status;
    pub fn tenso_decoder_read_fd(out: *mut *mut tenso_view, d: *mut tenso_decoder, fd: c_int) -> tenso_status;

    pub fn tenso_load_file(
        out: *mut *mut tenso_view,
        path: *const c_char,
        mode: u32,
        opts: *const tenso_decode_options,
    ) -> tenso_status;

    // ---- DLPack
    pub fn tenso_view_to_dlpack(out: *mut *mut DLManagedTensorVersioned, v: *const tenso_view) -> tenso_status;
    pub fn tenso_view_to_dlpack_legacy(out: *mut *mut DLManagedTensor, v: *const tenso_view) -> tenso_status;

    // ---- shm.h: segments
    pub fn tenso_shm_create(out: *mut *mut tenso_shm, name: *const c_char, size: u64, flags: u32) -> tenso_status;
    pub fn tenso_shm_create_for(
        out: *mut *mut tenso_shm,
        written_out: *mut u64,
        name: *const c_char,
        v: *const tenso_value,
        opts: *const tenso_encode_options,
        flags: u32,
    ) -> tenso_status;
    pub fn tenso_shm_open(out: *mut *mut tenso_shm, name: *const c_char, writable: c_int) -> tenso_status;
    /// @since 1.2
    pub fn tenso_shm_open_flags(out: *mut *mut tenso_shm, name: *const c_char, flags: u32) -> tenso_status;
    pub fn tenso_shm_put(
        written_out: *mut u64,
        shm: *mut tenso_shm,
        v: *const tenso_value,
        opts: *const tenso_encode_options,
    ) -> tenso_status;
    pub fn tenso_shm_get(
        out: *mut *mut tenso_view,
        shm: *const tenso_shm,
        opts: *const tenso_decode_options,
    ) -> tenso_status;
    pub fn tenso_shm_data(shm: *const tenso_shm) -> *mut c_void;
    pub fn tenso_shm_size(shm: *const tenso_shm) -> u64;
    pub fn tenso_shm_name(shm: *const tenso_shm) -> *const c_char;
    pub fn tenso_shm_close(shm: *mut tenso_shm);
    pub fn tenso_shm_unlink(name: *const c_char) -> tenso_status;

    // ---- shm.h: the cache
    pub fn tenso_cache_options_init(opts: *mut tenso_cache_options, version: u32) -> tenso_status;
    pub fn tenso_cache_create(
        out: *mut *mut tenso_cache,
        name: *const c_char,
        opts: *const tenso_cache_options,
    ) -> tenso_status;
    pub fn tenso_cache_open(
        out: *mut *mut tenso_cache,
        name: *const c_char,
        opts: *const tenso_cache_options,
    ) -> tenso_status;
    pub fn tenso_cache_close(cache: *mut tenso_cache);
    pub fn tenso_cache_unlink(name: *const c_char) -> tenso_status;
    pub fn tenso_cache_name(cache: *const tenso_cache) -> *const c_char;
    pub fn tenso_cache_put(
        written_out: *mut u64,
        cache: *mut tenso_cache,
        key: *const c_char,
        key_len: usize,
        v: *const tenso_value,
        opts: *const tenso_encode_options,
        ttl_seconds: f64,
    ) -> tenso_status;
    pub fn tenso_cache_get(
        out: *mut *mut tenso_view,
        cache: *mut tenso_cache,
        key: *const c_char,
        key_len: usize,
        opts: *const tenso_decode_options,
    ) -> tenso_status;
    pub fn tenso_cache_delete(cache: *mut tenso_cache, key: *const c_char, key_len: usize) -> tenso_status;
    pub fn tenso_cache_info(
        out: *mut tenso_cache_entry_info,
        cache: *mut tenso_cache,
        key: *const c_char,
        key_len: usize,
    ) -> tenso_status;
    pub fn tenso_cache_contains(
        found_out: *mut c_int,
        cache: *mut tenso_cache,
        key: *const c_char,
        key_len: usize,
    ) -> tenso_status;
    pub fn tenso_cache_keys(cache: *mut tenso_cache, fn_: tenso_cache_key_fn, user: *mut c_void) -> tenso_status;
    pub fn tenso_cache_clear(cache: *mut tenso_cache) -> tenso_status;
    pub fn tenso_cache_stats_get(out: *mut tenso_cache_stats, cache: *mut tenso_cache) -> tenso_status;
    pub fn tenso_cache_check(cache: *mut tenso_cache) -> tenso_status;

    // ---- archive.h: reading
    pub fn tenso_format_name(format: tenso_format) -> *const c_char;
    pub fn tenso_archive_options_init(opts: *mut tenso_archive_options, version: u32) -> tenso_status;
    pub fn tenso_archive_open(
        out: *mut *mut tenso_archive,
        path: *const c_char,
        opts: *const tenso_archive_options,
    ) -> tenso_status;
    pub fn tenso_archive_close(a: *mut tenso_archive);
    pub fn tenso_archive_format(a: *const tenso_archive) -> tenso_format;
    pub fn tenso_archive_alignment(a: *const tenso_archive) -> u32;
    pub fn tenso_archive_count(a: *const tenso_archive) -> u64;
    pub fn tenso_archive_entry_at(out: *mut tenso_archive_entry, a: *const tenso_archive, index: u64) -> tenso_status;
    pub fn tenso_archive_find(
        index_out: *mut u64,
        a: *const tenso_archive,
        name: *const c_char,
        name_len: usize,
    ) -> tenso_status;
    pub fn tenso_archive_get(
        out: *mut *mut tenso_view,
        a: *mut tenso_archive,
        index: u64,
        opts: *const tenso_decode_options,
    ) -> tenso_status;
    pub fn tenso_archive_read(
        dst: *mut c_void,
        a: *mut tenso_archive,
        index: u64,
        offset: u64,
        len: u64,
    ) -> tenso_status;
    pub fn tenso_archive_metadata_count(a: *const tenso_archive) -> u64;
    pub fn tenso_archive_metadata_at(
        key_out: *mut *const c_char,
        key_len_out: *mut usize,
        value_out: *mut *const c_char,
        value_len_out: *mut usize,
        a: *const tenso_archive,
        index: u64,
    ) -> tenso_status;
    pub fn tenso_archive_metadata_find(
        value_out: *mut *const c_char,
        value_len_out: *mut usize,
        a: *const tenso_archive,
        key: *const c_char,
        key_len: usize,
    ) -> tenso_status;
    pub fn tenso_archive_verify(
        bad_index_out: *mut u64,
        a: *mut tenso_archive,
        progress: tenso_progress_fn,
        user: *mut c_void,
    ) -> tenso_status;

    // ---- archive.h: writing
    pub fn tenso_archive_write_options_init(opts: *mut tenso_archive_write_options, version: u32) -> tenso_status;
    pub fn tenso_archive_writer_open(
        out: *mut *mut tenso_archive_writer,
        path: *const c_char,
        opts: *const tenso_archive_write_options,
    ) -> tenso_status;
    pub fn tenso_archive_writer_add(
        w: *mut tenso_archive_writer,
        name: *const c_char,
        name_len: usize,
        v: *const tenso_value,
    ) -> tenso_status;
    pub fn tenso_archive_writer_set_metadata(
        w: *mut tenso_archive_writer,
        key: *const c_char,
        key_len: usize,
        value: *const c_char,
        value_len: usize,
    ) -> tenso_status;
    pub fn tenso_archive_writer_finish(w: *mut tenso_archive_writer) -> tenso_status;
    pub fn tenso_archive_writer_free(w: *mut tenso_archive_writer);

    // ---- net.h (1.4): nodes
    pub fn tenso_cancel_new(out: *mut *mut tenso_cancel) -> tenso_status;
    pub fn tenso_cancel_trigger(c: *mut tenso_cancel);
    pub fn tenso_cancel_triggered(c: *const tenso_cancel) -> c_int;
    pub fn tenso_cancel_free(c: *mut tenso_cancel);
    pub fn tenso_node_options_init(opts: *mut tenso_node_options, version: u32) -> tenso_status;
    pub fn tenso_node_new(out: *mut *mut tenso_node, opts: *const tenso_node_options) -> tenso_status;
    pub fn tenso_node_shutdown(n: *mut tenso_node);
    pub fn tenso_node_free(n: *mut tenso_node);
    pub fn tenso_node_addr(
        buf: *mut c_char,
        cap: usize,
        len_out: *mut usize,
        n: *const tenso_node,
        index: u32,
    ) -> tenso_status;
    pub fn tenso_node_id(buf: *mut c_char, n: *const tenso_node) -> tenso_status;
    pub fn tenso_node_send(
        n: *mut tenso_node,
        addr: *const c_char,
        name: *const c_char,
        name_len: usize,
        v: *const tenso_value,
        timeout_ms: u64,
        cancel: *mut tenso_cancel,
    ) -> tenso_status;
    pub fn tenso_node_post(
        n: *mut tenso_node,
        addr: *const c_char,
        name: *const c_char,
        name_len: usize,
        v: *const tenso_value,
        timeout_ms: u64,
        cancel: *mut tenso_cancel,
    ) -> tenso_status;
    pub fn tenso_node_flush(
        n: *mut tenso_node,
        addr: *const c_char,
        timeout_ms: u64,
        cancel: *mut tenso_cancel,
    ) -> tenso_status;
    pub fn tenso_node_send_packet(
        n: *mut tenso_node,
        addr: *const c_char,
        name: *const c_char,
        name_len: usize,
        packet: *const c_void,
        len: usize,
        timeout_ms: u64,
        cancel: *mut tenso_cancel,
    ) -> tenso_status;
    pub fn tenso_node_send_fd(
        n: *mut tenso_node,
        addr: *const c_char,
        name: *const c_char,
        name_len: usize,
        fd: c_int,
        offset: u64,
        len: u64,
        timeout_ms: u64,
        cancel: *mut tenso_cancel,
    ) -> tenso_status;
    pub fn tenso_node_receive(
        out: *mut *mut tenso_node_message,
        n: *mut tenso_node,
        timeout_ms: u64,
        cancel: *mut tenso_cancel,
    ) -> tenso_status;
    pub fn tenso_node_receive_fd(n: *const tenso_node) -> c_int;
    pub fn tenso_node_message_name(m: *const tenso_node_message, len_out: *mut usize) -> *const c_char;
    pub fn tenso_node_message_sender(m: *const tenso_node_message) -> *const c_char;
    pub fn tenso_node_message_view(m: *const tenso_node_message) -> *const tenso_view;
    pub fn tenso_node_message_take_view(out: *mut *mut tenso_view, m: *mut tenso_node_message) -> tenso_status;
    pub fn tenso_node_message_free(m: *mut tenso_node_message);
    pub fn tenso_node_publish(
        n: *mut tenso_node,
        name: *const c_char,
        name_len: usize,
        v: *mut tenso_value,
        release: tenso_node_release_fn,
        user: *mut c_void,
    ) -> tenso_status;
    pub fn tenso_node_unpublish(n: *mut tenso_node, name: *const c_char, name_len: usize) -> tenso_status;
    /// @since 1.5
    pub fn tenso_node_set_access(n: *mut tenso_node, f: tenso_node_access_fn, user: *mut c_void) -> tenso_status;
    pub fn tenso_node_request(
        out: *mut *mut tenso_view,
        n: *mut tenso_node,
        addr: *const c_char,
        name: *const c_char,
        name_len: usize,
        timeout_ms: u64,
        cancel: *mut tenso_cancel,
    ) -> tenso_status;
    pub fn tenso_node_stats_get(out: *mut tenso_node_stats, n: *const tenso_node) -> tenso_status;

    // ---- completion-based calls (since 1.5)
    pub fn tenso_node_queue_new(
        out: *mut *mut tenso_node_queue,
        n: *mut tenso_node,
        f: tenso_node_op_fn,
    ) -> tenso_status;
    pub fn tenso_node_queue_fd(q: *const tenso_node_queue) -> c_int;
    pub fn tenso_node_queue_reap(
        ops: *mut *mut tenso_node_op,
        cap: usize,
        count_out: *mut usize,
        q: *mut tenso_node_queue,
        timeout_ms: u64,
    ) -> tenso_status;
    pub fn tenso_node_queue_free(q: *mut tenso_node_queue);
    pub fn tenso_node_send_start(
        out: *mut *mut tenso_node_op,
        q: *mut tenso_node_queue,
        addr: *const c_char,
        name: *const c_char,
        name_len: usize,
        v: *const tenso_value,
        timeout_ms: u64,
        payload: *mut c_void,
    ) -> tenso_status;
    pub fn tenso_node_post_start(
        out: *mut *mut tenso_node_op,
        q: *mut tenso_node_queue,
        addr: *const c_char,
        name: *const c_char,
        name_len: usize,
        v: *const tenso_value,
        timeout_ms: u64,
        payload: *mut c_void,
    ) -> tenso_status;
    pub fn tenso_node_flush_start(
        out: *mut *mut tenso_node_op,
        q: *mut tenso_node_queue,
        addr: *const c_char,
        timeout_ms: u64,
        payload: *mut c_void,
    ) -> tenso_status;
    pub fn tenso_node_request_start(
        out: *mut *mut tenso_node_op,
        q: *mut tenso_node_queue,
        addr: *const c_char,
        name: *const c_char,
        name_len: usize,
        timeout_ms: u64,
        payload: *mut c_void,
    ) -> tenso_status;
    pub fn tenso_node_receive_start(
        out: *mut *mut tenso_node_op,
        q: *mut tenso_node_queue,
        timeout_ms: u64,
        payload: *mut c_void,
    ) -> tenso_status;
    pub fn tenso_node_op_done(op: *const tenso_node_op) -> c_int;
    pub fn tenso_node_op_result(op: *const tenso_node_op) -> tenso_status;
    pub fn tenso_node_op_payload(op: *const tenso_node_op) -> *mut c_void;
    pub fn tenso_node_op_take_view(out: *mut *mut tenso_view, op: *mut tenso_node_op) -> tenso_status;
    pub fn tenso_node_op_take_message(out: *mut *mut tenso_node_message, op: *mut tenso_node_op) -> tenso_status;
    pub fn tenso_node_op_cancel(op: *mut tenso_node_op);
    pub fn tenso_node_op_free(op: *mut tenso_node_op);
}

// ============================================================================================
// gpu.h (since 1.4): packets to and from GPU device memory
// ============================================================================================

pub const TENSO_GPU_BACKEND_NONE: u32 = 0;
pub const TENSO_GPU_BACKEND_CUDA: u32 = 1;
pub const TENSO_GPU_BACKEND_HOST: u32 = 2;

/// A device's properties; set `version` to [`TENSO_GPU_DEVICE_INFO_VERSION`] before
/// [`tenso_gpu_device_info_get`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenso_gpu_device_info {
    pub version: u32,
    pub device: i32,
    /// NUL-terminated.
    pub name: [c_char; 256],
    pub uuid: [u8; 16],
    pub total_memory: u64,
    pub compute_major: i32,
    pub compute_minor: i32,
    pub multiprocessors: i32,
    pub pci_domain: i32,
    pub pci_bus: i32,
    pub pci_device: i32,
    pub backend: u32,
    pub flags: u32,
    pub reserved: [u64; 4],
}

pub const TENSO_GPU_DEVICE_INFO_VERSION: u32 = 1;
pub const TENSO_GPU_DEVICE_GDS: u32 = 0x1;
pub const TENSO_GPU_DEVICE_IPC: u32 = 0x2;

/// Dense device memory with a dtype and shape. Opaque.
#[repr(C)]
pub struct tenso_gpu_tensor {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// Called once when a borrowed device tensor is freed.
pub type tenso_gpu_release_fn = Option<unsafe extern "C" fn(user: *mut c_void, device_ptr: *mut c_void)>;

pub const TENSO_GPU_NO_GDS: u32 = 0x1;
pub const TENSO_GPU_PATH_STAGED: u32 = 1;
pub const TENSO_GPU_PATH_GDS: u32 = 2;
pub const TENSO_GPU_PATH_GDS_COMPAT: u32 = 3;
pub const TENSO_GPU_PATH_IPC: u32 = 4;

/// Options of the packet <-> device calls; start from [`TENSO_GPU_OPTIONS_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tenso_gpu_options {
    pub version: u32,
    pub flags: u32,
    pub device: i32,
    pub dequantize_to: tenso_dtype,
    pub stream: *mut c_void,
    pub chunk_bytes: u64,
    pub staging_buffers: u32,
    pub reserved0: u32,
    pub decode: *const tenso_decode_options,
}

pub const TENSO_GPU_OPTIONS_VERSION: u32 = 1;
/// `TENSO_GPU_OPTIONS_INIT`.
pub const TENSO_GPU_OPTIONS_INIT: tenso_gpu_options = tenso_gpu_options {
    version: TENSO_GPU_OPTIONS_VERSION,
    flags: 0,
    device: 0,
    dequantize_to: 0,
    stream: core::ptr::null_mut(),
    chunk_bytes: 0,
    staging_buffers: 0,
    reserved0: 0,
    decode: core::ptr::null(),
};

/// What a packet became on the device: a dense tensor or a bundle. Opaque.
#[repr(C)]
pub struct tenso_gpu_value {
    _data: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// The pinned staging pool's counters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct tenso_gpu_pool_stats {
    pub buffers: u64,
    pub bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub limit_bytes: u64,
    pub reserved: [u64; 3],
}

extern "C" {
    // ---- gpu.h: backends and devices
    pub fn tenso_gpu_select_backend(backend: u32) -> tenso_status;
    pub fn tenso_gpu_backend() -> u32;
    pub fn tenso_gpu_backend_name(backend: u32) -> *const c_char;
    pub fn tenso_gpu_available() -> tenso_status;
    pub fn tenso_gpu_device_count(count_out: *mut i32) -> tenso_status;
    pub fn tenso_gpu_device_info_get(out: *mut tenso_gpu_device_info, device: i32) -> tenso_status;

    // ---- gpu.h: streams
    pub fn tenso_gpu_stream_new(stream_out: *mut *mut c_void, device: i32) -> tenso_status;
    pub fn tenso_gpu_stream_synchronize(stream: *mut c_void) -> tenso_status;
    pub fn tenso_gpu_stream_free(stream: *mut c_void);

    // ---- gpu.h: device tensors
    pub fn tenso_gpu_tensor_new(
        out: *mut *mut tenso_gpu_tensor,
        device: i32,
        dtype: tenso_dtype,
        ndim: u32,
        shape: *const u64,
    ) -> tenso_status;
    pub fn tenso_gpu_tensor_wrap(
        out: *mut *mut tenso_gpu_tensor,
        device_ptr: *mut c_void,
        device: i32,
        dtype: tenso_dtype,
        ndim: u32,
        shape: *const u64,
        release: tenso_gpu_release_fn,
        user: *mut c_void,
    ) -> tenso_status;
    pub fn tenso_gpu_tensor_free(t: *mut tenso_gpu_tensor);
    pub fn tenso_gpu_tensor_data(t: *const tenso_gpu_tensor) -> *mut c_void;
    pub fn tenso_gpu_tensor_nbytes(t: *const tenso_gpu_tensor) -> u64;
    pub fn tenso_gpu_tensor_dtype(t: *const tenso_gpu_tensor) -> tenso_dtype;
    pub fn tenso_gpu_tensor_ndim(t: *const tenso_gpu_tensor) -> u32;
    pub fn tenso_gpu_tensor_shape(t: *const tenso_gpu_tensor) -> *const u64;
    pub fn tenso_gpu_tensor_device(t: *const tenso_gpu_tensor) -> i32;
    pub fn tenso_gpu_tensor_upload(
        dst: *mut tenso_gpu_tensor,
        src: *const c_void,
        len: usize,
        stream: *mut c_void,
    ) -> tenso_status;
    pub fn tenso_gpu_tensor_download(
        dst: *mut c_void,
        len: usize,
        src: *const tenso_gpu_tensor,
        stream: *mut c_void,
    ) -> tenso_status;

    // ---- gpu.h: packet -> device
    pub fn tenso_gpu_options_init(opts: *mut tenso_gpu_options, version: u32) -> tenso_status;
    pub fn tenso_gpu_loads(
        out: *mut *mut tenso_gpu_value,
        packet: *const c_void,
        len: usize,
        opts: *const tenso_gpu_options,
    ) -> tenso_status;
    pub fn tenso_gpu_read_fd(out: *mut *mut tenso_gpu_value, fd: c_int, opts: *const tenso_gpu_options)
        -> tenso_status;
    pub fn tenso_gpu_load_file(
        out: *mut *mut tenso_gpu_value,
        path: *const c_char,
        opts: *const tenso_gpu_options,
    ) -> tenso_status;
    pub fn tenso_gpu_loads_into(
        device_ptr: *mut c_void,
        capacity: u64,
        nbytes_out: *mut u64,
        packet: *const c_void,
        len: usize,
        opts: *const tenso_gpu_options,
    ) -> tenso_status;
    pub fn tenso_gpu_value_free(v: *mut tenso_gpu_value);
    pub fn tenso_gpu_value_tensor(v: *const tenso_gpu_value) -> *const tenso_gpu_tensor;
    pub fn tenso_gpu_value_take_tensor(out: *mut *mut tenso_gpu_tensor, v: *mut tenso_gpu_value) -> tenso_status;
    pub fn tenso_gpu_value_bundle_count(v: *const tenso_gpu_value) -> u32;
    pub fn tenso_gpu_value_bundle_entry(
        key_out: *mut *const c_char,
        key_len_out: *mut usize,
        child_out: *mut *const tenso_gpu_value,
        v: *const tenso_gpu_value,
        index: u32,
    ) -> tenso_status;
    pub fn tenso_gpu_value_path(v: *const tenso_gpu_value) -> u32;

    // ---- gpu.h: device -> packet
    pub fn tenso_gpu_dumps(
        out: *mut tenso_buffer,
        t: *const tenso_gpu_tensor,
        enc: *const tenso_encode_options,
        opts: *const tenso_gpu_options,
    ) -> tenso_status;
    pub fn tenso_gpu_write_fd(
        written_out: *mut u64,
        fd: c_int,
        t: *const tenso_gpu_tensor,
        enc: *const tenso_encode_options,
        opts: *const tenso_gpu_options,
    ) -> tenso_status;

    // ---- gpu.h: dequantize, IPC, DLPack, the pool
    pub fn tenso_gpu_dequantize(
        out: *mut *mut tenso_gpu_tensor,
        quantized: *const tenso_view,
        out_dtype: tenso_dtype,
        opts: *const tenso_gpu_options,
    ) -> tenso_status;
    pub fn tenso_gpu_ipc_export(out: *mut *mut tenso_value, t: *const tenso_gpu_tensor) -> tenso_status;
    pub fn tenso_gpu_ipc_open(
        out: *mut *mut tenso_gpu_tensor,
        ipc_ref: *const tenso_view,
        dtype: tenso_dtype,
        ndim: u32,
        shape: *const u64,
    ) -> tenso_status;
    pub fn tenso_gpu_tensor_to_dlpack(
        out: *mut *mut DLManagedTensorVersioned,
        t: *const tenso_gpu_tensor,
    ) -> tenso_status;
    pub fn tenso_gpu_tensor_from_dlpack(
        out: *mut *mut tenso_gpu_tensor,
        m: *mut DLManagedTensorVersioned,
    ) -> tenso_status;
    pub fn tenso_gpu_pool_stats_get(out: *mut tenso_gpu_pool_stats) -> tenso_status;
    pub fn tenso_gpu_pool_set_limit(limit_bytes: u64) -> tenso_status;
}
