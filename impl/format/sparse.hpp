// sparse.hpp - the structural rules of sparse COO/CSR/CSC containers, checked on encode and
// on decode before anything indexes memory with the stored indices.
#pragma once

#include <cstdint>

namespace tenso {

// One 1-D component as the checks see it (bytes may be unaligned: nested packets are).
struct SparseArray {
    int dtype = 0;
    uint32_t ndim = 0;
    uint64_t len = 0;  // shape[0] when ndim == 1
    const uint8_t *data = nullptr;
};

// kind: TENSO_KIND_SPARSE_COO/CSR/CSC; comps: data, then (row, col) or (indices, indptr).
// Fails with `status` and a message naming the first violated rule.
void check_sparse(int kind, const uint64_t *shape, uint32_t ndim, const SparseArray comps[3], int32_t status);

}  // namespace tenso
