// CapiDecoderTest - the push-style stream decoder (tenso_decoder_*): every golden vector fed
// whole, byte by byte and in random splits, through feed and through buffer/commit, must give
// what tenso_loads gives; truncation at every byte; limits refusing claimed lengths before any
// allocation; slow senders, SO_RCVTIMEO and timeout_ms over sockets; the caller allocator,
// buffer reuse, read-ahead and views that outlive their decoder; and an LZ4 frame of 80k
// one-byte blocks that framing must walk once, not once per read.
#include <cppunit/extensions/HelperMacros.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <malloc.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "hostile_util.hpp"
#include "tenso/tenso.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DECODER_TEST_SANITIZED 1  // their allocator keeps its own books: mallinfo2 says nothing
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DECODER_TEST_SANITIZED 1
#endif
#endif

using namespace hostile;

namespace {

struct DecoderFree {
    void operator()(tenso_decoder *d) const { tenso_decoder_free(d); }
};
using DecoderPtr = std::unique_ptr<tenso_decoder, DecoderFree>;

DecoderPtr make_decoder(const tenso_decoder_options *o = nullptr) {
    tenso_decoder *d = nullptr;
    TENSO_CHECK_OK(tenso_decoder_new(&d, o));
    CPPUNIT_ASSERT(d != nullptr);
    return DecoderPtr(d);
}

struct Sock {
    int fd[2] = {-1, -1};
    Sock() { CPPUNIT_ASSERT_EQUAL(0, ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd)); }
    ~Sock() {
        close_writer();
        if (fd[0] >= 0) ::close(fd[0]);
    }
    void close_writer() {
        if (fd[1] >= 0) ::close(fd[1]);
        fd[1] = -1;
    }
};

void write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t r = ::write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return;  // the reader gave up; the test reports its own failure
        p += r;
        n -= size_t(r);
    }
}

std::string loads_diff(const tenso_view *v, const Bytes &b) {
    tenso_view *l = nullptr;
    tenso_status st = tenso_loads(&l, b.data(), b.size(), nullptr);
    ViewPtr lv(l);
    if (st != TENSO_OK) return std::string("loads -> ") + tenso_status_name(st);
    if (tenso_view_packet_size(v) != b.size()) return "packet size " + std::to_string(tenso_view_packet_size(v));
    return view_diff(v, l);
}

// Feeds `b` in pieces of the sizes `next()` gives; returns the one view it must yield at the end.
template <class Next>
ViewPtr feed_in_pieces(tenso_decoder *d, const Bytes &b, Next next) {
    ViewPtr got;
    size_t pos = 0;
    while (pos < b.size()) {
        CPPUNIT_ASSERT(!got);
        size_t n = std::min(next(), b.size() - pos), used = 0;
        tenso_view *v = nullptr;
        // Checked without building messages on success: a byte-by-byte run makes a million calls.
        const tenso_status st = tenso_decoder_feed(d, b.data() + pos, n, &used, &v);
        if (st != TENSO_OK) CPPUNIT_FAIL("feed at " + std::to_string(pos) + " -> " + tenso_describe(st));
        if (used != n)
            CPPUNIT_FAIL("feed took " + std::to_string(used) + " of " + std::to_string(n));  // all is this packet's
        pos += used;
        got.reset(v);
        if (!v && (tenso_decoder_idle(d) || tenso_decoder_needed(d) == 0))
            CPPUNIT_FAIL("idle or needing nothing mid-packet");
    }
    CPPUNIT_ASSERT(got);
    CPPUNIT_ASSERT_EQUAL(1, tenso_decoder_idle(d));
    return got;
}

// The same through buffer/commit, writing at most `next()` bytes a time.
template <class Next>
ViewPtr commit_in_pieces(tenso_decoder *d, const Bytes &b, Next next) {
    ViewPtr got;
    size_t pos = 0;
    while (!got) {
        void *dst = nullptr;
        size_t room = 0;
        tenso_status st = tenso_decoder_buffer(d, &dst, &room);
        if (st != TENSO_OK) CPPUNIT_FAIL("buffer -> " + tenso_describe(st));
        if (room == 0 || !dst || room > tenso_decoder_needed(d)) CPPUNIT_FAIL("buffer offers " + std::to_string(room));
        if (pos + room > b.size()) CPPUNIT_FAIL("the decoder asks past the packet");
        size_t n = std::min(next(), room);
        std::memcpy(dst, b.data() + pos, n);
        pos += n;
        tenso_view *v = nullptr;
        st = tenso_decoder_commit(d, n, &v);
        if (st != TENSO_OK) CPPUNIT_FAIL("commit -> " + tenso_describe(st));
        got.reset(v);
    }
    CPPUNIT_ASSERT_EQUAL(b.size(), pos);
    return got;
}

// Reads `parts` from s.fd[0] through d, then expects the clean end; stops the writer thread
// `w` either way (a failure must not leave it blocked on a full socket).
void expect_packets_then_end(tenso_decoder *d, Sock &s, std::thread &w, const std::vector<Bytes> &parts) {
    std::string fail;
    for (const Bytes &b : parts) {
        tenso_view *v = nullptr;
        tenso_status st = tenso_decoder_read_fd(&v, d, s.fd[0]);
        ViewPtr vp(v);
        fail = st != TENSO_OK ? tenso_describe(st) : loads_diff(v, b);
        if (!fail.empty()) break;
    }
    tenso_view *v = nullptr;
    tenso_status end = fail.empty() ? tenso_decoder_read_fd(&v, d, s.fd[0]) : TENSO_E_END_OF_STREAM;
    ::shutdown(s.fd[0], SHUT_RDWR);
    w.join();
    CPPUNIT_ASSERT_EQUAL(std::string(), fail);
    TENSO_CHECK_STATUS(TENSO_E_END_OF_STREAM, end);
}

