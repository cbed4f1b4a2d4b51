// CapiDecodeTest - decoding through the C API: zero-copy views, exact packet sizes with slack,
// decompression, integrity checks, decode limits, tenso_inspect, tenso_packet_length framing,
// legacy v1-v3 packets and a few upstream v4 packets.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <cppunit/extensions/HelperMacros.h>

#include "check.hpp"
#include "hostile_util.hpp"
#include "tenso/tenso.h"

namespace {

using Bytes = std::vector<uint8_t>;

Bytes golden(const std::string &name) {
    std::string path = std::string(TENSO_VECTORS_DIR) + "/" + name + ".tenso";
    std::ifstream f(path, std::ios::binary);
    if (!f) CPPUNIT_FAIL("cannot open golden vector " + path);
    return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

Bytes encode(const tenso_tensor &t, uint32_t flags = 0, uint32_t alignment = 0) {
    tenso_encode_options o = TENSO_ENCODE_OPTIONS_INIT;
    o.flags = flags;
    o.alignment = alignment;
    tenso_buffer b = TENSO_BUFFER_INIT;
    TENSO_CHECK_OK(tenso_dumps(&b, &t, &o));
    Bytes out(b.data, b.data + b.size);
    tenso_buffer_dispose(&b);
    return out;
}

// Owns a view for the length of a scope.
struct ViewPtr {
    tenso_view *v = nullptr;
    ~ViewPtr() { tenso_view_free(v); }
    tenso_view **out() {
        tenso_view_free(v);
        v = nullptr;
        return &v;
    }
};

// The golden vectors' names, in directory order (kinds mixed).
std::vector<std::string> golden_names() {
    std::vector<std::string> names;
    if (DIR *d = ::opendir(TENSO_VECTORS_DIR)) {
        while (const dirent *e = ::readdir(d)) {
            const std::string n = e->d_name;
            if (n.size() > 6 && n.compare(n.size() - 6, 6, ".tenso") == 0) names.push_back(n.substr(0, n.size() - 6));
        }
        ::closedir(d);
    }
    CPPUNIT_ASSERT(names.size() > 50);
    return names;
}

const float kF32Five[5] = {1, 2, 3, 4, 5};
const uint64_t kShape5[1] = {5};
const tenso_tensor kTensorF32Five = {kF32Five, sizeof kF32Five, kShape5, 1, TENSO_DTYPE_FLOAT32};

tenso_decode_options dopts() {
    tenso_decode_options o = TENSO_DECODE_OPTIONS_INIT;
    return o;
}

// Checks tenso_packet_length over prefixes of `p`: every prefix shorter than the packet is
// TRUNCATED and asks for more than it has but never more than the packet; feeding exactly what
// is asked for converges to the exact length.
void check_framing(const std::string &name, const Bytes &p, size_t stride = 1) {
    const size_t size = p.size();
    size_t len = 0;
    for (size_t i = 0; i < size; i += stride) {
        tenso_status st = tenso_packet_length(&len, p.data(), i, nullptr);
        CPPUNIT_ASSERT_EQUAL_MESSAGE(name + " prefix " + std::to_string(i), TENSO_E_TRUNCATED, st);
        CPPUNIT_ASSERT_MESSAGE(name + " prefix " + std::to_string(i) + " asks for " + std::to_string(len),
                               len > i && len <= size);
    }
    // The read loop of a stream framer.
    size_t have = 0, rounds = 0;
    for (;;) {
        tenso_status st = tenso_packet_length(&len, have ? p.data() : nullptr, have, nullptr);
        if (st == TENSO_OK) break;
        CPPUNIT_ASSERT_EQUAL_MESSAGE(name + " at " + std::to_string(have), TENSO_E_TRUNCATED, st);
        CPPUNIT_ASSERT(len > have && len <= size);
        have = len;
        CPPUNIT_ASSERT_MESSAGE(name + ": framing does not converge", ++rounds < 100000);
    }
    CPPUNIT_ASSERT_EQUAL_MESSAGE(name, size, len);
    CPPUNIT_ASSERT_EQUAL_MESSAGE(name, size, have);
    // Exact with any amount of slack after it.
    Bytes slack = p;
    slack.insert(slack.end(), 333, 0x5A);
    TENSO_CHECK_OK(tenso_packet_length(&len, slack.data(), slack.size(), nullptr));
    CPPUNIT_ASSERT_EQUAL_MESSAGE(name + " with slack", size, len);
}

// A hand-made v4 dense header: ndim dims of value `dim`, ALIGNED, then zero padding and a body
// of `body` bytes.
Bytes handmade(uint8_t dtype, uint8_t ndim, uint32_t dim, size_t body) {
    Bytes p = {'T', 'N', 'S', 'O', 4, 0x01, 0x00, dtype, ndim, 0};
    for (uint8_t i = 0; i < ndim; ++i) {
        for (int k = 0; k < 4; ++k) p.push_back(uint8_t(dim >> (8 * k)));
    }
    p.resize((p.size() + 63) / 64 * 64, 0);
    p.resize(p.size() + body, 0);
    return p;
}

}  // namespace

class CapiDecodeTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiDecodeTest);
    CPPUNIT_TEST(testZeroCopyView);
    CPPUNIT_TEST(testTrailingSlackIgnored);
    CPPUNIT_TEST(testAccessorsOnNull);
    CPPUNIT_TEST(testArgumentChecks);
    CPPUNIT_TEST(testCompressedOwnsData);
    CPPUNIT_TEST(testForeignLz4Frames);
    CPPUNIT_TEST(testIntegrityVerified);
    CPPUNIT_TEST(testDecodeLimits);
    CPPUNIT_TEST(testLimitsNeverLoosen);
    CPPUNIT_TEST(testUnknownDecodeOptionsVersion);
    CPPUNIT_TEST(testInspectComplete);
    CPPUNIT_TEST(testInspectPartial);
    CPPUNIT_TEST(testInspectBundleAndCompressed);
    CPPUNIT_TEST(testPacketLengthFraming);
    CPPUNIT_TEST(testLegacyPackets);
    CPPUNIT_TEST(testGoldenV4Packets);
    CPPUNIT_TEST(testEmptyAndScalarViews);
    CPPUNIT_TEST(testLoadsTensorAgreesWithLoads);
    CPPUNIT_TEST(testFreedViewIsReused);
    CPPUNIT_TEST(testViewsFreedOnOtherThreads);
    CPPUNIT_TEST_SUITE_END();

