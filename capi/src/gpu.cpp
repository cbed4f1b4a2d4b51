// gpu.cpp - the extern "C" firewall for tenso/gpu.h (engine: impl/gpu/). A tenso_gpu_tensor*
// is a tenso::gpu::DeviceTensor* and a tenso_gpu_value* a tenso::gpu::DeviceValue*, so bundle
// members are handed out as pointers into their parent.
#include <cstdlib>
#include <cstring>

#include "convert.hpp"
#include "firewall.hpp"

#include "gpu/engine.hpp"

using namespace tenso::capi;
using tenso::gpu::DeviceTensor;
using tenso::gpu::DeviceValue;

namespace {
DeviceTensor *T(tenso_gpu_tensor *t) { return reinterpret_cast<DeviceTensor *>(t); }
const DeviceTensor *T(const tenso_gpu_tensor *t) { return reinterpret_cast<const DeviceTensor *>(t); }
tenso_gpu_tensor *H(std::unique_ptr<DeviceTensor> t) { return reinterpret_cast<tenso_gpu_tensor *>(t.release()); }
DeviceValue *GV(tenso_gpu_value *v) { return reinterpret_cast<DeviceValue *>(v); }
const DeviceValue *GV(const tenso_gpu_value *v) { return reinterpret_cast<const DeviceValue *>(v); }
tenso_gpu_value *H(std::unique_ptr<DeviceValue> v) { return reinterpret_cast<tenso_gpu_value *>(v.release()); }
const uint8_t *bytes(const void *p) { return static_cast<const uint8_t *>(p); }
}  // namespace

extern "C" {

/* ---------------------------------------------------------------- backends and devices */

tenso_status tenso_gpu_select_backend(uint32_t backend) {
    TENSO_API_BEGIN
    tenso::gpu::select_backend(backend);
    TENSO_API_END
}

uint32_t tenso_gpu_backend(void) { return tenso::gpu::backend_id(); }

const char *tenso_gpu_backend_name(uint32_t backend) { return tenso::gpu::backend_name(backend); }

tenso_status tenso_gpu_available(void) {
    TENSO_API_BEGIN
    tenso::gpu::device_count();
    TENSO_API_END
}

tenso_status tenso_gpu_device_count(int32_t *count_out) {
    CHECK_ARG(count_out);
    *count_out = 0;
    TENSO_API_BEGIN
    *count_out = tenso::gpu::device_count();
    TENSO_API_END
}

tenso_status tenso_gpu_device_info_get(tenso_gpu_device_info *out, int32_t device) {
    CHECK_ARG(out);
    if (out->version != TENSO_GPU_DEVICE_INFO_VERSION)
        return set_error(TENSO_E_INVALID_ARGUMENT, "unknown tenso_gpu_device_info version");
    TENSO_API_BEGIN
    *out = tenso::gpu::device_info(device);
    TENSO_API_END
}

/* ---------------------------------------------------------------- streams */

tenso_status tenso_gpu_stream_new(void **stream_out, int32_t device) {
    CHECK_ARG(stream_out);
    *stream_out = nullptr;
    TENSO_API_BEGIN
    *stream_out = tenso::gpu::stream_new(device);
    TENSO_API_END
}

tenso_status tenso_gpu_stream_synchronize(void *stream) {
    TENSO_API_BEGIN
    tenso::gpu::stream_synchronize(stream);
    TENSO_API_END
}

void tenso_gpu_stream_free(void *stream) { tenso::gpu::stream_free(stream); }

/* ---------------------------------------------------------------- device tensors */

tenso_status tenso_gpu_tensor_new(tenso_gpu_tensor **out, int32_t device, tenso_dtype dtype, uint32_t ndim,
                                  const uint64_t *shape) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(shape || !ndim);
    TENSO_API_BEGIN
    *out = H(tenso::gpu::tensor_new(device, dtype, ndim, shape));
    TENSO_API_END
}

tenso_status tenso_gpu_tensor_wrap(tenso_gpu_tensor **out, void *device_ptr, int32_t device, tenso_dtype dtype,
                                   uint32_t ndim, const uint64_t *shape, tenso_gpu_release_fn release, void *user) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(shape || !ndim);
    TENSO_API_BEGIN
    *out = H(tenso::gpu::tensor_wrap(device_ptr, device, dtype, ndim, shape, release, user));
    TENSO_API_END
}

