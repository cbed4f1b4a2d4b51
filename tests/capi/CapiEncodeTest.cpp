// CapiEncodeTest - dense encoding through the C API: exact bytes of the wire document's worked
// examples and of the upstream golden packets, every dense dtype, the integrity footer, sizing
// (dumps_bound, BUFFER_TOO_SMALL), the allocating encoder, and option/tensor validation.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <cppunit/Exception.h>
#include <cppunit/extensions/HelperMacros.h>

#include "check.hpp"
#include "isolated.hpp"
#include "tenso/tenso.h"

namespace {

using Bytes = std::vector<uint8_t>;

Bytes golden(const std::string &name) {
    std::string path = std::string(TENSO_VECTORS_DIR) + "/" + name + ".tenso";
    std::ifstream f(path, std::ios::binary);
    if (!f) CPPUNIT_FAIL("cannot open golden vector " + path);
    return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string hex(const uint8_t *p, size_t n) {
    std::string s;
    char b[4];
    for (size_t i = 0; i < n; ++i) {
        std::snprintf(b, sizeof b, "%02x", p[i]);
        s += b;
        if (i + 1 < n) s += (i % 16 == 15) ? '\n' : ' ';
    }
    return s;
}

void assert_bytes(const std::string &what, const Bytes &want, const Bytes &got) {
    if (want == got) return;
    size_t i = 0;
    while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
    CPPUNIT_FAIL(what + ": packets differ (want " + std::to_string(want.size()) + " B, got " +
                 std::to_string(got.size()) + " B, first difference at offset " + std::to_string(i) + ")\nwant:\n" +
                 hex(want.data(), want.size()) + "\ngot:\n" + hex(got.data(), got.size()));
}

// Encodes through dumps_bound + dumps_into and returns exactly the packet.
Bytes encode(const tenso_tensor &t, const tenso_encode_options *o = nullptr) {
    size_t bound = 0, n = 0;
    TENSO_CHECK_OK(tenso_dumps_bound(&bound, &t, o));
    Bytes out(bound);
    TENSO_CHECK_OK(tenso_dumps_into(out.data(), out.size(), &n, &t, o));
    CPPUNIT_ASSERT(n <= bound);
    out.resize(n);
    return out;
}

tenso_encode_options opts(uint32_t flags, uint32_t alignment) {
    tenso_encode_options o = TENSO_ENCODE_OPTIONS_INIT;
    o.flags = flags;
    o.alignment = alignment;
    return o;
}

const float kF32Five[5] = {1, 2, 3, 4, 5};
const uint64_t kShape5[1] = {5};

tenso_tensor f32_five() { return tenso_tensor{kF32Five, sizeof kF32Five, kShape5, 1, TENSO_DTYPE_FLOAT32}; }

uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
    return v;
}

}  // namespace

class CapiEncodeTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiEncodeTest);
    CPPUNIT_TEST(testF32VectorExactBytes);
    CPPUNIT_TEST(testWorkedSizes);
    CPPUNIT_TEST(testCustomAlignment128);
    CPPUNIT_TEST(testAlignmentOneHasNoPadding);
    CPPUNIT_TEST(testAlignment8And16And4096);
    CPPUNIT_TEST(testMaxAlignment);
    CPPUNIT_TEST(testEveryDenseDtype);
    CPPUNIT_TEST(testDtypeTableOutsideDense);
    CPPUNIT_TEST(testDtypeAndKindIteration);
    CPPUNIT_TEST(testIntegrityFooterKnownValue);
    CPPUNIT_TEST(testIntegrityFooterOfEmptyBody);
    CPPUNIT_TEST(testBoundEqualsWrittenUncompressed);
    CPPUNIT_TEST(testBufferTooSmall);
    CPPUNIT_TEST(testNullDestinationQueriesSize);
    CPPUNIT_TEST(testAllocatingEncoder);
    CPPUNIT_TEST(testOptionValidation);
    CPPUNIT_TEST(testTensorValidation);
    CPPUNIT_TEST(testZeroSizeDims);
    CPPUNIT_TEST(testNdim32);
    CPPUNIT_TEST(testCompressionCompressible);
    CPPUNIT_TEST(testCompressionIncompressibleAndEmpty);
    CPPUNIT_TEST(testCompressionWithIntegrity);
    CPPUNIT_TEST(testLz4FrameGolden);
    CPPUNIT_TEST(testLz4SameBytesOnEveryThreadCount);
    CPPUNIT_TEST(testLz4FrameLayoutOfLargeBodies);
    CPPUNIT_TEST(testLz4InPlaceSameBytesAsCompressedAside);
    CPPUNIT_TEST(testLz4HostileFrames);
    CPPUNIT_TEST(testEncodeOptionsVersion1);
    CPPUNIT_TEST(testDirectTensorPathMatchesPlan);
    CPPUNIT_TEST_SUITE_END();

