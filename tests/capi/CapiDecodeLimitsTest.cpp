// CapiDecodeLimitsTest - what a decode may allocate: max_decoded_bytes and max_entries
// (tenso_decode_options version 2), inflation held to max_packet_bytes, version-1 option
// structs still accepted, and the memory a tree of tiny packets costs per packet byte.
//
// Without a sanitizer, this file replaces the global operator new and delete of the test
// program (libtenso's own calls land here too) to measure the most a decode held at once.
#include <cppunit/extensions/HelperMacros.h>

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "check.hpp"
#include "hostile_util.hpp"
#include "tenso/tenso.h"

using namespace hostile;

// malloc's own statistics count what the view keeps, unless a sanitizer's allocator serves it.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LIMITS_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define LIMITS_TEST_SANITIZED 1
#endif
#endif

#ifndef LIMITS_TEST_SANITIZED
// Net bytes through operator new since peak_heap() started counting, and its highest value.
namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_net{0}, g_top{0};

void *counted_new(size_t n) {
    void *p = std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    if (g_counting.load(std::memory_order_relaxed)) {
        const int64_t now = g_net += int64_t(malloc_usable_size(p));
        for (int64_t top = g_top; now > top && !g_top.compare_exchange_weak(top, now);) {}
    }
    return p;
}
void counted_delete(void *p) noexcept {
    if (p && g_counting.load(std::memory_order_relaxed)) g_net -= int64_t(malloc_usable_size(p));
    std::free(p);
}
}  // namespace

void *operator new(size_t n) { return counted_new(n); }
void *operator new[](size_t n) { return counted_new(n); }
void operator delete(void *p) noexcept { counted_delete(p); }
void operator delete[](void *p) noexcept { counted_delete(p); }
void operator delete(void *p, size_t) noexcept { counted_delete(p); }
void operator delete[](void *p, size_t) noexcept { counted_delete(p); }
#endif

namespace {

// The bounds tenso.h states: decoding a packet of N bytes allocates at most this many times N
// for the decoded tree while it decodes, and the view keeps at most the second.
constexpr uint64_t kTreeBytesPerPacketByte = 24, kKeptBytesPerPacketByte = 12;

// What a decode may hold beyond max_decoded_bytes: the error's message and exception, the
// status record and the stream reader's own state, none of it sized by the packet.
constexpr int64_t kPeakSlack = 4096;

#ifndef LIMITS_TEST_SANITIZED
// The most operator new held at once (beyond what it held before) while `f` ran: the tree,
// not the bodies (aligned_alloc, charged at their rounded size by testRoundedBodiesCharged).
template <class F>
int64_t peak_heap(F f) {
    g_net = 0;
    g_top = 0;
    g_counting = true;
    f();
    g_counting = false;
    return g_top;
}
#endif

tenso_status loads(const Bytes &b, const tenso_decode_options &o) {
    tenso_view *v = nullptr;
    tenso_status st = tenso_loads(&v, b.data(), b.size(), &o);
    tenso_view_free(v);
    return st;
}

tenso_decode_options opts(uint64_t max_packet, uint64_t max_decoded, uint64_t max_entries) {
    tenso_decode_options o = TENSO_DECODE_OPTIONS_INIT;
    o.max_packet_bytes = max_packet;
    o.max_decoded_bytes = max_decoded;
    o.max_entries = max_entries;
    return o;
}

// A float32 tensor of `mib` MiB of zeros, LZ4-compressed (a few KiB on the wire).
Bytes compressed_zeros(size_t mib) {
    std::vector<float> z(mib << 18);
    const uint64_t shape[1] = {z.size()};
    tenso_tensor t = {z.data(), z.size() * 4, shape, 1, TENSO_DTYPE_FLOAT32};
    tenso_encode_options eo = TENSO_ENCODE_OPTIONS_INIT;
    eo.flags = TENSO_ENCODE_COMPRESS;
    tenso_buffer buf = TENSO_BUFFER_INIT;
    if (tenso_dumps(&buf, &t, &eo) != TENSO_OK) throw std::runtime_error("tenso_dumps");
    Bytes out(buf.data, buf.data + buf.size);
    tenso_buffer_dispose(&buf);
    return out;
}

Bytes bundle_of(const std::vector<Bytes> &values) {
    Pkt p;
    p.v4(TENSO_FLAG_BUNDLE, 0, uint8_t(values.size()));
    for (size_t i = 0; i < values.size(); ++i) p.entry("k" + std::to_string(i), values[i]);
    return p;
}

// 255 bundles of 255 empty v1 bundles: 16 wire bytes per packet, the cheapest packets there are.
Bytes tree_of_tiny_bundles() {
    const Bytes leaf = Pkt().legacy(1, TENSO_FLAG_BUNDLE, 0, 0);
    Pkt mid;
    mid.legacy(1, TENSO_FLAG_BUNDLE, 0, 255);
    for (int i = 0; i < 255; ++i) mid.entry("", leaf);
    Pkt top;
    top.legacy(1, TENSO_FLAG_BUNDLE, 0, 255);
    for (int i = 0; i < 255; ++i) top.entry("", mid);
    return top;
}

}  // namespace

class CapiDecodeLimitsTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiDecodeLimitsTest);
    CPPUNIT_TEST(testInflationHeldToMaxPacketBytes);
    CPPUNIT_TEST(testMaxDecodedBytes);
    CPPUNIT_TEST(testMaxEntries);
    CPPUNIT_TEST(testVersion1StructsStillWork);
    CPPUNIT_TEST(testTreeCostsASmallMultipleOfItsBytes);
    CPPUNIT_TEST(testPeakWithinMaxDecodedBytes);
    CPPUNIT_TEST(testClaimedBundleCountsCostNothing);
    CPPUNIT_TEST(testRoundedBodiesCharged);
    CPPUNIT_TEST(testStreamBufferWithinMaxDecodedBytes);
    CPPUNIT_TEST(testMaxInflation);
    CPPUNIT_TEST_SUITE_END();

public:
    // 4 MiB inflating to 16 MiB under max_packet_bytes 8 MiB was OK: max_packet_bytes now bounds
    // decompressed bytes too, summed over the tree, unless max_decoded_bytes says otherwise.
    void testInflationHeldToMaxPacketBytes() {
        const Bytes one = compressed_zeros(4), four = bundle_of({one, one, one, one});
        CPPUNIT_ASSERT(four.size() < (size_t(1) << 20));
        TENSO_CHECK_OK(loads(one, opts(8 << 20, 0, 0)));
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, loads(one, opts((4 << 20) - 1, 0, 0)));
        TENSO_CHECK_OK(loads(one, opts(4 << 20, 0, 0)));  // exactly 4 MiB inflated is fine
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, loads(four, opts(8 << 20, 0, 0)));
        TENSO_CHECK_OK(loads(four, opts(0, 0, 0)));               // no limit asked for
        TENSO_CHECK_OK(loads(four, opts(8 << 20, 32 << 20, 0)));  // max_decoded_bytes decides
        size_t len = 0;                                           // framing checks the same limits as decoding
        const tenso_decode_options o = opts(8 << 20, 0, 0);
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, tenso_packet_length(&len, four.data(), four.size(), &o));
    }

    void testMaxDecodedBytes() {
        const Bytes four =
            bundle_of({compressed_zeros(4), compressed_zeros(4), compressed_zeros(4), compressed_zeros(4)});
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, loads(four, opts(0, 16 << 20, 0)));  // bodies alone are 16 MiB
        TENSO_CHECK_OK(loads(four, opts(0, 17 << 20, 0)));
        // The tree counts too: a bundle of 255 scalars decodes in 255 x 300 bytes or so.
        const Bytes scalar = Pkt().v4(0, TENSO_DTYPE_UINT8, 0).u8(7);
        const Bytes wide = bundle_of(std::vector<Bytes>(255, scalar));
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, loads(wide, opts(0, 255 * 64, 0)));
        TENSO_CHECK_OK(loads(wide, opts(0, kTreeBytesPerPacketByte * wide.size(), 0)));
    }

    // Packets in one tree: the top one, each bundle value, each sparse component.
    void testMaxEntries() {
        const Bytes scalar = Pkt().v4(0, TENSO_DTYPE_UINT8, 0).u8(7);
        const Bytes ten = bundle_of(std::vector<Bytes>(10, scalar));
        TENSO_CHECK_OK(loads(ten, opts(0, 0, 11)));
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, loads(ten, opts(0, 0, 10)));
        const Bytes nested = bundle_of({ten, ten});
        TENSO_CHECK_OK(loads(nested, opts(0, 0, 23)));
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, loads(nested, opts(0, 0, 22)));
        TENSO_CHECK_OK(loads(nested, opts(0, 0, 0)));
    }

    // A caller built against version 1 passes a struct that ends before max_decoded_bytes: the
    // struct sits right before a page that faults, so reading or writing a v2 field crashes.
    void testVersion1StructsStillWork() {
        const size_t v1 = offsetof(tenso_decode_options, max_decoded_bytes);
        GuardedBuffer g(v1);
        tenso_decode_options full = opts(1 << 20, 1, 1);  // v2 fields that would refuse everything
        full.version = 1;
        auto *o = reinterpret_cast<tenso_decode_options *>(g.place(reinterpret_cast<const uint8_t *>(&full), v1));
        const Bytes ten = bundle_of(std::vector<Bytes>(10, Pkt().v4(0, TENSO_DTYPE_UINT8, 0).u8(7)));
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_loads(&v, ten.data(), ten.size(), o));
        tenso_view_free(v);
        TENSO_CHECK_OK(tenso_decode_options_init(o, 1));
        CPPUNIT_ASSERT_EQUAL(uint32_t(1), o->version);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), o->max_packet_bytes);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_decode_options_init(o, TENSO_DECODE_OPTIONS_VERSION + 1));
        tenso_decode_options two;
        TENSO_CHECK_OK(tenso_decode_options_init(&two, 2));
        CPPUNIT_ASSERT_EQUAL(uint32_t(2), two.version);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), two.max_decoded_bytes);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), two.max_entries);
    }

    // Every packet used to carry two 32-dim shape arrays and more (Node and View): 55 times
    // the bytes. The decoder's own count stays within the stated bound, and so does what the
    // view really keeps (malloc's count, in builds without a sanitizer's allocator).
    void testTreeCostsASmallMultipleOfItsBytes() {
        const Bytes tree = tree_of_tiny_bundles();
        const uint64_t bound = kTreeBytesPerPacketByte * tree.size();
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, loads(tree, opts(0, bound / 4, 0)));
        TENSO_CHECK_OK(loads(tree, opts(0, bound, 0)));
