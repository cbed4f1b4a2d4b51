/**
 * @file tenso/gpu.h
 * @brief packets to and from GPU device memory (tenso_gpu_*).
 * Included by tenso/tenso.h; may also be included on its own.
 *
 * libtenso does not link against CUDA. The CUDA backend lives in a plugin, libtenso_cuda.so
 * (installed beside libtenso, built with nvcc; it links libcudart), which libtenso dlopen()s at
 * the first GPU call. Where the plugin, the CUDA runtime, a driver or a device is missing, every
 * call answers TENSO_E_GPU_UNAVAILABLE with what was missing and how to run without a GPU (the
 * host backend), then the CUDA runtime's or the loader's own message - never a crash. Loading
 * cuFile (GPUDirect Storage) writes no cufile.log unless CUFILE_LOGFILE_PATH or
 * CUFILE_ENV_PATH_JSON says where.
 *
 * Backends. Two implement the same device interface:
 *   - TENSO_GPU_BACKEND_CUDA: real devices through the CUDA runtime (the default).
 *   - TENSO_GPU_BACKEND_HOST: an emulated device in host memory, with a worker thread per stream
 *     for asynchronous copies and events. It runs every transfer path (chunking, double
 *     buffering, the pinned pool, stream ordering, IPC, bundles, dequantize) on machines without
 *     a GPU, so tests and CI exercise the same public calls. Its "device memory" is host memory
 *     in shared segments, so its IPC references open in other processes too (of the same user;
 *     segments are sealed at their size, so no process can shrink one under a mapping).
 * The backend is chosen once per process: by tenso_gpu_select_backend() before the first GPU
 * call, else by the environment variable TENSO_GPU_BACKEND ("cuda" or "host"), else CUDA.
 *
 * Threads: every call is thread-safe. A tenso_gpu_tensor may be used from any thread, but not
 * freed while another call uses it. Streams follow CUDA's rules.
 *
 * Status codes: TENSO_E_GPU_UNAVAILABLE (no plugin/runtime/driver/device), TENSO_E_GPU (a CUDA
 * call failed; the message names it), TENSO_E_UNSUPPORTED_KIND (a packet kind that has no device
 * form: sparse, strings, ragged), plus the decoder's statuses for the packet itself.
 *
 * @since 1.4 for everything in this header.
 */
#ifndef TENSO_GPU_H
#define TENSO_GPU_H

#include "tenso/tenso.h"

TENSO_BEGIN_DECL

/* ============================================================================================
 * Backends and devices
 * ========================================================================================== */

#define TENSO_GPU_BACKEND_NONE 0u /**< no backend chosen yet */
#define TENSO_GPU_BACKEND_CUDA 1u /**< CUDA, through the plugin libtenso_cuda.so (the default) */
#define TENSO_GPU_BACKEND_HOST 2u /**< device memory emulated in host shared memory, for machines without a GPU */

/** Chooses the backend for this process. Allowed before the first other tenso_gpu_* call, or
 *  again with the backend already chosen.
 *  @return TENSO_E_INVALID_ARGUMENT for an unknown backend or a different one after first use. */
TENSO_API tenso_status tenso_gpu_select_backend(uint32_t backend);

/** The backend in use (chosen on first use; TENSO_GPU_BACKEND_NONE before). */
TENSO_API uint32_t tenso_gpu_backend(void);

/** "cuda", "host" or "none". Static storage. */
TENSO_API const char *tenso_gpu_backend_name(uint32_t backend);

/** TENSO_OK when the backend loaded and has at least one device; otherwise
 *  TENSO_E_GPU_UNAVAILABLE, with the reason in tenso_last_error(). Cheap after the first call. */
TENSO_API tenso_status tenso_gpu_available(void);

/** Number of devices (0 is never returned with TENSO_OK: no device is TENSO_E_GPU_UNAVAILABLE). */
TENSO_API tenso_status tenso_gpu_device_count(int32_t *count_out);

