// fuzz_common.hpp - what the fuzz targets share: a check that aborts (so libFuzzer and the
// replay driver report the input), a byte reader for structured inputs, and small helpers
// over the public C API. Only tenso/tenso.h is used: the targets test the ABI a consumer sees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tenso/tenso.h"

// Aborts with the condition, the place and tenso's last error when an invariant fails.
#define FUZZ_CHECK(cond, ...)                                                                   \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            std::fprintf(stderr, "%s:%d: invariant failed: %s\n  ", __FILE__, __LINE__, #cond); \
            std::fprintf(stderr, __VA_ARGS__);                                                  \
            std::fprintf(stderr, "\n  tenso_last_error: %s\n", tenso_last_error());             \
            std::abort();                                                                       \
        }                                                                                       \
    } while (0)

// Checks that `expr` returns `want`, naming both statuses when it does not.
#define FUZZ_CHECK_STATUS(want, expr)                                                               \
    do {                                                                                            \
        tenso_status fz_st_ = (expr);                                                               \
        FUZZ_CHECK(fz_st_ == (want), "%s returned %s, wanted %s", #expr, tenso_status_name(fz_st_), \
                   tenso_status_name(want));                                                        \
    } while (0)

namespace fuzz {

// Consumes a fuzz input front to back. Running out is not an error: reads then return 0, so
// every input (also an empty one) describes some test case.
class Reader {
public:
    Reader(const uint8_t *data, size_t size) : p_(data), n_(size) {}

    size_t left() const { return n_; }

    uint8_t u8() {
        if (!n_) return 0;
        --n_;
        return *p_++;
    }
    uint32_t u32() {
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) v |= uint32_t(u8()) << (8 * i);
        return v;
    }
    // A value in [lo, hi].
    uint32_t range(uint32_t lo, uint32_t hi) { return lo + u8() % (hi - lo + 1); }
    bool flag() { return u8() & 1; }

    // Copies up to n bytes into dst; the rest is a deterministic filler, so the encoded bytes
    // are a function of the input alone.
    void bytes(uint8_t *dst, size_t n) {
        size_t k = n < n_ ? n : n_;
        if (k) std::memcpy(dst, p_, k);
        for (size_t i = k; i < n; ++i) dst[i] = uint8_t(i * 131 + 7);
        p_ += k;
        n_ -= k;
    }

private:
    const uint8_t *p_;
    size_t n_;
};

// RFC 3629 UTF-8, the rule bundle keys must follow.
inline bool valid_utf8(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        size_t len;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) {
            len = 2;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4;
            cp = c & 0x07;
        } else return false;
        if (i + len > n) return false;
        for (size_t k = 1; k < len; ++k) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

