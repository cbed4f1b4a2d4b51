// fuzz_bintensors - arbitrary bytes opened as a bintensors file: the u64 length, the bincode
// header (varints, counts checked against what is left, UTF-8, padding) and the tiling.
#include "fuzz_archive_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::run_archive(data, size, TENSO_FORMAT_BINTENSORS);
    return 0;
}