#ifndef LIMITS_TEST_SANITIZED
        malloc_trim(0);
        const size_t before = mallinfo2().uordblks;
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_loads(&v, tree.data(), tree.size(), nullptr));
        const size_t kept = mallinfo2().uordblks - before;
        tenso_view_free(v);
        std::fprintf(stderr, "tree of %zu bytes: the view keeps %zu bytes (%.1f x)\n", tree.size(), kept,
                     double(kept) / double(tree.size()));
        CPPUNIT_ASSERT_MESSAGE(std::to_string(kept) + " bytes kept", kept <= kKeptBytesPerPacketByte * tree.size());
#endif
    }

    // A decode that succeeds under max_decoded_bytes = B never held more than B (+ kPeakSlack)
    // of tree at once, whatever the packet's shape.
    void testPeakWithinMaxDecodedBytes() {
#ifndef LIMITS_TEST_SANITIZED
        const Bytes scalar = Pkt().v4(0, TENSO_DTYPE_UINT8, 0).u8(7);
        const Bytes tree = tree_of_tiny_bundles(), wide = bundle_of(std::vector<Bytes>(255, scalar));
        for (const Bytes *p : {&tree, &wide}) {
            const uint64_t b = kTreeBytesPerPacketByte * p->size();
            tenso_status st = TENSO_OK;
            const int64_t peak = peak_heap([&] { st = loads(*p, opts(0, b, 0)); });
            TENSO_CHECK_OK(st);
            std::fprintf(stderr, "packet of %zu bytes under max_decoded_bytes %llu: peak %lld\n", p->size(),
                         (unsigned long long)b, (long long)peak);
            CPPUNIT_ASSERT_MESSAGE("peak " + std::to_string(peak), peak <= int64_t(b) + kPeakSlack);
        }
#endif
    }

    // 60 nested bundles, each claiming 255 entries and holding one: 1.1 KB that reserved
    // 255 children per level before reading any (3 MB) under max_decoded_bytes 64 KiB.
    void testClaimedBundleCountsCostNothing() {
        Bytes p = Pkt().v4(TENSO_FLAG_BUNDLE, 0, 255);
        for (int i = 0; i < 60; ++i) p = Pkt().v4(TENSO_FLAG_BUNDLE, 0, 255).entry("", p);
        CPPUNIT_ASSERT(p.size() < 1200);
        const uint64_t b = 64 << 10;
        tenso_status st = TENSO_OK;
#ifndef LIMITS_TEST_SANITIZED
        const int64_t peak = peak_heap([&] { st = loads(p, opts(0, b, 0)); });
        CPPUNIT_ASSERT_MESSAGE("peak " + std::to_string(peak), peak <= int64_t(b) + kPeakSlack);
#else
        st = loads(p, opts(0, b, 0));
#endif
        CPPUNIT_ASSERT_MESSAGE(tenso_describe(st), st != TENSO_OK);
    }

    // Bodies of 2 MiB or more take whole 2 MiB huge pages: 3 MiB costs 4 MiB, and is charged so.
    // Only on kernels with 4 KiB pages; with 16 or 64 KiB pages (some aarch64) the library
    // asks for no huge pages and charges 3 MiB as 3 MiB.
    void testRoundedBodiesCharged() {
        const Bytes three = compressed_zeros(3);
        if (::sysconf(_SC_PAGESIZE) != 4096) {
            TENSO_CHECK_OK(loads(three, opts(0, (3 << 20) + (64 << 10), 0)));
            TENSO_CHECK_STATUS(TENSO_E_LIMIT, loads(three, opts(0, (3 << 20) - (64 << 10), 0)));
            return;
        }
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, loads(three, opts(0, (3 << 20) + (64 << 10), 0)));
        TENSO_CHECK_OK(loads(three, opts(0, (4 << 20) + (64 << 10), 0)));
    }

    // A stream reader's buffer is memory the decode holds: max_decoded_bytes bounds it as
    // max_packet_bytes does, before the bytes are read.
    void testStreamBufferWithinMaxDecodedBytes() {
        std::vector<uint8_t> data(1 << 20, 1);
        const uint64_t shape[1] = {data.size()};
        tenso_tensor t = {data.data(), data.size(), shape, 1, TENSO_DTYPE_UINT8};
        tenso_buffer buf = TENSO_BUFFER_INIT;
        TENSO_CHECK_OK(tenso_dumps(&buf, &t, nullptr));
        const int fd = ::memfd_create("tenso-limits", MFD_CLOEXEC);
        CPPUNIT_ASSERT(fd >= 0 && ::write(fd, buf.data, buf.size) == ssize_t(buf.size));
        tenso_buffer_dispose(&buf);
        auto read = [&](uint64_t max_decoded) {
            CPPUNIT_ASSERT(::lseek(fd, 0, SEEK_SET) == 0);
            const tenso_decode_options o = opts(0, max_decoded, 0);
            tenso_view *v = nullptr;
            const tenso_status st = tenso_read_fd(&v, fd, &o);
            tenso_view_free(v);
            return st;
        };
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, read(64 << 10));
        TENSO_CHECK_OK(read(2 << 20));
        ::close(fd);
    }

    // max_inflation (version 4): decompressed bodies, summed over the tree, against a multiple
    // of the bytes decoded (counted as at least 4 MiB), whatever the header claims; the stream
    // decoder applies it too (the bytes are then exactly the packet's), and a version 3 struct
    // has no such field. `four` is ~66 KiB that inflate to 16 MiB; `big` ~8 MiB to 2 GiB.
    void testMaxInflation() {
        const Bytes one = compressed_zeros(4), four = bundle_of({one, one, one, one});
        auto with = [](uint32_t inflation) {
            tenso_decode_options o = opts(0, 0, 0);
            o.max_inflation = inflation;
            return o;
        };
        TENSO_CHECK_OK(loads(four, with(0)));
        TENSO_CHECK_OK(loads(four, with(4)));                     // 4 x 4 MiB: exactly enough
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, loads(four, with(3)));  // 12 MiB
        CPPUNIT_ASSERT(std::string(tenso_last_error()).find("max_inflation") != std::string::npos);
        TENSO_CHECK_OK(loads(one, with(1)));
        // Past the floor the packet's own size counts: 255 bodies of 8 MiB from a packet of about
        // 8 MiB inflate 2 GiB, refused at 16 x (checked before anything is inflated).
        const Bytes big = bundle_of(std::vector<Bytes>(255, compressed_zeros(8)));
        CPPUNIT_ASSERT(big.size() > (size_t(4) << 20));
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, loads(big, with(16)));
        tenso_decode_options v3 = with(1);
        v3.version = 3;
        TENSO_CHECK_OK(loads(four, v3));
        // The stream decoder, fed the packet in one piece and then byte by byte.
        for (size_t piece : {four.size(), size_t(1)}) {
            const tenso_decode_options o = with(3);
            tenso_decoder_options dopts = TENSO_DECODER_OPTIONS_INIT;
            dopts.decode = &o;
            tenso_decoder *d = nullptr;
            TENSO_CHECK_OK(tenso_decoder_new(&d, &dopts));
            tenso_status st = TENSO_OK;
            tenso_view *v = nullptr;
            for (size_t off = 0; off < four.size() && st == TENSO_OK && !v; off += piece) {
                size_t used = 0;
                st = tenso_decoder_feed(d, four.data() + off, std::min(piece, four.size() - off), &used, &v);
            }
            TENSO_CHECK_STATUS(TENSO_E_LIMIT, st);
            CPPUNIT_ASSERT(!v);
            tenso_decoder_free(d);
        }
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiDecodeLimitsTest);
