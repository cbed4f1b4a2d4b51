// GpuDequantHostTest - the dequantize element code (impl/gpu/kernels/dequant.hpp), run on the
// host by dequantize_host, against the library's own tenso_dequantize: float32 bit for bit
// (NaN included: on the host both sides propagate the same payload), float16 / bfloat16 equal
// to that float32 rounded to nearest even by independent references (the compiler's _Float16
// conversion, and a nearest-neighbour choice for bfloat16). Every qdtype x scheme x output,
// odd counts, 4-bit tails, NaN / infinite / zero / subnormal / huge scales and zero points.
// The CUDA kernel runs the same element code; tests/gpu/run-device-suite.sh checks it on a GPU.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <cppunit/extensions/HelperMacros.h>

#include "check.hpp"
#include "gpu/kernels/dequant.hpp"

#if !defined(__aarch64__) && !defined(__FLT16_MAX__)
#include <immintrin.h>  // F16C, the reference where the compiler has no _Float16 (below)
#endif
#include "tenso/tenso.h"

namespace {

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

float float_of(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

#if defined(__aarch64__)
// aarch64: the ISA's own half type (IEEE binary16 there; g++ before 13 has no C++ _Float16),
// converted by FCVT, round to nearest even; NaN as the library documents it (sign | 0x7E00).
uint16_t ref_f16(float f) {
    if (std::isnan(f)) return uint16_t(((bits_of(f) >> 16) & 0x8000u) | 0x7E00u);
    const __fp16 h = static_cast<__fp16>(f);
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
}
#elif defined(__FLT16_MAX__)
uint16_t ref_f16(float f) {
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
}
#else
// Compilers without _Float16 on x86 (clang 14, the sanitizer builds): the CPU's own F16C
// conversion, round to nearest even; NaN as the library documents it (sign | 0x7E00).
__attribute__((target("f16c"))) uint16_t ref_f16(float f) {
    if (std::isnan(f)) return uint16_t(((bits_of(f) >> 16) & 0x8000u) | 0x7E00u);
    return uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
#endif

// bfloat16 by choosing the nearer of the two neighbours (ties to the even one); past the
// largest finite one the upper neighbour is infinity, at IEEE's distance 2^128.
uint16_t ref_bf16(float f) {
    const uint32_t x = bits_of(f);
    const uint16_t lo = uint16_t(x >> 16), hi = uint16_t(lo + 1);
    const double d = std::fabs(double(f));
    const double dlo = std::fabs(double(float_of(uint32_t(lo) << 16)));
    const float fhi = float_of(uint32_t(hi) << 16);
    const double dhi = std::isinf(fhi) ? std::ldexp(1.0, 128) : std::fabs(double(fhi));
    if (d - dlo < dhi - d) return lo;
    if (d - dlo > dhi - d) return hi;
    return (lo & 1) ? hi : lo;
}

struct Case {
    std::vector<uint64_t> shape;
    int32_t scheme;
    int32_t axis;
    uint32_t group_size;
};

}  // namespace

class GpuDequantHostTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(GpuDequantHostTest);
    CPPUNIT_TEST(testMatchesTensoDequantize);
    CPPUNIT_TEST(testHalfConversionEdges);
    CPPUNIT_TEST(testBfloat16ConversionEdges);
    CPPUNIT_TEST(testRejectsBadArguments);
    CPPUNIT_TEST_SUITE_END();

    std::mt19937 rng{20261125};

    // Scales / zero points: ordinary values mixed with the ones that break naive code.
    float pick(bool zero_point) {
        static const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                                         -std::numeric_limits<float>::quiet_NaN(),
                                         std::numeric_limits<float>::infinity(),
                                         -std::numeric_limits<float>::infinity(),
                                         0.0f,
                                         -0.0f,
                                         1e-40f,
                                         3e38f,
                                         65519.0f,
                                         6.1e-5f,
                                         5.96e-8f,
                                         2.98e-8f};
        std::uniform_int_distribution<int> which(0, 9);
        if (which(rng) == 0) return specials[std::uniform_int_distribution<int>(0, 11)(rng)];
        std::uniform_real_distribution<float> u(zero_point ? -20.0f : 1e-6f, zero_point ? 20.0f : 3.0f);
        return u(rng);
    }