// A caller allocator that records what it is asked.
struct Recorder {
    int allocs = 0, releases = 0;
    size_t last_size = 0, last_align = 0;
    void *last = nullptr;
    bool refuse = false;
    bool misalign = false;  // 64-aligned memory only, whatever was asked
    static void *alloc(void *u, size_t size, size_t align) {
        auto *r = static_cast<Recorder *>(u);
        if (r->refuse) return nullptr;
        ++r->allocs;
        r->last_size = size;
        r->last_align = align;
        const size_t a = r->misalign ? 4096 : align, extra = r->misalign ? 64 : 0;
        r->last = static_cast<uint8_t *>(std::aligned_alloc(a, (size + extra + a - 1) / a * a)) + extra;
        return r->last;
    }
    static void release(void *u, void *p, size_t size) {
        auto *r = static_cast<Recorder *>(u);
        ++r->releases;
        CPPUNIT_ASSERT_EQUAL(r->last_size, size);
        std::free(static_cast<uint8_t *>(p) - (r->misalign ? 64 : 0));
    }
    tenso_decoder_options opts(const tenso_decode_options *dec = nullptr) {
        tenso_decoder_options o = TENSO_DECODER_OPTIONS_INIT;
        o.decode = dec;
        o.alloc = &Recorder::alloc;
        o.release = &Recorder::release;
        o.alloc_user = this;
        return o;
    }
};

Bytes dense_f32(size_t n, float base = 1.0f) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = base + float(i);
    std::vector<uint64_t> shape = {n};
    tenso_tensor t = tensor(x.data(), n * 4, shape, TENSO_DTYPE_FLOAT32);
    Buffer b;
    TENSO_CHECK_OK(tenso_dumps(&b.b, &t, nullptr));
    return b.bytes();
}

// XXH32 of a few bytes (< 16), for the LZ4 frame header checksum.
uint32_t xxh32_small(const uint8_t *p, size_t n) {
    const uint32_t P1 = 2654435761u, P2 = 2246822519u, P3 = 3266489917u, P5 = 374761393u;
    auto rotl = [](uint32_t x, int r) { return (x << r) | (x >> (32 - r)); };
    uint32_t h = P5 + uint32_t(n);
    for (size_t i = 0; i < n; ++i) h = rotl(h + p[i] * P5, 11) * P1;
    h ^= h >> 15;
    h *= P2;
    h ^= h >> 13;
    h *= P3;
    h ^= h >> 16;
    return h;
}

// A v4 uint8 [raw] packet whose LZ4 body is `small` stored one-byte blocks, then one stored
// block with the rest: framing must walk `small` block headers.
Bytes many_block_packet(size_t small, size_t raw) {
    Bytes b = {'T', 'N', 'S', 'O', 4, 0, 0, TENSO_DTYPE_UINT8, 1, 0};
    const uint16_t flags = TENSO_FLAG_COMPRESSION;
    b[5] = uint8_t(flags);
    b[6] = uint8_t(flags >> 8);
    b.resize(14);
    set32(b, 10, uint32_t(raw));
    const uint8_t desc[2] = {0x60, 0x70};  // version 1, independent blocks; 4 MiB blocks
    const uint8_t head[7] = {0x04, 0x22, 0x4D, 0x18, desc[0], desc[1], uint8_t(xxh32_small(desc, 2) >> 8)};
    b.insert(b.end(), head, head + 7);
    auto block = [&](size_t n, uint8_t fill) {
        size_t at = b.size();
        b.resize(at + 4 + n, fill);
        set32(b, at, 0x80000000u | uint32_t(n));
    };
    for (size_t i = 0; i < small; ++i) block(1, uint8_t(i));
    block(raw - small, 7);
    size_t at = b.size();
    b.resize(at + 4, 0);  // end mark
    return b;
}

}  // namespace

class CapiDecoderTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiDecoderTest);
    CPPUNIT_TEST(testGoldenFeed);
    CPPUNIT_TEST(testGoldenBufferCommit);
    CPPUNIT_TEST(testBackToBackInOneFeed);
    CPPUNIT_TEST(testTruncationAtEveryByte);
    CPPUNIT_TEST(testTruncationWording);
    CPPUNIT_TEST(testErrorsNeedReset);
    CPPUNIT_TEST(testHugeClaimsRefusedBeforeAllocation);
    CPPUNIT_TEST(testPacketLengthUsesTheDecoder);
    CPPUNIT_TEST(testManyLz4BlocksAreLinear);
    CPPUNIT_TEST(testSlowSender);
    CPPUNIT_TEST(testRcvTimeo);
    CPPUNIT_TEST(testTimeoutMs);
    CPPUNIT_TEST(testSndTimeo);
    CPPUNIT_TEST(testCallerAllocator);
    CPPUNIT_TEST(testMisalignedAllocationReleased);
    CPPUNIT_TEST(testTreeLimitsAtHeaders);
    CPPUNIT_TEST(testErrorStatusIsLoads);
    CPPUNIT_TEST(testFailureAfterFramingKeepsPosition);
    CPPUNIT_TEST(testHugeTimeoutIsNone);
    CPPUNIT_TEST(testBufferReuse);
    CPPUNIT_TEST(testReadAheadManySmallPackets);
    CPPUNIT_TEST(testViewsOutliveDecoder);
    CPPUNIT_TEST(testSmallBuffersPooledUpToTheBound);
    CPPUNIT_TEST(testOptions);
    CPPUNIT_TEST_SUITE_END();

