// fuzz_decoder.cpp - the push-style stream decoder in fuzz-chosen pieces.
//
// Input: byte 0 picks the options and the API (feed or buffer/commit), byte 1 seeds the piece
// sizes, the rest is the stream. Packets are pushed through one decoder until the stream ends
// or a packet fails. Invariant: the decoder is indistinguishable from tenso_loads of the same
// bytes in memory, packet after packet, whatever the pieces:
//   - where tenso_packet_length frames the packet (the decoder's own framing), the decoder
//     consumes exactly its bytes and gives the status and view tenso_loads gives;
//   - a packet cut short by the end of the stream leaves finish() at TRUNCATED, and where it
//     cannot be framed the decoder fails too, with loads' status (unless loads says TRUNCATED
//     or the decoder refused a claim early: LIMIT);
//   - buffer() never asks for a byte past the packet, and needed() is never 0 inside one.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "fuzz_common.hpp"

namespace {

struct Pieces {
    uint32_t x;
    size_t max;
    size_t next() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        return 1 + size_t(x) % max;
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const fuzz::StreamInput in = fuzz::stream_input(data, size);
    const uint8_t mode = in.mode, seed = in.seed;
    const uint8_t *stream = in.stream;
    const size_t total = in.total;

    tenso_decode_options opts;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_decode_options_init(&opts, TENSO_DECODE_OPTIONS_VERSION));
    opts.flags = (mode & 1) ? TENSO_DECODE_SKIP_CHECKSUM : 0;
    // 64 MiB, not the default cap: a declared size under the cap is allocated by design, and
    // libFuzzer counts a GiB allocation as a failure.
    static const uint64_t kCaps[4] = {uint64_t(64) << 20, 256, 4096, 65536};
    opts.max_packet_bytes = kCaps[(mode >> 1) & 3];
    const bool commit_api = mode & 8;
    tenso_decoder_options dopts = TENSO_DECODER_OPTIONS_INIT;
    dopts.decode = &opts;
    tenso_decoder *d = nullptr;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_decoder_new(&d, &dopts));
    Pieces pieces{0x9E3779B9u ^ seed, size_t(1) << (seed & 15)};

    size_t pos = 0;
    while (pos < total) {
        const uint8_t *rest = stream + pos;
        const size_t rest_len = total - pos;
        tenso_view *mem = nullptr;
        const tenso_status st_mem = tenso_loads(&mem, rest, rest_len, &opts);
        size_t plen = 0;
        const tenso_status st_len = tenso_packet_length(&plen, rest, rest_len, &opts);

        // Push pieces until a view, an error or the end of the stream.
        size_t used = 0;
        tenso_view *v = nullptr;
        tenso_status st = TENSO_OK;
        while (!v && st == TENSO_OK && used < rest_len) {
            FUZZ_CHECK(tenso_decoder_needed(d) > 0, "needed() is 0 inside a packet");
            const size_t n = std::min(pieces.next(), rest_len - used);
            if (commit_api) {
                void *dst = nullptr;
                size_t room = 0;
                st = tenso_decoder_buffer(d, &dst, &room);
                if (st != TENSO_OK) break;
                FUZZ_CHECK(room > 0 && room <= tenso_decoder_needed(d), "buffer() offers %zu of %zu needed", room,
                           tenso_decoder_needed(d));
                if (st_len == TENSO_OK)
                    FUZZ_CHECK(used + room <= plen, "buffer() asks past the packet: %zu + %zu > %zu", used, room, plen);
                const size_t k = std::min(n, room);
                std::memcpy(dst, rest + used, k);
                used += k;
                st = tenso_decoder_commit(d, k, &v);
            } else {
                size_t took = 0;
                st = tenso_decoder_feed(d, rest + used, n, &took, &v);
                FUZZ_CHECK(took <= n, "feed took %zu of %zu", took, n);
                if (st == TENSO_OK && !v) FUZZ_CHECK(took == n, "feed stopped at %zu of %zu without a packet", took, n);
                used += took;
            }
        }
        if (st == TENSO_OK && !v) {
            // The stream ended inside the packet.
            FUZZ_CHECK(st_len != TENSO_OK || plen > rest_len, "the decoder wants more than a framed packet");
            FUZZ_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_decoder_finish(d));
            tenso_view_free(mem);
            break;
        }
        if (st_len == TENSO_OK) {
            FUZZ_CHECK(st == st_mem, "packet at %zu: decoder gives %s, loads %s", pos, tenso_status_name(st),
                       tenso_status_name(st_mem));
            if (st == TENSO_OK) {
                FUZZ_CHECK(used == plen, "the decoder consumed %zu bytes of a %zu-byte packet", used, plen);
                fuzz::same_view(v, mem);
            }
        } else {
            FUZZ_CHECK(st != TENSO_OK, "the decoder decoded a packet packet_length cannot frame (%s)",
                       tenso_status_name(st_len));
            // Where loads names a fault, the decoder names the same one, unless it refused a
            // header's claim (LIMIT) before the bytes with that fault had arrived.
            if (st_mem != TENSO_E_TRUNCATED && st != TENSO_E_LIMIT)
                FUZZ_CHECK(st == st_mem, "packet at %zu: decoder gives %s, loads %s", pos, tenso_status_name(st),
                           tenso_status_name(st_mem));
        }
        tenso_view_free(v);
        tenso_view_free(mem);
        if (st != TENSO_OK) break;
        pos += used;
    }
    if (pos == total) FUZZ_CHECK_STATUS(TENSO_OK, tenso_decoder_finish(d));
    tenso_decoder_free(d);
    return 0;
}
