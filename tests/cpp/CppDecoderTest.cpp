// CppDecoderTest - tenso::decoder from tenso/tenso.hpp: packets pushed in pieces of every size
// (feed), received in place (buffer + commit), iterated from an fd (packets) with and without
// read-ahead; truncation, errors and reset, limits and the timeout as exact statuses; a partial
// packet carried across a move; views outliving their decoder.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <cppunit/extensions/HelperMacros.h>

#include "tenso/tenso.hpp"

namespace {

using Bytes = std::vector<std::uint8_t>;

const std::vector<float> kF32 = {-1.5f, -0.0f, 0.25f, 1.0f, 3.75f, 100.5f};
const std::vector<std::int64_t> kI64 = {10, 20, 30};

// Three packets of different kinds back to back: f32[2x3], a bundle, a string tensor.
Bytes stream_of_three() {
    Bytes out;
    auto append = [&](const tenso::buffer &b) { out.insert(out.end(), b.begin(), b.end()); };
    append(tenso::dumps(tenso::tensor(kF32, {2, 3})));
    tenso::value b = tenso::value::bundle();
    b.insert("ids", tenso::tensor(kI64)).insert("w", tenso::tensor(kF32, {6}));
    append(tenso::dumps(b, tenso::encode_options().integrity()));
    const std::vector<std::uint64_t> offsets = {0, 5, 5, 8};
    append(tenso::dumps(tenso::value::strings(offsets, "helloabc")));
    return out;
}

// The three packets of stream_of_three, as views; checks each one's contents.
void check_three(const std::vector<tenso::view> &got) {
    CPPUNIT_ASSERT_EQUAL(std::size_t(3), got.size());
    CPPUNIT_ASSERT(got[0].to_vector<float>() == kF32);
    CPPUNIT_ASSERT(got[1]["ids"].to_vector<std::int64_t>() == kI64);
    CPPUNIT_ASSERT(got[1]["w"].to_vector<float>() == kF32);
    std::vector<std::string> strs;
    for (std::string_view s : got[2].strings()) strs.emplace_back(s);
    CPPUNIT_ASSERT(strs == (std::vector<std::string>{"hello", "", "abc"}));
    for (const tenso::view &v : got) CPPUNIT_ASSERT(v.owns_data());
}

template <class F>
tenso_status status_of(F &&f) {
    try {
        f();
    } catch (const tenso::error &e) {
        return e.status();
    }
    return TENSO_OK;
}

struct Fds {
    int fd[2] = {-1, -1};
    ~Fds() {
        for (int f : fd)
            if (f >= 0) ::close(f);
    }
    void close_writer() {
        ::close(fd[1]);
        fd[1] = -1;
    }
    void write_all(const Bytes &b) {
        CPPUNIT_ASSERT_EQUAL(static_cast<ssize_t>(b.size()), ::write(fd[1], b.data(), b.size()));
    }
};

}  // namespace

static_assert(!std::is_copy_constructible_v<tenso::decoder> && std::is_nothrow_move_constructible_v<tenso::decoder> &&
              std::is_nothrow_move_assignable_v<tenso::decoder>);

class CppDecoderTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CppDecoderTest);
    CPPUNIT_TEST(feedInPiecesOfEverySize);
    CPPUNIT_TEST(receiveInPlace);
    CPPUNIT_TEST(truncationAndReset);
    CPPUNIT_TEST(limitsReachTheDecoder);
    CPPUNIT_TEST(packetsFromAnFd);
    CPPUNIT_TEST(truncatedFdStreamThrows);
    CPPUNIT_TEST(timeoutIsAStatus);
    CPPUNIT_TEST(moveKeepsThePartialPacket);
    CPPUNIT_TEST_SUITE_END();