void tenso_gpu_tensor_free(tenso_gpu_tensor *t) { delete T(t); }
void *tenso_gpu_tensor_data(const tenso_gpu_tensor *t) { return t ? T(t)->data : nullptr; }
uint64_t tenso_gpu_tensor_nbytes(const tenso_gpu_tensor *t) { return t ? T(t)->nbytes : 0; }
tenso_dtype tenso_gpu_tensor_dtype(const tenso_gpu_tensor *t) { return t ? T(t)->dtype : 0; }
uint32_t tenso_gpu_tensor_ndim(const tenso_gpu_tensor *t) { return t ? T(t)->ndim : 0; }
const uint64_t *tenso_gpu_tensor_shape(const tenso_gpu_tensor *t) { return t ? T(t)->shape : nullptr; }
int32_t tenso_gpu_tensor_device(const tenso_gpu_tensor *t) { return t ? T(t)->device : -1; }

tenso_status tenso_gpu_tensor_upload(tenso_gpu_tensor *dst, const void *src, size_t len, void *stream) {
    CHECK_ARG(dst);
    TENSO_API_BEGIN
    tenso::gpu::upload(*T(dst), src, len, stream);
    TENSO_API_END
}

tenso_status tenso_gpu_tensor_download(void *dst, size_t len, const tenso_gpu_tensor *src, void *stream) {
    CHECK_ARG(src);
    TENSO_API_BEGIN
    tenso::gpu::download(dst, len, *T(src), stream);
    TENSO_API_END
}

/* ---------------------------------------------------------------- packet -> device */

tenso_status tenso_gpu_options_init(tenso_gpu_options *opts, uint32_t version) {
    clear_error();
    CHECK_ARG(opts);
    if (version != TENSO_GPU_OPTIONS_VERSION)
        return set_error(TENSO_E_INVALID_ARGUMENT, "unknown tenso_gpu_options version");
    *opts = tenso_gpu_options TENSO_GPU_OPTIONS_INIT;
    return TENSO_OK;
}

tenso_status tenso_gpu_loads(tenso_gpu_value **out, const void *packet, size_t len, const tenso_gpu_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(packet || !len);
    TENSO_API_BEGIN
    *out = H(tenso::gpu::loads(bytes(packet), len, gpu_options(opts)));
    TENSO_API_END
}

tenso_status tenso_gpu_read_fd(tenso_gpu_value **out, int fd, const tenso_gpu_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    TENSO_API_BEGIN
    *out = H(tenso::gpu::read_fd(fd, gpu_options(opts)));
    TENSO_API_END
}

tenso_status tenso_gpu_load_file(tenso_gpu_value **out, const char *path, const tenso_gpu_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(path);
    TENSO_API_BEGIN
    *out = H(tenso::gpu::load_file(path, gpu_options(opts)));
    TENSO_API_END
}

tenso_status tenso_gpu_loads_into(void *device_ptr, uint64_t capacity, uint64_t *nbytes_out, const void *packet,
                                  size_t len, const tenso_gpu_options *opts) {
    if (nbytes_out) *nbytes_out = 0;
    CHECK_ARG(packet || !len);
    TENSO_API_BEGIN
    const uint64_t n = tenso::gpu::loads_into(device_ptr, capacity, bytes(packet), len, gpu_options(opts));
    if (nbytes_out) *nbytes_out = n;
    TENSO_API_END
}

void tenso_gpu_value_free(tenso_gpu_value *v) { delete GV(v); }

const tenso_gpu_tensor *tenso_gpu_value_tensor(const tenso_gpu_value *v) {
    return v ? reinterpret_cast<const tenso_gpu_tensor *>(GV(v)->tensor.get()) : nullptr;
}

tenso_status tenso_gpu_value_take_tensor(tenso_gpu_tensor **out, tenso_gpu_value *v) {
    clear_error();
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(v);
    if (!GV(v)->tensor)
        return set_error(TENSO_E_UNSUPPORTED_KIND, "the value holds no tensor (a bundle, or taken already)");
    *out = H(std::move(GV(v)->tensor));
    return TENSO_OK;
}

uint32_t tenso_gpu_value_bundle_count(const tenso_gpu_value *v) { return v ? uint32_t(GV(v)->entries.size()) : 0; }

