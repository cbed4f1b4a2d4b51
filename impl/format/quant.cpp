// quant.cpp - quantize / dequantize kernels.
//
// Bit-exactness with upstream (NumPy 2 semantics) decides the arithmetic:
//   scale = f32((max - min) / (qmax - qmin))   computed in double, rounded once to float
//   zp    = f32(qmin - f32(min / scale))       float32 (NEP 50: the Python float is weak)
//   q     = clip(rint(x / scale + zp))         float32, round half to even
//   x'    = (q - zp) * scale                   float32
// The loops are plain and branch-free so the compiler vectorises them (this file is built
// with -O3 and -ffp-contract=off: a fused multiply-add would change the bits).
#include "format/quant.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "error.hpp"
#include "tenso/tenso.h"
#include "format/wire.hpp"

namespace tenso {

namespace {

struct Range {
    int qmin, qmax;
};

Range range_of(int qdtype) {
    switch (qdtype) {
    case TENSO_DTYPE_QINT8: return {-128, 127};
    case TENSO_DTYPE_QUINT8: return {0, 255};
    case TENSO_DTYPE_QINT4: return {-8, 7};
    case TENSO_DTYPE_QUINT4: return {0, 15};
    default: fail(TENSO_E_BAD_DTYPE, "not a quantized dtype: " + std::to_string(qdtype));
    }
}

float half_to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (man << 13);  // inf / nan
    } else if (exp) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (!man) {
        bits = sign;
    } else {  // subnormal: normalise
        exp = 113;
        while (!(man & 0x400)) {
            man <<= 1;
            --exp;
        }
        bits = sign | (exp << 23) | ((man & 0x3FF) << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// The input as float32 (a copy only for float16/bfloat16, as upstream's astype does).
std::vector<float> widen(const uint8_t *src, int dtype, uint64_t n, const float **out) {
    std::vector<float> tmp;
    if (dtype == TENSO_DTYPE_FLOAT32) {
        *out = reinterpret_cast<const float *>(src);
        return tmp;
    }
    tmp.resize(n);
    for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        if (dtype == TENSO_DTYPE_BFLOAT16) {
            uint32_t bits = uint32_t(h) << 16;
            std::memcpy(&tmp[i], &bits, 4);
        } else {
            tmp[i] = half_to_float(h);
        }
    }
    *out = tmp.data();
    return tmp;
}

struct Params {
    float scale, zp;
};

Params params_for(float mn, float mx, Range r) {
    if (mn == mx) return {1.0f, 0.0f};
    float scale = float((double(mx) - double(mn)) / double(r.qmax - r.qmin));
    float zp = float(r.qmin) - mn / scale;
    return {scale, zp};
}

// min/max of n elements. (NaN inputs are not supported, as upstream's quantization of them is
// meaningless anyway.)
void min_max(const float *p, uint64_t len, float *mn, float *mx) {
    float lo = p[0], hi = p[0];
    uint64_t i = 0;
#if defined(__SSE2__)
    if (len >= 4) {
        __m128 vlo = _mm_set1_ps(lo), vhi = _mm_set1_ps(hi);
        for (; i + 4 <= len; i += 4) {
            __m128 v = _mm_loadu_ps(p + i);
            vlo = _mm_min_ps(vlo, v);
            vhi = _mm_max_ps(vhi, v);
        }
        float l[4], h[4];
        _mm_storeu_ps(l, vlo);
        _mm_storeu_ps(h, vhi);
        for (int k = 0; k < 4; ++k) {
            lo = std::min(lo, l[k]);
            hi = std::max(hi, h[k]);
        }
    }
#endif
    for (; i < len; ++i) {
        lo = std::min(lo, p[i]);
        hi = std::max(hi, p[i]);
    }
    *mn = lo;
    *mx = hi;
}

// q[i] = clip(rint(x[i] / scale + zp)). Clipping before rounding gives the same integers
// (the bounds are integers and rounding is monotone), and keeps |v| < 2^22 so adding and
// subtracting 1.5 * 2^23 rounds half to even in the default rounding mode without SSE4.1.
// The SSE2 path does the same operations in the same order, so the bits are identical. A NaN
// (0/0 from a range that underflows the scale) becomes code 0, as numpy's float->int cast does.
// `ss` is the scale stride: 0 applies s[0], z[0] to every element (one block), 1 gives element
// i its own s[i], z[i] (a row of a channels-last tensor).
void quantize_run(int8_t *q, const float *x, uint64_t n, const float *s, const float *z, int ss, Range r) {
    const float lo = float(r.qmin), hi = float(r.qmax), magic = 12582912.0f;
    uint64_t i = 0;
#if defined(__SSE2__)
    const __m128 vlo = _mm_set1_ps(lo), vhi = _mm_set1_ps(hi), vm = _mm_set1_ps(magic);
    const __m128 s1 = _mm_set1_ps(s[0]), z1 = _mm_set1_ps(z[0]);
    auto one = [&](uint64_t k) {
        const __m128 vs = ss ? _mm_loadu_ps(s + k) : s1, vz = ss ? _mm_loadu_ps(z + k) : z1;
        __m128 v = _mm_add_ps(_mm_div_ps(_mm_loadu_ps(x + k), vs), vz);
        const __m128i not_nan = _mm_castps_si128(_mm_cmpord_ps(v, v));
        v = _mm_min_ps(_mm_max_ps(v, vlo), vhi);
        v = _mm_sub_ps(_mm_add_ps(v, vm), vm);
        return _mm_and_si128(_mm_cvttps_epi32(v), not_nan);
    };
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm_packs_epi32(one(i), one(i + 4));
        __m128i b = _mm_packs_epi32(one(i + 8), one(i + 12));
        // Codes lie in [-128, 127] or [0, 255]: saturating packs keep them exact.
        __m128i bytes = r.qmin < 0 ? _mm_packs_epi16(a, b) : _mm_packus_epi16(a, b);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(q + i), bytes);
    }
#endif
    for (; i < n; ++i) {
        float v = x[i] / s[ss * i] + z[ss * i];
        if (v != v) {  // NaN (a degenerate scale): numpy's cast gives INT_MIN, whose low byte is 0
            q[i] = 0;
            continue;
        }
        v = std::min(std::max(v, lo), hi);
        v = (v + magic) - magic;
        q[i] = int8_t(int32_t(v));  // unsigned types wrap to their byte value
    }
}