/** What a device is, for tenso_gpu_device_info_get(). @since 1.4 */
typedef struct tenso_gpu_device_info {
    uint32_t version;        /**< TENSO_GPU_DEVICE_INFO_VERSION, set by the caller */
    int32_t device;          /**< the ordinal */
    char name[256];          /**< NUL-terminated */
    uint8_t uuid[16];        /**< the device UUID (the host backend: a per-process one) */
    uint64_t total_memory;   /**< bytes */
    int32_t compute_major;   /**< compute capability, major (8 for sm_80) */
    int32_t compute_minor;   /**< compute capability, minor */
    int32_t multiprocessors; /**< streaming multiprocessors */
    int32_t pci_domain;      /**< PCI domain of the device */
    int32_t pci_bus;         /**< PCI bus */
    int32_t pci_device;      /**< PCI device */
    uint32_t backend;        /**< TENSO_GPU_BACKEND_* */
    uint32_t flags;          /**< TENSO_GPU_DEVICE_* bits */
    uint64_t reserved[4];    /**< 0; room to grow */
} tenso_gpu_device_info;

#define TENSO_GPU_DEVICE_INFO_VERSION 1 /**< the tenso_gpu_device_info version these headers declare */
/** tenso_gpu_device_info.flags: GPUDirect Storage (cuFile) can reach this device. */
#define TENSO_GPU_DEVICE_GDS 0x1u
/** tenso_gpu_device_info.flags: CUDA IPC handles can be exported from this device. */
#define TENSO_GPU_DEVICE_IPC 0x2u

/** Fills *out (whose version the caller sets) with what `device` is.
 *  @return TENSO_E_INVALID_ARGUMENT for an unknown version or device ordinal. @since 1.4 */
TENSO_API tenso_status tenso_gpu_device_info_get(tenso_gpu_device_info *out, int32_t device);

/* ============================================================================================
 * Streams (cudaStream_t under CUDA; a worker queue under the host backend)
 * ========================================================================================== */

/** A new stream on `device`. Any call that takes a stream also takes a cudaStream_t the caller
 *  created itself (CUDA backend), or NULL for a stream of tenso's that the call synchronizes
 *  before it returns. */
TENSO_API tenso_status tenso_gpu_stream_new(void **stream_out, int32_t device);
/** Waits until the work queued on `stream` is done. @since 1.4 */
TENSO_API tenso_status tenso_gpu_stream_synchronize(void *stream);
/** Frees a stream made by tenso_gpu_stream_new(); NULL is accepted. @since 1.4 */
TENSO_API void tenso_gpu_stream_free(void *stream);

/* ============================================================================================
 * Device tensors
 * ========================================================================================== */

/** Dense device memory with a dtype and shape, owned by tenso or borrowed from the caller. */
typedef struct tenso_gpu_tensor tenso_gpu_tensor;

/** Called once when a borrowed tensor is freed (may be NULL). */
typedef void (*tenso_gpu_release_fn)(void *user, void *device_ptr);

/** Allocates a C-contiguous tensor on `device` (contents undefined). */
TENSO_API tenso_status tenso_gpu_tensor_new(tenso_gpu_tensor **out, int32_t device, tenso_dtype dtype, uint32_t ndim,
                                            const uint64_t *shape);

/** Wraps the caller's device memory (C-contiguous, product(shape) * itemsize bytes). */
TENSO_API tenso_status tenso_gpu_tensor_wrap(tenso_gpu_tensor **out, void *device_ptr, int32_t device,
                                             tenso_dtype dtype, uint32_t ndim, const uint64_t *shape,
                                             tenso_gpu_release_fn release, void *user);

/** Frees a tensor: its memory when tenso allocated it, else the release callback runs. NULL is
 *  accepted. @since 1.4 */