// memcmp that accepts NULL for zero bytes (an empty array's pointer may be NULL).
inline bool same_bytes(const void *a, const void *b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

// Element count of a view's shape (no overflow: decoded shapes are within the limits).
inline uint64_t numel(const tenso_view *v) {
    uint64_t n = 1;
    const uint64_t *shape = tenso_view_shape(v);
    for (uint32_t i = 0; i < tenso_view_ndim(v); ++i) n *= shape[i];
    return n;
}

// Reads every byte of [p, p+n) so the sanitizers see an access to memory that is not there.
inline uint64_t touch(const void *p, size_t n) {
    const uint8_t *b = static_cast<const uint8_t *>(p);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

// The DLPack type a dense dtype must export as (DLPack 1.1 codes), or {0,0,0} when unknown.
inline DLDataType dl_type_of(tenso_dtype d) {
    switch (d) {
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
    default: return {0, 0, 0};
    }
}

inline bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

// A view read from a stream (`s`) must equal the one decoded from the same bytes in memory
// (`m`): it owns its buffer, the other borrows.
inline void same_view(const tenso_view *s, const tenso_view *m) {
    const tenso_kind kind = tenso_view_kind(s);
    FUZZ_CHECK(kind == tenso_view_kind(m) && tenso_view_version(s) == tenso_view_version(m) &&
                   tenso_view_flags(s) == tenso_view_flags(m) && tenso_view_dtype(s) == tenso_view_dtype(m) &&
                   tenso_view_ndim(s) == tenso_view_ndim(m) && tenso_view_alignment(s) == tenso_view_alignment(m),
               "stream and memory views disagree on the header");
    FUZZ_CHECK(tenso_view_packet_size(s) == tenso_view_packet_size(m), "packet size %llu on the stream, %llu in memory",
               (unsigned long long)tenso_view_packet_size(s), (unsigned long long)tenso_view_packet_size(m));
    for (uint32_t i = 0; i < tenso_view_ndim(s); ++i)
        FUZZ_CHECK(tenso_view_shape(s)[i] == tenso_view_shape(m)[i], "shape[%u] differs", i);
    FUZZ_CHECK(tenso_view_nbytes(s) == tenso_view_nbytes(m), "nbytes differ");
    FUZZ_CHECK(tenso_view_owns_data(s) == 1, "a view read from a stream must own its bytes");
    if (tenso_view_nbytes(s))
        FUZZ_CHECK(std::memcmp(tenso_view_data(s), tenso_view_data(m), tenso_view_nbytes(s)) == 0, "body bytes differ");
    FUZZ_CHECK(is_pow2(tenso_view_alignment(s)), "alignment %u", tenso_view_alignment(s));
    switch (kind) {
    case TENSO_KIND_BUNDLE: {
        uint32_t count = tenso_view_bundle_count(s);
        FUZZ_CHECK(count == tenso_view_bundle_count(m), "bundle counts differ");
        for (uint32_t i = 0; i < count; ++i) {
            const char *ks, *km;
            size_t ls, lm;
            const tenso_view *cs, *cm;
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_bundle_entry(&ks, &ls, &cs, s, i));
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_bundle_entry(&km, &lm, &cm, m, i));
            FUZZ_CHECK(ls == lm && (ls == 0 || std::memcmp(ks, km, ls) == 0), "key %u differs", i);
            same_view(cs, cm);
        }
        break;
    }
    case TENSO_KIND_SPARSE_COO:
    case TENSO_KIND_SPARSE_CSR:
    case TENSO_KIND_SPARSE_CSC:
        for (uint32_t i = 0; i < 3; ++i) {
            const tenso_view *cs, *cm;
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_component(&cs, s, i));
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_component(&cm, m, i));
            same_view(cs, cm);
        }
        break;
    case TENSO_KIND_QUANTIZED: {
        tenso_quantized qs, qm;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_quantized(&qs, s));
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_quantized(&qm, m));
        FUZZ_CHECK(qs.scheme == qm.scheme && qs.axis == qm.axis && qs.group_size == qm.group_size &&
                       qs.num_scales == qm.num_scales,
                   "quantization parameters differ");
        FUZZ_CHECK(same_bytes(qs.scales, qm.scales, 4 * size_t(qs.num_scales)) &&
                       same_bytes(qs.zero_points, qm.zero_points, 4 * size_t(qs.num_scales)),
                   "scales or zero points differ");
        break;
    }
    case TENSO_KIND_STRING:
    case TENSO_KIND_RAGGED: {
        const uint64_t *os, *om;
        const char *ps, *pm;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_string_offsets(&os, &ps, s));
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_string_offsets(&om, &pm, m));
        FUZZ_CHECK(std::memcmp(os, om, 8 * (tenso_view_shape(s)[0] + 1)) == 0, "string offsets differ");
        break;
    }
    case TENSO_KIND_GPU_IPC_REF: {
        tenso_ipc_ref rs, rm;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_ipc_ref(&rs, s));
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_ipc_ref(&rm, m));
        FUZZ_CHECK(std::memcmp(&rs, &rm, sizeof rs) == 0, "IPC references differ");
        break;
    }
    default: break;
    }
}

// The input layout of the stream targets: an options byte, a seed for the piece sizes, then
// the stream itself.
struct StreamInput {
    uint8_t mode, seed;
    const uint8_t *stream;
    size_t total;
};
inline StreamInput stream_input(const uint8_t *data, size_t size) {
    Reader r(data, size);
    StreamInput in;
    in.mode = r.u8();
    in.seed = r.u8();
    in.stream = data + (size - r.left());
    in.total = r.left();
    return in;
}

}  // namespace fuzz