// Per-channel ranges of a tensor seen as [outer, channels, inner], in one pass in memory
// order; with inner == 1 (channels last) the pass is vectorised across channels.
void channel_ranges(const float *x, uint64_t outer, uint64_t channels, uint64_t inner, float *mn, float *mx) {
    for (uint64_t c = 0; c < channels; ++c) mn[c] = mx[c] = x[c * inner];
    for (uint64_t o = 0; o < outer; ++o) {
        const float *row = x + o * channels * inner;
        if (inner == 1) {
            uint64_t c = 0;
#if defined(__SSE2__)
            for (; c + 4 <= channels; c += 4) {
                __m128 v = _mm_loadu_ps(row + c);
                _mm_storeu_ps(mn + c, _mm_min_ps(_mm_loadu_ps(mn + c), v));
                _mm_storeu_ps(mx + c, _mm_max_ps(_mm_loadu_ps(mx + c), v));
            }
#endif
            for (; c < channels; ++c) {
                mn[c] = std::min(mn[c], row[c]);
                mx[c] = std::max(mx[c], row[c]);
            }
            continue;
        }
        for (uint64_t c = 0; c < channels; ++c) {
            float lo, hi;
            min_max(row + c * inner, inner, &lo, &hi);
            mn[c] = std::min(mn[c], lo);
            mx[c] = std::max(mx[c], hi);
        }
    }
}

void pack4(uint8_t *dst, const int8_t *q, uint64_t n) {
    for (uint64_t k = 0; k < n / 2; ++k)
        dst[k] = uint8_t((uint8_t(q[2 * k]) & 0x0F) | ((uint8_t(q[2 * k + 1]) & 0x0F) << 4));
    if (n % 2) dst[n / 2] = uint8_t(q[n - 1]) & 0x0F;
}

}  // namespace