TENSO_API void tenso_gpu_tensor_free(tenso_gpu_tensor *t);
/** The device pointer of the first element. @since 1.4 */
TENSO_API void *tenso_gpu_tensor_data(const tenso_gpu_tensor *t);
/** Bytes of the tensor: product(shape) x itemsize. @since 1.4 */
TENSO_API uint64_t tenso_gpu_tensor_nbytes(const tenso_gpu_tensor *t);
/** The dtype. @since 1.4 */
TENSO_API tenso_dtype tenso_gpu_tensor_dtype(const tenso_gpu_tensor *t);
/** Number of dimensions. @since 1.4 */
TENSO_API uint32_t tenso_gpu_tensor_ndim(const tenso_gpu_tensor *t);
/** The shape, ndim entries owned by the tensor (host memory). @since 1.4 */
TENSO_API const uint64_t *tenso_gpu_tensor_shape(const tenso_gpu_tensor *t);
/** The device ordinal the memory is on. @since 1.4 */
TENSO_API int32_t tenso_gpu_tensor_device(const tenso_gpu_tensor *t);

/** Plain copies between host memory and a device tensor (whole tensor; `len` must equal its
 *  nbytes), through the pinned pool, on `stream` (NULL: synchronous). */
TENSO_API tenso_status tenso_gpu_tensor_upload(tenso_gpu_tensor *dst, const void *src, size_t len, void *stream);
/** The reverse copy: a device tensor into `len` bytes of host memory at dst. @since 1.4 */
TENSO_API tenso_status tenso_gpu_tensor_download(void *dst, size_t len, const tenso_gpu_tensor *src, void *stream);

/* ============================================================================================
 * Packet -> device
 * ========================================================================================== */

/** tenso_gpu_options.flags: never use GPUDirect Storage for files (always stage). */
#define TENSO_GPU_NO_GDS 0x1u

/** How a packet reached the device (tenso_gpu_value_path). */
#define TENSO_GPU_PATH_STAGED     1u /**< source -> pinned staging -> device, overlapped */
#define TENSO_GPU_PATH_GDS        2u /**< cuFile, direct NVMe -> device DMA */
#define TENSO_GPU_PATH_GDS_COMPAT 3u /**< cuFile in compatibility mode (it stages internally) */
#define TENSO_GPU_PATH_IPC        4u /**< an IPC reference opened, nothing copied */

/** How a packet goes to the device. Zero means "default" in every field. @since 1.4 */
typedef struct tenso_gpu_options {
    uint32_t version;                   /**< TENSO_GPU_OPTIONS_VERSION */
    uint32_t flags;                     /**< TENSO_GPU_* bits */
    int32_t device;                     /**< target device ordinal */
    tenso_dtype dequantize_to;          /**< quantized packets: TENSO_DTYPE_FLOAT32, FLOAT16 or BFLOAT16
                                           to dequantize on the device; 0 = refuse them
                                           (TENSO_E_UNSUPPORTED_KIND) */
    void *stream;                       /**< NULL = tenso's own, synchronized before the call returns */
    uint64_t chunk_bytes;               /**< staging chunk; 0 = 8 MiB */
    uint32_t staging_buffers;           /**< chunks in flight; 0 = 2 (double buffering) */
    uint32_t reserved0;                 /**< 0 */
    const tenso_decode_options *decode; /**< limits for the packet; NULL = defaults */
} tenso_gpu_options;

#define TENSO_GPU_OPTIONS_VERSION 1 /**< the tenso_gpu_options version these headers declare */
/** A tenso_gpu_options with every default. */
#define TENSO_GPU_OPTIONS_INIT \
    { TENSO_GPU_OPTIONS_VERSION, 0, 0, 0, NULL, 0, 0, 0, NULL }

/** Fills *opts with defaults for struct version `version` (1).
 *  @return TENSO_E_INVALID_ARGUMENT for a NULL opts or an unknown version. @since 1.4 */
TENSO_API tenso_status tenso_gpu_options_init(tenso_gpu_options *opts, uint32_t version);

/** What a packet became on the device: a dense tensor, or a bundle of named values. */
typedef struct tenso_gpu_value tenso_gpu_value;

