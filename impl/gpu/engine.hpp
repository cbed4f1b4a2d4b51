// engine.hpp - the GPU transfer engine: backend selection and plugin loading, device tensors,
// the pinned staging pool, and packets to and from device memory. Written once against the
// backend table (backend.h); the host backend runs it all without a GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tenso/gpu.h"
#include "format/codec.hpp"
#include "gpu/backend.h"

namespace tenso::gpu {

// ---- backends ----
void select_backend(uint32_t backend);  // INVALID_ARGUMENT for unknown / a change after first use
uint32_t backend_id();                  // TENSO_GPU_BACKEND_NONE before first use
const char *backend_name(uint32_t backend);
// The loaded, initialised backend; throws GPU_UNAVAILABLE with the reason.
const tenso_gpu_backend_ops &ops();
int32_t device_count();
tenso_gpu_device_info device_info(int32_t device);

// Streams handed to callers (tenso_gpu_stream_new).
void *stream_new(int32_t device);
void stream_synchronize(void *stream);
void stream_free(void *stream) noexcept;

// ---- device tensors ----
struct DeviceTensor {
    void *data = nullptr;
    uint64_t nbytes = 0;
    int dtype = 0;
    uint32_t ndim = 0;
    uint64_t shape[TENSO_MAX_NDIM] = {};
    int32_t device = 0;
    bool exportable = false;     // memory from malloc_device (IPC handles can name it)
    std::shared_ptr<void> keep;  // releases the memory (free, release callback, IPC close, DLPack)
};

// C-contiguous tensor of dtype/shape; memory from the backend.
std::unique_ptr<DeviceTensor> tensor_new(int32_t device, int dtype, uint32_t ndim, const uint64_t *shape);
// Wraps memory the caller owns; `release(user, ptr)` runs once when the last reference goes.
std::unique_ptr<DeviceTensor> tensor_wrap(void *ptr, int32_t device, int dtype, uint32_t ndim, const uint64_t *shape,
                                          tenso_gpu_release_fn release, void *user);

// ---- transfer options (tenso_gpu_options, checked and copied) ----
struct Options {
    uint32_t flags = 0;
    int32_t device = 0;
    int dequantize_to = 0;
    void *stream = nullptr;
    uint64_t chunk_bytes = 8u << 20;
    uint32_t staging_buffers = 2;
    Limits limits;
};

void upload(DeviceTensor &dst, const void *src, size_t len, void *stream);
void download(void *dst, size_t len, const DeviceTensor &src, void *stream);

// ---- packet -> device ----
struct DeviceValue {
    std::unique_ptr<DeviceTensor> tensor;  // dense; null for a bundle
    struct Entry {
        std::string key;
        std::unique_ptr<DeviceValue> value;
    };
    std::vector<Entry> entries;  // bundle members, in packet order
    uint32_t path = TENSO_GPU_PATH_STAGED;
};

std::unique_ptr<DeviceValue> loads(const uint8_t *packet, size_t len, const Options &o);
std::unique_ptr<DeviceValue> read_fd(int fd, const Options &o);
std::unique_ptr<DeviceValue> load_file(const char *path, const Options &o);
// The dense body into caller memory; returns its size. BUFFER_TOO_SMALL when it does not fit.
uint64_t loads_into(void *dst, uint64_t capacity, const uint8_t *packet, size_t len, const Options &o);

// ---- device -> packet ----
// The packet in memory from alloc_bytes (freed with free()), and its size.
std::pair<uint8_t *, size_t> dumps(const DeviceTensor &t, const EncodeOptions &enc, const Options &o);
void write_fd(int fd, const DeviceTensor &t, const EncodeOptions &enc, const Options &o, uint64_t *written);

// ---- kernels ----
std::unique_ptr<DeviceTensor> dequantize(const View &quantized, int out_dtype, const Options &o);

// ---- IPC and DLPack ----
Value ipc_export(const DeviceTensor &t);
std::unique_ptr<DeviceTensor> ipc_open(const View &ref, int dtype, uint32_t ndim, const uint64_t *shape);
DLManagedTensorVersioned *to_dlpack(const DeviceTensor &t);
std::unique_ptr<DeviceTensor> from_dlpack(DLManagedTensorVersioned *m);

// ---- the pinned pool ----
tenso_gpu_pool_stats pool_stats();
void pool_set_limit(uint64_t limit);

// The host backend's table (host_backend.cpp).
const tenso_gpu_backend_ops *host_backend();

}  // namespace tenso::gpu
