// fuzz_stream.cpp - framed reads from a file descriptor.
//
// Input: byte 0 picks the transport and the options, byte 1 seeds the chunk sizes, the rest
// is the stream. The stream goes through a memfd (read straight through, position checkable
// with lseek), or a pipe / socketpair fed by a writer thread in fuzz-chosen chunks, each
// written only once the previous one has been read, so the reader sees short reads (and, with
// a non-blocking read end, EAGAIN). Packets are read with tenso_read_fd until the end of the
// stream or an error. Invariant: reading from the fd is indistinguishable from decoding the
// same bytes in memory with tenso_loads, packet after packet:
//   - same status for every packet that frames (OK, or a decode failure such as CHECKSUM) or
//     is cut short (TRUNCATED); a packet that cannot be framed fails on both sides, though not
//     necessarily with the same status (the reader asks for a whole bundle value at once);
//   - same view (kind, header fields, shape, body bytes, bundle tree), packet size equal to
//     tenso_packet_length of the bytes in memory;
//   - a framed packet consumes exactly its bytes, also when it then fails to decode (checksum,
//     unsupported kind): with a memfd the fd position is the sum of the packet sizes.
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "fuzz_common.hpp"

namespace {

enum Transport { kMemfd = 0, kPipe = 1, kPipeNonblocking = 2, kSocketpair = 3 };

void write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        FUZZ_CHECK(w > 0, "write to the transport failed: %s", std::strerror(errno));
        p += w;
        n -= size_t(w);
    }
}

// Feeds `bytes` into wfd in chunks; after each chunk it waits until the reader has taken
// everything (FIONREAD on the read end is 0), unless `reader_done` says nobody is reading, so
// every read() the reader makes returns at most one chunk.
class Writer {
public:
    Writer(int wfd, int rfd, const uint8_t *p, size_t n, uint8_t seed)
        : wfd_(wfd), rfd_(rfd), p_(p), n_(n), seed_(seed) {
        th_ = std::thread([this] { run(); });
    }
    void reader_done() { done_ = true; }
    void join() { th_.join(); }

private:
    int wfd_, rfd_;
    const uint8_t *p_;
    size_t n_;
    uint8_t seed_;
    std::atomic<bool> done_{false};
    std::thread th_;

    void run() {
        // Chunk sizes from 1 to 2^(seed & 15), from a xorshift seeded by the input.
        uint32_t x = 0x9E3779B9u ^ seed_;
        const size_t max_chunk = size_t(1) << (seed_ & 15);
        // Each paced chunk costs a thread hand-off; after kPaced of them the rest goes at once.
        constexpr int kPaced = 256;
        size_t off = 0;
        for (int i = 0; off < n_; ++i) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            size_t chunk = i < kPaced ? std::min(n_ - off, 1 + size_t(x) % max_chunk) : n_ - off;
            write_all(wfd_, p_ + off, chunk);
            off += chunk;
            int queued = 1;
            while (!done_ && ::ioctl(rfd_, FIONREAD, &queued) == 0 && queued > 0) sched_yield();
        }
        ::close(wfd_);
    }
};