    void run_case(int32_t qdtype, const Case &c) {
        uint64_t n = 1;
        for (uint64_t d : c.shape) n *= d;
        const bool four = qdtype == TENSO_DTYPE_QINT4 || qdtype == TENSO_DTYPE_QUINT4;
        std::vector<uint8_t> codes(four ? (n + 1) / 2 : n);
        for (auto &b : codes) b = uint8_t(rng());
        if (four && (n & 1)) codes.back() &= 0x0F;  // the unused high nibble of an odd tail is 0

        uint64_t num = 1, inner = 1, channels = 1;
        if (c.scheme == TENSO_QUANT_PER_CHANNEL) {
            channels = num = c.shape[size_t(c.axis)];
            for (size_t i = size_t(c.axis) + 1; i < c.shape.size(); ++i) inner *= c.shape[i];
        } else if (c.scheme == TENSO_QUANT_PER_GROUP) {
            num = (n + c.group_size - 1) / c.group_size;
        }
        std::vector<float> scales(num), zps(num);
        for (uint64_t k = 0; k < num; ++k) {
            scales[k] = pick(false);
            zps[k] = pick(true);
        }

        tenso_quantized q{};
        q.data = codes.data();
        q.nbytes = codes.size();
        q.shape = c.shape.data();
        q.scales = scales.data();
        q.zero_points = zps.data();
        q.ndim = uint32_t(c.shape.size());
        q.dtype = qdtype;
        q.scheme = c.scheme;
        q.axis = c.scheme == TENSO_QUANT_PER_CHANNEL ? c.axis : 0;
        q.group_size = c.scheme == TENSO_QUANT_PER_GROUP ? c.group_size : 0;
        q.num_scales = uint32_t(num);
        std::vector<float> want(n);
        TENSO_CHECK_OK(tenso_dequantize(want.data(), n, &q));

        for (int32_t out : {TENSO_DTYPE_FLOAT32, TENSO_DTYPE_FLOAT16, TENSO_DTYPE_BFLOAT16}) {
            std::vector<uint8_t> got(n * (out == TENSO_DTYPE_FLOAT32 ? 4 : 2) + 1, 0xA5);
            tenso_gpu_dequant_args a{};
            a.codes = codes.data();
            a.scales = scales.data();
            a.zero_points = zps.data();
            a.out = got.data();
            a.count = n;
            a.inner = inner;
            a.channels = channels;
            a.group_size = c.group_size;
            a.qdtype = qdtype;
            a.scheme = c.scheme;
            a.out_dtype = out;
            char msg[256] = "";
            CPPUNIT_ASSERT_EQUAL_MESSAGE(msg, TENSO_OK, tenso::gpu::dequantize_host(a, msg, sizeof msg));
            CPPUNIT_ASSERT_EQUAL(uint8_t(0xA5), got.back());  // nothing written past the end
            // The kernel's 32-bit index variant (count < 2^32) writes the same bytes.
            std::vector<uint8_t> got32(got.size(), 0xA5);
            a.out = got32.data();
            for (uint32_t i = 0; i < uint32_t(n); ++i) tenso::gpu::dq_element(a, i);
            CPPUNIT_ASSERT(got32 == got);
            for (uint64_t i = 0; i < n; ++i) {
                const std::string where = "qdtype " + std::to_string(qdtype) + " scheme " + std::to_string(c.scheme) +
                                          " out " + std::to_string(out) + " n " + std::to_string(n) + " element " +
                                          std::to_string(i);
                if (out == TENSO_DTYPE_FLOAT32) {
                    uint32_t g;
                    std::memcpy(&g, got.data() + 4 * i, 4);
                    CPPUNIT_ASSERT_EQUAL_MESSAGE(where, bits_of(want[i]), g);
                    continue;
                }
                uint16_t g;
                std::memcpy(&g, got.data() + 2 * i, 2);
                if (std::isnan(want[i])) {
                    const uint16_t sign = uint16_t((bits_of(want[i]) >> 16) & 0x8000u);
                    CPPUNIT_ASSERT_EQUAL_MESSAGE(where,
                                                 uint16_t(sign | (out == TENSO_DTYPE_FLOAT16 ? 0x7E00u : 0x7FC0u)), g);
                } else {
                    const uint16_t r = out == TENSO_DTYPE_FLOAT16 ? ref_f16(want[i]) : ref_bf16(want[i]);
                    CPPUNIT_ASSERT_EQUAL_MESSAGE(where, r, g);
                }
            }
        }
    }

public:
    void testMatchesTensoDequantize() {
        const std::vector<Case> cases = {
            {{1}, TENSO_QUANT_PER_TENSOR, 0, 0},        {{1001}, TENSO_QUANT_PER_TENSOR, 0, 0},
            {{3, 5, 7}, TENSO_QUANT_PER_CHANNEL, 1, 0}, {{3, 5, 7}, TENSO_QUANT_PER_CHANNEL, 0, 0},
            {{9, 13}, TENSO_QUANT_PER_CHANNEL, 1, 0},  // inner == 1: quant.cpp's other loop
            {{257}, TENSO_QUANT_PER_CHANNEL, 0, 0},     {{1001}, TENSO_QUANT_PER_GROUP, 0, 64},  // a short last group
            {{4, 33}, TENSO_QUANT_PER_GROUP, 0, 5},     {{7}, TENSO_QUANT_PER_GROUP, 0, 1},
        };
        for (int32_t qd : {TENSO_DTYPE_QINT8, TENSO_DTYPE_QUINT8, TENSO_DTYPE_QINT4, TENSO_DTYPE_QUINT4})
            for (const Case &c : cases)
                for (int rep = 0; rep < 3; ++rep) run_case(qd, c);
    }

