// dlpack.hpp - dense tensors as DLPack tensors, and DLPack types back to dtypes.
#pragma once

#include "format/codec.hpp"

namespace tenso {

DLManagedTensorVersioned *to_dlpack(const View &v);
DLManagedTensor *to_dlpack_legacy(const View &v);
// A dense tensor anywhere (device memory included); `keep` holds its memory until the deleter.
DLManagedTensorVersioned *to_dlpack(int dtype, uint32_t ndim, const uint64_t *shape, void *data, DLDevice device,
                                    std::shared_ptr<const void> keep, uint64_t flags);
// The dense dtype of a DLPack type; UNSUPPORTED_KIND when there is none.
int from_dl_dtype(DLDataType t);

}  // namespace tenso