/** Decodes a packet held in host memory into device memory. Dense packets become one tensor
 *  (LZ4 bodies are decompressed on the host, chunk by chunk, into staging); bundles go member by
 *  member; quantized packets are dequantized on the device when opts->dequantize_to says so; an
 *  IPC reference packet is opened (as uint8 bytes). */
TENSO_API tenso_status tenso_gpu_loads(tenso_gpu_value **out, const void *packet, size_t len,
                                       const tenso_gpu_options *opts);

/** As tenso_gpu_loads, reading one packet from `fd` (socket, pipe or file), so reading the
 *  source overlaps the host -> device copies. Device memory follows the bytes received, not
 *  the header's claim: a dense body of at most 64 MiB is allocated when its header arrives, a
 *  larger one once half of it has arrived (at once when `fd` is a regular file holding the whole
 *  packet), so a peer holds at most max(64 MiB, 2 x what it sent) of device memory. */
TENSO_API tenso_status tenso_gpu_read_fd(tenso_gpu_value **out, int fd, const tenso_gpu_options *opts);

/** Reads the packet file at `path` into device memory: GPUDirect Storage where cuFile is
 *  present and the packet allows it (an uncompressed dense body), else staged.
 *  tenso_gpu_value_path() says which path it took. */
TENSO_API tenso_status tenso_gpu_load_file(tenso_gpu_value **out, const char *path, const tenso_gpu_options *opts);

/** Decodes a dense packet into the caller's device memory.
 *  @param device_ptr  where the body goes, on opts->device.
 *  @param capacity    bytes available at device_ptr.
 *  @param nbytes_out  receives the body size.
 *  @param packet, len the packet, in host memory.
 *  @param opts        NULL for defaults.
 *  @return TENSO_E_BUFFER_TOO_SMALL when it does not fit; TENSO_E_UNSUPPORTED_KIND for bundles. */
TENSO_API tenso_status tenso_gpu_loads_into(void *device_ptr, uint64_t capacity, uint64_t *nbytes_out,
                                            const void *packet, size_t len, const tenso_gpu_options *opts);

/** Frees a value and the device memory it still owns; NULL is accepted. @since 1.4 */
TENSO_API void tenso_gpu_value_free(tenso_gpu_value *v);
/** The dense tensor of a value, NULL for a bundle. Owned by the value. */
TENSO_API const tenso_gpu_tensor *tenso_gpu_value_tensor(const tenso_gpu_value *v);
/** Takes the dense tensor out of the value (the caller frees it; the value stays to be freed). */
TENSO_API tenso_status tenso_gpu_value_take_tensor(tenso_gpu_tensor **out, tenso_gpu_value *v);
/** Bundle entries, in packet order; 0 for a dense value. */
TENSO_API uint32_t tenso_gpu_value_bundle_count(const tenso_gpu_value *v);
/** Entry `index` of a bundle value: its key (UTF-8, not NUL-terminated) and its value, both
 *  owned by `v`. @return TENSO_E_INVALID_ARGUMENT for an index out of range (a dense value has
 *  no entries). @since 1.4 */
TENSO_API tenso_status tenso_gpu_value_bundle_entry(const char **key_out, size_t *key_len_out,
                                                    const tenso_gpu_value **child_out, const tenso_gpu_value *v,
                                                    uint32_t index);
/** TENSO_GPU_PATH_* */
TENSO_API uint32_t tenso_gpu_value_path(const tenso_gpu_value *v);

/* ============================================================================================
 * Device -> packet
 * ========================================================================================== */

/** Encodes a device tensor as a packet in host memory (downloaded through pinned staging, the
 *  integrity footer and compression as `enc` says). */
TENSO_API tenso_status tenso_gpu_dumps(tenso_buffer *out, const tenso_gpu_tensor *t, const tenso_encode_options *enc,
                                       const tenso_gpu_options *opts);