public:
    void setUp() override { ::signal(SIGPIPE, SIG_IGN); }

    void testGoldenFeed() {
        std::mt19937 rng(14);
        DecoderPtr d = make_decoder();
        for (const std::string &name : golden_names()) {
            const Bytes b = golden(name);
            ViewPtr whole = feed_in_pieces(d.get(), b, [&] { return b.size(); });
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, std::string(), loads_diff(whole.get(), b));
            CPPUNIT_ASSERT_EQUAL(1, tenso_view_owns_data(whole.get()));
            ViewPtr ones = feed_in_pieces(d.get(), b, [] { return size_t(1); });
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name + " byte by byte", std::string(), loads_diff(ones.get(), b));
            for (int round = 0; round < 4; ++round) {
                std::uniform_int_distribution<size_t> split(1, std::max<size_t>(1, b.size() / 3));
                ViewPtr v = feed_in_pieces(d.get(), b, [&] { return split(rng); });
                CPPUNIT_ASSERT_EQUAL_MESSAGE(name + " random splits", std::string(), loads_diff(v.get(), b));
            }
        }
    }

    void testGoldenBufferCommit() {
        std::mt19937 rng(41);
        DecoderPtr d = make_decoder();
        for (const std::string &name : golden_names()) {
            const Bytes b = golden(name);
            ViewPtr all = commit_in_pieces(d.get(), b, [] { return ~size_t(0); });
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, std::string(), loads_diff(all.get(), b));
            ViewPtr ones = commit_in_pieces(d.get(), b, [] { return size_t(1); });
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name + " byte by byte", std::string(), loads_diff(ones.get(), b));
            std::uniform_int_distribution<size_t> split(1, 97);
            ViewPtr v = commit_in_pieces(d.get(), b, [&] { return split(rng); });
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name + " random", std::string(), loads_diff(v.get(), b));
        }
    }

    // Every golden vector back to back in one buffer: each feed stops exactly at a packet's end.
    void testBackToBackInOneFeed() {
        Bytes all;
        std::vector<Bytes> parts;
        for (const std::string &name : golden_names()) {
            parts.push_back(golden(name));
            all.insert(all.end(), parts.back().begin(), parts.back().end());
        }
        DecoderPtr d = make_decoder();
        size_t pos = 0;
        for (const Bytes &b : parts) {
            size_t used = 0;
            tenso_view *v = nullptr;
            TENSO_CHECK_OK(tenso_decoder_feed(d.get(), all.data() + pos, all.size() - pos, &used, &v));
            ViewPtr vp(v);
            CPPUNIT_ASSERT(v);
            CPPUNIT_ASSERT_EQUAL(b.size(), used);
            CPPUNIT_ASSERT_EQUAL(std::string(), loads_diff(v, b));
            pos += used;
        }
        TENSO_CHECK_OK(tenso_decoder_finish(d.get()));
    }

    void testTruncationAtEveryByte() {
        DecoderPtr d = make_decoder();
        for (const std::string &name : golden_names()) {
            const Bytes b = golden(name);
            tenso_decoder_reset(d.get());
            TENSO_CHECK_OK(tenso_decoder_finish(d.get()));
            for (size_t i = 0; i + 1 < b.size(); ++i) {
                size_t used = 0;
                tenso_view *v = nullptr;
                TENSO_CHECK_OK(tenso_decoder_feed(d.get(), b.data() + i, 1, &used, &v));
                CPPUNIT_ASSERT(!v);
                TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_decoder_finish(d.get()));
            }
        }
    }

    // A cut stream is told in upstream tenso 0.24's words (which users match on), then ours.
    void testTruncationWording() {
        const Bytes b = dense_f32(10);  // 64 bytes of header and padding, a 40-byte body
        struct Cut {
            size_t at;
            const char *starts;
        } cuts[] = {
            {3, "Stream ended during header read. Expected 8 bytes, got 3 (stream ended inside a packet after 3 bytes"},
            {9, "Stream ended during v4 header read ("},
            {12, "Stream ended during packet read ("},
            {70,
             "Stream ended during body read. Expected 40 bytes, got 6 (stream ended inside a packet after 70 bytes, "
             "at least 34 more needed)"}};
        for (const Cut &c : cuts) {
            DecoderPtr d = make_decoder();
            size_t used = 0;
            tenso_view *v = nullptr;
            TENSO_CHECK_OK(tenso_decoder_feed(d.get(), b.data(), c.at, &used, &v));
            CPPUNIT_ASSERT_EQUAL(c.at, used);
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_decoder_finish(d.get()));
            const std::string msg = tenso_last_error();
            CPPUNIT_ASSERT_MESSAGE(msg, msg.rfind(c.starts, 0) == 0);
        }
    }

    void testErrorsNeedReset() {
        DecoderPtr d = make_decoder();
        const uint8_t junk[] = {'N', 'O', 'P', 'E', 4, 0, 0, 1, 0, 0};
        size_t used = 0;
        tenso_view *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_BAD_MAGIC, tenso_decoder_feed(d.get(), junk, sizeof junk, &used, &v));
        const Bytes good = dense_f32(8);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_decoder_feed(d.get(), good.data(), good.size(), &used, &v));
        tenso_decoder_reset(d.get());
        TENSO_CHECK_OK(tenso_decoder_feed(d.get(), good.data(), good.size(), &used, &v));
        ViewPtr vp(v);
        CPPUNIT_ASSERT_EQUAL(std::string(), loads_diff(v, good));
        // A corrupted integrity footer: the statuses tenso_loads gives.
        Bytes bad = golden("dense_i32_integrity");
        bad.back() ^= 1;
        tenso_view *v2 = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_CHECKSUM, tenso_decoder_feed(d.get(), bad.data(), bad.size(), &used, &v2));
        CPPUNIT_ASSERT(!v2);
    }

    // A f64 [1e9] header (8 GB claimed) and a bundle value claiming 4 GiB: the limits refuse
    // them from the header, before the allocator is ever asked; without limits the bundle's
    // claim is never allocated either (staging grows with the bytes received).
    void testHugeClaimsRefusedBeforeAllocation() {
        Bytes huge = {'T', 'N', 'S', 'O', 4, 0, 0, TENSO_DTYPE_FLOAT64, 1, 0, 0, 0, 0, 0};
        set32(huge, 10, 1000000000u);
        tenso_decode_options lim = TENSO_DECODE_OPTIONS_INIT;
        lim.max_packet_bytes = 1 << 20;
        Recorder r;
        tenso_decoder_options o = r.opts(&lim);
        DecoderPtr d = make_decoder(&o);
        size_t used = 0;
        tenso_view *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, tenso_decoder_feed(d.get(), huge.data(), huge.size(), &used, &v));
        CPPUNIT_ASSERT_EQUAL(0, r.allocs);
        tenso_decoder_reset(d.get());
        lim.max_packet_bytes = 0;
        lim.max_decoded_bytes = 1 << 20;
        DecoderPtr d2 = make_decoder(&o);
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, tenso_decoder_feed(d2.get(), huge.data(), huge.size(), &used, &v));
        CPPUNIT_ASSERT_EQUAL(0, r.allocs);

        Bytes bundle = {'T', 'N', 'S', 'O', 4, 0, 0, 0, 1, 0};
        const uint16_t bf = TENSO_FLAG_BUNDLE;
        bundle[5] = uint8_t(bf);
        bundle[6] = uint8_t(bf >> 8);
        bundle.insert(bundle.end(), {1, 0, 0, 0, 'k', 0xF0, 0xFF, 0xFF, 0xFF});
        Bytes inner = huge;
        inner[7] = TENSO_DTYPE_UINT8;
        bundle.insert(bundle.end(), inner.begin(), inner.end());
        Recorder r2;
        tenso_decoder_options o2 = r2.opts();
        DecoderPtr d3 = make_decoder(&o2);
        TENSO_CHECK_OK(tenso_decoder_feed(d3.get(), bundle.data(), bundle.size(), &used, &v));
        CPPUNIT_ASSERT_EQUAL(bundle.size(), used);
        CPPUNIT_ASSERT(tenso_decoder_needed(d3.get()) > (size_t(1) << 31));
        void *dst = nullptr;
        size_t room = 0;
        TENSO_CHECK_OK(tenso_decoder_buffer(d3.get(), &dst, &room));
        CPPUNIT_ASSERT(room <= (size_t(1) << 20));  // grows with what arrives, not with the claim
        CPPUNIT_ASSERT_EQUAL(0, r2.allocs);
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_decoder_finish(d3.get()));
        // And with a limit, the bundle's claim is refused as soon as it is read.
        lim.max_decoded_bytes = 0;
        lim.max_packet_bytes = 1 << 20;
        DecoderPtr d4 = make_decoder(&o2);
        o2.decode = &lim;
        DecoderPtr d5 = make_decoder(&o2);
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, tenso_decoder_feed(d5.get(), bundle.data(), bundle.size(), &used, &v));
    }

    void testPacketLengthUsesTheDecoder() {
        for (const std::string &name : golden_names()) {
            const Bytes b = golden(name);
            size_t len = 0;
            TENSO_CHECK_OK(tenso_packet_length(&len, b.data(), b.size(), nullptr));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, b.size(), len);
            size_t need = 0;
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_packet_length(&need, b.data(), b.size() - 1, nullptr));
            CPPUNIT_ASSERT_MESSAGE(name, need > b.size() - 1 && need <= b.size());
        }
    }

    // 80k one-byte LZ4 blocks (a 1.4 MB packet): fed one byte at a time and read from a socket,
    // framing walks each block header once. Re-walking the list per read, as framing once did,
    // takes minutes here (80k x 400 KB), far past the CTest timeout.
    void testManyLz4BlocksAreLinear() {
        const Bytes b = many_block_packet(80000, 1 << 20);
        tenso_view *l = nullptr;
        TENSO_CHECK_OK(tenso_loads(&l, b.data(), b.size(), nullptr));
        ViewPtr lv(l);
        DecoderPtr d = make_decoder();
        ViewPtr v = feed_in_pieces(d.get(), b, [] { return size_t(1); });
        CPPUNIT_ASSERT_EQUAL(std::string(), view_diff(v.get(), l));
        ViewPtr c = commit_in_pieces(d.get(), b, [] { return size_t(5); });
        CPPUNIT_ASSERT_EQUAL(std::string(), view_diff(c.get(), l));
        Sock s;
        std::thread w([&] {
            for (size_t i = 0; i < b.size(); i += 4096)
                write_all(s.fd[1], b.data() + i, std::min<size_t>(4096, b.size() - i));
        });
        tenso_view *r = nullptr;
        tenso_status st = tenso_read_fd(&r, s.fd[0], nullptr);
        w.join();
        ViewPtr rv(r);
        TENSO_CHECK_STATUS(TENSO_OK, st);
        CPPUNIT_ASSERT_EQUAL(std::string(), view_diff(r, l));
    }

    // A sender that writes one byte per syscall: every golden vector through read_fd.
    void testSlowSender() {
        std::vector<Bytes> parts;
        for (const std::string &name : golden_names()) {
            Bytes b = golden(name);
            if (b.size() <= 4096) parts.push_back(b);
        }
        for (uint32_t flags : {0u, TENSO_DECODER_READ_AHEAD}) {
            Sock s;
            std::thread w([&] {
                for (const Bytes &b : parts)
                    for (uint8_t c : b) write_all(s.fd[1], &c, 1);
                s.close_writer();
            });
            tenso_decoder_options o = TENSO_DECODER_OPTIONS_INIT;
            o.flags = flags;
            DecoderPtr d = make_decoder(&o);
            expect_packets_then_end(d.get(), s, w, parts);
        }
    }

    // A peer that sends 4 bytes and goes quiet: SO_RCVTIMEO gives TENSO_E_TIMEOUT, not a hang,
    // and the decoder keeps the partial packet for when the rest arrives.
    void testRcvTimeo() {
        const Bytes b = dense_f32(16);
        Sock s;
        struct timeval tv = {0, 100 * 1000};
        CPPUNIT_ASSERT_EQUAL(0, ::setsockopt(s.fd[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
        write_all(s.fd[1], b.data(), 4);
        tenso_view *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_TIMEOUT, tenso_read_fd(&v, s.fd[0], nullptr));
        CPPUNIT_ASSERT(!v);
        // The stack decoder of tenso_read_fd took the 4 bytes; a decoder keeps them across calls.
        write_all(s.fd[1], b.data(), 4);
        DecoderPtr d = make_decoder();
        TENSO_CHECK_STATUS(TENSO_E_TIMEOUT, tenso_decoder_read_fd(&v, d.get(), s.fd[0]));
        CPPUNIT_ASSERT_EQUAL(0, tenso_decoder_idle(d.get()));
        write_all(s.fd[1], b.data() + 4, b.size() - 4);
        TENSO_CHECK_OK(tenso_decoder_read_fd(&v, d.get(), s.fd[0]));
        ViewPtr vp(v);
        CPPUNIT_ASSERT_EQUAL(std::string(), loads_diff(v, b));
    }

    // timeout_ms (decode options v3) on an fd with no SO_RCVTIMEO: a socket and a pipe.
    void testTimeoutMs() {
        const Bytes b = dense_f32(16);
        tenso_decode_options o;
        TENSO_CHECK_OK(tenso_decode_options_init(&o, 3));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), o.timeout_ms);
        o.timeout_ms = 100;
        Sock s;
        write_all(s.fd[1], b.data(), 4);
        tenso_view *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_TIMEOUT, tenso_read_fd(&v, s.fd[0], &o));
        int p[2];
        CPPUNIT_ASSERT_EQUAL(0, ::pipe2(p, O_CLOEXEC | O_NONBLOCK));
        write_all(p[1], b.data(), 6);
        tenso_decoder_options dopt = TENSO_DECODER_OPTIONS_INIT;
        dopt.decode = &o;
        dopt.flags = TENSO_DECODER_READ_AHEAD;
        DecoderPtr d = make_decoder(&dopt);
        TENSO_CHECK_STATUS(TENSO_E_TIMEOUT, tenso_decoder_read_fd(&v, d.get(), p[0]));
        write_all(p[1], b.data() + 6, b.size() - 6);
        TENSO_CHECK_OK(tenso_decoder_read_fd(&v, d.get(), p[0]));
        ViewPtr vp(v);
        CPPUNIT_ASSERT_EQUAL(std::string(), loads_diff(v, b));
        ::close(p[1]);
        TENSO_CHECK_STATUS(TENSO_E_END_OF_STREAM, tenso_decoder_read_fd(&v, d.get(), p[0]));
        ::close(p[0]);
        // A version-2 struct has no timeout_ms: tenso_decode_options_init(2) leaves it alone.
        tenso_decode_options two;
        std::memset(&two, 0xAB, sizeof two);
        TENSO_CHECK_OK(tenso_decode_options_init(&two, 2));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0xABABABABABABABABull), two.timeout_ms);
    }

    // A peer that stops reading: SO_SNDTIMEO makes tenso_write_fd give TENSO_E_TIMEOUT.
    void testSndTimeo() {
        Sock s;
        int small = 4096;
        ::setsockopt(s.fd[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
        struct timeval tv = {0, 100 * 1000};
        CPPUNIT_ASSERT_EQUAL(0, ::setsockopt(s.fd[1], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv));
        std::vector<float> x(1 << 20, 1.0f);
        std::vector<uint64_t> shape = {x.size()};
        tenso_tensor t = tensor(x.data(), x.size() * 4, shape, TENSO_DTYPE_FLOAT32);
        uint64_t written = 0;
        TENSO_CHECK_STATUS(TENSO_E_TIMEOUT, tenso_write_fd(&written, s.fd[1], &t, nullptr));
        CPPUNIT_ASSERT(written > 0 && written < x.size() * 4);
    }

    void testCallerAllocator() {
        Recorder r;
        tenso_decoder_options o = r.opts();
        DecoderPtr d = make_decoder(&o);
        for (const char *name : {"dense_f32_vec", "bundle_mixed", "string_mixed_utf8", "dense_u8_70000"}) {
            const Bytes b = golden(name);
            const int before = r.allocs;
            ViewPtr v = feed_in_pieces(d.get(), b, [] { return size_t(3); });
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, before + 1, r.allocs);
            CPPUNIT_ASSERT_EQUAL(b.size(), r.last_size);
            CPPUNIT_ASSERT(r.last_align >= 64);
            CPPUNIT_ASSERT_EQUAL(1, tenso_view_owns_data(v.get()));
            CPPUNIT_ASSERT_EQUAL(std::string(), loads_diff(v.get(), b));
            CPPUNIT_ASSERT_EQUAL(before, r.releases);  // alive while the view is
            v.reset();
            CPPUNIT_ASSERT_EQUAL(before + 1, r.releases);
        }
        // Reset mid-packet releases the partial packet's memory.
        const Bytes b = dense_f32(64);
        size_t used = 0;
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_decoder_feed(d.get(), b.data(), b.size() - 1, &used, &v));
        CPPUNIT_ASSERT_EQUAL(r.allocs - 1, r.releases);
        tenso_decoder_reset(d.get());
        CPPUNIT_ASSERT_EQUAL(r.allocs, r.releases);
        // A refusal is TENSO_E_NO_MEMORY.
        r.refuse = true;
        TENSO_CHECK_STATUS(TENSO_E_NO_MEMORY, tenso_decoder_feed(d.get(), b.data(), b.size(), &used, &v));
    }

    // A fault inside entry a shows as garbage where entry b should be: framing alone says
    // BAD_MAGIC, but the decoder names it as tenso_loads does, whole or byte by byte.
    void testErrorStatusIsLoads() {
        Pkt p;
        p.v4(TENSO_FLAG_BUNDLE, 0, 2);
        Pkt a;
        a.v4(0, TENSO_DTYPE_FLOAT32, 1).u32(1).u32(0).u32(0);  // 22 bytes claimed, 18 a packet
        p.u32(1).str("a").u32(22).raw(a.b);
        p.u32(1).str("b").u32(18).str("XXXX").u8(4).zeros(13);
        const Bytes &b = p;
        tenso_view *v = nullptr;
        const tenso_status want = tenso_loads(&v, b.data(), b.size(), nullptr);
        CPPUNIT_ASSERT_EQUAL(int(TENSO_E_BAD_BUNDLE), int(want));
        for (size_t step : {b.size(), size_t(1)}) {
            DecoderPtr d = make_decoder();
            tenso_status st = TENSO_OK;
            for (size_t pos = 0; pos < b.size() && st == TENSO_OK; pos += step) {
                size_t used = 0;
                st = tenso_decoder_feed(d.get(), b.data() + pos, std::min(step, b.size() - pos), &used, &v);
            }
            CPPUNIT_ASSERT_EQUAL(int(want), int(st));
        }
    }

    // A packet that fails after it is framed (a checksum) counts whole: the caller, and the fd
    // loop's read-ahead, stay in step and the next packet decodes after a reset.
    void testFailureAfterFramingKeepsPosition() {
        const tenso_encode_options eo = enc(TENSO_ENCODE_INTEGRITY);
        std::vector<float> x(8, 1.0f);
        const std::vector<uint64_t> shape = {x.size()};
        const tenso_tensor t = tensor(x.data(), x.size() * 4, shape, TENSO_DTYPE_FLOAT32);
        Buffer ab;
        TENSO_CHECK_OK(tenso_dumps(&ab.b, &t, &eo));
        Bytes a = ab.bytes();
        a[a.size() - 12] ^= 1;  // a body byte under the footer
        const Bytes b = dense_f32(4);
        Bytes both = a;
        both.insert(both.end(), b.begin(), b.end());
        DecoderPtr d = make_decoder();
        size_t used = 0;
        tenso_view *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_CHECKSUM, tenso_decoder_feed(d.get(), both.data(), both.size(), &used, &v));
        CPPUNIT_ASSERT_EQUAL(a.size(), used);
        tenso_decoder_reset(d.get());
        TENSO_CHECK_OK(tenso_decoder_feed(d.get(), both.data() + used, both.size() - used, &used, &v));
        ViewPtr bv(v);
        CPPUNIT_ASSERT_EQUAL(std::string(), loads_diff(v, b));
        // A framing failure leaves the position unknown: nothing counts as taken.
        tenso_decoder_reset(d.get());
        const char junk[8] = {'X', 'X', 'X', 'X', 4, 0, 0, 0};
        TENSO_CHECK_STATUS(TENSO_E_BAD_MAGIC, tenso_decoder_feed(d.get(), junk, sizeof junk, &used, &v));
        CPPUNIT_ASSERT_EQUAL(size_t(0), used);
        for (uint32_t flags : {0u, uint32_t(TENSO_DECODER_READ_AHEAD)}) {
            Sock s;
            write_all(s.fd[1], both.data(), both.size());
            s.close_writer();
            tenso_decoder_options o = TENSO_DECODER_OPTIONS_INIT;
            o.flags = flags;
            DecoderPtr r = make_decoder(&o);
            TENSO_CHECK_STATUS(TENSO_E_CHECKSUM, tenso_decoder_read_fd(&v, r.get(), s.fd[0]));
            tenso_decoder_reset(r.get());
            TENSO_CHECK_OK(tenso_decoder_read_fd(&v, r.get(), s.fd[0]));
            ViewPtr rv(v);
            CPPUNIT_ASSERT_EQUAL(std::string(), loads_diff(v, b));
            TENSO_CHECK_STATUS(TENSO_E_END_OF_STREAM, tenso_decoder_read_fd(&v, r.get(), s.fd[0]));
        }
    }

    // max_entries and max_depth refuse a tree at its headers, not after the decoder has taken
    // a 4 GB first entry.
    void testTreeLimitsAtHeaders() {
        const uint32_t vlen = 14 + 16u * 250000000u;
        Pkt one;  // bundle{a: complex128[2.5e8]}: 2 packets
        one.v4(TENSO_FLAG_BUNDLE, 0, 1)
            .u32(1)
            .str("a")
            .u32(vlen)
            .v4(0, TENSO_DTYPE_COMPLEX128, 1)
            .u32((vlen - 14) / 16);
        Pkt two;  // bundle{a: bundle{b: ...}}: 3 packets, 2 deep
        two.v4(TENSO_FLAG_BUNDLE, 0, 1).u32(1).str("a").u32(vlen).v4(TENSO_FLAG_BUNDLE, 0, 1).u32(1).str("b");
        struct Case {
            const Bytes &b;
            uint64_t entries, depth;
        };
        for (const Case &c : {Case{one, 1, 0}, Case{two, 2, 0}, Case{two, 0, 1}}) {
            tenso_decode_options o = TENSO_DECODE_OPTIONS_INIT;
            o.max_entries = c.entries;
            o.max_depth = uint32_t(c.depth);
            tenso_view *v = nullptr;
            tenso_decoder_options dopt = TENSO_DECODER_OPTIONS_INIT;
            dopt.decode = &o;
            DecoderPtr d = make_decoder(&dopt);
            size_t used = 0;
            TENSO_CHECK_STATUS(TENSO_E_LIMIT, tenso_decoder_feed(d.get(), c.b.data(), c.b.size(), &used, &v));
        }
    }

    // A 4096-aligned body asks for 4096; 64-aligned memory fails the packet and goes back at once.
    void testMisalignedAllocationReleased() {
        Recorder r;
        r.misalign = true;
        tenso_decoder_options o = r.opts();
        DecoderPtr d = make_decoder(&o);
        std::vector<float> x(1000, 2.0f);
        const std::vector<uint64_t> shape = {x.size()};
        const tenso_tensor t = tensor(x.data(), x.size() * 4, shape, TENSO_DTYPE_FLOAT32);
        const tenso_encode_options eo = enc(0, 4096);
        Buffer buf;
        TENSO_CHECK_OK(tenso_dumps(&buf.b, &t, &eo));
        size_t used = 0;
        tenso_view *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_decoder_feed(d.get(), buf.b.data, buf.b.size, &used, &v));
        CPPUNIT_ASSERT_EQUAL(size_t(4096), r.last_align);
        CPPUNIT_ASSERT_EQUAL(1, r.allocs);
        CPPUNIT_ASSERT_EQUAL(1, r.releases);
    }

    // timeout_ms near UINT64_MAX is no deadline (it overflowed into an instant one): the
    // socket's SO_RCVTIMEO is what ends the wait.
    void testHugeTimeoutIsNone() {
        const Bytes b = dense_f32(16);
        Sock s;
        struct timeval tv = {0, 50 * 1000};
        CPPUNIT_ASSERT_EQUAL(0, ::setsockopt(s.fd[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
        write_all(s.fd[1], b.data(), 4);
        for (uint64_t ms : {~uint64_t(0), uint64_t(1) << 62, uint64_t(1) << 41}) {
            tenso_decode_options o = TENSO_DECODE_OPTIONS_INIT;
            o.timeout_ms = ms;
            tenso_decoder_options dopt = TENSO_DECODER_OPTIONS_INIT;
            dopt.decode = &o;
            DecoderPtr d = make_decoder(&dopt);
            tenso_view *v = nullptr;
            TENSO_CHECK_STATUS(TENSO_E_TIMEOUT, tenso_decoder_read_fd(&v, d.get(), s.fd[0]));
            CPPUNIT_ASSERT(std::string(tenso_last_error()).find("SO_RCVTIMEO") != std::string::npos);
            write_all(s.fd[1], b.data(), 4);  // the next decoder's partial packet
        }
    }

    void testBufferReuse() {
        const Bytes a = dense_f32(1000, 1), b = dense_f32(1000, 2), c = dense_f32(1000, 3);
        DecoderPtr d = make_decoder();
        size_t used = 0;
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_decoder_feed(d.get(), a.data(), a.size(), &used, &v));
        const void *first = tenso_view_data(v);
        CPPUNIT_ASSERT_EQUAL(uintptr_t(0), reinterpret_cast<uintptr_t>(first) % 64);
        tenso_view_free(v);
        TENSO_CHECK_OK(tenso_decoder_feed(d.get(), b.data(), b.size(), &used, &v));
        ViewPtr second(v);
        CPPUNIT_ASSERT_EQUAL(first, tenso_view_data(v));  // the freed buffer, reused
        CPPUNIT_ASSERT_EQUAL(std::string(), loads_diff(v, b));
        TENSO_CHECK_OK(tenso_decoder_feed(d.get(), c.data(), c.size(), &used, &v));
        ViewPtr third(v);
        CPPUNIT_ASSERT(tenso_view_data(v) != first);  // the second view still holds it
        CPPUNIT_ASSERT_EQUAL(std::string(), loads_diff(v, c));
        CPPUNIT_ASSERT_EQUAL(std::string(), loads_diff(second.get(), b));
    }

    // Many small packets (and a few large ones) over a socket with read-ahead, then the end.
    void testReadAheadManySmallPackets() {
        std::vector<Bytes> parts;
        for (int i = 0; i < 5000; ++i) parts.push_back(dense_f32(size_t(1 + i % 300), float(i)));
        parts.insert(parts.begin() + 2500, dense_f32(300000, 5));
        Sock s;
        std::thread w([&] {
            Bytes all;
            for (const Bytes &b : parts) all.insert(all.end(), b.begin(), b.end());
            write_all(s.fd[1], all.data(), all.size());
            s.close_writer();
        });
        tenso_decoder_options o = TENSO_DECODER_OPTIONS_INIT;
        o.flags = TENSO_DECODER_READ_AHEAD;
        DecoderPtr d = make_decoder(&o);
        expect_packets_then_end(d.get(), s, w, parts);
    }

    void testViewsOutliveDecoder() {
        const Bytes b = golden("bundle_mixed"), f = dense_f32(100);
        Recorder r;
        tenso_decoder_options o = r.opts();
        ViewPtr v1, v2;
        {
            DecoderPtr d = make_decoder();
            v1 = feed_in_pieces(d.get(), b, [] { return size_t(7); });
            DecoderPtr d2 = make_decoder(&o);
            v2 = feed_in_pieces(d2.get(), f, [] { return size_t(100); });
        }
        CPPUNIT_ASSERT_EQUAL(std::string(), loads_diff(v1.get(), b));
        CPPUNIT_ASSERT_EQUAL(std::string(), loads_diff(v2.get(), f));
        CPPUNIT_ASSERT_EQUAL(0, r.releases);
        v2.reset();
        CPPUNIT_ASSERT_EQUAL(1, r.releases);
    }

    // Many small packets held at once, then freed on another thread (a node's receive queue):
    // the decoder keeps their buffers for the next packets, up to its stated bound (1 MiB of
    // buffers under 64 KiB, tenso.h) and no further, and gives them back when it is freed; views
    // still held then stay valid. The bytes held are glibc's in-use count (mallinfo2).
    void testSmallBuffersPooledUpToTheBound() {
        const size_t kCount = 1500, kBound = size_t(1) << 20;
        std::vector<Bytes> in;
        for (size_t i = 0; i < kCount; ++i) in.push_back(dense_f32(256, float(i)));  // 1088-byte packets
        auto in_use = [] { return size_t(mallinfo2().uordblks); };
        auto feed_all = [&](tenso_decoder *d, size_t count) {
            std::vector<ViewPtr> views;
            for (size_t i = 0; i < count; ++i) {
                size_t used = 0;
                tenso_view *v = nullptr;
                TENSO_CHECK_OK(tenso_decoder_feed(d, in[i].data(), in[i].size(), &used, &v));
                CPPUNIT_ASSERT(v != nullptr);
                views.emplace_back(v);
            }
            return views;
        };
        auto free_elsewhere = [](std::vector<ViewPtr> &views) { std::thread([&] { views.clear(); }).join(); };

        // One view out at a time (a decoder per packet, as tenso_read_fd makes): one spare, no pool.
        size_t start = in_use();
        DecoderPtr d = make_decoder();
        for (size_t i = 0; i < 100; ++i) feed_all(d.get(), 1);
        const size_t one_at_a_time = in_use() - start;  // the decoder and its one spare
        d = make_decoder();
        start = in_use();
        std::vector<ViewPtr> views = feed_all(d.get(), kCount);
        free_elsewhere(views);
        const size_t kept = in_use() - start;   // what freeing every view did not give back
        views = feed_all(d.get(), kCount / 2);  // within the bound: every buffer is a pooled one
        const size_t grew = in_use() - start - kept;
        for (size_t i = 0; i < views.size(); i += 97)
            CPPUNIT_ASSERT_EQUAL(std::string(), loads_diff(views[i].get(), in[i]));
        d.reset();  // the views outlive it; their buffers go when they do
        for (size_t i = 0; i < views.size(); i += 97)
            CPPUNIT_ASSERT_EQUAL(std::string(), loads_diff(views[i].get(), in[i]));
        const size_t held = in_use();
        free_elsewhere(views);
        const size_t after = in_use();
#ifndef DECODER_TEST_SANITIZED
        const std::string got = "one at a time kept " + std::to_string(one_at_a_time) + "; many: kept " +
                                std::to_string(kept) + ", then grew " + std::to_string(grew) + ", gave back " +
                                std::to_string(held - after);
        CPPUNIT_ASSERT_MESSAGE(got, one_at_a_time <= 8192);                      // 24 KiB if it made the pool
        CPPUNIT_ASSERT_MESSAGE(got, kept >= kBound * 3 / 4);                     // the pool kept them...
        CPPUNIT_ASSERT_MESSAGE(got, kept <= kBound + (kBound >> 3));             // ...up to the bound
        CPPUNIT_ASSERT_MESSAGE(got, grew < kCount / 2 * in[0].size() / 2);       // no packet buffer allocated
        CPPUNIT_ASSERT_MESSAGE(got, held - after >= kCount / 2 * in[0].size());  // not pooled: the decoder is gone
#else
        (void)one_at_a_time;
        (void)kept;
        (void)grew;
        (void)held;
        (void)after;
#endif
    }

    void testOptions() {
        tenso_decoder *d = nullptr;
        tenso_decoder_options o = TENSO_DECODER_OPTIONS_INIT;
        o.version = 2;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_decoder_new(&d, &o));
        o = TENSO_DECODER_OPTIONS_INIT;
        o.flags = 0x80;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_decoder_new(&d, &o));
        o = TENSO_DECODER_OPTIONS_INIT;
        o.alloc = &Recorder::alloc;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_decoder_new(&d, &o));
        CPPUNIT_ASSERT(!d);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_decoder_finish(nullptr));
        CPPUNIT_ASSERT_EQUAL(size_t(0), tenso_decoder_needed(nullptr));
        CPPUNIT_ASSERT_EQUAL(0, tenso_decoder_idle(nullptr));
        tenso_decoder_free(nullptr);
        DecoderPtr ok = make_decoder();
        CPPUNIT_ASSERT_EQUAL(size_t(4), tenso_decoder_needed(ok.get()));
        CPPUNIT_ASSERT_EQUAL(1, tenso_decoder_idle(ok.get()));
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiDecoderTest);
