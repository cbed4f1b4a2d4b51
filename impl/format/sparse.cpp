// sparse.cpp - sparse container checks.
#include "format/sparse.hpp"

#include <cstring>
#include <string>

#include "error.hpp"
#include "tenso/tenso.h"

namespace tenso {

namespace {

// Reads integer element i of an index array; negative values come back as a huge unsigned
// number, so one `< bound` test rejects them too.
struct IndexReader {
    const uint8_t *p;
    int dtype;
    uint64_t operator()(uint64_t i) const {
        switch (dtype) {
        case TENSO_DTYPE_INT8: return uint64_t(int64_t(int8_t(p[i])));
        case TENSO_DTYPE_UINT8: return p[i];
        case TENSO_DTYPE_INT16: {
            int16_t v;
            std::memcpy(&v, p + 2 * i, 2);
            return uint64_t(int64_t(v));
        }
        case TENSO_DTYPE_UINT16: {
            uint16_t v;
            std::memcpy(&v, p + 2 * i, 2);
            return v;
        }
        case TENSO_DTYPE_INT32: {
            int32_t v;
            std::memcpy(&v, p + 4 * i, 4);
            return uint64_t(int64_t(v));
        }
        case TENSO_DTYPE_UINT32: {
            uint32_t v;
            std::memcpy(&v, p + 4 * i, 4);
            return v;
        }
        case TENSO_DTYPE_INT64: {
            int64_t v;
            std::memcpy(&v, p + 8 * i, 8);
            return uint64_t(v);
        }
        default: {
            uint64_t v;
            std::memcpy(&v, p + 8 * i, 8);
            return v;
        }
        }
    }
};

bool is_index_dtype(int d) {
    switch (d) {
    case TENSO_DTYPE_INT8:
    case TENSO_DTYPE_UINT8:
    case TENSO_DTYPE_INT16:
    case TENSO_DTYPE_UINT16:
    case TENSO_DTYPE_INT32:
    case TENSO_DTYPE_UINT32:
    case TENSO_DTYPE_INT64:
    case TENSO_DTYPE_UINT64: return true;
    default: return false;
    }
}

std::string num(uint64_t v) { return std::to_string(v); }

}  // namespace

void check_sparse(int kind, const uint64_t *shape, uint32_t ndim, const SparseArray c[3], int32_t status) {
    if (ndim != 2) fail(status, "sparse matrices are 2-D, this one has " + num(ndim) + " dimensions");
    for (int i = 0; i < 3; ++i)
        if (c[i].ndim != 1) fail(status, "sparse component " + num(unsigned(i)) + " is not 1-D");
    for (int i = 1; i < 3; ++i)
        if (!is_index_dtype(c[i].dtype))
            fail(status, "sparse index component " + num(unsigned(i)) + " is not an integer array");
    const uint64_t nnz = c[0].len;
    IndexReader a{c[1].data, c[1].dtype}, b{c[2].data, c[2].dtype};
    if (kind == TENSO_KIND_SPARSE_COO) {
        if (c[1].len != nnz || c[2].len != nnz)
            fail(status,
                 "COO row/col lengths (" + num(c[1].len) + ", " + num(c[2].len) + ") differ from nnz " + num(nnz));
        for (uint64_t i = 0; i < nnz; ++i)
            if (a(i) >= shape[0] || b(i) >= shape[1])
                fail(status,
                     "COO entry " + num(i) + " lies outside the " + num(shape[0]) + "x" + num(shape[1]) + " shape");
        return;
    }
    // CSR compresses rows (indices are columns); CSC compresses columns.
    const bool csr = kind == TENSO_KIND_SPARSE_CSR;
    const uint64_t major = csr ? shape[0] : shape[1], minor = csr ? shape[1] : shape[0];
    const char *name = csr ? "CSR" : "CSC";
    if (c[1].len != nnz)
        fail(status, std::string(name) + " indices length " + num(c[1].len) + " differs from nnz " + num(nnz));
    if (c[2].len != major + 1)
        fail(status, std::string(name) + " indptr has " + num(c[2].len) + " entries, not " + num(major + 1));
    if (b(0) != 0) fail(status, std::string(name) + " indptr does not start at 0");
    for (uint64_t i = 1; i <= major; ++i)
        if (b(i) < b(i - 1)) fail(status, std::string(name) + " indptr decreases at " + num(i));
    if (b(major) != nnz) fail(status, std::string(name) + " indptr ends at " + num(b(major)) + ", not nnz " + num(nnz));
    for (uint64_t i = 0; i < nnz; ++i)
        if (a(i) >= minor) fail(status, std::string(name) + " index " + num(i) + " is out of range");
}

}  // namespace tenso