public:
    void testF32VectorExactBytes() {
        tenso_tensor t = f32_five();
        Bytes got = encode(t);
        Bytes want = {0x54, 0x4e, 0x53, 0x4f,   // "TNSO"
                      0x04,                     // version 4
                      0x01, 0x00,               // flags: ALIGNED
                      0x01,                     // float32
                      0x01,                     // ndim 1
                      0x00,                     // reserved
                      0x05, 0x00, 0x00, 0x00};  // shape [5]
        want.resize(64, 0);                     // 50 bytes of padding: body at 64
        const uint8_t body[20] = {0,    0,    0x80, 0x3f, 0,    0,    0, 0x40, 0,    0,
                                  0x40, 0x40, 0,    0,    0x80, 0x40, 0, 0,    0xa0, 0x40};
        want.insert(want.end(), body, body + sizeof body);
        CPPUNIT_ASSERT_EQUAL(size_t(84), want.size());
        assert_bytes("f32[5] vs hand-written bytes", want, got);
        assert_bytes("f32[5] vs golden dense_f32_vec", golden("dense_f32_vec"), got);
    }

    void testWorkedSizes() {
        // f64[3,4] = arange(12): 18 -> 64, total 160.
        double f64[12];
        for (int i = 0; i < 12; ++i) f64[i] = i;
        uint64_t s34[2] = {3, 4};
        tenso_tensor tm = {f64, sizeof f64, s34, 2, TENSO_DTYPE_FLOAT64};
        Bytes m = encode(tm);
        CPPUNIT_ASSERT_EQUAL(size_t(160), m.size());
        assert_bytes("f64[3,4]", golden("dense_f64_mat"), m);

        // u8[4,4,4] zeros: 22 -> 64, total 128.
        uint8_t u8[64] = {};
        uint64_t s444[3] = {4, 4, 4};
        tenso_tensor tu = {u8, sizeof u8, s444, 3, TENSO_DTYPE_UINT8};
        Bytes u = encode(tu);
        CPPUNIT_ASSERT_EQUAL(size_t(128), u.size());
        assert_bytes("u8[4,4,4]", golden("dense_u8_3d_zeros"), u);

        // f32 scalar 3.5: 10 -> 64, total 68; the shape may be NULL for ndim 0.
        float x = 3.5f;
        tenso_tensor ts = {&x, sizeof x, nullptr, 0, TENSO_DTYPE_FLOAT32};
        Bytes s = encode(ts);
        CPPUNIT_ASSERT_EQUAL(size_t(68), s.size());
        CPPUNIT_ASSERT_EQUAL(uint8_t(0), s[8]);  // ndim 0
        assert_bytes("f32 scalar", golden("dense_f32_scalar"), s);

        int64_t i64 = -42;
        tenso_tensor ti = {&i64, sizeof i64, nullptr, 0, TENSO_DTYPE_INT64};
        assert_bytes("i64 scalar", golden("dense_i64_scalar"), encode(ti));
    }

    void testCustomAlignment128() {
        tenso_tensor t = f32_five();
        tenso_encode_options o = opts(0, 128);
        Bytes p = encode(t, &o);
        CPPUNIT_ASSERT_EQUAL(size_t(148), p.size());
        // flags: CUST_ALIGN (0x80) instead of ALIGNED.
        CPPUNIT_ASSERT_EQUAL(uint8_t(0x80), p[5]);
        CPPUNIT_ASSERT_EQUAL(uint8_t(0x00), p[6]);
        CPPUNIT_ASSERT_EQUAL(uint8_t(7), p[14]);                                   // exponent byte: log2(128)
        for (size_t i = 15; i < 128; ++i) CPPUNIT_ASSERT_EQUAL(uint8_t(0), p[i]);  // 113 pad bytes
        CPPUNIT_ASSERT(std::memcmp(p.data() + 128, kF32Five, sizeof kF32Five) == 0);
        assert_bytes("f32[5] align 128", golden("align_f32_128"), p);
    }

    void testAlignmentOneHasNoPadding() {
        tenso_tensor t = f32_five();
        tenso_encode_options o = opts(0, 1);
        Bytes p = encode(t, &o);
        CPPUNIT_ASSERT_EQUAL(size_t(35), p.size());
        CPPUNIT_ASSERT_EQUAL(uint8_t(0x80), p[5]);
        CPPUNIT_ASSERT_EQUAL(uint8_t(0), p[14]);  // exponent 0: alignment 1
        CPPUNIT_ASSERT(std::memcmp(p.data() + 15, kF32Five, sizeof kF32Five) == 0);
        assert_bytes("f32[5] align 1", golden("align_f32_1"), p);
    }

    void testAlignment8And16And4096() {
        tenso_tensor t = f32_five();
        struct {
            uint32_t a;
            size_t size;
            uint8_t exp;
            const char *name;
        } const cases[] = {{8, 36, 3, "align_f32_8"}, {16, 36, 4, "align_f32_16"}, {4096, 4116, 12, "align_f32_4096"}};
        for (const auto &c : cases) {
            tenso_encode_options o = opts(0, c.a);
            Bytes p = encode(t, &o);
            CPPUNIT_ASSERT_EQUAL(c.size, p.size());
            CPPUNIT_ASSERT_EQUAL(c.exp, p[14]);
            CPPUNIT_ASSERT(std::memcmp(p.data() + (c.size - 20), kF32Five, 20) == 0);
            assert_bytes(c.name, golden(c.name), p);
        }
        // alignment 64 given explicitly is the default: ALIGNED, no exponent byte.
        tenso_encode_options o64 = opts(0, 64);
        assert_bytes("explicit 64", golden("dense_f32_vec"), encode(t, &o64));
    }

    void testMaxAlignment() {
        tenso_tensor t = f32_five();
        tenso_encode_options o = opts(0, TENSO_MAX_ALIGNMENT);
        Bytes p = encode(t, &o);
        CPPUNIT_ASSERT_EQUAL(size_t(TENSO_MAX_ALIGNMENT) + 20, p.size());
        CPPUNIT_ASSERT_EQUAL(uint8_t(20), p[14]);
        CPPUNIT_ASSERT(std::memcmp(p.data() + TENSO_MAX_ALIGNMENT, kF32Five, 20) == 0);
    }

    void testEveryDenseDtype() {
        struct {
            tenso_dtype code;
            size_t item;
            const char *name;
        } const table[] = {
            {TENSO_DTYPE_FLOAT32, 4, "float32"},     {TENSO_DTYPE_INT32, 4, "int32"},
            {TENSO_DTYPE_FLOAT64, 8, "float64"},     {TENSO_DTYPE_INT64, 8, "int64"},
            {TENSO_DTYPE_UINT8, 1, "uint8"},         {TENSO_DTYPE_UINT16, 2, "uint16"},
            {TENSO_DTYPE_BOOL, 1, "bool"},           {TENSO_DTYPE_FLOAT16, 2, "float16"},
            {TENSO_DTYPE_INT8, 1, "int8"},           {TENSO_DTYPE_INT16, 2, "int16"},
            {TENSO_DTYPE_UINT32, 4, "uint32"},       {TENSO_DTYPE_UINT64, 8, "uint64"},
            {TENSO_DTYPE_COMPLEX64, 8, "complex64"}, {TENSO_DTYPE_COMPLEX128, 16, "complex128"},
            {TENSO_DTYPE_BFLOAT16, 2, "bfloat16"},
        };
        CPPUNIT_ASSERT_EQUAL(size_t(15), sizeof table / sizeof table[0]);
        for (const auto &d : table) {
            const std::string name = d.name;
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, d.item, tenso_dtype_itemsize(d.code));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, name, std::string(tenso_dtype_name(d.code)));
            tenso_dtype back = 0;
            TENSO_CHECK_OK(tenso_dtype_from_name(&back, d.name));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, d.code, back);

            // A 2x3 tensor with the golden vector's body encodes to the golden packet.
            Bytes g = golden("dense_" + name + "_2x3");
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, size_t(64) + 6 * d.item, g.size());
            uint64_t shape[2] = {2, 3};
            tenso_tensor t = {g.data() + 64, 6 * d.item, shape, 2, d.code};
            Bytes p = encode(t);
            assert_bytes("dtype " + name, g, p);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, uint8_t(d.code), p[7]);
        }
        // The bf16 vector from the wire document.
        Bytes g = golden("dense_bf16_vec");
        uint64_t s4[1] = {4};
        tenso_tensor bf = {g.data() + 64, 8, s4, 1, TENSO_DTYPE_BFLOAT16};
        assert_bytes("bf16[4]", g, encode(bf));
    }

    void testDtypeTableOutsideDense() {
        // Codes that are not dense have no itemsize but do have names (16..21).
        const char *names[] = {"qint8", "quint8", "qint4", "quint4", "string", "bytes"};
        for (tenso_dtype c = 16; c <= 21; ++c) {
            CPPUNIT_ASSERT_EQUAL(size_t(0), tenso_dtype_itemsize(c));
            CPPUNIT_ASSERT_EQUAL(std::string(names[c - 16]), std::string(tenso_dtype_name(c)));
            tenso_dtype back = 0;
            TENSO_CHECK_OK(tenso_dtype_from_name(&back, names[c - 16]));
            CPPUNIT_ASSERT_EQUAL(c, back);
        }
        for (tenso_dtype c : {0, 22, 99, 255, -1}) {
            CPPUNIT_ASSERT_EQUAL(size_t(0), tenso_dtype_itemsize(c));
            CPPUNIT_ASSERT_EQUAL(std::string("unknown"), std::string(tenso_dtype_name(c)));
        }
        tenso_dtype d = 77;
        for (const char *bad : {"unknown", "", "Float32", "float", "f4", "float32 "})
            TENSO_CHECK_STATUS(TENSO_E_BAD_DTYPE, tenso_dtype_from_name(&d, bad));
        CPPUNIT_ASSERT_EQUAL(tenso_dtype(77), d);  // untouched on failure
    }

    void testDtypeAndKindIteration() {
        // What an SDK reads instead of restating a table: every code, its kind and its width.
        CPPUNIT_ASSERT_EQUAL(uint32_t(21), tenso_dtype_count());
        for (uint32_t i = 0; i < tenso_dtype_count(); ++i) {
            const tenso_dtype d = tenso_dtype_at(i);
            CPPUNIT_ASSERT_EQUAL(tenso_dtype(i + 1), d);  // 1.3 knows codes 1..21
            const std::string name = tenso_dtype_name(d);
            const tenso_kind want = d <= 15 ? TENSO_KIND_DENSE : d <= 19 ? TENSO_KIND_QUANTIZED : TENSO_KIND_STRING;
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, want, tenso_dtype_kind(d));
            const uint32_t bits = d <= 15 ? uint32_t(8 * tenso_dtype_itemsize(d)) : d <= 17 ? 8u : d <= 19 ? 4u : 0u;
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, bits, tenso_dtype_bits(d));
        }
        CPPUNIT_ASSERT_EQUAL(uint32_t(16), tenso_dtype_bits(TENSO_DTYPE_BFLOAT16));
        CPPUNIT_ASSERT_EQUAL(uint32_t(128), tenso_dtype_bits(TENSO_DTYPE_COMPLEX128));
        for (uint32_t past : {21u, 22u, 1000u, UINT32_MAX}) CPPUNIT_ASSERT_EQUAL(tenso_dtype(0), tenso_dtype_at(past));
        for (tenso_dtype c : {0, 22, 99, -1}) {
            CPPUNIT_ASSERT_EQUAL(tenso_kind(0), tenso_dtype_kind(c));
            CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_dtype_bits(c));
        }

        const char *kinds[] = {"dense",     "bundle", "sparse_coo", "sparse_csr", "sparse_csc",
                               "quantized", "string", "ragged",     "gpu_ipc_ref"};
        CPPUNIT_ASSERT_EQUAL(uint32_t(9), tenso_kind_count());
        for (uint32_t i = 0; i < tenso_kind_count(); ++i) {
            const tenso_kind k = tenso_kind_at(i);
            CPPUNIT_ASSERT_EQUAL(tenso_kind(i + 1), k);
            CPPUNIT_ASSERT_EQUAL(std::string(kinds[i]), std::string(tenso_kind_name(k)));
            tenso_kind back = 0;
            TENSO_CHECK_OK(tenso_kind_from_name(&back, kinds[i]));
            CPPUNIT_ASSERT_EQUAL(k, back);
        }
        CPPUNIT_ASSERT_EQUAL(TENSO_KIND_GPU_IPC_REF, tenso_kind_at(8));
        CPPUNIT_ASSERT_EQUAL(tenso_kind(0), tenso_kind_at(9));
        for (tenso_kind c : {0, 10, -1}) CPPUNIT_ASSERT_EQUAL(std::string("unknown"), std::string(tenso_kind_name(c)));
        tenso_kind k = 77;
        for (const char *bad : {"unknown", "", "Dense", "sparse", "dense "})
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_kind_from_name(&k, bad));
        CPPUNIT_ASSERT_EQUAL(tenso_kind(77), k);  // untouched on failure
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_kind_from_name(nullptr, "dense"));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_kind_from_name(&k, nullptr));
    }

    void testIntegrityFooterKnownValue() {
        int32_t a[8];
        for (int i = 0; i < 8; ++i) a[i] = i;
        uint64_t s8[1] = {8};
        tenso_tensor t = {a, sizeof a, s8, 1, TENSO_DTYPE_INT32};
        tenso_encode_options o = opts(TENSO_ENCODE_INTEGRITY, 0);
        Bytes p = encode(t, &o);
        CPPUNIT_ASSERT_EQUAL(size_t(104), p.size());
        CPPUNIT_ASSERT_EQUAL(uint8_t(0x03), p[5]);  // ALIGNED | INTEGRITY
        const uint8_t footer[8] = {0x71, 0xe0, 0x70, 0x3c, 0x18, 0x75, 0xe6, 0x43};
        CPPUNIT_ASSERT_MESSAGE("footer: " + hex(p.data() + 0x60, 8), std::memcmp(p.data() + 0x60, footer, 8) == 0);
        assert_bytes("i32 arange(8) + integrity", golden("dense_i32_integrity"), p);

        // Footer right after the body (no padding) with custom alignment too.
        double f[6] = {0.5, -2, 3.25, 0.001, 6, -7.5};
        uint64_t s23[2] = {2, 3};
        tenso_tensor tf = {f, sizeof f, s23, 2, TENSO_DTYPE_FLOAT64};
        tenso_encode_options o128 = opts(TENSO_ENCODE_INTEGRITY, 128);
        assert_bytes("f64[2,3] align 128 + integrity", golden("integrity_f64_align128"), encode(tf, &o128));

        float sc = -0.75f;
        tenso_tensor ts = {&sc, sizeof sc, nullptr, 0, TENSO_DTYPE_FLOAT32};
        assert_bytes("f32 scalar + integrity", golden("integrity_f32_scalar"), encode(ts, &o));
    }

    // Run in a child process: a footer over no bytes at all is an edge the hashing loop can get
    // wrong badly enough to crash, and that must fail this test only.
    void testIntegrityFooterOfEmptyBody() {
        std::string failure = run_isolated([] {
            // XXH3-64 of zero bytes, seed 0, is 0x2D06800538D394C2.
            uint64_t s0[1] = {0};
            tenso_tensor t = {nullptr, 0, s0, 1, TENSO_DTYPE_FLOAT32};
            tenso_encode_options o = opts(TENSO_ENCODE_INTEGRITY, 0);
            Bytes p = encode(t, &o);
            CPPUNIT_ASSERT_EQUAL(size_t(72), p.size());
            CPPUNIT_ASSERT_EQUAL(uint64_t(0x2D06800538D394C2ull), rd64(p.data() + 64));
            tenso_view *v = nullptr;
            TENSO_CHECK_OK(tenso_loads(&v, p.data(), p.size(), nullptr));
            tenso_view_free(v);
            // Empty bodies inside a bundle get the same footer.
            tenso_value *leaf = nullptr, *b = nullptr;
            TENSO_CHECK_OK(tenso_value_new_tensor(&leaf, &t));
            TENSO_CHECK_OK(tenso_value_new_bundle(&b));
            TENSO_CHECK_OK(tenso_bundle_insert(b, "e", 1, leaf));
            tenso_buffer buf = TENSO_BUFFER_INIT;
            TENSO_CHECK_OK(tenso_value_dumps(&buf, b, &o));
            tenso_value_free(leaf);
            tenso_value_free(b);
            Bytes bp(buf.data, buf.data + buf.size);
            tenso_buffer_dispose(&buf);
            CPPUNIT_ASSERT_EQUAL(size_t(10 + 4 + 1 + 4 + 72), bp.size());
            CPPUNIT_ASSERT_EQUAL(uint64_t(0x2D06800538D394C2ull), rd64(bp.data() + bp.size() - 8));
        });
        CPPUNIT_ASSERT_MESSAGE(failure, failure.empty());
    }

    void testBoundEqualsWrittenUncompressed() {
        std::vector<uint8_t> data(3 * 5 * 7 * 8, 0x5a);
        uint64_t shape[3] = {3, 5, 7};
        tenso_tensor t = {data.data(), data.size(), shape, 3, TENSO_DTYPE_FLOAT64};
        for (uint32_t a : {0u, 1u, 2u, 8u, 64u, 256u, 4096u}) {
            for (uint32_t f : {0u, unsigned(TENSO_ENCODE_INTEGRITY)}) {
                tenso_encode_options o = opts(f, a);
                size_t bound = 0, n = 0;
                TENSO_CHECK_OK(tenso_dumps_bound(&bound, &t, &o));
                Bytes out(bound + 16);
                TENSO_CHECK_OK(tenso_dumps_into(out.data(), out.size(), &n, &t, &o));
                CPPUNIT_ASSERT_EQUAL(bound, n);
                // header + shape + (exponent) padded to the alignment, body, footer.
                size_t al = a ? a : 64, h = 10 + 12 + (al != 64 ? 1 : 0);
                size_t body = (h + al - 1) / al * al;
                CPPUNIT_ASSERT_EQUAL(body + data.size() + (f ? 8 : 0), n);
            }
        }
    }

    void testBufferTooSmall() {
        tenso_tensor t = f32_five();
        for (uint32_t f : {0u, unsigned(TENSO_ENCODE_INTEGRITY), unsigned(TENSO_ENCODE_COMPRESS)}) {
            tenso_encode_options o = opts(f, 0);
            size_t need = 0;
            {
                Bytes exact = encode(t, &o);
                need = exact.size();
            }
            for (size_t cap : {size_t(0), size_t(1), size_t(10), size_t(64), need - 1}) {
                Bytes buf(need + 64, 0xEE);  // guard bytes everywhere past `cap`
                size_t written = 12345;
                TENSO_CHECK_STATUS(TENSO_E_BUFFER_TOO_SMALL, tenso_dumps_into(buf.data(), cap, &written, &t, &o));
                // The needed size (exact here; at least the real size when compressing).
                if (f & TENSO_ENCODE_COMPRESS) CPPUNIT_ASSERT(written >= need);
                else CPPUNIT_ASSERT_EQUAL(need, written);
                for (size_t i = cap; i < buf.size(); ++i)
                    CPPUNIT_ASSERT_MESSAGE(
                        "byte " + std::to_string(i) + " past capacity " + std::to_string(cap) + " was written",
                        buf[i] == 0xEE);
                // Retrying with the reported size succeeds.
                Bytes again(written);
                size_t n2 = 0;
                TENSO_CHECK_OK(tenso_dumps_into(again.data(), again.size(), &n2, &t, &o));
                CPPUNIT_ASSERT_EQUAL(need, n2);
            }
            // Exactly the size needed is enough, and nothing past it is touched.
            Bytes buf(need + 32, 0xEE);
            size_t n = 0;
            TENSO_CHECK_OK(tenso_dumps_into(buf.data(), need, &n, &t, &o));
            CPPUNIT_ASSERT_EQUAL(need, n);
            for (size_t i = need; i < buf.size(); ++i) CPPUNIT_ASSERT_EQUAL(uint8_t(0xEE), buf[i]);
        }
    }

    void testNullDestinationQueriesSize() {
        tenso_tensor t = f32_five();
        size_t written = 0;
        TENSO_CHECK_STATUS(TENSO_E_BUFFER_TOO_SMALL, tenso_dumps_into(nullptr, 0, &written, &t, nullptr));
        CPPUNIT_ASSERT_EQUAL(size_t(84), written);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dumps_into(nullptr, 100, &written, &t, nullptr));
        uint8_t buf[128];
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dumps_into(buf, sizeof buf, nullptr, &t, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dumps_into(buf, sizeof buf, &written, nullptr, nullptr));
        size_t bound = 0;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dumps_bound(nullptr, &t, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dumps_bound(&bound, nullptr, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dumps(nullptr, &t, nullptr));
        tenso_buffer b = TENSO_BUFFER_INIT;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dumps(&b, nullptr, nullptr));
        CPPUNIT_ASSERT(b.data == nullptr);
    }

    void testAllocatingEncoder() {
        tenso_tensor t = f32_five();
        tenso_buffer b = TENSO_BUFFER_INIT;
        TENSO_CHECK_OK(tenso_dumps(&b, &t, nullptr));
        CPPUNIT_ASSERT(b.data != nullptr);
        CPPUNIT_ASSERT_EQUAL(uintptr_t(0), reinterpret_cast<uintptr_t>(b.data) % 64);
        CPPUNIT_ASSERT_EQUAL(size_t(84), b.size);
        assert_bytes("tenso_dumps", golden("dense_f32_vec"), Bytes(b.data, b.data + b.size));
        // The body is 64-aligned in memory because the buffer is.
        CPPUNIT_ASSERT_EQUAL(uintptr_t(0), reinterpret_cast<uintptr_t>(b.data + 64) % 64);

        // Encoding into a used buffer replaces its contents (the old ones are disposed of).
        tenso_encode_options o = opts(TENSO_ENCODE_INTEGRITY, 4096);
        TENSO_CHECK_OK(tenso_dumps(&b, &t, &o));
        CPPUNIT_ASSERT_EQUAL(size_t(4096 + 20 + 8), b.size);
        CPPUNIT_ASSERT_EQUAL(uintptr_t(0), reinterpret_cast<uintptr_t>(b.data) % 64);
        CPPUNIT_ASSERT(std::memcmp(b.data + 4096, kF32Five, 20) == 0);

        // A failing encode leaves the buffer as it was.
        tenso_buffer before = b;
        tenso_encode_options bad = opts(0, 3);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dumps(&b, &t, &bad));
        CPPUNIT_ASSERT(b.data == before.data);
        CPPUNIT_ASSERT_EQUAL(before.size, b.size);

        tenso_buffer_dispose(&b);
        CPPUNIT_ASSERT(b.data == nullptr);
        CPPUNIT_ASSERT_EQUAL(size_t(0), b.size);
        CPPUNIT_ASSERT_EQUAL(size_t(0), b.reserved);

        // dumps and dumps_into agree byte for byte.
        tenso_encode_options oc = opts(TENSO_ENCODE_COMPRESS | TENSO_ENCODE_INTEGRITY, 16);
        TENSO_CHECK_OK(tenso_dumps(&b, &t, &oc));
        assert_bytes("dumps vs dumps_into", encode(t, &oc), Bytes(b.data, b.data + b.size));
        tenso_buffer_dispose(&b);
    }

    void testOptionValidation() {
        tenso_tensor t = f32_five();
        std::vector<tenso_encode_options> bad;
        for (uint32_t v : {0u, 3u, 0xFFFFFFFFu}) {
            tenso_encode_options o = opts(0, 0);
            o.version = v;
            bad.push_back(o);
        }
        for (uint32_t a : {3u, 6u, 96u, 100u, 65535u, (1u << 21), (1u << 31), 0xFFFFFFFFu}) bad.push_back(opts(0, a));
        for (uint32_t f : {0x4u, 0x8u, 0x80000000u, 0x7u}) bad.push_back(opts(f, 0));
        for (const auto &o : bad) {
            std::string what = "version " + std::to_string(o.version) + " flags " + std::to_string(o.flags) +
                               " alignment " + std::to_string(o.alignment);
            size_t n = 0;
            uint8_t buf[256];
            tenso_buffer b = TENSO_BUFFER_INIT;
            tenso_status s1 = tenso_dumps_bound(&n, &t, &o);
            tenso_status s2 = tenso_dumps_into(buf, sizeof buf, &n, &t, &o);
            tenso_status s3 = tenso_dumps(&b, &t, &o);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(what, TENSO_E_INVALID_ARGUMENT, s1);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(what, TENSO_E_INVALID_ARGUMENT, s2);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(what, TENSO_E_INVALID_ARGUMENT, s3);
            CPPUNIT_ASSERT(tenso_last_error()[0] != '\0');
            CPPUNIT_ASSERT(b.data == nullptr);
        }
        // Every power of two up to 2^20 is accepted.
        for (unsigned e = 0; e <= 20; ++e) {
            tenso_encode_options o = opts(0, 1u << e);
            size_t n = 0;
            TENSO_CHECK_OK(tenso_dumps_bound(&n, &t, &o));
        }
    }

    void testTensorValidation() {
        float f[6] = {};
        uint64_t s23[2] = {2, 3};
        size_t n = 0;
        uint8_t buf[512];

        // nbytes must be exactly shape x itemsize.
        for (uint64_t nb : {uint64_t(0), uint64_t(23), uint64_t(25), uint64_t(48)}) {
            tenso_tensor t = {f, nb, s23, 2, TENSO_DTYPE_FLOAT32};
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dumps_into(buf, sizeof buf, &n, &t, nullptr));
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dumps_bound(&n, &t, nullptr));
        }
        // Each dimension must fit the wire's u32.
        {
            uint64_t big[1] = {uint64_t(1) << 32};
            tenso_tensor t = {f, uint64_t(1) << 32, big, 1, TENSO_DTYPE_UINT8};
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dumps_into(buf, sizeof buf, &n, &t, nullptr));
            uint64_t big2[2] = {0, ~uint64_t(0)};
            tenso_tensor t2 = {nullptr, 0, big2, 2, TENSO_DTYPE_UINT8};
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dumps_into(buf, sizeof buf, &n, &t2, nullptr));
        }
        // ndim 33.
        {
            uint64_t ones[33];
            for (auto &d : ones) d = 1;
            tenso_tensor t = {f, 4, ones, 33, TENSO_DTYPE_FLOAT32};
            TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_DIMS, tenso_dumps_into(buf, sizeof buf, &n, &t, nullptr));
            TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_DIMS, tenso_dumps_bound(&n, &t, nullptr));
            tenso_buffer b = TENSO_BUFFER_INIT;
            TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_DIMS, tenso_dumps(&b, &t, nullptr));
            tenso_tensor t255 = {f, 4, ones, 255, TENSO_DTYPE_FLOAT32};  // shape array is never read past 32
            t255.shape = nullptr;
            TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_DIMS, tenso_dumps_bound(&n, &t255, nullptr));
        }
        // Dtypes that are not dense.
        for (tenso_dtype d : {0, 16, 17, 18, 19, 20, 21, 22, 99, -1}) {
            tenso_tensor t = {f, 6, s23, 2, d};
            TENSO_CHECK_STATUS(TENSO_E_BAD_DTYPE, tenso_dumps_into(buf, sizeof buf, &n, &t, nullptr));
            TENSO_CHECK_STATUS(TENSO_E_BAD_DTYPE, tenso_dumps_bound(&n, &t, nullptr));
        }
        // NULL data with a non-empty body; NULL shape with ndim > 0.
        {
            tenso_tensor t = {nullptr, 24, s23, 2, TENSO_DTYPE_FLOAT32};
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dumps_into(buf, sizeof buf, &n, &t, nullptr));
            tenso_tensor t2 = {f, 24, nullptr, 2, TENSO_DTYPE_FLOAT32};
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dumps_into(buf, sizeof buf, &n, &t2, nullptr));
        }
        // More than 1e9 elements (the count is checked before nbytes is compared).
        {
            uint64_t huge[2] = {100000, 100000};
            tenso_tensor t = {f, 10000000000ull, huge, 2, TENSO_DTYPE_UINT8};
            TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_ELEMENTS, tenso_dumps_bound(&n, &t, nullptr));
        }
        // Nothing was written by any of the failures above: a valid call still fits.
        tenso_tensor ok = {f, 24, s23, 2, TENSO_DTYPE_FLOAT32};
        TENSO_CHECK_OK(tenso_dumps_into(buf, sizeof buf, &n, &ok, nullptr));
        CPPUNIT_ASSERT_EQUAL(size_t(88), n);
    }

    void testZeroSizeDims() {
        uint64_t s0[1] = {0};
        tenso_tensor t0 = {nullptr, 0, s0, 1, TENSO_DTYPE_FLOAT32};
        Bytes p0 = encode(t0);
        CPPUNIT_ASSERT_EQUAL(size_t(64), p0.size());
        assert_bytes("f32[0]", golden("dense_f32_empty_0"), p0);

        uint64_t s203[3] = {2, 0, 3};
        tenso_tensor t1 = {nullptr, 0, s203, 3, TENSO_DTYPE_FLOAT64};
        assert_bytes("f64[2,0,3]", golden("dense_f64_empty_2x0x3"), encode(t1));

        // A non-NULL data pointer is fine too, and so is a huge dim next to a zero one.
        float dummy = 0;
        uint64_t sbig[2] = {0, 0xFFFFFFFFull};
        tenso_tensor t2 = {&dummy, 0, sbig, 2, TENSO_DTYPE_FLOAT32};
        Bytes p2 = encode(t2);
        CPPUNIT_ASSERT_EQUAL(size_t(64), p2.size());
        const uint8_t dims[8] = {0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
        CPPUNIT_ASSERT(std::memcmp(p2.data() + 10, dims, 8) == 0);
    }

    void testNdim32() {
        uint64_t ones[32];
        for (auto &d : ones) d = 1;
        float one = 1.0f;
        tenso_tensor t = {&one, 4, ones, 32, TENSO_DTYPE_FLOAT32};
        Bytes p = encode(t);
        CPPUNIT_ASSERT_EQUAL(size_t(196), p.size());  // 10 + 128 = 138 -> 192, + 4
        CPPUNIT_ASSERT_EQUAL(uint8_t(32), p[8]);
        assert_bytes("f32 ndim 32", golden("dense_f32_ndim32"), p);
    }

    void testCompressionCompressible() {
        std::vector<double> d(4096);
        for (size_t i = 0; i < d.size(); ++i) d[i] = double(i % 48);
        uint64_t shape[2] = {64, 64};
        tenso_tensor t = {d.data(), d.size() * 8, shape, 2, TENSO_DTYPE_FLOAT64};
        tenso_encode_options o = opts(TENSO_ENCODE_COMPRESS, 0);
        size_t bound = 0;
        TENSO_CHECK_OK(tenso_dumps_bound(&bound, &t, &o));
        Bytes p = encode(t, &o);
        CPPUNIT_ASSERT(bound >= p.size());
        CPPUNIT_ASSERT_MESSAGE("compressed size " + std::to_string(p.size()), p.size() < 64 + d.size() * 8 / 4);
        CPPUNIT_ASSERT_EQUAL(uint8_t(0x05), p[5]);  // ALIGNED | COMPRESSION
        const uint8_t lz4_magic[4] = {0x04, 0x22, 0x4d, 0x18};
        CPPUNIT_ASSERT(std::memcmp(p.data() + 64, lz4_magic, 4) == 0);

        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_loads(&v, p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint64_t(d.size() * 8), tenso_view_nbytes(v));
        CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v), d.data(), d.size() * 8) == 0);
        CPPUNIT_ASSERT_EQUAL(uint64_t(p.size()), tenso_view_packet_size(v));
        tenso_view_free(v);

        // Deterministic, and every compression level gives a decodable packet.
        assert_bytes("compress twice", p, encode(t, &o));
        for (int level : {-5, 1, 3, 9, 12}) {
            o.compression_level = level;
            Bytes q = encode(t, &o);
            TENSO_CHECK_OK(tenso_loads(&v, q.data(), q.size(), nullptr));
            CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v), d.data(), d.size() * 8) == 0);
            tenso_view_free(v);
        }
    }

    void testCompressionIncompressibleAndEmpty() {
        std::mt19937_64 rng(7);
        std::vector<uint8_t> d(70000);
        for (auto &b : d) b = uint8_t(rng());
        uint64_t shape[1] = {d.size()};
        tenso_tensor t = {d.data(), d.size(), shape, 1, TENSO_DTYPE_UINT8};
        tenso_encode_options o = opts(TENSO_ENCODE_COMPRESS, 0);
        size_t bound = 0;
        TENSO_CHECK_OK(tenso_dumps_bound(&bound, &t, &o));
        Bytes p = encode(t, &o);
        CPPUNIT_ASSERT(bound >= p.size());
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_loads(&v, p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint64_t(d.size()), tenso_view_nbytes(v));
        CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v), d.data(), d.size()) == 0);
        tenso_view_free(v);

        uint64_t s0[1] = {0};
        tenso_tensor te = {nullptr, 0, s0, 1, TENSO_DTYPE_FLOAT32};
        Bytes e = encode(te, &o);
        TENSO_CHECK_OK(tenso_dumps_bound(&bound, &te, &o));
        CPPUNIT_ASSERT(bound >= e.size());
        TENSO_CHECK_OK(tenso_loads(&v, e.data(), e.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), tenso_view_nbytes(v));
        CPPUNIT_ASSERT_EQUAL(uint64_t(e.size()), tenso_view_packet_size(v));
        tenso_view_free(v);
    }

    void testCompressionWithIntegrity() {
        std::vector<float> d(1024, 0.0f);
        uint64_t shape[1] = {1024};
        tenso_tensor t = {d.data(), 4096, shape, 1, TENSO_DTYPE_FLOAT32};
        tenso_encode_options o = opts(TENSO_ENCODE_COMPRESS | TENSO_ENCODE_INTEGRITY, 128);
        Bytes p = encode(t, &o);
        CPPUNIT_ASSERT_EQUAL(uint8_t(0x86), p[5]);  // CUST_ALIGN | COMPRESSION | INTEGRITY
        CPPUNIT_ASSERT_EQUAL(uint8_t(7), p[14]);
        CPPUNIT_ASSERT(p.size() < 128 + 4096);
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_loads(&v, p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v), d.data(), 4096) == 0);
        CPPUNIT_ASSERT_EQUAL(uint32_t(128), tenso_view_alignment(v));
        tenso_view_free(v);
        // The footer covers the compressed bytes: flipping the last byte of the LZ4 block
        // (before the 4-byte end mark and the footer) is caught before decompression.
        p[p.size() - 8 - 4 - 1] ^= 0x01;
        TENSO_CHECK_STATUS(TENSO_E_CHECKSUM, tenso_loads(&v, p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT(v == nullptr);
    }

    // Upstream's frame shape: magic, FLG 0x60 (independent blocks, nothing optional), BD 0x70
    // (4 MiB blocks), header checksum 0x73, one block, end mark. Upstream decodes these bytes
    // (sdk/python/tests/test_interop_upstream.py, test_upstream_decodes_our_lz4_frames).
    void testLz4FrameGolden() {
        float d[64];
        for (int i = 0; i < 64; ++i) d[i] = float(i % 5);
        uint64_t shape[1] = {64};
        tenso_tensor t = {d, sizeof d, shape, 1, TENSO_DTYPE_FLOAT32};
        tenso_encode_options o = opts(TENSO_ENCODE_COMPRESS, 0);
        Bytes p = encode(t, &o);
        const Bytes want_body = {0x04, 0x22, 0x4d, 0x18, 0x60, 0x70, 0x73, 0x1f, 0x00, 0x00, 0x00, 0x11,
                                 0x00, 0x01, 0x00, 0xe1, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00,
                                 0x40, 0x40, 0x00, 0x00, 0x80, 0x40, 0x13, 0x00, 0x0f, 0x14, 0x00, 0xcf,
                                 0x50, 0x40, 0x00, 0x00, 0x40, 0x40, 0x00, 0x00, 0x00, 0x00};
        assert_bytes("LZ4 frame", want_body, Bytes(p.begin() + 64, p.end()));
    }

    // 9 MiB + 4 bytes: two full 4 MiB blocks and a short one; the middle block is random
    // (stored raw), the others compress. Every thread count writes the same bytes, and every
    // thread count decodes them.
    struct Mixed {
        Bytes d;
        uint64_t shape[1];
        tenso_tensor t;
        Mixed() : d((size_t(9) << 20) + 4), shape{d.size()} {
            std::mt19937_64 rng(11);
            for (size_t i = 0; i < d.size(); ++i)
                d[i] = (i >> 22) == 1 ? uint8_t(rng()) : uint8_t((i * 7) % 251 ^ (i >> 12));
            t = tenso_tensor{d.data(), d.size(), shape, 1, TENSO_DTYPE_UINT8};
        }
        Mixed(const Mixed &) = delete;  // t points into this object
        // The packet compressed with default options.
        Bytes packet() const {
            tenso_encode_options o = opts(TENSO_ENCODE_COMPRESS, 0);
            return encode(t, &o);
        }
    };

    void testLz4SameBytesOnEveryThreadCount() {
        const Mixed m;
        const Bytes &d = m.d;
        const tenso_tensor &t = m.t;
        tenso_encode_options o = opts(TENSO_ENCODE_COMPRESS, 0);
        for (int level : {0, 3}) {
            o.compression_level = level;
            o.threads = 1;
            const Bytes one = encode(t, &o);
            for (uint32_t threads : {2u, 4u, 0u}) {
                o.threads = threads;
                assert_bytes("threads=" + std::to_string(threads) + " level " + std::to_string(level), one,
                             encode(t, &o));
                tenso_buffer b = {nullptr, 0, 0};
                TENSO_CHECK_OK(tenso_dumps(&b, &t, &o));  // the allocating sink too
                CPPUNIT_ASSERT(Bytes(b.data, b.data + b.size) == one);
                tenso_buffer_dispose(&b);
            }
            for (uint32_t threads : {1u, 2u, 4u, 0u}) {
                tenso_decode_options dopt = TENSO_DECODE_OPTIONS_INIT;
                dopt.threads = threads;
                tenso_view *v = nullptr;
                TENSO_CHECK_OK(tenso_loads(&v, one.data(), one.size(), &dopt));
                CPPUNIT_ASSERT_EQUAL(uint64_t(d.size()), tenso_view_nbytes(v));
                CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v), d.data(), d.size()) == 0);
                tenso_view_free(v);
            }
        }
    }

    // A bundle of compressed bodies with footers, written four ways: compressed straight into a
    // buffer of the bound (bundle lengths filled in afterwards), into a buffer of exactly the
    // packet (compressed aside, then copied), to a file descriptor, and by the allocating sink.
    void testLz4InPlaceSameBytesAsCompressedAside() {
        const Mixed m;
        float small[300];
        for (int i = 0; i < 300; ++i) small[i] = float(i % 7);
        uint64_t s300[1] = {300};
        const tenso_tensor ts = {small, sizeof small, s300, 1, TENSO_DTYPE_FLOAT32};
        tenso_value *a = nullptr, *b = nullptr, *bundle = nullptr;
        TENSO_CHECK_OK(tenso_value_new_tensor(&a, &m.t));
        TENSO_CHECK_OK(tenso_value_new_tensor(&b, &ts));
        TENSO_CHECK_OK(tenso_value_new_bundle(&bundle));
        TENSO_CHECK_OK(tenso_bundle_insert(bundle, "a", 1, a));
        TENSO_CHECK_OK(tenso_bundle_insert(bundle, "b", 1, b));
        TENSO_CHECK_OK(tenso_bundle_insert(bundle, "a2", 2, a));
        tenso_encode_options o = opts(TENSO_ENCODE_COMPRESS | TENSO_ENCODE_INTEGRITY, 0);
        o.threads = 2;
        size_t bound = 0, n = 0, n2 = 0;
        TENSO_CHECK_OK(tenso_value_dumps_bound(&bound, bundle, &o));
        Bytes direct(bound);
        TENSO_CHECK_OK(tenso_value_dumps_into(direct.data(), direct.size(), &n, bundle, &o));
        CPPUNIT_ASSERT(n < bound);
        direct.resize(n);
        Bytes exact(n);
        TENSO_CHECK_OK(tenso_value_dumps_into(exact.data(), exact.size(), &n2, bundle, &o));
        CPPUNIT_ASSERT_EQUAL(n, n2);
        assert_bytes("in place vs compressed aside", exact, direct);
        Bytes small_dst(n - 1);
        TENSO_CHECK_STATUS(TENSO_E_BUFFER_TOO_SMALL,
                           tenso_value_dumps_into(small_dst.data(), small_dst.size(), &n2, bundle, &o));
        CPPUNIT_ASSERT_EQUAL(n, n2);  // what it needs, exactly
        tenso_buffer buf = {nullptr, 0, 0};
        TENSO_CHECK_OK(tenso_value_dumps(&buf, bundle, &o));
        assert_bytes("allocating sink", direct, Bytes(buf.data, buf.data + buf.size));
        tenso_buffer_dispose(&buf);
        FILE *f = std::tmpfile();
        CPPUNIT_ASSERT(f);
        TENSO_CHECK_OK(tenso_value_write_fd(nullptr, fileno(f), bundle, &o));
        Bytes via_fd(n + 1);
        CPPUNIT_ASSERT_EQUAL(ssize_t(n), ::pread(fileno(f), via_fd.data(), via_fd.size(), 0));
        std::fclose(f);
        via_fd.resize(n);
        assert_bytes("file descriptor sink", direct, via_fd);
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_loads(&v, direct.data(), direct.size(), nullptr));  // footers verified
        for (const char *key : {"a", "a2"}) {
            const tenso_view *c = nullptr;
            TENSO_CHECK_OK(tenso_view_bundle_find(&c, v, key, std::strlen(key)));
            CPPUNIT_ASSERT_EQUAL(uint64_t(m.d.size()), tenso_view_nbytes(c));
            CPPUNIT_ASSERT(std::memcmp(tenso_view_data(c), m.d.data(), m.d.size()) == 0);
        }
        const tenso_view *c = nullptr;
        TENSO_CHECK_OK(tenso_view_bundle_find(&c, v, "b", 1));
        CPPUNIT_ASSERT(std::memcmp(tenso_view_data(c), small, sizeof small) == 0);
        tenso_view_free(v);
        tenso_value_free(a);
        tenso_value_free(b);
        tenso_value_free(bundle);
    }

    // Block sizes as written: 4 MiB blocks, the random one stored raw (high bit), end mark last.
    void testLz4FrameLayoutOfLargeBodies() {
        const Bytes p = Mixed().packet();
        const uint8_t head[7] = {0x04, 0x22, 0x4d, 0x18, 0x60, 0x70, 0x73};
        CPPUNIT_ASSERT(std::memcmp(p.data() + 64, head, 7) == 0);
        size_t pos = 64 + 7;
        std::vector<uint32_t> words;
        for (;;) {
            const uint32_t w = uint32_t(rd64(p.data() + pos) & 0xffffffffu);
            pos += 4;
            if (!w) break;
            words.push_back(w);
            pos += w & 0x7fffffffu;
        }
        CPPUNIT_ASSERT_EQUAL(p.size(), pos);
        CPPUNIT_ASSERT_EQUAL(size_t(3), words.size());
        CPPUNIT_ASSERT(words[0] < (1u << 22));                               // compressed
        CPPUNIT_ASSERT_EQUAL(uint32_t(0x80000000u | (1u << 22)), words[1]);  // stored raw
        CPPUNIT_ASSERT(words[2] < (1u << 20));                               // the last 1 MiB + 4, compressed
    }

    static tenso_status load(const Bytes &p, uint32_t threads) {
        tenso_decode_options dopt = TENSO_DECODE_OPTIONS_INIT;
        dopt.threads = threads;
        tenso_view *v = nullptr;
        tenso_status st = tenso_loads(&v, p.data(), p.size(), &dopt);
        tenso_view_free(v);
        return st;
    }

    void testLz4HostileFrames() {
        const Bytes p = Mixed().packet();
        tenso_encode_options o = opts(TENSO_ENCODE_COMPRESS, 0);
        const size_t b0 = 64 + 7, len0 = uint32_t(rd64(p.data() + b0) & 0x7fffffffu);
        for (uint32_t threads : {1u, 2u}) {
            Bytes q = p;
            q.resize(q.size() - 4);                                   // no end mark
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, load(q, threads));  // the framing sees it first
            q = p;
            q.insert(q.begin() + long(b0 + 4 + len0), {0, 0, 0, 0});  // an end mark after block 0
            TENSO_CHECK_STATUS(TENSO_E_COMPRESSION, load(q, threads));
            q = p;
            q[64 + 6] ^= 0x01;  // header checksum
            TENSO_CHECK_STATUS(TENSO_E_COMPRESSION, load(q, threads));
            // Compressed data that asks for a match before the start of its block.
            q = p;
            q[b0 + 4] = 0x0f;  // 0 literals, match; offset 0xffff is out of range
            q[b0 + 5] = 0xff;
            q[b0 + 6] = 0xff;
            TENSO_CHECK_STATUS(TENSO_E_COMPRESSION, load(q, threads));
        }
        // A valid frame whose middle block is short (raw 100 bytes, then the rest): not the
        // block-parallel layout, so liblz4's frame decoder takes it, and it decodes.
        Bytes small(5000);
        for (size_t i = 0; i < small.size(); ++i) small[i] = uint8_t(i * 13);
        uint64_t s1[1] = {small.size()};
        tenso_tensor ts = {small.data(), small.size(), s1, 1, TENSO_DTYPE_UINT8};
        Bytes q = encode(ts, &o);
        q.resize(64);
        const uint8_t head[7] = {0x04, 0x22, 0x4d, 0x18, 0x60, 0x70, 0x73};
        q.insert(q.end(), head, head + 7);
        for (size_t cut : {size_t(0), size_t(100)}) {
            const size_t n = cut ? small.size() - cut : cut + 100;
            const uint32_t w = 0x80000000u | uint32_t(n);
            for (int k = 0; k < 4; ++k) q.push_back(uint8_t(w >> (8 * k)));
            const size_t from = cut ? 100 : 0;
            q.insert(q.end(), small.begin() + long(from), small.begin() + long(from + n));
        }
        for (int k = 0; k < 4; ++k) q.push_back(0);
        for (uint32_t threads : {1u, 2u}) {
            tenso_decode_options dopt = TENSO_DECODE_OPTIONS_INIT;
            dopt.threads = threads;
            tenso_view *v = nullptr;
            TENSO_CHECK_OK(tenso_loads(&v, q.data(), q.size(), &dopt));
            CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v), small.data(), small.size()) == 0);
            tenso_view_free(v);
        }
    }

    // A version 1 struct (no threads field) is still read, and init writes only its 16 bytes.
    // tenso_dumps_into writes an uncompressed tensor without a plan (1.5): its bytes, sizes and
    // BUFFER_TOO_SMALL answers are those of the plan path (tenso_value_dumps_into of the same
    // tensor), for every ndim up to 32, alignments from 1 to 4096, with and without integrity,
    // empty tensors and bodies past the one-pass hashing threshold.
    void testDirectTensorPathMatchesPlan() {
        std::mt19937 rng(25);
        for (uint32_t ndim : {0u, 1u, 2u, 5u, 32u}) {
            for (uint64_t n : {uint64_t(0), uint64_t(1), uint64_t(3), uint64_t(5000)}) {
                std::vector<uint64_t> shape(ndim, 1);
                if (ndim) shape[0] = n;
                const uint64_t count = ndim ? n : 1;
                std::vector<uint16_t> data(count + 1);
                for (auto &x : data) x = uint16_t(rng());
                const tenso_tensor t = {data.data(), count * 2, ndim ? shape.data() : nullptr, ndim,
                                        TENSO_DTYPE_UINT16};
                tenso_value *v = nullptr;
                TENSO_CHECK_OK(tenso_value_new_tensor(&v, &t));
                for (uint32_t flags : {0u, uint32_t(TENSO_ENCODE_INTEGRITY)}) {
                    for (uint32_t align : {0u, 1u, 8u, 64u, 4096u}) {
                        tenso_encode_options o = TENSO_ENCODE_OPTIONS_INIT;
                        o.flags = flags;
                        o.alignment = align;
                        const std::string what = "ndim " + std::to_string(ndim) + " n " + std::to_string(n) +
                                                 " flags " + std::to_string(flags) + " align " + std::to_string(align);
                        Bytes a(count * 2 + 8192, 0xEE), b(a.size(), 0xEE);
                        size_t wa = 0, wb = 0;
                        TENSO_CHECK_OK(tenso_dumps_into(a.data(), a.size(), &wa, &t, &o));
                        TENSO_CHECK_OK(tenso_value_dumps_into(b.data(), b.size(), &wb, v, &o));
                        CPPUNIT_ASSERT_EQUAL_MESSAGE(what, wb, wa);
                        CPPUNIT_ASSERT_MESSAGE(what, a == b);  // the bytes past the packet untouched too
                        size_t need = 0;
                        TENSO_CHECK_STATUS(TENSO_E_BUFFER_TOO_SMALL, tenso_dumps_into(a.data(), wa - 1, &need, &t, &o));
                        CPPUNIT_ASSERT_EQUAL_MESSAGE(what, wa, need);
                    }
                }
                tenso_value_free(v);
            }
        }
        // A body above the 16 KiB hashing chunk, hashed while copied: the footer still matches.
        std::vector<float> big(100000, 0.25f);
        const uint64_t bs[1] = {big.size()};
        const tenso_tensor t = {big.data(), big.size() * 4, bs, 1, TENSO_DTYPE_FLOAT32};
        tenso_encode_options o = TENSO_ENCODE_OPTIONS_INIT;
        o.flags = TENSO_ENCODE_INTEGRITY;
        Bytes p(big.size() * 4 + 128);
        size_t w = 0;
        TENSO_CHECK_OK(tenso_dumps_into(p.data(), p.size(), &w, &t, &o));
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_loads(&v, p.data(), w, nullptr));
        tenso_view_free(v);
    }

    void testEncodeOptionsVersion1() {
        struct V1 {
            uint32_t version, flags, alignment;
            int32_t level;
            uint32_t canary;
        } v1 = {0, 0, 0, 0, 0xdeadbeefu};
        TENSO_CHECK_OK(tenso_encode_options_init(reinterpret_cast<tenso_encode_options *>(&v1), 1));
        CPPUNIT_ASSERT_EQUAL(1u, v1.version);
        CPPUNIT_ASSERT_EQUAL(0xdeadbeefu, v1.canary);
        v1.flags = TENSO_ENCODE_COMPRESS;
        const tenso_tensor t = f32_five();
        tenso_encode_options v2 = opts(TENSO_ENCODE_COMPRESS, 0);
        assert_bytes("v1 options", encode(t, &v2), encode(t, reinterpret_cast<tenso_encode_options *>(&v1)));
        tenso_encode_options bad = opts(0, 0);
        bad.version = 3;
        size_t bound = 0;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_dumps_bound(&bound, &t, &bad));
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiEncodeTest);