bool is_4bit(int qdtype) { return qdtype == TENSO_DTYPE_QINT4 || qdtype == TENSO_DTYPE_QUINT4; }
bool is_signed_q(int qdtype) { return qdtype == TENSO_DTYPE_QINT8 || qdtype == TENSO_DTYPE_QINT4; }
uint64_t quant_body_len(int qdtype, uint64_t numel) { return is_4bit(qdtype) ? (numel + 1) / 2 : numel; }

void check_quant(const QuantDesc &q, int32_t status) {
    range_of(q.dtype);
    uint64_t n = checked_numel(q.shape, q.ndim, TENSO_MAX_ELEMENTS);
    uint64_t expect = expected_num_scales(q.scheme, q.axis, q.group_size, q.shape, q.ndim, n, status);
    if (q.num_scales != expect)
        fail(status, "num_scales " + std::to_string(q.num_scales) + " does not match the scheme (" +
                         std::to_string(expect) + ")");
    if (q.nbytes != quant_body_len(q.dtype, n))
        fail(status, "quantized body is " + std::to_string(q.nbytes) + " bytes, not " +
                         std::to_string(quant_body_len(q.dtype, n)));
}

QuantOutput quantize(const uint8_t *src, int src_dtype, const uint64_t *shape, uint32_t ndim, int qdtype, int scheme,
                     uint32_t axis, uint32_t group_size) {
    if (src_dtype != TENSO_DTYPE_FLOAT32 && src_dtype != TENSO_DTYPE_FLOAT16 && src_dtype != TENSO_DTYPE_BFLOAT16)
        fail(TENSO_E_BAD_DTYPE, "quantize takes float32, float16 or bfloat16 input");
    const Range r = range_of(qdtype);
    const uint64_t n = checked_numel(shape, ndim, TENSO_MAX_ELEMENTS);
    if (scheme == TENSO_QUANT_PER_CHANNEL && axis >= ndim)
        fail(TENSO_E_INVALID_ARGUMENT, "per-channel axis is out of range");
    if (scheme == TENSO_QUANT_PER_GROUP && !group_size)
        fail(TENSO_E_INVALID_ARGUMENT, "per-group quantization needs a group size > 0");
    if (scheme < TENSO_QUANT_PER_TENSOR || scheme > TENSO_QUANT_PER_GROUP)
        fail(TENSO_E_INVALID_ARGUMENT, "unknown quantization scheme " + std::to_string(scheme));
    const float *x = nullptr;
    std::vector<float> widened = widen(src, src_dtype, n, &x);
    QuantOutput out;
    out.packed.resize(quant_body_len(qdtype, n));
    // 8-bit codes go straight into the packet body; 4-bit ones are packed from a scratch copy.
    std::vector<int8_t> scratch(is_4bit(qdtype) ? n : 0);
    int8_t *q = is_4bit(qdtype) ? scratch.data() : reinterpret_cast<int8_t *>(out.packed.data());

    auto block = [&](uint64_t off, uint64_t len) {
        float mn, mx;
        min_max(x + off, len, &mn, &mx);
        Params p = params_for(mn, mx, r);
        quantize_run(q + off, x + off, len, &p.scale, &p.zp, 0, r);
        out.scales.push_back(p.scale);
        out.zero_points.push_back(p.zp);
    };

    if (n == 0) {
        // numpy cannot take the min of nothing; an empty tensor gets the constant-block params.
        uint64_t groups = scheme == TENSO_QUANT_PER_CHANNEL ? shape[axis] : (scheme == TENSO_QUANT_PER_TENSOR);
        out.scales.assign(groups, 1.0f);
        out.zero_points.assign(groups, 0.0f);
    } else if (scheme == TENSO_QUANT_PER_TENSOR) {
        block(0, n);
    } else if (scheme == TENSO_QUANT_PER_CHANNEL) {
        // The tensor as [outer, channels, inner]: channel c is every run of `inner` elements at
        // index c of the middle axis. Both passes walk memory in order.
        uint64_t outer = 1, inner = 1, channels = shape[axis];
        for (uint32_t i = 0; i < axis; ++i) outer *= shape[i];
        for (uint32_t i = axis + 1; i < ndim; ++i) inner *= shape[i];
        std::vector<float> mn(channels), mx(channels);
        channel_ranges(x, outer, channels, inner, mn.data(), mx.data());
        out.scales.resize(channels);
        out.zero_points.resize(channels);
        for (uint64_t c = 0; c < channels; ++c) {
            Params p = params_for(mn[c], mx[c], r);
            out.scales[c] = p.scale;
            out.zero_points[c] = p.zp;
        }
        const float *sc = out.scales.data(), *zp = out.zero_points.data();
        for (uint64_t o = 0; o < outer; ++o) {
            const uint64_t row = o * channels * inner;
            if (inner == 1) {
                quantize_run(q + row, x + row, channels, sc, zp, 1, r);
                continue;
            }
            for (uint64_t c = 0; c < channels; ++c)
                quantize_run(q + row + c * inner, x + row + c * inner, inner, sc + c, zp + c, 0, r);
        }
    } else {
        for (uint64_t g = 0; g < n; g += group_size) block(g, std::min<uint64_t>(group_size, n - g));
    }

    if (is_4bit(qdtype)) pack4(out.packed.data(), q, n);
    return out;
}