public:
    void feedInPiecesOfEverySize() {
        const Bytes stream = stream_of_three();
        for (std::size_t piece : {std::size_t(1), std::size_t(7), std::size_t(64), stream.size()}) {
            tenso::decoder dec;
            std::vector<tenso::view> got;
            std::size_t packets = 0;
            for (std::size_t at = 0; at < stream.size(); at += piece) {
                const std::size_t n = std::min(piece, stream.size() - at);
                packets += dec.feed(tenso::bytes_view(stream.data() + at, n),
                                    [&](tenso::view v) { got.push_back(std::move(v)); });
            }
            CPPUNIT_ASSERT_EQUAL(std::size_t(3), packets);
            CPPUNIT_ASSERT(dec.idle());
            dec.finish();
            check_three(got);
        }
        // An empty feed is no packet and no error.
        tenso::decoder dec;
        CPPUNIT_ASSERT_EQUAL(std::size_t(0), dec.feed(tenso::bytes_view(), [](tenso::view) {}));
    }

    void receiveInPlace() {
        const Bytes stream = stream_of_three();
        tenso::decoder dec;
        std::vector<tenso::view> got;
        std::size_t at = 0;
        while (at < stream.size()) {
            const tenso::span<std::uint8_t> dst = dec.buffer();
            CPPUNIT_ASSERT(!dst.empty() && dst.size() == dec.needed());
            // Never more than asked for: the decoder never over-reads a stream.
            const std::size_t n = std::min(dst.size(), stream.size() - at);
            std::memcpy(dst.data(), stream.data() + at, n);
            at += n;
            if (std::optional<tenso::view> v = dec.commit(n)) got.push_back(std::move(*v));
        }
        check_three(got);
    }

    void truncationAndReset() {
        const Bytes stream = stream_of_three();
        tenso::decoder dec;
        std::size_t packets = dec.feed(tenso::bytes_view(stream.data(), 40), [](tenso::view) {});
        CPPUNIT_ASSERT_EQUAL(std::size_t(0), packets);
        CPPUNIT_ASSERT(!dec.idle());
        CPPUNIT_ASSERT(dec.needed() > 0);
        CPPUNIT_ASSERT_EQUAL(TENSO_E_TRUNCATED, status_of([&] { dec.finish(); }));

        // Junk is refused with its status; the decoder then refuses everything until reset.
        dec.reset();
        CPPUNIT_ASSERT(dec.idle());
        const std::string junk = "XXXXXXXXXXXXXXXX";
        CPPUNIT_ASSERT_EQUAL(TENSO_E_BAD_MAGIC,
                             status_of([&] { dec.feed(tenso::as_bytes(junk), [](tenso::view) {}); }));
        CPPUNIT_ASSERT_EQUAL(TENSO_E_INVALID_ARGUMENT,
                             status_of([&] { dec.feed(tenso::as_bytes(stream), [](tenso::view) {}); }));
        dec.reset();
        std::vector<tenso::view> got;
        dec.feed(tenso::as_bytes(stream), [&](tenso::view v) { got.push_back(std::move(v)); });
        check_three(got);

        // An exception from the callback propagates; the packets before it were delivered.
        tenso::decoder d2;
        int seen = 0;
        try {
            d2.feed(tenso::as_bytes(stream), [&](tenso::view) {
                if (++seen == 2) throw std::runtime_error("stop");
            });
            CPPUNIT_FAIL("the callback's exception was lost");
        } catch (const std::runtime_error &e) {
            CPPUNIT_ASSERT_EQUAL(std::string("stop"), std::string(e.what()));
        }
        CPPUNIT_ASSERT_EQUAL(2, seen);
    }

    void limitsReachTheDecoder() {
        const tenso::buffer p = tenso::dumps(tenso::tensor(kF32, {2, 3}));  // 88 bytes
        tenso::decoder tight(tenso::decode_options().packet_bytes(50));
        CPPUNIT_ASSERT_EQUAL(TENSO_E_LIMIT, status_of([&] { tight.feed(p.bytes(), [](tenso::view) {}); }));
        tenso::decoder enough(tenso::decode_options().packet_bytes(88));
        CPPUNIT_ASSERT_EQUAL(std::size_t(1), enough.feed(p.bytes(), [](tenso::view) {}));
    }

    void packetsFromAnFd() {
        const Bytes stream = stream_of_three();
        for (std::uint32_t flags : {0u, TENSO_DECODER_READ_AHEAD}) {
            Fds fds;
            CPPUNIT_ASSERT_EQUAL(0, ::pipe(fds.fd));
            fds.write_all(stream);
            fds.write_all(stream);
            fds.close_writer();
            tenso::decoder dec(tenso::decode_options(), flags);
            std::vector<tenso::view> got;
            for (tenso::view &v : dec.packets(fds.fd[0])) got.push_back(std::move(v));
            CPPUNIT_ASSERT_EQUAL(std::size_t(6), got.size());
            check_three(std::vector<tenso::view>(std::make_move_iterator(got.begin()),
                                                 std::make_move_iterator(got.begin() + 3)));
            check_three(
                std::vector<tenso::view>(std::make_move_iterator(got.begin() + 3), std::make_move_iterator(got.end())));
            // After the clean end, read_fd answers "no packet" again.
            CPPUNIT_ASSERT(!dec.read_fd(fds.fd[0]));
        }
    }

    void truncatedFdStreamThrows() {
        const Bytes stream = stream_of_three();
        Fds fds;
        CPPUNIT_ASSERT_EQUAL(0, ::pipe(fds.fd));
        fds.write_all(Bytes(stream.begin(), stream.begin() + 100));  // packet 1 and a piece of 2
        fds.close_writer();
        tenso::decoder dec;
        int seen = 0;
        const tenso_status st = status_of([&] {
            for (tenso::view &v : dec.packets(fds.fd[0])) {
                CPPUNIT_ASSERT(v.to_vector<float>() == kF32);
                ++seen;
            }
        });
        CPPUNIT_ASSERT_EQUAL(TENSO_E_TRUNCATED, st);
        CPPUNIT_ASSERT_EQUAL(1, seen);
    }

    void timeoutIsAStatus() {
        // A peer that sends 4 bytes and goes quiet: the deadline turns the wait into a status.
        Fds fds;
        CPPUNIT_ASSERT_EQUAL(0, ::socketpair(AF_UNIX, SOCK_STREAM, 0, fds.fd));
        const Bytes stream = stream_of_three();
        fds.write_all(Bytes(stream.begin(), stream.begin() + 4));
        tenso::decoder dec(tenso::decode_options().timeout(20));
        CPPUNIT_ASSERT_EQUAL(TENSO_E_TIMEOUT, status_of([&] { dec.read_fd(fds.fd[0]); }));
        // The partial packet is kept: the rest arrives, and the same decoder completes it.
        fds.write_all(Bytes(stream.begin() + 4, stream.begin() + 88));
        std::optional<tenso::view> v = dec.read_fd(fds.fd[0]);
        CPPUNIT_ASSERT(v && v->to_vector<float>() == kF32);
    }

    void moveKeepsThePartialPacket() {
        const Bytes stream = stream_of_three();
        tenso::decoder a;
        const tenso_decoder *raw = a.get();
        a.feed(tenso::bytes_view(stream.data(), 50), [](tenso::view) {});
        tenso::decoder b(std::move(a));
        CPPUNIT_ASSERT(!a && b.get() == raw);
        tenso::decoder c;
        c = std::move(b);  // c's own decoder is freed
        CPPUNIT_ASSERT(!b && c.get() == raw && !c.idle());
        std::vector<tenso::view> got;
        c.feed(tenso::bytes_view(stream.data() + 50, stream.size() - 50),
               [&](tenso::view v) { got.push_back(std::move(v)); });
        // Views outlive the decoder that made them.
        c = tenso::decoder();
        check_three(got);
        tenso_decoder *released = c.release();
        CPPUNIT_ASSERT(!c && released != nullptr);
        tenso_decoder_free(released);
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CppDecoderTest);
