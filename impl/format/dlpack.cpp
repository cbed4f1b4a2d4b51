// dlpack.cpp - DLPack export. The managed tensor owns a context that holds a reference to
// whatever keeps the view's data alive, plus the int64 shape DLPack wants; the deleter frees
// exactly that.
#include "format/dlpack.hpp"

#include <algorithm>
#include <cstring>

#include "error.hpp"

namespace tenso {

namespace {

DLDataType dl_dtype(int dtype) {
    switch (dtype) {
    case TENSO_DTYPE_FLOAT32: return {kDLFloat, 32, 1};
    case TENSO_DTYPE_INT32: return {kDLInt, 32, 1};
    case TENSO_DTYPE_FLOAT64: return {kDLFloat, 64, 1};
    case TENSO_DTYPE_INT64: return {kDLInt, 64, 1};
    case TENSO_DTYPE_UINT8: return {kDLUInt, 8, 1};
    case TENSO_DTYPE_UINT16: return {kDLUInt, 16, 1};
    case TENSO_DTYPE_BOOL: return {kDLBool, 8, 1};
    case TENSO_DTYPE_FLOAT16: return {kDLFloat, 16, 1};
    case TENSO_DTYPE_INT8: return {kDLInt, 8, 1};
    case TENSO_DTYPE_INT16: return {kDLInt, 16, 1};
    case TENSO_DTYPE_UINT32: return {kDLUInt, 32, 1};
    case TENSO_DTYPE_UINT64: return {kDLUInt, 64, 1};
    case TENSO_DTYPE_COMPLEX64: return {kDLComplex, 64, 1};
    case TENSO_DTYPE_COMPLEX128: return {kDLComplex, 128, 1};
    case TENSO_DTYPE_BFLOAT16: return {kDLBfloat, 16, 1};
    default: fail(TENSO_E_UNSUPPORTED_KIND, "dtype has no DLPack equivalent");
    }
}

// Consumers may dereference data even for empty tensors; give them a valid address.
alignas(64) const uint8_t kEmpty[64] = {};

template <class Managed>
struct Ctx {
    Managed managed;
    std::shared_ptr<const void> keep;
    int64_t shape[TENSO_MAX_NDIM];
    int64_t strides[TENSO_MAX_NDIM];
};

// Any dense tensor: host views, and device tensors (impl/gpu) with their own device.
template <class Managed>
Managed *make(int dtype, uint32_t ndim, const uint64_t *shape, const void *data, DLDevice device,
              std::shared_ptr<const void> keep) {
    DLDataType dt = dl_dtype(dtype);
    auto *ctx = new Ctx<Managed>();
    ctx->keep = std::move(keep);
    // Compact row-major strides, in elements: DLPack 1.2 importers require them for ndim > 0.
    // Unsigned arithmetic: an empty tensor's other dimensions may multiply past 2^63 (its
    // strides are then meaningless, but computing them must not be undefined).
    uint64_t stride = 1;
    for (uint32_t i = ndim; i-- > 0;) {
        ctx->shape[i] = int64_t(shape[i]);
        ctx->strides[i] = int64_t(stride);
        stride *= std::max<uint64_t>(shape[i], 1);
    }
    Managed &m = ctx->managed;
    m.manager_ctx = ctx;
    m.deleter = [](Managed *self) {
        if (self) delete static_cast<Ctx<Managed> *>(self->manager_ctx);
    };
    DLTensor &t = m.dl_tensor;
    t.data = const_cast<void *>(data ? data : kEmpty);
    t.device = device;
    t.ndim = int32_t(ndim);
    t.dtype = dt;
    t.shape = ndim ? ctx->shape : nullptr;  // a scalar has neither
    t.strides = ndim ? ctx->strides : nullptr;
    t.byte_offset = 0;
    return &m;
}

template <class Managed>
Managed *make(const View &v) {
    if (v.kind != TENSO_KIND_DENSE) fail(TENSO_E_UNSUPPORTED_KIND, "only dense views export to DLPack");
    return make<Managed>(v.dtype, v.ndim, v.shape.data(), v.data, DLDevice{kDLCPU, 0}, v.keep);
}

}  // namespace

DLManagedTensorVersioned *to_dlpack(const View &v) {
    DLManagedTensorVersioned *m = make<DLManagedTensorVersioned>(v);
    m->version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    m->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    if (v.kind == TENSO_KIND_DENSE && (v.flags & TENSO_FLAG_COMPRESSION))
        m->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;  // the body was decompressed into new memory
    return m;
}

DLManagedTensor *to_dlpack_legacy(const View &v) { return make<DLManagedTensor>(v); }

DLManagedTensorVersioned *to_dlpack(int dtype, uint32_t ndim, const uint64_t *shape, void *data, DLDevice device,
                                    std::shared_ptr<const void> keep, uint64_t flags) {
    DLManagedTensorVersioned *m = make<DLManagedTensorVersioned>(dtype, ndim, shape, data, device, std::move(keep));
    m->version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    m->flags = flags;
    return m;
}

int from_dl_dtype(DLDataType t) {
    if (t.lanes == 1)
        for (uint32_t i = 0, n = dtype_count(); i < n; ++i) {
            const int d = dtype_at(i);
            if (dtype_itemsize(d) == 0) continue;
            DLDataType c;
            try {
                c = dl_dtype(d);
            } catch (const Error &) {
                continue;
            }
            if (c.code == t.code && c.bits == t.bits) return d;
        }
    fail(TENSO_E_UNSUPPORTED_KIND, "DLPack dtype (code " + std::to_string(t.code) + ", " + std::to_string(t.bits) +
                                       " bits, " + std::to_string(t.lanes) + " lanes) has no tenso dtype");
}

}  // namespace tenso