/** Writes a device tensor's packet to `fd`, overlapping device -> host copies with writes. */
TENSO_API tenso_status tenso_gpu_write_fd(uint64_t *written_out, int fd, const tenso_gpu_tensor *t,
                                          const tenso_encode_options *enc, const tenso_gpu_options *opts);

/* ============================================================================================
 * Dequantize on the device
 * ========================================================================================== */

/** Dequantizes a quantized view (tenso_loads of a quantized packet) into a new device tensor of
 *  `out_dtype` (FLOAT32, FLOAT16 or BFLOAT16), bit-exact with tenso_dequantize for float32
 *  (float16 / bfloat16: that float32 value rounded to nearest even). */
TENSO_API tenso_status tenso_gpu_dequantize(tenso_gpu_tensor **out, const tenso_view *quantized, tenso_dtype out_dtype,
                                            const tenso_gpu_options *opts);

/* ============================================================================================
 * IPC between processes and DLPack
 * ========================================================================================== */

/** The GPU IPC reference packet (106 bytes, kind gpu_ipc_ref) for a tensor whose memory tenso
 *  allocated (cudaIpcGetMemHandle; the host backend names its shared segment). The exporting
 *  process must keep the tensor alive while others use it. */
TENSO_API tenso_status tenso_gpu_ipc_export(tenso_value **out, const tenso_gpu_tensor *t);

/** Opens an IPC reference (a view of an IPC reference packet) in this process as a tensor of
 *  `dtype` and `shape` (their size must be the reference's nbytes). Freeing the tensor closes
 *  the handle. @return TENSO_E_INVALID_ARGUMENT when dtype/shape do not match nbytes;
 *  TENSO_E_BAD_OFFSET when the reference's offset + nbytes lie past the opened allocation
 *  (tenso_gpu_loads of a reference packet answers the same). */
TENSO_API tenso_status tenso_gpu_ipc_open(tenso_gpu_tensor **out, const tenso_view *ipc_ref, tenso_dtype dtype,
                                          uint32_t ndim, const uint64_t *shape);

/** Exports a device tensor as DLPack 1.1 (kDLCUDA with its device; the host backend exports
 *  kDLCPU, as its memory is host memory). The DLPack tensor holds a reference: it stays valid
 *  after tenso_gpu_tensor_free(). */
TENSO_API tenso_status tenso_gpu_tensor_to_dlpack(DLManagedTensorVersioned **out, const tenso_gpu_tensor *t);

/** Imports a DLPack tensor (kDLCUDA on the CUDA backend, kDLCPU on the host backend; compact
 *  row-major strides or none) without copying; tenso calls its deleter when the tensor is freed.
 *  On failure the caller still owns `m`. */
TENSO_API tenso_status tenso_gpu_tensor_from_dlpack(tenso_gpu_tensor **out, DLManagedTensorVersioned *m);

/* ============================================================================================
 * The pinned staging pool (pinning is expensive: buffers are kept and reused across calls)
 * ========================================================================================== */

/** The pinned pool's counters, for tenso_gpu_pool_stats_get(). @since 1.4 */
typedef struct tenso_gpu_pool_stats {
    uint64_t buffers;     /**< pinned buffers held now */
    uint64_t bytes;       /**< their total size */
    uint64_t hits;        /**< requests served by a kept buffer */
    uint64_t misses;      /**< requests that pinned a new one */
    uint64_t limit_bytes; /**< the most kept; beyond it buffers are unpinned on release */
    uint64_t reserved[3]; /**< 0; room to grow */
} tenso_gpu_pool_stats;

/** The pool's counters now. @since 1.4 */
TENSO_API tenso_status tenso_gpu_pool_stats_get(tenso_gpu_pool_stats *out);
/** Sets how many bytes the pool may keep (default 256 MiB); 0 unpins everything idle now. */
TENSO_API tenso_status tenso_gpu_pool_set_limit(uint64_t limit_bytes);

TENSO_END_DECL

#endif /* TENSO_GPU_H */
