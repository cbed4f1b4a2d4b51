// CapiStreamTest - packets over POSIX file descriptors: tenso_write_fd / tenso_value_write_fd on
// one end of a socketpair or pipe, tenso_read_fd on the other. Framing (exactly one packet per
// call, clean end vs truncation), partial writes through small socket buffers, non-blocking
// ends, I/O errors, and the decode limits that protect a reader from what a stream claims.
#include <cppunit/extensions/HelperMacros.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "hostile_util.hpp"
#include "tenso/tenso.h"

using namespace hostile;

namespace {

// An fd closed on scope exit (or earlier with close()).
struct Fd {
    int fd = -1;
    Fd() = default;
    explicit Fd(int f) : fd(f) {}
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    Fd(Fd &&o) noexcept : fd(o.fd) { o.fd = -1; }
    ~Fd() { close(); }
    void close() {
        if (fd >= 0) ::close(fd);
        fd = -1;
    }
};

// [0] reads, [1] writes (a socketpair is bidirectional; the roles are by convention).
struct Channel {
    Fd r, w;
};

Channel socket_channel() {
    int sv[2];
    CPPUNIT_ASSERT_EQUAL(0, ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
    Channel c;
    c.r.fd = sv[0];
    c.w.fd = sv[1];
    return c;
}

Channel pipe_channel() {
    int p[2];
    CPPUNIT_ASSERT_EQUAL(0, ::pipe2(p, O_CLOEXEC));
    Channel c;
    c.r.fd = p[0];
    c.w.fd = p[1];
    return c;
}

void set_nonblocking(int fd) {
    int fl = ::fcntl(fd, F_GETFL);
    CPPUNIT_ASSERT(fl >= 0);
    CPPUNIT_ASSERT_EQUAL(0, ::fcntl(fd, F_SETFL, fl | O_NONBLOCK));
}

bool is_nonblocking(int fd) { return (::fcntl(fd, F_GETFL) & O_NONBLOCK) != 0; }

// Writes all bytes with plain write(2) (raw packets, sentinels, cut streams).
void write_raw(int fd, const void *p, size_t n) {
    const auto *b = static_cast<const uint8_t *>(p);
    while (n) {
        ssize_t r = ::write(fd, b, n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN) {
            struct pollfd pf = {fd, POLLOUT, 0};
            ::poll(&pf, 1, 1000);
            continue;
        }
        if (r <= 0) throw std::runtime_error(std::string("write: ") + std::strerror(errno));
        b += r;
        n -= size_t(r);
    }
}

// Reads exactly n raw bytes, failing (not hanging) when they do not arrive within a second.
Bytes read_raw(int fd, size_t n) {
    Bytes out(n);
    size_t got = 0;
    while (got < n) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (::poll(&pf, 1, 1000) != 1)
            throw std::runtime_error("raw read timed out after " + std::to_string(got) + " bytes");
        ssize_t r = ::read(fd, out.data() + got, n - got);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r <= 0) break;
        got += size_t(r);
    }
    out.resize(got);
    return out;
}