    // Every float16 rounding boundary class: normal, subnormal, the tie below the smallest
    // subnormal, overflow at 65520, NaN and both infinities; against the compiler's conversion
    // over a sweep of float32 bit patterns.
    void testHalfConversionEdges() {
        using tenso::gpu::dq_f32_to_f16;
        CPPUNIT_ASSERT_EQUAL(uint16_t(0x7BFF), dq_f32_to_f16(65519.0f));
        CPPUNIT_ASSERT_EQUAL(uint16_t(0x7C00), dq_f32_to_f16(65520.0f));
        CPPUNIT_ASSERT_EQUAL(uint16_t(0xFC00), dq_f32_to_f16(-std::numeric_limits<float>::infinity()));
        CPPUNIT_ASSERT_EQUAL(uint16_t(0x0000), dq_f32_to_f16(std::ldexp(1.0f, -25)));
        CPPUNIT_ASSERT_EQUAL(uint16_t(0x0001), dq_f32_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)));
        CPPUNIT_ASSERT_EQUAL(uint16_t(0x0002), dq_f32_to_f16(std::ldexp(3.0f, -25)));  // tie -> even
        CPPUNIT_ASSERT_EQUAL(uint16_t(0x0400), dq_f32_to_f16(std::ldexp(1.0f, -14)));
        CPPUNIT_ASSERT_EQUAL(uint16_t(0x8000), dq_f32_to_f16(-0.0f));
        CPPUNIT_ASSERT_EQUAL(uint16_t(0x7E00), dq_f32_to_f16(float_of(0x7F800001u)));
        CPPUNIT_ASSERT_EQUAL(uint16_t(0xFE00), dq_f32_to_f16(float_of(0xFFC00000u)));
        for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 4093) {
            const float f = float_of(uint32_t(u));
            if (std::isnan(f)) continue;
            CPPUNIT_ASSERT_EQUAL_MESSAGE(std::to_string(u), ref_f16(f), dq_f32_to_f16(f));
        }
    }

    void testBfloat16ConversionEdges() {
        using tenso::gpu::dq_f32_to_bf16;
        CPPUNIT_ASSERT_EQUAL(uint16_t(0x3F80), dq_f32_to_bf16(float_of(0x3F808000u)));  // tie -> even
        CPPUNIT_ASSERT_EQUAL(uint16_t(0x3F82), dq_f32_to_bf16(float_of(0x3F818000u)));  // tie -> even
        CPPUNIT_ASSERT_EQUAL(uint16_t(0x7F80), dq_f32_to_bf16(float_of(0x7F7FFFFFu)));  // rounds to inf
        CPPUNIT_ASSERT_EQUAL(uint16_t(0x7F80), dq_f32_to_bf16(float_of(0x7F7F8000u)));  // tie -> even: inf
        CPPUNIT_ASSERT_EQUAL(uint16_t(0x7F7E), dq_f32_to_bf16(float_of(0x7F7E8000u)));  // tie -> even
        CPPUNIT_ASSERT_EQUAL(uint16_t(0xFF80), dq_f32_to_bf16(-std::numeric_limits<float>::infinity()));
        CPPUNIT_ASSERT_EQUAL(uint16_t(0x7FC0), dq_f32_to_bf16(float_of(0x7F800001u)));
        CPPUNIT_ASSERT_EQUAL(uint16_t(0xFFC0), dq_f32_to_bf16(float_of(0xFFFFFFFFu)));
        for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 4093) {
            const float f = float_of(uint32_t(u));
            if (std::isnan(f) || std::isinf(f)) continue;
            CPPUNIT_ASSERT_EQUAL_MESSAGE(std::to_string(u), ref_bf16(f), dq_f32_to_bf16(f));
        }
    }

    void testRejectsBadArguments() {
        uint8_t code = 0;
        float s = 1, z = 0, out = 0;
        tenso_gpu_dequant_args a{};
        a.codes = &code;
        a.scales = &s;
        a.zero_points = &z;
        a.out = &out;
        a.count = 1;
        a.qdtype = TENSO_DTYPE_QINT8;
        a.scheme = TENSO_QUANT_PER_TENSOR;
        a.out_dtype = TENSO_DTYPE_FLOAT32;
        char msg[256];
        CPPUNIT_ASSERT_EQUAL(TENSO_OK, tenso::gpu::dequantize_host(a, msg, sizeof msg));
        // One field broken at a time, and the words the message must carry.
        using Break = void (*)(tenso_gpu_dequant_args &);
        const struct {
            Break brk;
            const char *needle;
        } cases[] = {
            {[](tenso_gpu_dequant_args &b) { b.qdtype = TENSO_DTYPE_FLOAT32; }, "quantized dtype"},
            {[](tenso_gpu_dequant_args &b) { b.out_dtype = TENSO_DTYPE_INT32; }, "output dtype"},
            {[](tenso_gpu_dequant_args &b) { b.scheme = TENSO_QUANT_PER_CHANNEL; }, "inner and channels"},
            {[](tenso_gpu_dequant_args &b) { b.scheme = TENSO_QUANT_PER_GROUP; }, "group_size"},
            {[](tenso_gpu_dequant_args &b) { b.scheme = 7; }, "scheme"},
            {[](tenso_gpu_dequant_args &b) { b.scales = nullptr; }, "NULL"},
        };
        for (const auto &c : cases) {
            tenso_gpu_dequant_args b = a;
            c.brk(b);
            msg[0] = 0;
            CPPUNIT_ASSERT_EQUAL(TENSO_E_INVALID_ARGUMENT, tenso::gpu::dequantize_host(b, msg, sizeof msg));
            CPPUNIT_ASSERT_MESSAGE(msg, std::strstr(msg, c.needle) != nullptr);
        }
        tenso_gpu_dequant_args b = a;
        b.scales = nullptr;
        b.count = 0;  // nothing to read: no pointer needed
        CPPUNIT_ASSERT_EQUAL(TENSO_OK, tenso::gpu::dequantize_host(b, msg, sizeof msg));
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(GpuDequantHostTest);
