/*
 * impl/gpu/backend.h - the device interface between libtenso's transfer engine and a backend.
 *
 * Two backends implement it: the host backend (impl/gpu/host_backend.cpp, inside libtenso) and
 * the CUDA backend (impl/gpu/cuda/, built by nvcc into the plugin libtenso_cuda.so, which
 * links libcudart; libtenso dlopen()s it and calls tenso_cuda_backend_v1()). The engine
 * (chunking, double buffering, the pinned pool, bundles, IPC packets, DLPack) is written once
 * against this table. It is plain C so the plugin boundary is a stable C ABI; it is internal:
 * not installed, and the plugin is only ever loaded by the libtenso it was built with
 * (abi_version is checked).
 *
 * Conventions: every op returns a tenso_status (TENSO_OK, TENSO_E_GPU_UNAVAILABLE, TENSO_E_GPU,
 * TENSO_E_NO_MEMORY, TENSO_E_INVALID_ARGUMENT, TENSO_E_IO) and on failure writes a NUL-terminated
 * message into msg[0..msg_cap) (which names the CUDA call and carries cudaGetErrorString).
 * Ops are thread-safe. Device memory ops act on the device given (the backend sets it current).
 */
#ifndef TENSO_IMPL_GPU_BACKEND_H
#define TENSO_IMPL_GPU_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "tenso/errors.h"
#include "tenso/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TENSO_GPU_BACKEND_ABI 2u

/* Arguments of the dequantize kernel. Device pointers; scales/zero_points are float32 arrays of
 * num_scales entries. Element i (C order) uses scale index k = 0 (per tensor), the index of i
 * along `axis` (per channel: k = (i / inner) % shape[axis], inner = product of dims after axis),
 * or i / group_size (per group). q_i is read from `codes`: 1 byte per element, or for 4-bit
 * dtypes element 2j in the low nibble of byte j and 2j+1 in the high nibble (signed 4-bit:
 * two's complement in the nibble). Output: (float(q_i) - zp[k]) * scale[k] in float32, then
 * converted to out_dtype with round-to-nearest-even (the element code lives in
 * impl/gpu/kernels/dequant.hpp and is shared with the host backend). */
typedef struct tenso_gpu_dequant_args {
    const void *codes;
    const float *scales;
    const float *zero_points;
    void *out;
    uint64_t count;      /* elements */
    uint64_t inner;      /* per channel: product of dims after axis */
    uint64_t channels;   /* per channel: shape[axis] */
    uint64_t group_size; /* per group */
    int32_t qdtype;      /* TENSO_DTYPE_QINT8 .. QUINT4 */
    int32_t scheme;      /* TENSO_QUANT_PER_TENSOR / CHANNEL / GROUP */
    int32_t out_dtype;   /* TENSO_DTYPE_FLOAT32 / FLOAT16 / BFLOAT16 */
    int32_t device;
} tenso_gpu_dequant_args;

typedef struct tenso_gpu_backend_ops {
    uint32_t abi_version; /* TENSO_GPU_BACKEND_ABI */
    uint32_t backend;     /* TENSO_GPU_BACKEND_CUDA / HOST */

    /* Discovery. init is called once; it loads what it needs and reports why it cannot. */
    tenso_status (*init)(char *msg, size_t msg_cap);
    tenso_status (*device_count)(int32_t *count, char *msg, size_t msg_cap);
    tenso_status (*device_info)(tenso_gpu_device_info *out, int32_t device, char *msg, size_t msg_cap);

    /* Memory. */
    tenso_status (*malloc_device)(void **ptr, size_t n, int32_t device, char *msg, size_t msg_cap);
    tenso_status (*free_device)(void *ptr, int32_t device, char *msg, size_t msg_cap);
    tenso_status (*malloc_pinned)(void **ptr, size_t n, char *msg, size_t msg_cap);
    tenso_status (*free_pinned)(void *ptr, char *msg, size_t msg_cap);

    /* Streams and events (opaque: cudaStream_t / cudaEvent_t under CUDA). */
    tenso_status (*stream_create)(void **stream, int32_t device, char *msg, size_t msg_cap);
    tenso_status (*stream_destroy)(void *stream, char *msg, size_t msg_cap);
    tenso_status (*stream_synchronize)(void *stream, char *msg, size_t msg_cap);
    tenso_status (*event_create)(void **event, int32_t device, char *msg, size_t msg_cap);
    tenso_status (*event_destroy)(void *event, char *msg, size_t msg_cap);
    tenso_status (*event_record)(void *event, void *stream, char *msg, size_t msg_cap);
    tenso_status (*event_synchronize)(void *event, char *msg, size_t msg_cap);

    /* Asynchronous copies on `stream` (host side pinned). */
    tenso_status (*copy_h2d)(void *dst, const void *src, size_t n, void *stream, char *msg, size_t msg_cap);
    tenso_status (*copy_d2h)(void *dst, const void *src, size_t n, void *stream, char *msg, size_t msg_cap);

    /* IPC: a 64-byte handle for memory from malloc_device (the base of its allocation and the
     * offset of ptr in it), and opening one in another process: *ptr the allocation's base,
     * *size its length (so a reference's offset and nbytes can be checked against it). */
    tenso_status (*ipc_export)(uint8_t handle[64], uint64_t *offset, const void *ptr, int32_t device, char *msg,
                               size_t msg_cap);
    tenso_status (*ipc_open)(void **ptr, uint64_t *size, const uint8_t handle[64], int32_t device, char *msg,
                             size_t msg_cap);
    tenso_status (*ipc_close)(void *ptr, int32_t device, char *msg, size_t msg_cap);

    /* Kernels, on `stream`. */
    tenso_status (*dequantize)(const tenso_gpu_dequant_args *args, void *stream, char *msg, size_t msg_cap);

    /* GPUDirect Storage (NULL when the backend has none). gds_probe: TENSO_OK and *mode =
     * TENSO_GPU_PATH_GDS or _GDS_COMPAT when cuFile can serve `fd`; TENSO_E_NOT_AVAILABLE when
     * not. gds_read reads n bytes at file_offset of fd into device memory. */
    tenso_status (*gds_probe)(uint32_t *mode, int fd, int32_t device, char *msg, size_t msg_cap);
    tenso_status (*gds_read)(void *dst, size_t n, int fd, uint64_t file_offset, int32_t device, char *msg,
                             size_t msg_cap);
} tenso_gpu_backend_ops;

/* The plugin's one exported symbol (libtenso_cuda.so). */
typedef const tenso_gpu_backend_ops *(*tenso_cuda_backend_entry_fn)(void);
#define TENSO_CUDA_BACKEND_ENTRY "tenso_cuda_backend_v1"

#ifdef __cplusplus
}
#endif

#endif /* TENSO_IMPL_GPU_BACKEND_H */