tenso_status tenso_gpu_value_bundle_entry(const char **key_out, size_t *key_len_out, const tenso_gpu_value **child_out,
                                          const tenso_gpu_value *v, uint32_t index) {
    clear_error();
    CHECK_ARG(v);
    const auto &entries = GV(v)->entries;
    if (index >= entries.size()) return set_error(TENSO_E_INVALID_ARGUMENT, "bundle index out of range");
    const DeviceValue::Entry &e = entries[index];
    if (key_out) *key_out = e.key.c_str();
    if (key_len_out) *key_len_out = e.key.size();
    if (child_out) *child_out = reinterpret_cast<const tenso_gpu_value *>(e.value.get());
    return TENSO_OK;
}

uint32_t tenso_gpu_value_path(const tenso_gpu_value *v) { return v ? GV(v)->path : 0; }

/* ---------------------------------------------------------------- device -> packet */

tenso_status tenso_gpu_dumps(tenso_buffer *out, const tenso_gpu_tensor *t, const tenso_encode_options *enc,
                             const tenso_gpu_options *opts) {
    CHECK_ARG(out);
    CHECK_ARG(t);
    TENSO_API_BEGIN
    const auto packet = tenso::gpu::dumps(*T(t), encode_options(enc), gpu_options(opts));
    tenso_buffer_dispose(out);
    out->data = packet.first;
    out->size = packet.second;
    out->reserved = packet.second;
    TENSO_API_END
}

tenso_status tenso_gpu_write_fd(uint64_t *written_out, int fd, const tenso_gpu_tensor *t,
                                const tenso_encode_options *enc, const tenso_gpu_options *opts) {
    if (written_out) *written_out = 0;
    CHECK_ARG(t);
    TENSO_API_BEGIN
    tenso::gpu::write_fd(fd, *T(t), encode_options(enc), gpu_options(opts), written_out);
    TENSO_API_END
}

/* ---------------------------------------------------------------- dequantize */

tenso_status tenso_gpu_dequantize(tenso_gpu_tensor **out, const tenso_view *quantized, tenso_dtype out_dtype,
                                  const tenso_gpu_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(quantized);
    TENSO_API_BEGIN
    *out = H(tenso::gpu::dequantize(*V(quantized), out_dtype, gpu_options(opts)));
    TENSO_API_END
}

/* ---------------------------------------------------------------- IPC and DLPack */

tenso_status tenso_gpu_ipc_export(tenso_value **out, const tenso_gpu_tensor *t) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(t);
    TENSO_API_BEGIN
    auto v = std::make_unique<tenso_value>();
    v->v = tenso::gpu::ipc_export(*T(t));
    *out = v.release();
    TENSO_API_END
}

tenso_status tenso_gpu_ipc_open(tenso_gpu_tensor **out, const tenso_view *ipc_ref, tenso_dtype dtype, uint32_t ndim,
                                const uint64_t *shape) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(ipc_ref);
    CHECK_ARG(shape || !ndim);
    TENSO_API_BEGIN
    *out = H(tenso::gpu::ipc_open(*V(ipc_ref), dtype, ndim, shape));
    TENSO_API_END
}

tenso_status tenso_gpu_tensor_to_dlpack(DLManagedTensorVersioned **out, const tenso_gpu_tensor *t) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(t);
    TENSO_API_BEGIN
    *out = tenso::gpu::to_dlpack(*T(t));
    TENSO_API_END
}

tenso_status tenso_gpu_tensor_from_dlpack(tenso_gpu_tensor **out, DLManagedTensorVersioned *m) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(m);
    TENSO_API_BEGIN
    *out = H(tenso::gpu::from_dlpack(m));
    TENSO_API_END
}

/* ---------------------------------------------------------------- pinned pool */

tenso_status tenso_gpu_pool_stats_get(tenso_gpu_pool_stats *out) {
    CHECK_ARG(out);
    TENSO_API_BEGIN
    *out = tenso::gpu::pool_stats();
    TENSO_API_END
}

tenso_status tenso_gpu_pool_set_limit(uint64_t limit_bytes) {
    TENSO_API_BEGIN
    tenso::gpu::pool_set_limit(limit_bytes);
    TENSO_API_END
}

}  // extern "C"
