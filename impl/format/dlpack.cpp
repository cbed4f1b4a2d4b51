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

template <class Managed>
Managed *make(const View &v) {
    if (v.kind != TENSO_KIND_DENSE) fail(TENSO_E_UNSUPPORTED_KIND, "only dense views export to DLPack");
    DLDataType dt = dl_dtype(v.dtype);
    auto *ctx = new Ctx<Managed>();
    ctx->keep = v.keep;
    // Compact row-major strides, in elements: DLPack 1.2 importers require them for ndim > 0.
    // Unsigned arithmetic: an empty tensor's other dimensions may multiply past 2^63 (its
    // strides are then meaningless, but computing them must not be undefined).
    uint64_t stride = 1;
    for (uint32_t i = v.ndim; i-- > 0;) {
        ctx->shape[i] = int64_t(v.shape[i]);
        ctx->strides[i] = int64_t(stride);
        stride *= std::max<uint64_t>(v.shape[i], 1);
    }
    Managed &m = ctx->managed;
    m.manager_ctx = ctx;
    m.deleter = [](Managed *self) {
        if (self) delete static_cast<Ctx<Managed> *>(self->manager_ctx);
    };
    DLTensor &t = m.dl_tensor;
    t.data = const_cast<uint8_t *>(v.data ? v.data : kEmpty);
    t.device = {kDLCPU, 0};
    t.ndim = int32_t(v.ndim);
    t.dtype = dt;
    t.shape = v.ndim ? ctx->shape : nullptr;  // a scalar has neither
    t.strides = v.ndim ? ctx->strides : nullptr;
    t.byte_offset = 0;
    return &m;
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

}  // namespace tenso
