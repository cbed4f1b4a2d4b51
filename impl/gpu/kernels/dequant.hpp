// dequant.hpp - the element code of the dequantize kernel, shared by the CUDA kernel
// (impl/gpu/kernels/dequant.cu, compiled by nvcc: __host__ __device__) and the host backend
// (dequantize_host, compiled into libtenso: plain inline), so CI checks on the host the very
// code the device runs.
//
// Bit-exactness with tenso_dequantize (impl/format/quant.cpp) decides the arithmetic:
//   x = (float(q) - zp[k]) * scale[k]    float32, subtract then multiply, never fused
// On the device the two operations are __fsub_rn / __fmul_rn, which nvcc never contracts into
// an FMA; on the host the file is built with -ffp-contract=off like quant.cpp.
// float16 / bfloat16 output is that float32 rounded to nearest even (bit code below, the same
// on both sides; no intrinsics, whose NaN and overflow handling differ between host and device).
// NaN converts to a quiet NaN with the input's sign (float16 0x7E00, bfloat16 0x7FC0). One
// difference is the hardware's, not ours: a GPU returns its canonical NaN (0x7FFFFFFF) from
// arithmetic on a NaN scale where x86 propagates the operand's payload, so NaN outputs agree
// as NaN, not always bit for bit.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <cstring>

#include "gpu/backend.h"

#if defined(TENSO_CUDA_PLUGIN)
#include <cuda_runtime.h>  // the plugin's host code (g++) declares dequantize_launch too
#endif

#if defined(__CUDACC__)
#define TENSO_DQ_FN __host__ __device__ __forceinline__
#else
#define TENSO_DQ_FN inline
#endif

namespace tenso {
namespace gpu {

TENSO_DQ_FN uint32_t dq_float_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
#endif
}

TENSO_DQ_FN float dq_affine(float q, float zp, float scale) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(__fsub_rn(q, zp), scale);
#else
    return (q - zp) * scale;
#endif
}

// float32 -> IEEE binary16, round to nearest even; overflow to infinity.
TENSO_DQ_FN uint16_t dq_f32_to_f16(float f) {
    const uint32_t x = dq_float_bits(f);
    const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return uint16_t(sign | 0x7E00u);   // NaN
    if (ax >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // >= 65520 rounds to infinity
    if (ax >= 0x38800000u) {                                 // normal: rebias, round at bit 13
        const uint32_t h = ax - 0x38000000u;
        return uint16_t(sign | ((h + 0xFFFu + ((h >> 13) & 1u)) >> 13));
    }
    if (ax <= 0x33000000u) return sign;  // <= 2^-25: the tie rounds to even, zero
    // Subnormal result: the 24-bit significand shifted to units of 2^-24.
    const uint32_t e = ax >> 23, m = (ax & 0x7FFFFFu) | 0x800000u, shift = 126u - e;
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return uint16_t(sign | r);
}

// float32 -> bfloat16 (the upper half of a float32), round to nearest even.
TENSO_DQ_FN uint16_t dq_f32_to_bf16(float f) {
    const uint32_t x = dq_float_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t(((x >> 16) & 0x8000u) | 0x7FC0u);
    return uint16_t((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// Element indices are uint64_t, or uint32_t where the kernel knows count < 2^32 (64-bit
// division is a long instruction sequence on a GPU; the results are the same).

// The integer value of element i as float: 1 byte per element, or two 4-bit codes per byte
// (element 2j low nibble, 2j+1 high; signed nibbles are two's complement: (v ^ 8) - 8).
template <class I>
TENSO_DQ_FN float dq_code(const uint8_t *codes, I i, int32_t qdtype) {
    switch (qdtype) {
    case TENSO_DTYPE_QINT8: return float(int8_t(codes[i]));
    case TENSO_DTYPE_QUINT8: return float(codes[i]);
    default: {
        const uint8_t b = codes[i >> 1];
        const int nib = (i & 1u) ? (b >> 4) : (b & 0x0F);
        return float(qdtype == TENSO_DTYPE_QINT4 ? (nib ^ 8) - 8 : nib);
    }
    }
}

// The scale / zero point index of element i (C order). With I = uint32_t the caller has
// checked count < 2^32, so inner, channels and group_size (<= count) fit too.
template <class I>
TENSO_DQ_FN I dq_scale_index(const tenso_gpu_dequant_args &a, I i) {
    switch (a.scheme) {
    case TENSO_QUANT_PER_CHANNEL: return (i / I(a.inner)) % I(a.channels);
    case TENSO_QUANT_PER_GROUP: return i / I(a.group_size);
    default: return 0;
    }
}

// Element i of the output: the one step every backend runs.
template <class I>
TENSO_DQ_FN void dq_element(const tenso_gpu_dequant_args &a, I i) {
    const I k = dq_scale_index(a, i);
    const float v =
        dq_affine(dq_code(static_cast<const uint8_t *>(a.codes), i, a.qdtype), a.zero_points[k], a.scales[k]);
    switch (a.out_dtype) {
    case TENSO_DTYPE_FLOAT16: static_cast<uint16_t *>(a.out)[i] = dq_f32_to_f16(v); break;
    case TENSO_DTYPE_BFLOAT16: static_cast<uint16_t *>(a.out)[i] = dq_f32_to_bf16(v); break;
    default: static_cast<float *>(a.out)[i] = v; break;
    }
}

// Checks what the element code relies on (dtypes, scheme, non-zero divisors, pointers) so a
// backend rejects bad arguments before touching memory. TENSO_OK or TENSO_E_INVALID_ARGUMENT
// with the reason in msg. Host only.
tenso_status check_dequant_args(const tenso_gpu_dequant_args &a, char *msg, size_t cap);

// Runs the element code over all a.count elements on the host (the host backend's kernel).
// The pointers are host memory. TENSO_OK, or TENSO_E_INVALID_ARGUMENT from check_dequant_args.
tenso_status dequantize_host(const tenso_gpu_dequant_args &a, char *msg, size_t cap);

#if defined(__CUDACC__) || defined(TENSO_CUDA_PLUGIN)
// Launches the grid-stride kernel over a.count elements on `stream` (the current device; the
// pointers are device memory, already checked by check_dequant_args). The launch's error.
cudaError_t dequantize_launch(const tenso_gpu_dequant_args &a, cudaStream_t stream);
#endif

}  // namespace gpu
}  // namespace tenso