public:
    void testZeroCopyView() {
        Bytes p = encode(kTensorF32Five);
        ViewPtr v;
        TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT(v.v != nullptr);
        CPPUNIT_ASSERT_EQUAL(TENSO_KIND_DENSE, tenso_view_kind(v.v));
        CPPUNIT_ASSERT_EQUAL(TENSO_DTYPE_FLOAT32, tenso_view_dtype(v.v));
        CPPUNIT_ASSERT_EQUAL(uint32_t(1), tenso_view_ndim(v.v));
        CPPUNIT_ASSERT_EQUAL(uint64_t(5), tenso_view_shape(v.v)[0]);
        CPPUNIT_ASSERT_EQUAL(uint64_t(20), tenso_view_nbytes(v.v));
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_FLAG_ALIGNED), tenso_view_flags(v.v));
        CPPUNIT_ASSERT_EQUAL(uint32_t(4), tenso_view_version(v.v));
        CPPUNIT_ASSERT_EQUAL(uint32_t(64), tenso_view_alignment(v.v));
        CPPUNIT_ASSERT_EQUAL(uint64_t(84), tenso_view_packet_size(v.v));
        CPPUNIT_ASSERT_EQUAL(0, tenso_view_owns_data(v.v));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_view_bundle_count(v.v));
        // Zero copy: the data pointer is exactly input + body offset.
        CPPUNIT_ASSERT(tenso_view_data(v.v) == static_cast<const void *>(p.data() + 64));
        // Writes to the input show through the view (it is the same memory).
        p[64 + 2] = 0x00;  // 1.0f (00 00 80 3f) -> 2.0f (00 00 00 40)
        p[64 + 3] = 0x40;
        CPPUNIT_ASSERT_EQUAL(2.0f, static_cast<const float *>(tenso_view_data(v.v))[0]);

        // Custom alignment: body offset follows the exponent byte.
        for (uint32_t a : {1u, 8u, 128u, 4096u}) {
            Bytes q = encode(kTensorF32Five, 0, a);
            size_t off = (15 + a - 1) / a * a;
            TENSO_CHECK_OK(tenso_loads(v.out(), q.data(), q.size(), nullptr));
            CPPUNIT_ASSERT(tenso_view_data(v.v) == static_cast<const void *>(q.data() + off));
            CPPUNIT_ASSERT_EQUAL(a, tenso_view_alignment(v.v));
            CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_FLAG_CUST_ALIGN), tenso_view_flags(v.v));
            CPPUNIT_ASSERT_EQUAL(uint64_t(q.size()), tenso_view_packet_size(v.v));
        }
    }

    void testTrailingSlackIgnored() {
        std::vector<double> d(300);
        for (size_t i = 0; i < d.size(); ++i) d[i] = double(i % 7);
        uint64_t shape[1] = {d.size()};
        tenso_tensor t = {d.data(), d.size() * 8, shape, 1, TENSO_DTYPE_FLOAT64};
        for (uint32_t f : {0u, 1u, 2u, 3u}) {
            Bytes p = encode(t, f);
            const size_t size = p.size();
            p.insert(p.end(), 1000, 0xA5);
            ViewPtr v;
            TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), nullptr));
            CPPUNIT_ASSERT_EQUAL(uint64_t(size), tenso_view_packet_size(v.v));
            CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v.v), d.data(), d.size() * 8) == 0);
            size_t len = 0;
            TENSO_CHECK_OK(tenso_packet_length(&len, p.data(), p.size(), nullptr));
            CPPUNIT_ASSERT_EQUAL(size, len);
            // A second packet right after the first decodes from its own offset.
            Bytes two(p.begin(), p.begin() + long(size));
            two.insert(two.end(), p.begin(), p.begin() + long(size));
            TENSO_CHECK_OK(tenso_loads(v.out(), two.data() + size, size, nullptr));
            CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v.v), d.data(), d.size() * 8) == 0);
        }
    }

    void testAccessorsOnNull() {
        CPPUNIT_ASSERT_EQUAL(tenso_kind(0), tenso_view_kind(nullptr));
        CPPUNIT_ASSERT_EQUAL(tenso_dtype(0), tenso_view_dtype(nullptr));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_view_ndim(nullptr));
        CPPUNIT_ASSERT(tenso_view_shape(nullptr) == nullptr);
        CPPUNIT_ASSERT(tenso_view_data(nullptr) == nullptr);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), tenso_view_nbytes(nullptr));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_view_flags(nullptr));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_view_version(nullptr));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_view_alignment(nullptr));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), tenso_view_packet_size(nullptr));
        CPPUNIT_ASSERT_EQUAL(0, tenso_view_owns_data(nullptr));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_view_bundle_count(nullptr));
        tenso_view_free(nullptr);
    }

    void testArgumentChecks() {
        Bytes p = encode(kTensorF32Five);
        tenso_view *v = reinterpret_cast<tenso_view *>(&p);  // must be overwritten with NULL
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_loads(nullptr, p.data(), p.size(), nullptr));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_loads(&v, nullptr, 84, nullptr));
        CPPUNIT_ASSERT(v == nullptr);
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_loads(&v, nullptr, 0, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_loads(&v, p.data(), 0, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_loads(&v, p.data(), 83, nullptr));
        CPPUNIT_ASSERT(v == nullptr);
        Bytes bad = p;
        bad[0] = 'X';
        TENSO_CHECK_STATUS(TENSO_E_BAD_MAGIC, tenso_loads(&v, bad.data(), bad.size(), nullptr));
        bad = p;
        bad[4] = 5;
        TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_VERSION, tenso_loads(&v, bad.data(), bad.size(), nullptr));
        bad[4] = 0;
        TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_VERSION, tenso_loads(&v, bad.data(), bad.size(), nullptr));
        bad = p;
        bad[7] = 0;
        TENSO_CHECK_STATUS(TENSO_E_BAD_DTYPE, tenso_loads(&v, bad.data(), bad.size(), nullptr));
        CPPUNIT_ASSERT(v == nullptr);
        size_t len = 1;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_packet_length(nullptr, p.data(), p.size(), nullptr));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_packet_length(&len, nullptr, 10, nullptr));
        tenso_packet_info info;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_inspect(nullptr, p.data(), p.size()));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_inspect(&info, nullptr, 10));
    }

    void testCompressedOwnsData() {
        std::vector<int32_t> d(5000);
        for (size_t i = 0; i < d.size(); ++i) d[i] = int32_t(i / 100);
        uint64_t shape[2] = {50, 100};
        tenso_tensor t = {d.data(), d.size() * 4, shape, 2, TENSO_DTYPE_INT32};
        Bytes p = encode(t, TENSO_ENCODE_COMPRESS);
        CPPUNIT_ASSERT(p.size() < d.size() * 4);
        ViewPtr v;
        TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(1, tenso_view_owns_data(v.v));
        CPPUNIT_ASSERT_EQUAL(uint64_t(d.size() * 4), tenso_view_nbytes(v.v));  // decompressed size
        CPPUNIT_ASSERT_EQUAL(uint64_t(p.size()), tenso_view_packet_size(v.v));
        CPPUNIT_ASSERT(tenso_view_flags(v.v) & TENSO_FLAG_COMPRESSION);
        const uint8_t *data = static_cast<const uint8_t *>(tenso_view_data(v.v));
        CPPUNIT_ASSERT(data < p.data() || data >= p.data() + p.size());  // not in the input
        CPPUNIT_ASSERT(std::memcmp(data, d.data(), d.size() * 4) == 0);
        // The view no longer needs the input.
        std::fill(p.begin(), p.end(), 0);
        Bytes().swap(p);
        CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v.v), d.data(), d.size() * 4) == 0);

        // Upstream's lz4_flex frames: f64[n] = i % 64.
        struct {
            const char *name;
            int n;
        } const frames[] = {
            {"compressed_f64_tile", 1024}, {"dense_f64_compressed", 1024}, {"compressed_f64_align128", 256}};
        for (const auto &f : frames) {
            const std::string name = f.name;
            Bytes g = golden(name);
            TENSO_CHECK_OK(tenso_loads(v.out(), g.data(), g.size(), nullptr));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, uint64_t(8 * f.n), tenso_view_nbytes(v.v));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, 1, tenso_view_owns_data(v.v));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, uint64_t(g.size()), tenso_view_packet_size(v.v));
            const double *x = static_cast<const double *>(tenso_view_data(v.v));
            for (int i = 0; i < f.n; ++i) CPPUNIT_ASSERT_EQUAL_MESSAGE(name, double(i % 64), x[i]);
        }
        Bytes z = golden("compressed_f32_zeros1024");
        TENSO_CHECK_OK(tenso_loads(v.out(), z.data(), z.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint64_t(4096), tenso_view_nbytes(v.v));
        const float *zf = static_cast<const float *>(tenso_view_data(v.v));
        for (int i = 0; i < 1024; ++i) CPPUNIT_ASSERT_EQUAL(0.0f, zf[i]);
        Bytes e = golden("compressed_f32_empty_0");
        TENSO_CHECK_OK(tenso_loads(v.out(), e.data(), e.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), tenso_view_nbytes(v.v));
        CPPUNIT_ASSERT_EQUAL(uint64_t(75), tenso_view_packet_size(v.v));
    }

    void testForeignLz4Frames() {
        // liblz4 frames with content size, block and content checksums, linked blocks.
        Bytes plain = golden("dense_u8_70000");
        Bytes linked = golden("compressed_u8_70000_liblz4_linked");
        ViewPtr v;
        TENSO_CHECK_OK(tenso_loads(v.out(), linked.data(), linked.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint64_t(70000), tenso_view_nbytes(v.v));
        CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v.v), plain.data() + 64, 70000) == 0);
        Bytes frame = golden("compressed_f64_liblz4_frame");
        TENSO_CHECK_OK(tenso_loads(v.out(), frame.data(), frame.size(), nullptr));
        const double *x = static_cast<const double *>(tenso_view_data(v.v));
        for (int i = 0; i < 1024; ++i) CPPUNIT_ASSERT_EQUAL(double(i % 64), x[i]);
    }

    void testIntegrityVerified() {
        Bytes p = golden("dense_i32_integrity");
        ViewPtr v;
        TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_FLAG_ALIGNED | TENSO_FLAG_INTEGRITY), tenso_view_flags(v.v));
        CPPUNIT_ASSERT_EQUAL(uint64_t(32), tenso_view_nbytes(v.v));
        CPPUNIT_ASSERT_EQUAL(uint64_t(104), tenso_view_packet_size(v.v));
        CPPUNIT_ASSERT_EQUAL(0, tenso_view_owns_data(v.v));
        CPPUNIT_ASSERT(tenso_view_data(v.v) == static_cast<const void *>(p.data() + 64));

        tenso_decode_options skip = dopts();
        skip.flags = TENSO_DECODE_SKIP_CHECKSUM;
        for (size_t at : {size_t(64), size_t(64 + 17), size_t(64 + 31), size_t(0x60), size_t(0x67)}) {
            Bytes bad = p;
            bad[at] ^= 0x20;
            TENSO_CHECK_STATUS(TENSO_E_CHECKSUM, tenso_loads(v.out(), bad.data(), bad.size(), nullptr));
            CPPUNIT_ASSERT(v.v == nullptr);
            TENSO_CHECK_OK(tenso_loads(v.out(), bad.data(), bad.size(), &skip));
            CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v.v), bad.data() + 64, 32) == 0);
            CPPUNIT_ASSERT_EQUAL(uint64_t(104), tenso_view_packet_size(v.v));  // footer still framed
        }
        // Padding and header bytes are not covered by the footer (and padding is not checked).
        Bytes pad = p;
        pad[40] = 0x77;
        TENSO_CHECK_OK(tenso_loads(v.out(), pad.data(), pad.size(), nullptr));
        // A footer that is cut off is a truncation, not a checksum failure.
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_loads(v.out(), p.data(), 100, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_loads(v.out(), p.data(), 100, &skip));

        // Compressed + integrity: the footer covers the frame; a flipped frame byte is caught.
        Bytes c = golden("dense_f64_compressed");
        TENSO_CHECK_OK(tenso_loads(v.out(), c.data(), c.size(), nullptr));
        c[c.size() - 8 - 4 - 1] ^= 0x01;  // last byte of the last block's data
        TENSO_CHECK_STATUS(TENSO_E_CHECKSUM, tenso_loads(v.out(), c.data(), c.size(), nullptr));
    }

    void testDecodeLimits() {
        double d[12] = {};
        uint64_t s34[2] = {3, 4};
        tenso_tensor t = {d, sizeof d, s34, 2, TENSO_DTYPE_FLOAT64};
        Bytes p = encode(t);
        ViewPtr v;
        tenso_decode_options o = dopts();

        o.max_ndim = 1;
        TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_DIMS, tenso_loads(v.out(), p.data(), p.size(), &o));
        o.max_ndim = 2;
        TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), &o));

        o = dopts();
        o.max_elements = 11;
        TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_ELEMENTS, tenso_loads(v.out(), p.data(), p.size(), &o));
        o.max_elements = 12;
        TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), &o));

        o = dopts();
        o.max_packet_bytes = 159;
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, tenso_loads(v.out(), p.data(), p.size(), &o));
        o.max_packet_bytes = 160;
        TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), &o));

        // Nesting: bundle_nested3 has its deepest tensors at depth 4 (top = 0).
        Bytes n3 = golden("bundle_nested3");
        o = dopts();
        o.max_depth = 3;
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, tenso_loads(v.out(), n3.data(), n3.size(), &o));
        o.max_depth = 4;
        TENSO_CHECK_OK(tenso_loads(v.out(), n3.data(), n3.size(), &o));
        CPPUNIT_ASSERT_EQUAL(uint32_t(2), tenso_view_bundle_count(v.v));

        // The limits apply inside bundles too.
        o = dopts();
        o.max_ndim = 0;
        o.max_elements = 3;  // 'top' is bool[4]
        TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_ELEMENTS, tenso_loads(v.out(), n3.data(), n3.size(), &o));
        o.max_elements = 0;
        o.max_packet_bytes = n3.size() - 1;
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, tenso_loads(v.out(), n3.data(), n3.size(), &o));

        // Zero in every field means the defaults.
        o = dopts();
        TENSO_CHECK_OK(tenso_loads(v.out(), n3.data(), n3.size(), &o));
    }

    void testLimitsNeverLoosen() {
        ViewPtr v;
        tenso_decode_options o = dopts();
        o.max_ndim = 1000;
        o.max_elements = uint64_t(1) << 62;
        o.max_depth = 1000;
        // ndim 33 stays over the protocol's 32.
        Bytes p33 = handmade(TENSO_DTYPE_FLOAT32, 33, 1, 4);
        TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_DIMS, tenso_loads(v.out(), p33.data(), p33.size(), &o));
        TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_DIMS, tenso_loads(v.out(), p33.data(), p33.size(), nullptr));
        // 1e10 elements stay over 1e9 (the body is never reached).
        Bytes big = handmade(TENSO_DTYPE_UINT8, 2, 100000, 0);
        TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_ELEMENTS, tenso_loads(v.out(), big.data(), big.size(), &o));
        // A shape whose product overflows u64 is too many elements, not a wrap-around.
        Bytes wrap = handmade(TENSO_DTYPE_UINT8, 3, 0xFFFFFFFFu, 0);
        TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_ELEMENTS, tenso_loads(v.out(), wrap.data(), wrap.size(), &o));
        // 1e9 elements exactly is within the limit: the packet is then merely truncated.
        Bytes edge = handmade(TENSO_DTYPE_UINT8, 1, 1000000000u, 0);
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_loads(v.out(), edge.data(), edge.size(), &o));
        Bytes over = handmade(TENSO_DTYPE_UINT8, 1, 1000000001u, 0);
        TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_ELEMENTS, tenso_loads(v.out(), over.data(), over.size(), &o));
    }

    void testUnknownDecodeOptionsVersion() {
        Bytes p = encode(kTensorF32Five);
        ViewPtr v;
        for (uint32_t ver : {0u, uint32_t(TENSO_DECODE_OPTIONS_VERSION + 1), 0xFFFFFFFFu}) {
            tenso_decode_options o = dopts();
            o.version = ver;
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_loads(v.out(), p.data(), p.size(), &o));
            CPPUNIT_ASSERT(v.v == nullptr);
        }
    }

    void testInspectComplete() {
        Bytes p = golden("dense_i32_integrity");
        tenso_packet_info info;
        std::memset(&info, 0xEE, sizeof info);
        TENSO_CHECK_OK(tenso_inspect(&info, p.data(), p.size()));
        CPPUNIT_ASSERT_EQUAL(uint32_t(4), info.version);
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_FLAG_ALIGNED | TENSO_FLAG_INTEGRITY), info.flags);
        CPPUNIT_ASSERT_EQUAL(TENSO_KIND_DENSE, info.kind);
        CPPUNIT_ASSERT_EQUAL(TENSO_DTYPE_INT32, info.dtype);
        CPPUNIT_ASSERT_EQUAL(uint32_t(1), info.ndim);
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), info.entry_count);
        CPPUNIT_ASSERT_EQUAL(uint32_t(64), info.alignment);
        CPPUNIT_ASSERT_EQUAL(uint64_t(8), info.shape[0]);
        for (int i = 1; i < TENSO_MAX_NDIM; ++i) CPPUNIT_ASSERT_EQUAL(uint64_t(0), info.shape[i]);
        CPPUNIT_ASSERT_EQUAL(uint64_t(64), info.body_offset);
        CPPUNIT_ASSERT_EQUAL(uint64_t(32), info.body_size);
        CPPUNIT_ASSERT_EQUAL(uint64_t(104), info.packet_size);

        // inspect does not verify the body: a corrupt footer still inspects.
        p[0x60] ^= 1;
        TENSO_CHECK_OK(tenso_inspect(&info, p.data(), p.size()));
        CPPUNIT_ASSERT_EQUAL(uint64_t(104), info.packet_size);

        Bytes a = golden("align_f32_128");
        TENSO_CHECK_OK(tenso_inspect(&info, a.data(), a.size()));
        CPPUNIT_ASSERT_EQUAL(uint32_t(128), info.alignment);
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_FLAG_CUST_ALIGN), info.flags);
        CPPUNIT_ASSERT_EQUAL(uint64_t(128), info.body_offset);
        CPPUNIT_ASSERT_EQUAL(uint64_t(148), info.packet_size);

        Bytes bad = a;
        bad[7] = 99;
        TENSO_CHECK_STATUS(TENSO_E_BAD_DTYPE, tenso_inspect(&info, bad.data(), bad.size()));
        bad = a;
        bad[1] = 'n';
        TENSO_CHECK_STATUS(TENSO_E_BAD_MAGIC, tenso_inspect(&info, bad.data(), bad.size()));
    }

    void testInspectPartial() {
        double d[12] = {};
        uint64_t s34[2] = {3, 4};
        tenso_tensor t = {d, sizeof d, s34, 2, TENSO_DTYPE_FLOAT64};
        Bytes p = encode(t);  // 18 header bytes, body at 64, 160 in all
        tenso_packet_info info;
        // Any prefix holding header + shape gives the header fields, packet_size 0.
        for (size_t n : {size_t(18), size_t(40), size_t(64), size_t(100), size_t(159)}) {
            std::memset(&info, 0xEE, sizeof info);
            TENSO_CHECK_OK(tenso_inspect(&info, p.data(), n));
            std::string at = "prefix " + std::to_string(n);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(at, TENSO_DTYPE_FLOAT64, info.dtype);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(at, TENSO_KIND_DENSE, info.kind);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(at, uint32_t(2), info.ndim);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(at, uint64_t(3), info.shape[0]);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(at, uint64_t(4), info.shape[1]);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(at, uint64_t(64), info.body_offset);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(at, uint64_t(0), info.packet_size);
        }
        TENSO_CHECK_OK(tenso_inspect(&info, p.data(), 160));
        CPPUNIT_ASSERT_EQUAL(uint64_t(160), info.packet_size);
        // Shorter than header + shape: truncated.
        for (size_t n : {size_t(0), size_t(3), size_t(4), size_t(8), size_t(9), size_t(10), size_t(17)})
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_inspect(&info, p.data(), n));

        // Custom alignment: the exponent byte is part of the header.
        Bytes a = encode(kTensorF32Five, 0, 256);
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_inspect(&info, a.data(), 14));
        TENSO_CHECK_OK(tenso_inspect(&info, a.data(), 15));
        CPPUNIT_ASSERT_EQUAL(uint32_t(256), info.alignment);
        CPPUNIT_ASSERT_EQUAL(uint64_t(256), info.body_offset);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), info.packet_size);
    }

    void testInspectBundleAndCompressed() {
        tenso_packet_info info;
        Bytes b = golden("bundle_mixed");
        TENSO_CHECK_OK(tenso_inspect(&info, b.data(), b.size()));
        CPPUNIT_ASSERT_EQUAL(TENSO_KIND_BUNDLE, info.kind);
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_FLAG_BUNDLE), info.flags);
        CPPUNIT_ASSERT_EQUAL(tenso_dtype(0), info.dtype);
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), info.ndim);
        CPPUNIT_ASSERT_EQUAL(uint32_t(2), info.entry_count);
        CPPUNIT_ASSERT_EQUAL(uint64_t(188), info.packet_size);
        // The 10-byte header alone is enough for the count.
        TENSO_CHECK_OK(tenso_inspect(&info, b.data(), 10));
        CPPUNIT_ASSERT_EQUAL(uint32_t(2), info.entry_count);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), info.packet_size);
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_inspect(&info, b.data(), 9));

        Bytes c = golden("compressed_f64_tile");
        TENSO_CHECK_OK(tenso_inspect(&info, c.data(), c.size()));
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_FLAG_ALIGNED | TENSO_FLAG_COMPRESSION), info.flags);
        CPPUNIT_ASSERT_EQUAL(uint64_t(1024), info.shape[0]);
        CPPUNIT_ASSERT_EQUAL(uint64_t(64), info.body_offset);
        CPPUNIT_ASSERT_EQUAL(uint64_t(c.size() - 64), info.body_size);  // compressed size
        CPPUNIT_ASSERT_EQUAL(uint64_t(c.size()), info.packet_size);
        TENSO_CHECK_OK(tenso_inspect(&info, c.data(), 64));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), info.packet_size);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), info.body_size);  // unknown until the frame is read

        Bytes v1 = golden("legacy_v1_f32");
        TENSO_CHECK_OK(tenso_inspect(&info, v1.data(), v1.size()));
        CPPUNIT_ASSERT_EQUAL(uint32_t(1), info.version);
        CPPUNIT_ASSERT_EQUAL(uint32_t(1), info.alignment);
        CPPUNIT_ASSERT_EQUAL(uint64_t(12), info.body_offset);
        CPPUNIT_ASSERT_EQUAL(uint64_t(24), info.packet_size);
    }

    void testPacketLengthFraming() {
        // Dense, integrity, custom alignment, compressed (upstream and liblz4 frames), bundles
        // (plain, nested, compressed, 255 entries), legacy.
        const char *names[] = {"dense_f32_vec",
                               "dense_i32_integrity",
                               "align_f32_4096",
                               "dense_f32_scalar",
                               "dense_f32_empty_0",
                               "compressed_f64_tile",
                               "dense_f64_compressed",
                               "compressed_f32_empty_0",
                               "compressed_f32_random256",
                               "compressed_f64_liblz4_frame",
                               "bundle_mixed",
                               "bundle_empty",
                               "bundle_nested3",
                               "bundle_compressed",
                               "bundle_integrity",
                               "legacy_v1_f32",
                               "legacy_v3_custalign16",
                               "legacy_v3_integrity"};
        for (const char *name : names) check_framing(name, golden(name));
        check_framing("bundle_255", golden("bundle_255"), 7);
        check_framing("compressed_u8_70000_liblz4_linked", golden("compressed_u8_70000_liblz4_linked"));

        // Our own multi-block frames (over 64 KiB of input: several LZ4 blocks).
        std::vector<uint16_t> d(100000);
        for (size_t i = 0; i < d.size(); ++i) d[i] = uint16_t(i * 2654435761u >> 7);
        uint64_t shape[1] = {d.size()};
        tenso_tensor t = {d.data(), d.size() * 2, shape, 1, TENSO_DTYPE_UINT16};
        check_framing("u16[100000] compressed+integrity", encode(t, TENSO_ENCODE_COMPRESS | TENSO_ENCODE_INTEGRITY),
                      97);
    }

    void testLegacyPackets() {
        struct {
            const char *name;
            uint32_t version, alignment, flags;
            size_t body_off, size;
        } const cases[] = {
            {"legacy_v1_f32", 1, 1, 0, 12, 24},
            {"legacy_v2_f32", 2, 64, TENSO_FLAG_ALIGNED, 64, 76},
            {"legacy_v3_f32", 3, 64, TENSO_FLAG_ALIGNED, 64, 76},
            {"legacy_v3_unaligned", 3, 1, 0, 12, 24},
            {"legacy_v3_custalign16", 3, 16, TENSO_FLAG_CUST_ALIGN, 16, 28},
            {"legacy_v3_integrity", 3, 64, TENSO_FLAG_ALIGNED | TENSO_FLAG_INTEGRITY, 64, 84},
        };
        const float want[3] = {1, 2, 3};
        for (const auto &c : cases) {
            const std::string name = c.name;
            Bytes p = golden(name);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, c.size, p.size());
            ViewPtr v;
            TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), nullptr));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, c.version, tenso_view_version(v.v));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, c.alignment, tenso_view_alignment(v.v));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, c.flags, tenso_view_flags(v.v));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, TENSO_DTYPE_FLOAT32, tenso_view_dtype(v.v));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, uint32_t(1), tenso_view_ndim(v.v));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, uint64_t(3), tenso_view_shape(v.v)[0]);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, uint64_t(c.size), tenso_view_packet_size(v.v));
            CPPUNIT_ASSERT_MESSAGE(name + ": body offset",
                                   tenso_view_data(v.v) == static_cast<const void *>(p.data() + c.body_off));
            CPPUNIT_ASSERT_MESSAGE(name, std::memcmp(tenso_view_data(v.v), want, 12) == 0);
            size_t len = 0;
            TENSO_CHECK_OK(tenso_packet_length(&len, p.data(), p.size(), nullptr));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, c.size, len);
        }
        // The v3 integrity footer is verified like a v4 one.
        Bytes p = golden("legacy_v3_integrity");
        p[64] ^= 1;
        ViewPtr v;
        TENSO_CHECK_STATUS(TENSO_E_CHECKSUM, tenso_loads(v.out(), p.data(), p.size(), nullptr));
    }

    // tenso_loads_tensor (1.5) on every golden vector, whole and cut, corrupted and with
    // options: for a plain dense packet the struct says what tenso_loads' view says; every
    // other packet tenso_loads takes is UNSUPPORTED_KIND; every packet tenso_loads refuses is
    // refused with the same status. *out is untouched on failure.
    void testLoadsTensorAgreesWithLoads() {
        const std::vector<std::string> names = golden_names();
        size_t dense = 0, other = 0, refused = 0;
        tenso_decode_options skip = dopts();
        skip.flags = TENSO_DECODE_SKIP_CHECKSUM;
        for (const std::string &name : names) {
            const Bytes whole = golden(name);
            Bytes flipped = whole;
            if (!flipped.empty()) flipped[flipped.size() - 9] ^= 0x40;  // last body byte of a footed packet
            for (const Bytes *pkt : {&whole, static_cast<const Bytes *>(&flipped)}) {
                for (size_t len : {pkt->size(), pkt->size() / 2, size_t(9)}) {
                    if (len > pkt->size()) continue;
                    for (const tenso_decode_options *o : {static_cast<const tenso_decode_options *>(nullptr),
                                                          static_cast<const tenso_decode_options *>(&skip)}) {
                        const std::string what = name + " (" + std::to_string(len) + " bytes" +
                                                 (pkt == &flipped ? ", flipped" : "") + (o ? ", skip checksum)" : ")");
                        ViewPtr v;
                        const tenso_status a = tenso_loads(v.out(), pkt->data(), len, o);
                        tenso_tensor_view t;
                        std::memset(&t, 0xAB, sizeof t);
                        tenso_status b = tenso_loads_tensor(&t, pkt->data(), len, o);
                        // What the header says: a packet that is not plain dense may be
                        // refused for its kind before the checks that come after the scan
                        // (checksums, decompression, sparse and string structure).
                        tenso_packet_info pi;
                        const bool plain = tenso_inspect(&pi, pkt->data(), len) != TENSO_OK ||
                                           (pi.kind == TENSO_KIND_DENSE && !(pi.flags & TENSO_FLAG_COMPRESSION));
                        if (a != TENSO_OK) {
                            if (!plain && b == TENSO_E_UNSUPPORTED_KIND) b = a;
                            CPPUNIT_ASSERT_EQUAL_MESSAGE(what, std::string(tenso_status_name(a)),
                                                         std::string(tenso_status_name(b)));
                            CPPUNIT_ASSERT_EQUAL_MESSAGE(what + ": untouched", uint8_t(0xAB),
                                                         reinterpret_cast<uint8_t *>(&t)[0]);
                            ++refused;
                            continue;
                        }
                        if (tenso_view_kind(v.v) != TENSO_KIND_DENSE ||
                            (tenso_view_flags(v.v) & TENSO_FLAG_COMPRESSION)) {
                            CPPUNIT_ASSERT_EQUAL_MESSAGE(what, std::string("TENSO_E_UNSUPPORTED_KIND"),
                                                         std::string(tenso_status_name(b)));
                            ++other;
                            continue;
                        }
                        TENSO_CHECK_OK(b);
                        CPPUNIT_ASSERT_MESSAGE(what, t.data == tenso_view_data(v.v));
                        CPPUNIT_ASSERT_EQUAL_MESSAGE(what, tenso_view_nbytes(v.v), t.nbytes);
                        CPPUNIT_ASSERT_EQUAL_MESSAGE(what, tenso_view_packet_size(v.v), t.packet_size);
                        CPPUNIT_ASSERT_EQUAL_MESSAGE(what, tenso_view_dtype(v.v), t.dtype);
                        CPPUNIT_ASSERT_EQUAL_MESSAGE(what, tenso_view_ndim(v.v), t.ndim);
                        CPPUNIT_ASSERT_EQUAL_MESSAGE(what, tenso_view_flags(v.v), t.flags);
                        CPPUNIT_ASSERT_EQUAL_MESSAGE(what, tenso_view_version(v.v), t.version);
                        CPPUNIT_ASSERT_EQUAL_MESSAGE(what, tenso_view_alignment(v.v), t.alignment);
                        CPPUNIT_ASSERT_EQUAL_MESSAGE(what, uint32_t(0), t.reserved);
                        for (uint32_t i = 0; i < t.ndim; ++i)
                            CPPUNIT_ASSERT_EQUAL_MESSAGE(what, tenso_view_shape(v.v)[i], t.shape[i]);
                        ++dense;
                    }
                }
            }
        }
        CPPUNIT_ASSERT(dense > 20 && other > 20 && refused > 20);
        tenso_tensor_view t;
        const Bytes p = golden("dense_complex128_2x3");
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_loads_tensor(nullptr, p.data(), p.size(), nullptr));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_loads_tensor(&t, nullptr, 5, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_loads_tensor(&t, nullptr, 0, nullptr));
    }

    void testGoldenV4Packets() {
        ViewPtr v;
        Bytes c = golden("dense_complex128_2x3");
        TENSO_CHECK_OK(tenso_loads(v.out(), c.data(), c.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(TENSO_DTYPE_COMPLEX128, tenso_view_dtype(v.v));
        CPPUNIT_ASSERT_EQUAL(uint64_t(96), tenso_view_nbytes(v.v));
        const double *z = static_cast<const double *>(tenso_view_data(v.v));
        CPPUNIT_ASSERT_EQUAL(1.0, z[0]);
        CPPUNIT_ASSERT_EQUAL(2.0, z[1]);
        CPPUNIT_ASSERT_EQUAL(-0.5, z[2]);

        Bytes n = golden("dense_f32_ndim32");
        TENSO_CHECK_OK(tenso_loads(v.out(), n.data(), n.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint32_t(32), tenso_view_ndim(v.v));
        for (int i = 0; i < 32; ++i) CPPUNIT_ASSERT_EQUAL(uint64_t(1), tenso_view_shape(v.v)[i]);
        CPPUNIT_ASSERT_EQUAL(1.0f, *static_cast<const float *>(tenso_view_data(v.v)));
        CPPUNIT_ASSERT(tenso_view_data(v.v) == static_cast<const void *>(n.data() + 192));

        Bytes b = golden("dense_bf16_vec");
        TENSO_CHECK_OK(tenso_loads(v.out(), b.data(), b.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(TENSO_DTYPE_BFLOAT16, tenso_view_dtype(v.v));
        const uint16_t *h = static_cast<const uint16_t *>(tenso_view_data(v.v));
        CPPUNIT_ASSERT_EQUAL(uint16_t(0x3f80), h[0]);  // 1.0
        CPPUNIT_ASSERT_EQUAL(uint16_t(0xbfc0), h[1]);  // -1.5

        Bytes f = golden("integrity_f64_align128");
        TENSO_CHECK_OK(tenso_loads(v.out(), f.data(), f.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint32_t(128), tenso_view_alignment(v.v));
        CPPUNIT_ASSERT_EQUAL(0.5, static_cast<const double *>(tenso_view_data(v.v))[0]);
    }

    void testEmptyAndScalarViews() {
        ViewPtr v;
        Bytes e = golden("dense_f64_empty_2x0x3");
        TENSO_CHECK_OK(tenso_loads(v.out(), e.data(), e.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), tenso_view_nbytes(v.v));
        CPPUNIT_ASSERT(tenso_view_data(v.v) == nullptr);  // documented: NULL when empty
        CPPUNIT_ASSERT_EQUAL(uint32_t(3), tenso_view_ndim(v.v));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), tenso_view_shape(v.v)[1]);
        CPPUNIT_ASSERT_EQUAL(uint64_t(64), tenso_view_packet_size(v.v));

        Bytes s = golden("dense_f32_scalar");
        TENSO_CHECK_OK(tenso_loads(v.out(), s.data(), s.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_view_ndim(v.v));
        CPPUNIT_ASSERT(tenso_view_shape(v.v) == nullptr);  // documented: NULL for ndim 0
        CPPUNIT_ASSERT_EQUAL(uint64_t(4), tenso_view_nbytes(v.v));
        CPPUNIT_ASSERT_EQUAL(3.5f, *static_cast<const float *>(tenso_view_data(v.v)));
    }

    // tenso_loads decodes into the view this thread freed last rather than allocate one (a small
    // packet's decode costs about what the allocation does). Whatever kind came before, the
    // reused view is the one a fresh view would be: every golden vector after every other kind.
    void testFreedViewIsReused() {
        std::vector<Bytes> pkts;
        for (const std::string &name : golden_names()) {
            Bytes p = golden(name);
            tenso_view *v = nullptr;
            if (tenso_loads(&v, p.data(), p.size(), nullptr) == TENSO_OK) pkts.push_back(std::move(p));
            tenso_view_free(v);
        }
        CPPUNIT_ASSERT(pkts.size() > 50);
        pkts.push_back(pkts.front());  // the last kind is followed too
        for (size_t i = 1; i < pkts.size(); ++i) {
            const Bytes &prev = pkts[i - 1], &next = pkts[i];
            tenso_view *before = nullptr, *reused = nullptr, *fresh = nullptr;
            TENSO_CHECK_OK(tenso_loads(&before, prev.data(), prev.size(), nullptr));
            tenso_view_free(before);
            TENSO_CHECK_OK(tenso_loads(&reused, next.data(), next.size(), nullptr));
            TENSO_CHECK_OK(tenso_loads(&fresh, next.data(), next.size(), nullptr));  // the spare is taken
            const std::string where = "vector " + std::to_string(i);
            CPPUNIT_ASSERT_MESSAGE(where + ": the freed view was not reused", reused == before);
            CPPUNIT_ASSERT_MESSAGE(where + ": two live views share storage", fresh != reused);
            const std::string diff = hostile::view_diff(reused, fresh);
            CPPUNIT_ASSERT_MESSAGE(where + ": " + diff, diff.empty());
            CPPUNIT_ASSERT_EQUAL_MESSAGE(where, tenso_view_owns_data(fresh), tenso_view_owns_data(reused));
            if (!tenso_view_owns_data(fresh))  // both borrow `next` (NULL without a body)
                CPPUNIT_ASSERT_MESSAGE(where, tenso_view_data(fresh) == tenso_view_data(reused));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(where, tenso_view_bundle_count(fresh), tenso_view_bundle_count(reused));
            tenso_view_free(fresh);
            tenso_view_free(reused);
        }
        // A failed decode hands out nothing and keeps the spare for the next one.
        Bytes p = encode(kTensorF32Five);
        tenso_view *a = nullptr, *b = nullptr;
        TENSO_CHECK_OK(tenso_loads(&a, p.data(), p.size(), nullptr));
        tenso_view_free(a);
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_loads(&b, p.data(), p.size() - 1, nullptr));
        CPPUNIT_ASSERT(b == nullptr);
        TENSO_CHECK_OK(tenso_loads(&b, p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT(b == a);
        CPPUNIT_ASSERT_EQUAL(uint64_t(sizeof kF32Five), tenso_view_nbytes(b));
        tenso_view_free(b);
    }

    // A view may be freed on any thread; each thread keeps its own spare and frees it when it
    // exits (under ASan, LeakSanitizer reports a spare that outlives its thread).
    void testViewsFreedOnOtherThreads() {
        const Bytes p = encode(kTensorF32Five);
        for (int round = 0; round < 20; ++round) {
            std::vector<tenso_view *> made(8, nullptr);
            std::vector<tenso_status> st(made.size() + 1, TENSO_E_INTERNAL);
            uint64_t nbytes = 0;
            std::thread maker([&] {
                for (size_t i = 0; i < made.size(); ++i) st[i] = tenso_loads(&made[i], p.data(), p.size(), nullptr);
            });
            maker.join();
            std::thread freer([&] {
                for (tenso_view *v : made) tenso_view_free(v);
                tenso_view *again = nullptr;  // the spare, taken and given back
                st.back() = tenso_loads(&again, p.data(), p.size(), nullptr);
                nbytes = tenso_view_nbytes(again);
                tenso_view_free(again);
            });
            freer.join();
            for (tenso_status s : st) TENSO_CHECK_OK(s);
            CPPUNIT_ASSERT_EQUAL(uint64_t(sizeof kF32Five), nbytes);
        }
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiDecodeTest);