// A dense stream view exported to DLPack keeps the stream buffer alive after the view is gone.
void export_and_free(tenso_view *v) {
    DLManagedTensorVersioned *m = nullptr;
    if (tenso_view_kind(v) == TENSO_KIND_DENSE) FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_to_dlpack(&m, v));
    uint64_t nbytes = tenso_view_nbytes(v);
    tenso_view_free(v);
    if (!m) return;
    if (nbytes) fuzz::touch(m->dl_tensor.data, nbytes);
    m->deleter(m);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const fuzz::StreamInput in = fuzz::stream_input(data, size);
    const uint8_t mode = in.mode, seed = in.seed;
    const uint8_t *stream = in.stream;
    const size_t total = in.total;

    const Transport transport = Transport(mode & 3);
    tenso_decode_options opts;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_decode_options_init(&opts, TENSO_DECODE_OPTIONS_VERSION));
    opts.flags = (mode & 4) ? TENSO_DECODE_SKIP_CHECKSUM : 0;
    // No cap (the reader's memory follows the bytes received, not the lengths claimed), or a
    // cap the corpus packets straddle.
    static const uint64_t kCaps[4] = {0, 256, 4096, 65536};
    opts.max_packet_bytes = kCaps[(mode >> 3) & 3];

    int rfd = -1, wfd = -1;
    switch (transport) {
    case kMemfd: {
        rfd = ::memfd_create("tenso-fuzz", MFD_CLOEXEC);
        FUZZ_CHECK(rfd >= 0, "memfd_create: %s", std::strerror(errno));
        write_all(rfd, stream, total);
        FUZZ_CHECK(::lseek(rfd, 0, SEEK_SET) == 0, "lseek: %s", std::strerror(errno));
        break;
    }
    case kPipe:
    case kPipeNonblocking: {
        int p[2];
        FUZZ_CHECK(::pipe2(p, O_CLOEXEC) == 0, "pipe2: %s", std::strerror(errno));
        rfd = p[0];
        wfd = p[1];
        if (transport == kPipeNonblocking)
            FUZZ_CHECK(::fcntl(rfd, F_SETFL, ::fcntl(rfd, F_GETFL) | O_NONBLOCK) == 0, "fcntl");
        break;
    }
    case kSocketpair: {
        int sv[2];
        FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair: %s",
                   std::strerror(errno));
        rfd = sv[0];
        wfd = sv[1];
        ::shutdown(rfd, SHUT_WR);
        break;
    }
    }
    Writer *writer = wfd >= 0 ? new Writer(wfd, rfd, stream, total, seed) : nullptr;

    size_t pos = 0;  // bytes of the stream consumed by the packets read so far
    for (int packets = 0;; ++packets) {
        const uint8_t *rest = stream + pos;
        const size_t rest_len = total - pos;
        tenso_view *mem = nullptr;
        tenso_status st_mem = tenso_loads(&mem, rest, rest_len, &opts);
        size_t plen = 0;
        tenso_status st_len = tenso_packet_length(&plen, rest, rest_len, &opts);

        tenso_view *sv = reinterpret_cast<tenso_view *>(1);
        tenso_status st_fd = tenso_read_fd(&sv, rfd, &opts);
        FUZZ_CHECK((st_fd == TENSO_OK) == (sv != nullptr), "read_fd returned %s with view %p", tenso_status_name(st_fd),
                   static_cast<void *>(sv));

        if (rest_len == 0) {
            FUZZ_CHECK_STATUS(TENSO_E_END_OF_STREAM, st_fd);
            tenso_view_free(mem);
            break;
        }
        // Same outcome as in memory. Where the packet cannot be framed, the reader may name
        // another of its faults (it asks for a whole bundle value before looking inside), but a
        // packet cut short is TRUNCATED on both sides.
        if (st_len == TENSO_OK || st_len == TENSO_E_TRUNCATED)
            FUZZ_CHECK(st_fd == st_mem, "packet %d at offset %zu: read_fd gives %s, loads of the same bytes %s",
                       packets, pos, tenso_status_name(st_fd), tenso_status_name(st_mem));
        else
            FUZZ_CHECK(st_fd != TENSO_OK && st_fd != TENSO_E_END_OF_STREAM && st_mem == st_len,
                       "packet %d at offset %zu: unframeable (%s), read_fd gives %s, loads %s", packets, pos,
                       tenso_status_name(st_len), tenso_status_name(st_fd), tenso_status_name(st_mem));
        if (st_fd == TENSO_OK) {
            FUZZ_CHECK(st_len == TENSO_OK && tenso_view_packet_size(sv) == plen,
                       "read_fd read a %llu-byte packet, packet_length says %s %zu",
                       (unsigned long long)tenso_view_packet_size(sv), tenso_status_name(st_len), plen);
            fuzz::same_view(sv, mem);
            export_and_free(sv);
        }
        tenso_view_free(mem);

        // Framed under these options: the reader consumed exactly the packet, whether or not
        // it then decoded.
        bool framed = st_len == TENSO_OK;
        if (framed && opts.max_packet_bytes)
            FUZZ_CHECK(plen <= opts.max_packet_bytes, "framed %zu bytes past max_packet_bytes", plen);
        if (!framed) {
            FUZZ_CHECK(st_fd != TENSO_OK, "read_fd decoded a packet packet_length cannot frame");
            break;
        }
        pos += plen;
        if (transport == kMemfd) {
            off_t at = ::lseek(rfd, 0, SEEK_CUR);
            FUZZ_CHECK(at == off_t(pos), "after packet %d the fd is at %lld, the packets end at %zu", packets,
                       (long long)at, pos);
        }
    }

    if (writer) {
        // Let the writer finish without pacing, and take whatever the reader left.
        writer->reader_done();
        std::vector<uint8_t> left;
        uint8_t buf[4096];
        for (;;) {
            ssize_t n = ::read(rfd, buf, sizeof buf);
            if (n > 0) {
                left.insert(left.end(), buf, buf + n);
                continue;
            }
            if (n == 0) break;
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                sched_yield();
                continue;
            }
            FUZZ_CHECK(false, "draining the transport: %s", std::strerror(errno));
        }
        writer->join();
        delete writer;
        // The reader never consumes more than the stream holds nor less than the packets it
        // framed; what is left is exactly the stream's tail.
        FUZZ_CHECK(left.size() <= total - pos, "%zu bytes left after %zu of %zu consumed", left.size(), pos, total);
        FUZZ_CHECK(left.empty() || std::memcmp(left.data(), stream + total - left.size(), left.size()) == 0,
                   "bytes left on the transport are not the stream's tail");
    }
    ::close(rfd);
    return 0;
}
