// fuzz_archive - arbitrary bytes opened as a tenso archive. The header and index carry XXH3
// checksums that random bytes never match, so the target recomputes both (where the header's
// index range lies in the input) before opening: the fuzzer then explores the index checks
// themselves - section sizes, record ranges, tiling, the hash table, names and metadata - and
// the packets behind them.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <vector>

#include "fuzz_archive_common.hpp"

namespace {
uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
    return v;
}
void wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::vector<uint8_t> b(data, data + size);
    if (size >= 64) {
        uint64_t ioff = rd64(&b[24]), isz = rd64(&b[32]);
        if (isz >= 8 && ioff <= size && isz <= size - ioff) wr64(&b[ioff + isz - 8], XXH3_64bits(&b[ioff], isz - 8));
        wr64(&b[56], XXH3_64bits(b.data(), 56));
    }
    fuzz::run_archive(b.data(), b.size(), TENSO_FORMAT_ARCHIVE);
    return 0;
}