namespace {
// Integer value of element i (signed or unsigned bytes); inlined into the dequantize loops.
struct Q8s {
    const uint8_t *d;
    float operator()(uint64_t i) const { return float(int8_t(d[i])); }
};
struct Q8u {
    const uint8_t *d;
    float operator()(uint64_t i) const { return float(d[i]); }
};
template <class Get>
void dequantize_with(float *dst, const QuantDesc &q, uint64_t n, Get get) {
    auto apply = [&](uint64_t off, uint64_t len, uint64_t k) {
        const float s = q.scales[k], z = q.zero_points[k];
        for (uint64_t i = off; i < off + len; ++i) dst[i] = (get(i) - z) * s;
    };
    if (q.scheme == TENSO_QUANT_PER_TENSOR) {
        apply(0, n, 0);
    } else if (q.scheme == TENSO_QUANT_PER_CHANNEL) {
        // [outer, channels, inner] in memory order; channels last vectorises across channels.
        uint64_t outer = 1, inner = 1, channels = q.shape[q.axis];
        for (uint32_t i = 0; i < q.axis; ++i) outer *= q.shape[i];
        for (uint32_t i = q.axis + 1; i < q.ndim; ++i) inner *= q.shape[i];
        for (uint64_t o = 0; o < outer; ++o) {
            const uint64_t row = o * channels * inner;
            if (inner == 1) {
                for (uint64_t c = 0; c < channels; ++c) dst[row + c] = (get(row + c) - q.zero_points[c]) * q.scales[c];
                continue;
            }
            for (uint64_t c = 0; c < channels; ++c) apply(row + c * inner, inner, c);
        }
    } else {
        for (uint64_t g = 0, k = 0; g < n; g += q.group_size, ++k) apply(g, std::min<uint64_t>(q.group_size, n - g), k);
    }
}
}  // namespace

void dequantize(float *dst, const QuantDesc &q) {
    check_quant(q, TENSO_E_INVALID_ARGUMENT);
    const uint64_t n = checked_numel(q.shape, q.ndim, TENSO_MAX_ELEMENTS);
    if (!n) return;
    const bool sgn = is_signed_q(q.dtype);
    const uint8_t *codes = q.data;
    std::vector<uint8_t> unpacked;
    if (is_4bit(q.dtype)) {
        // One vectorisable pass to bytes, then the 8-bit loops: cheaper than nibble
        // arithmetic inside the affine loop. (x ^ 8) - 8 sign-extends a 4-bit value.
        unpacked.resize(n + 1);
        for (uint64_t k = 0; k < (n + 1) / 2; ++k) {
            uint8_t b = q.data[k], l = b & 0x0F, h = b >> 4;
            unpacked[2 * k] = sgn ? uint8_t((l ^ 8) - 8) : l;
            unpacked[2 * k + 1] = sgn ? uint8_t((h ^ 8) - 8) : h;
        }
        codes = unpacked.data();
    }
    if (sgn) dequantize_with(dst, q, n, Q8s{codes});
    else dequantize_with(dst, q, n, Q8u{codes});
}

}  // namespace tenso