// Reads everything until end of stream.
Bytes read_all(int fd) {
    Bytes out;
    uint8_t chunk[65536];
    for (;;) {
        ssize_t r = ::read(fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        out.insert(out.end(), chunk, chunk + r);
    }
    return out;
}

// Deterministic, not very compressible bytes (or very compressible ones). Past 1 MiB the
// first 64 KiB are tiled, each tile stamped with its index, to keep ASan builds quick.
void fill(Bytes &b, uint32_t seed, bool compressible) {
    uint32_t x = seed * 2654435761u + 1;
    const size_t direct = b.size() > (1u << 20) ? 65536 : b.size();
    for (size_t i = 0; i < direct; ++i) {
        if (compressible) {
            b[i] = uint8_t((i / 64 + seed) % 7);
        } else {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            b[i] = uint8_t(x);
        }
    }
    for (size_t off = direct, tile = 1; off < b.size(); off += direct, ++tile) {
        std::memcpy(b.data() + off, b.data(), std::min(direct, b.size() - off));
        std::memcpy(b.data() + off, &tile, std::min(sizeof tile, b.size() - off));
    }
}

// One thing to send: a dense tensor (sent with tenso_write_fd), a value (tenso_value_write_fd)
// or raw bytes (write(2), for packets only other writers produce), and the packet it must be.
struct Item {
    std::string name;
    enum Kind { kTensor, kValue, kRaw } kind = kTensor;
    tenso_tensor tensor{};
    ValuePtr value;
    tenso_encode_options opts = TENSO_ENCODE_OPTIONS_INIT;
    Bytes expect;  // what tenso_dumps / tenso_value_dumps give, or the raw bytes
};

// Owns the tensor memory the items borrow.
class Corpus {
public:
    std::vector<Item> items;

    tenso_tensor make(tenso_dtype dtype, std::vector<uint64_t> shape, bool compressible = false) {
        uint64_t n = tenso_dtype_itemsize(dtype);
        for (uint64_t d : shape) n *= d;
        data_.emplace_back(size_t(n));
        fill(data_.back(), uint32_t(data_.size()), compressible);
        shapes_.push_back(std::move(shape));
        return tensor(data_.back().data(), n, shapes_.back(), dtype);
    }

    ValuePtr value_of(const tenso_tensor &t) {
        tenso_value *v = nullptr;
        TENSO_CHECK_OK(tenso_value_new_tensor(&v, &t));
        return ValuePtr(v);
    }

    static ValuePtr bundle(std::vector<std::pair<std::string, const tenso_value *>> entries) {
        tenso_value *b = nullptr;
        TENSO_CHECK_OK(tenso_value_new_bundle(&b));
        for (auto &e : entries) TENSO_CHECK_OK(tenso_bundle_insert(b, e.first.data(), e.first.size(), e.second));
        return ValuePtr(b);
    }

    void add_tensor(std::string name, const tenso_tensor &t, tenso_encode_options o = enc()) {
        Item it;
        it.name = std::move(name);
        it.kind = Item::kTensor;
        it.tensor = t;
        it.opts = o;
        Buffer b;
        TENSO_CHECK_OK(tenso_dumps(&b.b, &t, &o));
        it.expect = b.bytes();
        items.push_back(std::move(it));
    }

    void add_value(std::string name, ValuePtr v, tenso_encode_options o = enc()) {
        Item it;
        it.name = std::move(name);
        it.kind = Item::kValue;
        it.opts = o;
        Buffer b;
        TENSO_CHECK_OK(tenso_value_dumps(&b.b, v.get(), &o));
        it.expect = b.bytes();
        it.value = std::move(v);
        items.push_back(std::move(it));
    }

    void add_raw(std::string name, Bytes bytes) {
        Item it;
        it.name = std::move(name);
        it.kind = Item::kRaw;
        it.expect = std::move(bytes);
        items.push_back(std::move(it));
    }

    const Bytes &hold(Bytes b) {
        packets_.push_back(std::move(b));
        return packets_.back();
    }

private:
    std::deque<Bytes> data_, packets_;
    std::deque<std::vector<uint64_t>> shapes_;
};

// Sends one item; returns the status and the bytes the call reported.
tenso_status send(int fd, const Item &it, uint64_t *written) {
    *written = 0;
    switch (it.kind) {
    case Item::kTensor: return tenso_write_fd(written, fd, &it.tensor, &it.opts);
    case Item::kValue: return tenso_value_write_fd(written, fd, it.value.get(), &it.opts);
    case Item::kRaw:
        write_raw(fd, it.expect.data(), it.expect.size());
        *written = it.expect.size();
        return TENSO_OK;
    }
    return TENSO_E_INTERNAL;
}

// Every kind of packet the stream must carry, mixed: dense (all the options), bundles (nested,
// with compressed values, holding pre-encoded packets), scalars, zero-size tensors, and raw
// packets from other writers (upstream LZ4 frames without content size, legacy versions).
void build_mixed(Corpus &c) {
    c.add_tensor("f32 3x4", c.make(TENSO_DTYPE_FLOAT32, {3, 4}));
    c.add_tensor("f64 1000 compressed", c.make(TENSO_DTYPE_FLOAT64, {1000}, true), enc(TENSO_ENCODE_COMPRESS));
    c.add_tensor("f32 300 incompressible, compressed", c.make(TENSO_DTYPE_FLOAT32, {300}), enc(TENSO_ENCODE_COMPRESS));
    c.add_tensor("i32 17 integrity", c.make(TENSO_DTYPE_INT32, {17}), enc(TENSO_ENCODE_INTEGRITY));
    c.add_tensor("u8 70000 compressed+integrity", c.make(TENSO_DTYPE_UINT8, {70000}, true),
                 enc(TENSO_ENCODE_COMPRESS | TENSO_ENCODE_INTEGRITY));
    c.add_tensor("f32 7 align 1", c.make(TENSO_DTYPE_FLOAT32, {7}), enc(0, 1));
    c.add_tensor("i16 3x3 align 8", c.make(TENSO_DTYPE_INT16, {3, 3}), enc(0, 8));
    c.add_tensor("f64 5 align 128 integrity", c.make(TENSO_DTYPE_FLOAT64, {5}), enc(TENSO_ENCODE_INTEGRITY, 128));
    c.add_tensor("u8 100 align 4096", c.make(TENSO_DTYPE_UINT8, {100}), enc(0, 4096));
    c.add_tensor("c128 2x2 align 16 compressed", c.make(TENSO_DTYPE_COMPLEX128, {2, 2}, true),
                 enc(TENSO_ENCODE_COMPRESS, 16));
    c.add_tensor("f32 scalar", c.make(TENSO_DTYPE_FLOAT32, {}));
    c.add_tensor("i64 scalar integrity", c.make(TENSO_DTYPE_INT64, {}), enc(TENSO_ENCODE_INTEGRITY));
    c.add_tensor("bf16 scalar align 1", c.make(TENSO_DTYPE_BFLOAT16, {}), enc(0, 1));
    c.add_tensor("f32 [0]", c.make(TENSO_DTYPE_FLOAT32, {0}));
    c.add_tensor("f64 [2,0,3]", c.make(TENSO_DTYPE_FLOAT64, {2, 0, 3}));
    c.add_tensor("u8 [0] compressed", c.make(TENSO_DTYPE_UINT8, {0}), enc(TENSO_ENCODE_COMPRESS));
    c.add_tensor("f32 [0] integrity align 1", c.make(TENSO_DTYPE_FLOAT32, {0}), enc(TENSO_ENCODE_INTEGRITY, 1));
    c.add_tensor("bool 4x4x4 ndim 3", c.make(TENSO_DTYPE_BOOL, {4, 4, 4}));

    {
        ValuePtr a = c.value_of(c.make(TENSO_DTYPE_FLOAT32, {2}));
        ValuePtr cc = c.value_of(c.make(TENSO_DTYPE_INT64, {3}));
        ValuePtr e = c.value_of(c.make(TENSO_DTYPE_UINT8, {0}));
        ValuePtr d = Corpus::bundle({{"e", e.get()}});
        ValuePtr b = Corpus::bundle({{"c", cc.get()}, {"d", d.get()}});
        c.add_value("nested bundle, integrity", Corpus::bundle({{"a", a.get()}, {"b", b.get()}}),
                    enc(TENSO_ENCODE_INTEGRITY));
    }
    {
        ValuePtr x = c.value_of(c.make(TENSO_DTYPE_FLOAT64, {512}, true));
        ValuePtr z = c.value_of(c.make(TENSO_DTYPE_UINT8, {3000}, true));
        ValuePtr s = c.value_of(c.make(TENSO_DTYPE_INT8, {}));
        ValuePtr y = Corpus::bundle({{"z", z.get()}, {"scalar", s.get()}});
        c.add_value("bundle of compressed values", Corpus::bundle({{"x", x.get()}, {"y", y.get()}}),
                    enc(TENSO_ENCODE_COMPRESS | TENSO_ENCODE_INTEGRITY));
    }
    {
        tenso_value *b = nullptr;
        TENSO_CHECK_OK(tenso_value_new_bundle(&b));
        c.add_value("empty bundle", ValuePtr(b));
        ValuePtr e = c.value_of(c.make(TENSO_DTYPE_UINT8, {0}));
        ValuePtr s = c.value_of(c.make(TENSO_DTYPE_FLOAT32, {}));
        ValuePtr empty = Corpus::bundle({});
        c.add_value("bundle of empty things, align 1",
                    Corpus::bundle({{"", e.get()}, {"scalar", s.get()}, {"empty", empty.get()}}), enc(0, 1));
    }
    {
        // Pre-encoded packets inside a bundle: a liblz4 frame with checksums and a legacy v3.
        const Bytes &lz = c.hold(golden("compressed_f64_liblz4_frame"));
        const Bytes &v3 = c.hold(golden("legacy_v3_custalign16"));
        tenso_value *p1 = nullptr, *p2 = nullptr;
        TENSO_CHECK_OK(tenso_value_new_packet(&p1, lz.data(), lz.size()));
        TENSO_CHECK_OK(tenso_value_new_packet(&p2, v3.data(), v3.size()));
        ValuePtr a(p1), b(p2);
        ValuePtr t = c.value_of(c.make(TENSO_DTYPE_UINT16, {5}));
        c.add_value("bundle of packets, align 16",
                    Corpus::bundle({{"lz4", a.get()}, {"v3", b.get()}, {u8"t\u00e9", t.get()}}), enc(0, 16));
    }
    c.add_value("dense value, align 32", c.value_of(c.make(TENSO_DTYPE_UINT32, {6, 2})), enc(0, 32));
    for (const char *g : {"compressed_f32_zeros1024", "compressed_u8_70000_liblz4_linked", "compressed_f32_empty_0",
                          "legacy_v1_f32", "legacy_v3_unaligned", "legacy_v3_integrity", "bundle_255"})
        c.add_raw(std::string("golden ") + g, golden(g));
}

// What tenso_read_fd must give for an item: the view tenso_loads makes of the same bytes.
std::string compare_with_loads(const tenso_view *got, const Item &it) {
    tenso_view *raw = nullptr;
    tenso_status st = tenso_loads(&raw, it.expect.data(), it.expect.size(), nullptr);
    ViewPtr want(raw);
    if (st != TENSO_OK) return "loads of the expected bytes failed: " + tenso_describe(st);
    if (tenso_view_packet_size(got) != it.expect.size())
        return "packet_size " + std::to_string(tenso_view_packet_size(got)) + ", wanted " +
               std::to_string(it.expect.size());
    if (tenso_view_kind(got) != TENSO_KIND_BUNDLE && tenso_view_nbytes(got) && !tenso_view_owns_data(got))
        return "a view read from a stream must own its data";
    return view_diff(got, want.get());
}

// Runs `writer(fd)` on a thread against the write end, closing it afterwards. When a failed
// assertion unwinds the reader, the read end is closed first so a blocked writer gets EPIPE
// instead of hanging the suite.
class WriterThread {
public:
    WriterThread(Channel &ch, std::function<void(int)> fn)
        : ch_(ch), t_([this, fn] {
              try {
                  fn(ch_.w.fd);
              } catch (const std::exception &e) {
                  error_ = e.what();  // read after join(); the reader's own checks report first
              }
              ch_.w.close();
          }) {}
    ~WriterThread() {
        if (std::uncaught_exceptions()) ch_.r.close();
        if (t_.joinable()) t_.join();
    }

    std::string join() {
        if (t_.joinable()) t_.join();
        return error_;
    }

private:
    Channel &ch_;
    std::string error_;
    std::thread t_;
};

std::string key(const Item &it) { return it.name + " (" + std::to_string(it.expect.size()) + " B): "; }

}  // namespace

class CapiStreamTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiStreamTest);
    CPPUNIT_TEST(testMixedPacketsOverSocketpair);
    CPPUNIT_TEST(testMixedPacketsOverPipe);
    CPPUNIT_TEST(testFdBytesEqualDumps);
    CPPUNIT_TEST(testWriteCbPiecesEqualDumps);
    CPPUNIT_TEST(testWriteCbStops);
    CPPUNIT_TEST(testGoldenVectorsBackToBack);
    CPPUNIT_TEST(testOnePacketPerCall);
    CPPUNIT_TEST(testCutStreamsAreTruncated);
    CPPUNIT_TEST(testGarbage);
    CPPUNIT_TEST(testLargePacketThroughSmallSocketBuffers);
    CPPUNIT_TEST(testNonBlockingWriter);
    CPPUNIT_TEST(testNonBlockingReader);
    CPPUNIT_TEST(testBadDescriptors);
    CPPUNIT_TEST(testBrokenPipe);
    CPPUNIT_TEST(testDecodeLimits);
    CPPUNIT_TEST(testHostileHugeClaims);
    CPPUNIT_TEST(testEmptyBodyWithIntegrity);
    CPPUNIT_TEST_SUITE_END();

public:
    void setUp() override { ::signal(SIGPIPE, SIG_IGN); }  // EPIPE comes back as TENSO_E_IO

    // Writes every item back to back from a thread, reads them back, then the clean end.
    void roundTrip(Channel ch) {
        Corpus c;
        build_mixed(c);
        std::vector<tenso_status> sent(c.items.size(), TENSO_E_INTERNAL);
        std::vector<uint64_t> written(c.items.size(), 0);
        std::vector<std::string> messages(c.items.size());
        {
            WriterThread wt(ch, [&](int fd) {
                for (size_t i = 0; i < c.items.size(); ++i) {
                    sent[i] = send(fd, c.items[i], &written[i]);
                    messages[i] = tenso_last_error();  // thread-local: read it on this thread
                }
            });
            for (const Item &it : c.items) {
                tenso_view *raw = nullptr;
                tenso_status st = tenso_read_fd(&raw, ch.r.fd, nullptr);
                ViewPtr v(raw);
                CPPUNIT_ASSERT_MESSAGE(key(it) + "read_fd -> " + tenso_describe(st), st == TENSO_OK);
                std::string diff = compare_with_loads(v.get(), it);
                CPPUNIT_ASSERT_MESSAGE(key(it) + diff, diff.empty());
            }
            tenso_view *raw = nullptr;
            TENSO_CHECK_STATUS(TENSO_E_END_OF_STREAM, tenso_read_fd(&raw, ch.r.fd, nullptr));
            CPPUNIT_ASSERT(raw == nullptr);
            // And again: the end stays the end.
            TENSO_CHECK_STATUS(TENSO_E_END_OF_STREAM, tenso_read_fd(&raw, ch.r.fd, nullptr));
            CPPUNIT_ASSERT_EQUAL(std::string(), wt.join());
        }
        for (size_t i = 0; i < c.items.size(); ++i) {
            CPPUNIT_ASSERT_MESSAGE(key(c.items[i]) + "write -> " + tenso_status_name(sent[i]) + ": " + messages[i],
                                   sent[i] == TENSO_OK);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(key(c.items[i]) + "written_out", uint64_t(c.items[i].expect.size()),
                                         written[i]);
        }
    }

    void testMixedPacketsOverSocketpair() { roundTrip(socket_channel()); }
    void testMixedPacketsOverPipe() { roundTrip(pipe_channel()); }

    // The vectored fd writer produces exactly the bytes of the buffer encoder.
    void testFdBytesEqualDumps() {
        Corpus c;
        build_mixed(c);
        Channel ch = socket_channel();
        Bytes all;
        for (const Item &it : c.items) all.insert(all.end(), it.expect.begin(), it.expect.end());
        std::vector<tenso_status> sent(c.items.size(), TENSO_E_INTERNAL);
        Bytes got;
        {
            WriterThread wt(ch, [&](int fd) {
                uint64_t w;
                for (size_t i = 0; i < c.items.size(); ++i) sent[i] = send(fd, c.items[i], &w);
            });
            got = read_all(ch.r.fd);
            CPPUNIT_ASSERT_EQUAL(std::string(), wt.join());
        }
        for (size_t i = 0; i < c.items.size(); ++i)
            CPPUNIT_ASSERT_MESSAGE(key(c.items[i]) + tenso_status_name(sent[i]), sent[i] == TENSO_OK);
        CPPUNIT_ASSERT_EQUAL(all.size(), got.size());
        for (size_t i = 0, off = 0; i < c.items.size(); off += c.items[i].expect.size(), ++i)
            CPPUNIT_ASSERT_MESSAGE(
                key(c.items[i]) + "bytes differ from tenso_(value_)dumps",
                std::memcmp(got.data() + off, c.items[i].expect.data(), c.items[i].expect.size()) == 0);
    }

    // tenso_value_write_cb: the pieces make exactly tenso_(value_)dumps' packet; an uncompressed
    // tensor's body is one borrowed piece at the tensor's own address (never copied), and
    // nothing the library owns is marked borrowed.
    struct Pieces {
        Bytes all;
        std::vector<std::pair<const void *, size_t>> borrowed;
        size_t calls = 0, stop_after = SIZE_MAX;
        static int take(const void *data, size_t len, int borrowed, void *user) {
            auto *p = static_cast<Pieces *>(user);
            const auto *b = static_cast<const uint8_t *>(data);
            p->all.insert(p->all.end(), b, b + len);
            if (borrowed) p->borrowed.emplace_back(data, len);
            return ++p->calls >= p->stop_after ? 1 : 0;
        }
    };

    void testWriteCbPiecesEqualDumps() {
        Corpus c;
        build_mixed(c);
        size_t dense_checked = 0;
        for (const Item &it : c.items) {
            if (it.kind == Item::kRaw) continue;
            ValuePtr tv;
            const tenso_value *v = it.value.get();
            if (it.kind == Item::kTensor) {
                tv = c.value_of(it.tensor);
                v = tv.get();
            }
            Pieces p;
            uint64_t w = 0;
            TENSO_CHECK_OK(tenso_value_write_cb(&w, v, &it.opts, &Pieces::take, &p));
            CPPUNIT_ASSERT_EQUAL(uint64_t(it.expect.size()), w);
            CPPUNIT_ASSERT_MESSAGE(key(it) + "pieces differ from dumps", p.all == it.expect);
            if (it.kind == Item::kTensor && !(it.opts.flags & TENSO_ENCODE_COMPRESS) && it.tensor.nbytes) {
                CPPUNIT_ASSERT_EQUAL(size_t(1), p.borrowed.size());
                CPPUNIT_ASSERT(p.borrowed[0].first == it.tensor.data);
                CPPUNIT_ASSERT_EQUAL(size_t(it.tensor.nbytes), p.borrowed[0].second);
                ++dense_checked;
            }
            if (it.kind == Item::kTensor && (it.opts.flags & TENSO_ENCODE_COMPRESS))
                CPPUNIT_ASSERT(p.borrowed.empty());  // the compressed body is the library's
        }
        CPPUNIT_ASSERT(dense_checked >= 2);
    }

    void testWriteCbStops() {
        Corpus c;
        const tenso_tensor t = c.make(TENSO_DTYPE_FLOAT32, {64, 64});
        ValuePtr v = c.value_of(t);
        const tenso_encode_options o = enc(TENSO_ENCODE_INTEGRITY);
        Pieces all;
        TENSO_CHECK_OK(tenso_value_write_cb(nullptr, v.get(), &o, &Pieces::take, &all));
        CPPUNIT_ASSERT(all.calls >= 3);  // header, body, footer
        Pieces p;
        p.stop_after = 2;
        uint64_t w = 7;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_USER, tenso_value_write_cb(&w, v.get(), &o, &Pieces::take, &p));
        CPPUNIT_ASSERT_EQUAL(size_t(2), p.calls);
        // Only the piece it accepted counts: the header, not the body it refused.
        CPPUNIT_ASSERT_EQUAL(uint64_t(p.all.size() - t.nbytes), w);
        CPPUNIT_ASSERT(w > 0 && w < 4096);
        CPPUNIT_ASSERT(std::string(tenso_last_error()).find("write callback") != std::string::npos);
        CPPUNIT_ASSERT_EQUAL(TENSO_E_INVALID_ARGUMENT, tenso_value_write_cb(&w, v.get(), &o, nullptr, nullptr));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), w);
        CPPUNIT_ASSERT_EQUAL(TENSO_E_INVALID_ARGUMENT, tenso_value_write_cb(&w, nullptr, &o, &Pieces::take, &p));
    }

    // All 97 upstream and hand-made golden packets back to back through one stream: each read
    // takes exactly its packet (compressed frames are framed from their block headers) and
    // gives what tenso_loads gives.
    void testGoldenVectorsBackToBack() {
        Corpus c;
        for (const std::string &name : golden_names()) c.add_raw(name, golden(name));
        Channel ch = socket_channel();
        WriterThread wt(ch, [&](int fd) {
            for (const Item &it : c.items) write_raw(fd, it.expect.data(), it.expect.size());
        });
        for (const Item &it : c.items) {
            tenso_view *raw = nullptr;
            tenso_status st = tenso_read_fd(&raw, ch.r.fd, nullptr);
            ViewPtr v(raw);
            tenso_view *lraw = nullptr;
            tenso_status lst = tenso_loads(&lraw, it.expect.data(), it.expect.size(), nullptr);
            ViewPtr lv(lraw);
            CPPUNIT_ASSERT_MESSAGE(
                key(it) + "read_fd -> " + tenso_describe(st) + ", loads -> " + tenso_status_name(lst),
                st == TENSO_OK && lst == TENSO_OK);
            std::string diff = compare_with_loads(v.get(), it);
            CPPUNIT_ASSERT_MESSAGE(key(it) + diff, diff.empty());
        }
        tenso_view *raw = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_END_OF_STREAM, tenso_read_fd(&raw, ch.r.fd, nullptr));
        CPPUNIT_ASSERT_EQUAL(std::string(), wt.join());
    }

    // tenso_read_fd consumes exactly one packet: bytes written right after it are still
    // there, unread, for a plain read(2).
    void testOnePacketPerCall() {
        Corpus c;
        build_mixed(c);
        const char sentinel[] = "\x01SENTINEL\xff";  // not a magic, 10 bytes + NUL
        for (Item &it : c.items) {
            Channel ch = pipe_channel();
            uint64_t written = 0;
            tenso_status st = TENSO_E_INTERNAL;
            {
                WriterThread wt(ch, [&](int fd) {
                    st = send(fd, it, &written);
                    write_raw(fd, sentinel, 10);
                    write_raw(fd, it.expect.data(), 8);  // the start of another packet, never completed
                });
                tenso_view *raw = nullptr;
                tenso_status rst = tenso_read_fd(&raw, ch.r.fd, nullptr);
                ViewPtr v(raw);
                CPPUNIT_ASSERT_MESSAGE(key(it) + "read_fd -> " + tenso_describe(rst), rst == TENSO_OK);
                CPPUNIT_ASSERT_EQUAL_MESSAGE(key(it) + "packet_size", uint64_t(it.expect.size()),
                                             tenso_view_packet_size(v.get()));
                Bytes after = read_raw(ch.r.fd, 10);
                CPPUNIT_ASSERT_MESSAGE(key(it) + "the bytes after the packet were consumed",
                                       after == Bytes(sentinel, sentinel + 10));
                // What follows is 8 bytes of a header and then the end: a packet cut short.
                TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_read_fd(&raw, ch.r.fd, nullptr));
                CPPUNIT_ASSERT_EQUAL(std::string(), wt.join());
            }
            CPPUNIT_ASSERT_MESSAGE(key(it) + tenso_status_name(st), st == TENSO_OK);
        }
    }

    // A stream that ends inside a packet is TRUNCATED at every cut point: in the header, the
    // shape, the exponent byte, the padding, the body, the footer, an LZ4 frame (between and
    // inside blocks), a bundle's key length, key, value length and value, and a legacy packet;
    // one that ends before the first byte is END_OF_STREAM.
    void testCutStreamsAreTruncated() {
        Corpus c;
        build_mixed(c);
        std::vector<const Item *> picks;
        for (const Item &it : c.items)
            if (it.name == "nested bundle, integrity" || it.name == "bundle of compressed values" ||
                it.name == "f64 5 align 128 integrity" || it.name == "bundle of packets, align 16" ||
                it.name == "golden compressed_u8_70000_liblz4_linked" || it.name == "golden legacy_v1_f32" ||
                it.name == "f32 7 align 1" || it.name == "i64 scalar integrity" || it.name == "empty bundle")
                picks.push_back(&it);
        CPPUNIT_ASSERT_EQUAL(size_t(9), picks.size());
        size_t cuts = 0;
        for (const Item *it : picks) {
            const Bytes &b = it->expect;
            CPPUNIT_ASSERT_MESSAGE(key(*it) + "must fit a pipe buffer", b.size() < 65536);
            for (size_t cut = 0; cut < b.size(); ++cut) {
                Channel ch = pipe_channel();
                write_raw(ch.w.fd, b.data(), cut);
                ch.w.close();
                tenso_view *raw = nullptr;
                tenso_status st = tenso_read_fd(&raw, ch.r.fd, nullptr);
                ViewPtr v(raw);
                const tenso_status want = cut == 0 ? TENSO_E_END_OF_STREAM : TENSO_E_TRUNCATED;
                CPPUNIT_ASSERT_MESSAGE(key(*it) + "cut at " + std::to_string(cut) + " -> " + tenso_describe(st),
                                       st == want && !v && tenso_last_error()[0] != '\0');
                ++cuts;
            }
        }
        std::printf("\n  CapiStreamTest: %zu cut streams\n", cuts);
    }

    void testGarbage() {
        const std::string junk = "GET / HTTP/1.1\r\nHost: example\r\n\r\n";
        Channel ch = pipe_channel();
        write_raw(ch.w.fd, junk.data(), junk.size());
        ch.w.close();
        tenso_view *raw = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_BAD_MAGIC, tenso_read_fd(&raw, ch.r.fd, nullptr));
        CPPUNIT_ASSERT(raw == nullptr);

        Channel ch2 = pipe_channel();
        const uint8_t v9[] = {'T', 'N', 'S', 'O', 9, 1, 1, 1, 0, 0, 4, 0, 0, 0};
        write_raw(ch2.w.fd, v9, sizeof v9);
        ch2.w.close();
        TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_VERSION, tenso_read_fd(&raw, ch2.r.fd, nullptr));
    }

    // 64 MiB through 16 KiB socket buffers: the writer's writev returns short many times and
    // the reader's read(2) returns a few KiB at a time.
    void testLargePacketThroughSmallSocketBuffers() {
        Channel ch = socket_channel();
        int small = 16384;
        CPPUNIT_ASSERT_EQUAL(0, ::setsockopt(ch.w.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small));
        CPPUNIT_ASSERT_EQUAL(0, ::setsockopt(ch.r.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small));
        Bytes body(64u << 20);
        fill(body, 7, false);
        std::vector<uint64_t> shape = {16u << 20};
        tenso_tensor t = tensor(body.data(), body.size(), shape, TENSO_DTYPE_FLOAT32);
        tenso_encode_options o = enc();
        size_t expect = 0;
        TENSO_CHECK_OK(tenso_dumps_bound(&expect, &t, &o));
        tenso_status wst = TENSO_E_INTERNAL;
        uint64_t written = 0;
        const auto t0 = std::chrono::steady_clock::now();
        {
            WriterThread wt(ch, [&](int fd) { wst = tenso_write_fd(&written, fd, &t, &o); });
            tenso_view *raw = nullptr;
            TENSO_CHECK_OK(tenso_read_fd(&raw, ch.r.fd, nullptr));
            ViewPtr v(raw);
            CPPUNIT_ASSERT_EQUAL(uint64_t(expect), tenso_view_packet_size(v.get()));
            CPPUNIT_ASSERT_EQUAL(uint64_t(body.size()), tenso_view_nbytes(v.get()));
            CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v.get()), body.data(), body.size()) == 0);
            CPPUNIT_ASSERT_EQUAL(uintptr_t(0), reinterpret_cast<uintptr_t>(tenso_view_data(v.get())) % 64);
            TENSO_CHECK_STATUS(TENSO_E_END_OF_STREAM, tenso_read_fd(&raw, ch.r.fd, nullptr));
        }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        CPPUNIT_ASSERT_MESSAGE(std::string("writer: ") + tenso_status_name(wst), wst == TENSO_OK);
        CPPUNIT_ASSERT_EQUAL(uint64_t(expect), written);
        std::printf("\n  CapiStreamTest: 64 MiB through 16 KiB socket buffers: %.0f ms, %.0f MB/s\n", s * 1e3,
                    double(expect) / s / 1e6);
    }

    // A non-blocking writer meets EAGAIN as soon as the socket buffer is full (the reader
    // starts late); the engine polls and still writes everything, leaving the flag alone.
    void testNonBlockingWriter() {
        Channel ch = socket_channel();
        int small = 16384;
        ::setsockopt(ch.w.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
        set_nonblocking(ch.w.fd);
        Corpus c;
        c.add_tensor("u8 8 MiB", c.make(TENSO_DTYPE_UINT8, {8u << 20}));
        c.add_tensor("f32 9 integrity", c.make(TENSO_DTYPE_FLOAT32, {9}), enc(TENSO_ENCODE_INTEGRITY));
        {
            ValuePtr a = c.value_of(c.make(TENSO_DTYPE_FLOAT64, {200000}));
            ValuePtr b = c.value_of(c.make(TENSO_DTYPE_INT16, {3}));
            c.add_value("bundle 1.6 MB", Corpus::bundle({{"a", a.get()}, {"b", b.get()}}));
        }
        std::vector<tenso_status> sent(c.items.size(), TENSO_E_INTERNAL);
        std::vector<uint64_t> written(c.items.size(), 0);
        bool still_nonblocking = false;
        {
            WriterThread wt(ch, [&](int fd) {
                for (size_t i = 0; i < c.items.size(); ++i) sent[i] = send(fd, c.items[i], &written[i]);
                still_nonblocking = is_nonblocking(fd);
            });
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            for (const Item &it : c.items) {
                tenso_view *raw = nullptr;
                tenso_status st = tenso_read_fd(&raw, ch.r.fd, nullptr);
                ViewPtr v(raw);
                CPPUNIT_ASSERT_MESSAGE(key(it) + tenso_describe(st), st == TENSO_OK);
                std::string diff = compare_with_loads(v.get(), it);
                CPPUNIT_ASSERT_MESSAGE(key(it) + diff, diff.empty());
            }
            tenso_view *raw = nullptr;
            TENSO_CHECK_STATUS(TENSO_E_END_OF_STREAM, tenso_read_fd(&raw, ch.r.fd, nullptr));
        }
        for (size_t i = 0; i < c.items.size(); ++i) {
            CPPUNIT_ASSERT_MESSAGE(key(c.items[i]) + tenso_status_name(sent[i]), sent[i] == TENSO_OK);
            CPPUNIT_ASSERT_EQUAL(uint64_t(c.items[i].expect.size()), written[i]);
        }
        CPPUNIT_ASSERT_MESSAGE("the writer's O_NONBLOCK flag was changed", still_nonblocking);
    }

    // A non-blocking reader sees EAGAIN before the first byte and between the dribbled pieces
    // of the packets; it waits instead of failing.
    void testNonBlockingReader() {
        Corpus c;
        build_mixed(c);
        Channel ch = socket_channel();
        set_nonblocking(ch.r.fd);
        Bytes all;
        for (const Item &it : c.items) all.insert(all.end(), it.expect.begin(), it.expect.end());
        {
            WriterThread wt(ch, [&](int fd) {
                std::this_thread::sleep_for(std::chrono::milliseconds(30));
                // Small irregular pieces with pauses, so reads find partial packets.
                size_t off = 0, step = 1;
                int pauses = 0;
                while (off < all.size()) {
                    size_t n = std::min(all.size() - off, off < 4096 ? step : step * 997);
                    write_raw(fd, all.data() + off, n);
                    off += n;
                    step = step % 13 + 1;
                    if (pauses < 40 && off % 3 == 0) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(1));
                        ++pauses;
                    }
                }
            });
            for (const Item &it : c.items) {
                tenso_view *raw = nullptr;
                tenso_status st = tenso_read_fd(&raw, ch.r.fd, nullptr);
                ViewPtr v(raw);
                CPPUNIT_ASSERT_MESSAGE(key(it) + tenso_describe(st), st == TENSO_OK);
                std::string diff = compare_with_loads(v.get(), it);
                CPPUNIT_ASSERT_MESSAGE(key(it) + diff, diff.empty());
            }
            tenso_view *raw = nullptr;
            TENSO_CHECK_STATUS(TENSO_E_END_OF_STREAM, tenso_read_fd(&raw, ch.r.fd, nullptr));
            CPPUNIT_ASSERT_EQUAL(std::string(), wt.join());
        }
        CPPUNIT_ASSERT(is_nonblocking(ch.r.fd));
    }

    void testBadDescriptors() {
        float x[3] = {1, 2, 3};
        std::vector<uint64_t> shape = {3};
        tenso_tensor t = tensor(x, sizeof x, shape, TENSO_DTYPE_FLOAT32);
        tenso_value *val = nullptr;
        TENSO_CHECK_OK(tenso_value_new_tensor(&val, &t));
        ValuePtr v(val);
        tenso_view *raw = nullptr;
        for (int fd : {-1, 1 << 20}) {
            TENSO_CHECK_STATUS(TENSO_E_IO, tenso_read_fd(&raw, fd, nullptr));
            CPPUNIT_ASSERT(raw == nullptr);
            CPPUNIT_ASSERT_MESSAGE(tenso_last_error(),
                                   std::strstr(tenso_last_error(), std::strerror(EBADF)) != nullptr);
            uint64_t written = 99;
            TENSO_CHECK_STATUS(TENSO_E_IO, tenso_write_fd(&written, fd, &t, nullptr));
            CPPUNIT_ASSERT_EQUAL(uint64_t(0), written);
            CPPUNIT_ASSERT_MESSAGE(tenso_last_error(),
                                   std::strstr(tenso_last_error(), std::strerror(EBADF)) != nullptr);
            written = 99;
            TENSO_CHECK_STATUS(TENSO_E_IO, tenso_value_write_fd(&written, fd, v.get(), nullptr));
            CPPUNIT_ASSERT_EQUAL(uint64_t(0), written);
        }
        // A closed descriptor, and each end of a pipe used the wrong way round.
        Channel ch = pipe_channel();
        TENSO_CHECK_STATUS(TENSO_E_IO, tenso_write_fd(nullptr, ch.r.fd, &t, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_IO, tenso_read_fd(&raw, ch.w.fd, nullptr));
        int closed = ch.r.fd;
        ch.r.close();
        TENSO_CHECK_STATUS(TENSO_E_IO, tenso_read_fd(&raw, closed, nullptr));
        // A directory opened for reading: read(2) fails with EISDIR.
        Fd dir(::open(TENSO_VECTORS_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        CPPUNIT_ASSERT(dir.fd >= 0);
        TENSO_CHECK_STATUS(TENSO_E_IO, tenso_read_fd(&raw, dir.fd, nullptr));
    }

    // Writing to a socket or pipe whose reader is gone fails with EPIPE (SIGPIPE is ignored by
    // setUp), at once or half way through a large packet; written_out says how far it got.
    void testBrokenPipe() {
        float x[3] = {1, 2, 3};
        std::vector<uint64_t> shape = {3};
        tenso_tensor t = tensor(x, sizeof x, shape, TENSO_DTYPE_FLOAT32);
        for (bool sock : {true, false}) {
            Channel ch = sock ? socket_channel() : pipe_channel();
            ch.r.close();
            uint64_t written = 99;
            TENSO_CHECK_STATUS(TENSO_E_IO, tenso_write_fd(&written, ch.w.fd, &t, nullptr));
            CPPUNIT_ASSERT_EQUAL(uint64_t(0), written);
            CPPUNIT_ASSERT_MESSAGE(tenso_last_error(),
                                   std::strstr(tenso_last_error(), std::strerror(EPIPE)) != nullptr);
        }

        Bytes body(16u << 20);
        fill(body, 3, false);
        std::vector<uint64_t> big = {body.size()};
        tenso_tensor bt = tensor(body.data(), body.size(), big, TENSO_DTYPE_UINT8);
        Channel ch = socket_channel();
        int small = 16384;
        ::setsockopt(ch.w.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
        std::thread reader([&] {
            Bytes first = read_raw(ch.r.fd, 1000);
            (void)first;
            ch.r.close();
        });
        uint64_t written = 0;
        tenso_status st = tenso_write_fd(&written, ch.w.fd, &bt, nullptr);
        std::string msg = tenso_last_error();
        reader.join();
        CPPUNIT_ASSERT_MESSAGE(tenso_status_name(st) + (": " + msg), st == TENSO_E_IO);
        CPPUNIT_ASSERT_MESSAGE("written_out " + std::to_string(written), written >= 1000 && written < body.size() + 64);
    }

    // The decode options apply to streams, before the body is read or allocated.
    void testDecodeLimits() {
        Corpus c;
        c.add_tensor("u8 70000", c.make(TENSO_DTYPE_UINT8, {70000}));
        c.add_tensor("f32 2x3x4 integrity", c.make(TENSO_DTYPE_FLOAT32, {2, 3, 4}), enc(TENSO_ENCODE_INTEGRITY));
        const Bytes nested3 = golden("bundle_nested3");
        auto read_with = [](const Bytes &pkt, const tenso_decode_options &o, ViewPtr *out = nullptr) {
            Channel ch = socket_channel();
            std::thread w([&] {
                write_raw(ch.w.fd, pkt.data(), pkt.size());
                ch.w.close();
            });
            tenso_view *raw = nullptr;
            tenso_status st = tenso_read_fd(&raw, ch.r.fd, &o);
            w.join();
            if (out) out->reset(raw);
            else tenso_view_free(raw);
            return st;
        };
        const Bytes &big = c.items[0].expect;
        tenso_decode_options o = TENSO_DECODE_OPTIONS_INIT;
        o.max_packet_bytes = big.size() - 1;
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, read_with(big, o));
        o.max_packet_bytes = big.size();
        TENSO_CHECK_OK(read_with(big, o));
        o = tenso_decode_options TENSO_DECODE_OPTIONS_INIT;
        o.max_elements = 69999;
        TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_ELEMENTS, read_with(big, o));
        o.max_elements = 70000;
        TENSO_CHECK_OK(read_with(big, o));
        o = tenso_decode_options TENSO_DECODE_OPTIONS_INIT;
        o.max_ndim = 2;
        const Bytes &f = c.items[1].expect;
        TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_DIMS, read_with(f, o));
        o = tenso_decode_options TENSO_DECODE_OPTIONS_INIT;
        o.max_depth = 1;
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, read_with(nested3, o));
        o.max_packet_bytes = 100;  // a bundle's length is learnt entry by entry: still bounded
        o.max_depth = 0;
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, read_with(nested3, o));

        Bytes bad = f;
        bad.back() ^= 1;  // the footer
        o = tenso_decode_options TENSO_DECODE_OPTIONS_INIT;
        TENSO_CHECK_STATUS(TENSO_E_CHECKSUM, read_with(bad, o));
        o.flags = TENSO_DECODE_SKIP_CHECKSUM;
        ViewPtr v;
        TENSO_CHECK_OK(read_with(bad, o, &v));
        CPPUNIT_ASSERT_EQUAL(uint64_t(f.size()), tenso_view_packet_size(v.get()));
        o.version = 99;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, read_with(f, o));
    }

    // A stream header may claim a body of any size the limits allow. The reader must not
    // succeed, must report the cut stream as TRUNCATED, and with max_packet_bytes refuses the
    // claim (LIMIT) before allocating anything.
    void testHostileHugeClaims() {
        // f64 [1e9] = 8 GB, and a bundle whose first key claims 1 GiB.
        struct sysinfo si;
        ::sysinfo(&si);
        const bool roomy = uint64_t(si.totalram) * si.mem_unit >= (16ull << 30);
        // Under ASan the allocator aborts when the kernel refuses a mapping: claim 1 GB on
        // small machines instead of 8 GB.
        const uint8_t dtype = roomy || !asan_build() ? TENSO_DTYPE_FLOAT64 : TENSO_DTYPE_UINT8;
        Bytes dense = Pkt().v4(TENSO_FLAG_ALIGNED, dtype, 1).u32(1000000000u).pad(64).zeros(4096);
        Bytes bundle = Pkt().v4(TENSO_FLAG_BUNDLE, 0, 1).u32(0x40000000u).str("abc");  // a 1 GiB key
        for (const Bytes *pkt : {&dense, &bundle}) {
            for (uint64_t limit : {uint64_t(0), uint64_t(1) << 20}) {
                Channel ch = socket_channel();
                std::thread w([&] {
                    write_raw(ch.w.fd, pkt->data(), pkt->size());
                    ch.w.close();
                });
                tenso_decode_options o = TENSO_DECODE_OPTIONS_INIT;
                o.max_packet_bytes = limit;
                tenso_view *raw = nullptr;
                const auto t0 = std::chrono::steady_clock::now();
                tenso_status st = tenso_read_fd(&raw, ch.r.fd, &o);
                const double ms =
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                w.join();
                ViewPtr v(raw);
                const std::string what = std::string(pkt == &dense ? "dense claim" : "bundle key claim") +
                                         (limit ? " with max_packet_bytes 1 MiB" : " with default limits");
                std::printf("\n  CapiStreamTest: %s -> %s in %.1f ms", what.c_str(), tenso_status_name(st), ms);
                if (limit || pkt != &dense) {
                    // Keys are capped at TENSO_MAX_KEY_BYTES whatever the options say.
                    CPPUNIT_ASSERT_MESSAGE(what + ": " + tenso_describe(st), st == TENSO_E_LIMIT);
                } else {
                    // NO_MEMORY is an honest answer on a machine that cannot map the claim.
                    CPPUNIT_ASSERT_MESSAGE(what + ": " + tenso_describe(st),
                                           st == TENSO_E_TRUNCATED || st == TENSO_E_NO_MEMORY);
                }
                CPPUNIT_ASSERT(!v);
            }
        }
        std::printf("\n");
    }

    // An empty tensor with integrity has a footer too: XXH3-64 of zero bytes,
    // 0x2d06800538d394c2 (what upstream writes for np.zeros(0) with check_integrity=True).
    // The encoders run in a child process, so a crash is reported instead of ending the suite.
    void testEmptyBodyWithIntegrity() {
        static const uint8_t kEmptyDigest[8] = {0xc2, 0x94, 0xd3, 0x38, 0x05, 0x80, 0x06, 0x2d};
        Channel ch = pipe_channel();
        pid_t pid = ::fork();
        CPPUNIT_ASSERT(pid >= 0);
        if (pid == 0) {
            ch.r.close();
            const std::vector<uint64_t> shapes[] = {{0}, {2, 0, 3}};
            int step = 100;  // exit codes 100+: that encode call failed; ASan reports a crash as 1
            for (const auto &shape : shapes) {
                for (uint32_t align : {0u, 1u}) {
                    tenso_tensor t = tensor(nullptr, 0, shape, TENSO_DTYPE_FLOAT32);
                    tenso_encode_options o = enc(TENSO_ENCODE_INTEGRITY, align);
                    Buffer b;
                    if (tenso_dumps(&b.b, &t, &o) != TENSO_OK) ::_exit(step);
                    write_raw(ch.w.fd, b.b.data, b.b.size);
                    ++step;
                    if (tenso_write_fd(nullptr, ch.w.fd, &t, &o) != TENSO_OK) ::_exit(step);
                    ++step;
                }
            }
            // The same inside a bundle, through the value encoders.
            std::vector<uint64_t> zero = {0};
            tenso_tensor t = tensor(nullptr, 0, zero, TENSO_DTYPE_UINT8);
            tenso_value *leaf = nullptr, *bundle = nullptr;
            if (tenso_value_new_tensor(&leaf, &t) != TENSO_OK || tenso_value_new_bundle(&bundle) != TENSO_OK ||
                tenso_bundle_insert(bundle, "e", 1, leaf) != TENSO_OK)
                ::_exit(step);
            tenso_encode_options o = enc(TENSO_ENCODE_INTEGRITY);
            if (tenso_value_write_fd(nullptr, ch.w.fd, bundle, &o) != TENSO_OK) ::_exit(step + 1);
            ::_exit(0);
        }
        ch.w.close();
        Bytes all = read_all(ch.r.fd);
        int wstatus = 0;
        CPPUNIT_ASSERT_EQUAL(pid, ::waitpid(pid, &wstatus, 0));
        CPPUNIT_ASSERT_MESSAGE("the encoder crashed on an empty body with integrity (signal " +
                                   std::to_string(WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0) + ")",
                               !WIFSIGNALED(wstatus));
        CPPUNIT_ASSERT_EQUAL_MESSAGE(
            "encoder child's exit code (1: it crashed under a sanitizer, 100+k: "
            "encode call k failed)",
            0, WEXITSTATUS(wstatus));
        size_t off = 0, packets = 0;
        while (off < all.size()) {
            size_t len = 0;
            TENSO_CHECK_OK(tenso_packet_length(&len, all.data() + off, all.size() - off, nullptr));
            // Every packet here ends with its one footer, the bundle's included (its value is last).
            CPPUNIT_ASSERT_MESSAGE("packet " + std::to_string(packets) + ": footer is not XXH3 of nothing",
                                   std::memcmp(all.data() + off + len - 8, kEmptyDigest, 8) == 0);
            tenso_view *raw = nullptr;
            TENSO_CHECK_OK(tenso_loads(&raw, all.data() + off, len, nullptr));
            tenso_view_free(raw);
            off += len;
            ++packets;
        }
        CPPUNIT_ASSERT_EQUAL(size_t(9), packets);
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiStreamTest);
