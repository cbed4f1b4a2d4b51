// dlpack.hpp - exporting a dense view as a DLPack tensor.
#pragma once

#include "format/codec.hpp"

namespace tenso {

DLManagedTensorVersioned *to_dlpack(const View &v);
DLManagedTensor *to_dlpack_legacy(const View &v);

}  // namespace tenso
