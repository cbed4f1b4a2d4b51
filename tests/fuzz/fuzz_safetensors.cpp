// fuzz_safetensors - arbitrary bytes opened as a safetensors file: the u64 length, the JSON
// header (SAX-parsed, bounded nesting, duplicate keys) and the data-section tiling.
#include "fuzz_archive_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::run_archive(data, size, TENSO_FORMAT_SAFETENSORS);
    return 0;
}
