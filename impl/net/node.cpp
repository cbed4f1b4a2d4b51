// node.cpp - the node engine (see node.hpp and docs/net-protocol.md).
#include "net/node.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <asio.hpp>
#include <openssl/err.h>

#include "error.hpp"
#include "format/decoder.hpp"
#include "io/io.hpp"
#include "net/control.hpp"
#include "net/tls.hpp"

namespace tenso::net {

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void sys_fail(int32_t st, const std::string &what, int err = errno) {
    fail(st, what + ": " + std::strerror(err));
}

// ---- waits: a socket, the node's stop descriptor and a cancel token, until a deadline ------

struct Deadline {
    bool none = true;
    Clock::time_point at;
    static Deadline in(uint64_t ms) {
        Deadline d;
        if (ms != UINT64_MAX) {
            d.none = false;
            d.at = Clock::now() + std::chrono::milliseconds(std::min<uint64_t>(ms, uint64_t(1) << 40));
        }
        return d;
    }
    int poll_ms() const {
        if (none) return -1;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at - Clock::now()).count();
        return left <= 0 ? 0 : int(std::min<long long>(left + 1, INT_MAX));
    }
};

struct Waker {
    int stop_fd;
    Cancel *cancel;
    // The node's flag, set before stop_fd is written: checking it costs no syscall (a post
    // checks once per call); the waits below still poll stop_fd to be woken.
    const std::atomic<bool> *stopped;
    void check() const {
        if (cancel && cancel->triggered()) fail(TENSO_E_CANCELLED, "cancelled");
        if (stopped->load(std::memory_order_acquire)) fail(TENSO_E_SHUTDOWN, "the node is shut down");
    }
    // Sleeps up to ms, waking for a cancel or a stop (which throw).
    void pause(int ms) const {
        pollfd p[2] = {{stop_fd, POLLIN, 0}, {cancel ? cancel->fd() : -1, POLLIN, 0}};
        ::poll(p, 2, ms);
        check();
    }
    // Waits for `events` on fd (fd < 0: only for the deadline, a cancel or a stop).
    void wait(int fd, short events, const Deadline &d) const {
        for (;;) {
            check();
            pollfd p[3] = {{fd, events, 0}, {stop_fd, POLLIN, 0}, {cancel ? cancel->fd() : -1, POLLIN, 0}};
            const int ms = d.poll_ms();
            if (ms == 0) fail(TENSO_E_TIMEOUT, "timed out");
            const int r = ::poll(p, 3, ms);
            if (r < 0 && errno != EINTR) sys_fail(TENSO_E_IO, "poll");
            if (r > 0 && p[0].revents) {
                check();
                return;
            }
        }
    }
};

// ---- addresses -------------------------------------------------------------------------

struct Address {
    enum Scheme { kTls, kTcp, kUnix } scheme = kTls;
    std::string host, port, path, fingerprint;
    std::string key() const {
        return scheme == kUnix ? "unix://" + path
                               : (scheme == kTls ? "tls://" + fingerprint + "@" : "tcp://") + host + ":" + port;
    }
};

Address parse_address(const std::string &s, bool listen) {
    auto bad = [&](const char *why) -> Address { fail(TENSO_E_BAD_ADDRESS, "address '" + s + "': " + why); };
    Address a;
    std::string rest;
    if (s.rfind("tls://", 0) == 0) {
        a.scheme = Address::kTls;
        rest = s.substr(6);
    } else if (s.rfind("tcp://", 0) == 0) {
        a.scheme = Address::kTcp;
        rest = s.substr(6);
    } else if (s.rfind("unix://", 0) == 0) {
        a.scheme = Address::kUnix;
        a.path = s.substr(7);
        if (a.path.empty() || a.path.size() >= sizeof(sockaddr_un{}.sun_path)) return bad("bad socket path");
        return a;
    } else {
        return bad("expected tls://, tcp:// or unix://");
    }
    if (a.scheme == Address::kTls) {
        const size_t at = rest.find('@');
        if (at != std::string::npos) {
            a.fingerprint = rest.substr(0, at);
            rest = rest.substr(at + 1);
            if (a.fingerprint.size() != 64 || a.fingerprint.find_first_not_of("0123456789abcdef") != std::string::npos)
                return bad("the key fingerprint is not 64 lower-case hex digits");
        }
        if (listen != a.fingerprint.empty())
            return bad(listen ? "a listen address takes no fingerprint" : "no key fingerprint");
    }
    size_t colon;
    if (!rest.empty() && rest[0] == '[') {
        const size_t close = rest.find(']');
        if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
            return bad("bad IPv6 literal");
        a.host = rest.substr(1, close - 1);
        colon = close + 1;
    } else {
        colon = rest.rfind(':');
        if (colon == std::string::npos) return bad("no port");
        a.host = rest.substr(0, colon);
    }
    a.port = rest.substr(colon + 1);
    if (a.host.empty() || a.port.empty() || a.port.size() > 5 ||
        a.port.find_first_not_of("0123456789") != std::string::npos || std::stoul(a.port) > 65535)
        return bad("bad host or port");
    if (!listen && a.port == "0") return bad("port 0");
    return a;
}

std::string host_text(const std::string &h) { return h.find(':') != std::string::npos ? "[" + h + "]" : h; }

// ---- sockets: bytes in and out of a plain or TLS connection, never blocking -----------------

enum class Io { kDone, kWantRead, kWantWrite, kEof };

struct Sock {
    int fd = -1;
    SSL *ssl = nullptr;
    bool unix_ = false;
    std::deque<int> fds;  // descriptors received (Unix), oldest first
    std::string peer;     // the sender name of messages from it
    uint64_t *counter_in = nullptr, *counter_out = nullptr;

    Sock() = default;
    Sock(const Sock &) = delete;
    Sock &operator=(const Sock &) = delete;
    ~Sock() {
        if (ssl) SSL_free(ssl);
        if (fd >= 0) ::close(fd);
        for (int f : fds) ::close(f);
    }

    [[noreturn]] void ssl_fail(int err, const char *what) {
        const unsigned long e = ERR_peek_error();
        char buf[256] = "";
        if (e) ERR_error_string_n(e, buf, sizeof buf);
        // A TLS alert from the peer (reason codes from SSL_AD_REASON_OFFSET) is its refusal.
        const bool alert = e && ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) >= 1000;
        ERR_clear_error();
        if (err == SSL_ERROR_SYSCALL && !e) sys_fail(TENSO_E_CONNECTION, what, errno ? errno : ECONNRESET);
        fail(alert ? TENSO_E_AUTH : TENSO_E_CONNECTION, std::string(what) + ": " + buf);
    }

    // What an SSL_read_ex / SSL_write_ex call returned (r), as an Io; n bytes moved.
    Io ssl_result(int r, size_t n, uint64_t *counter, const char *what) {
        if (r == 1) {
            if (counter) __atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
            return Io::kDone;
        }
        const int err = SSL_get_error(ssl, r);
        if (err == SSL_ERROR_WANT_READ) return Io::kWantRead;
        if (err == SSL_ERROR_WANT_WRITE) return Io::kWantWrite;
        if (err == SSL_ERROR_ZERO_RETURN) return Io::kEof;
        if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && errno == 0) return Io::kEof;
        ssl_fail(err, what);
    }

    // Reads into p; *n gets the bytes. TLS reads ahead (tls.cpp): OpenSSL may hold whole
    // records the socket no longer shows as readable, so callers wait for POLLIN only after a
    // read returned kWantRead (OpenSSL says so only when it holds no complete record).
    Io read(void *p, size_t cap, size_t *n) {
        *n = 0;
        if (ssl) return ssl_result(SSL_read_ex(ssl, p, cap, n), *n, counter_in, "TLS read");
        ssize_t r;
        if (unix_) {
            alignas(cmsghdr) char cbuf[CMSG_SPACE(4 * sizeof(int))];
            iovec iov{p, cap};
            msghdr m{};
            m.msg_iov = &iov;
            m.msg_iovlen = 1;
            m.msg_control = cbuf;
            m.msg_controllen = sizeof cbuf;
            do r = ::recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
            while (r < 0 && errno == EINTR);
            if (r >= 0) {
                for (cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
                    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        for (size_t i = 0; i < k; ++i) {
                            int f;
                            std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
                            fds.push_back(f);
                        }
                    }
                if (fds.size() > 16) fail(TENSO_E_LIMIT, "the peer passed too many descriptors");
            }
        } else {
            do r = ::read(fd, p, cap);
            while (r < 0 && errno == EINTR);
        }
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return Io::kWantRead;
            sys_fail(TENSO_E_CONNECTION, "read");
        }
        if (r == 0) return Io::kEof;
        *n = size_t(r);
        if (counter_in) __atomic_add_fetch(counter_in, *n, __ATOMIC_RELAXED);
        return Io::kDone;
    }

    // TLS writes one record (up to kRecord bytes) per SSL_write_ex (partial writes). Segments
    // shorter than a record (a control frame, a packet header, a small body) are packed with
    // what follows into one record: a tiny record costs a cipher call, 22 bytes and, alone, a
    // segment of its own. Records that more of this write follows are gathered by the BIO and
    // sent together (set_send_more); the last one sends them all before it counts as written.
    // After WANT_WRITE the caller retries with the same segments, so the packed record is the
    // same bytes again, at the same address, as OpenSSL requires.
    static constexpr size_t kRecord = 16384;  // TLS's largest plaintext record
    std::unique_ptr<uint8_t[]> stage;         // a packed record
    Io tls_write(const iovec *iov, size_t cnt, size_t *n) {
        const void *p = iov[0].iov_base;
        size_t len = iov[0].iov_len;
        if (len < kRecord && cnt > 1 && !stage) stage.reset(new (std::nothrow) uint8_t[kRecord]);  // none: unpacked
        if (len < kRecord && cnt > 1 && stage) {
            len = 0;
            for (size_t i = 0; i < cnt && len < kRecord; ++i) {
                const size_t k = std::min(iov[i].iov_len, kRecord - len);
                std::memcpy(stage.get() + len, iov[i].iov_base, k);
                len += k;
            }
            p = stage.get();
        }
        // One record per call: after WANT_WRITE, OpenSSL finishes the pending record and goes
        // on to the next one in the same call, which could be the last of the write and must
        // not then be gathered (nothing would send it). The retry passes the same length.
        len = std::min(len, kRecord);
        size_t total = 0;  // does anything follow this record?
        for (size_t i = 0; i < cnt && total <= len; ++i) total += iov[i].iov_len;
        set_send_more(ssl, total > len);
        const int r = SSL_write_ex(ssl, p, len, n);
        set_send_more(ssl, false);
        return ssl_result(r, *n, counter_out, "TLS write");
    }

    // Writes from iov[0, cnt); *n gets the bytes. pass_fd (Unix): sent with the first byte.
    Io write(const iovec *iov, size_t cnt, size_t *n, int pass_fd) {
        *n = 0;
        if (ssl) return tls_write(iov, cnt, n);
        msghdr m{};
        m.msg_iov = const_cast<iovec *>(iov);
        m.msg_iovlen = std::min<size_t>(cnt, IOV_MAX);
        alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
        if (pass_fd >= 0) {
            m.msg_control = cbuf;
            m.msg_controllen = sizeof cbuf;
            cmsghdr *c = CMSG_FIRSTHDR(&m);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            std::memcpy(CMSG_DATA(c), &pass_fd, sizeof pass_fd);
        }
        ssize_t r;
        do r = ::sendmsg(fd, &m, MSG_NOSIGNAL);
        while (r < 0 && errno == EINTR);
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return Io::kWantWrite;
            sys_fail(TENSO_E_CONNECTION, "write");
        }
        *n = size_t(r);
        if (counter_out) __atomic_add_fetch(counter_out, *n, __ATOMIC_RELAXED);
        return Io::kDone;
    }
};

// A list of segments being written, front first.
struct Outgoing {
    std::vector<uint8_t> head;         // the control frame
    std::vector<iovec> iov;            // head, then the value's segments
    size_t at = 0;                     // first segment not fully written
    int pass_fd = -1;                  // sent with the first byte (not owned)
    std::shared_ptr<const void> keep;  // what the segments point into
    void start() { iov.insert(iov.begin(), iovec{head.data(), head.size()}); }
    bool done() const { return at == iov.size(); }
    // Writes what the socket takes now.
    Io pump(Sock &s) {
        while (at < iov.size()) {
            if (iov[at].iov_len == 0) {
                ++at;
                continue;
            }
            size_t n;
            const Io r = s.write(&iov[at], iov.size() - at, &n, pass_fd);
            if (r != Io::kDone) return r;
            pass_fd = -1;
            while (n > 0) {
                const size_t k = std::min(n, iov[at].iov_len);
                iov[at].iov_base = static_cast<uint8_t *>(iov[at].iov_base) + k;
                iov[at].iov_len -= k;
                n -= k;
                if (iov[at].iov_len == 0) ++at;
            }
        }
        return Io::kDone;
    }
};

// Frames in: a read-ahead buffer feeding the stream decoder, or, for large packets with nothing
// read ahead, reads straight into the decoder's (aligned) packet buffer.
struct Reader {
    static constexpr size_t kAhead = 64 * 1024;
    std::unique_ptr<uint8_t[]> buf{new uint8_t[kAhead]};
    size_t pos = 0, end = 0;

    Io frame(Sock &s, Decoder &d, std::unique_ptr<View> *out) {
        for (;;) {
            if (pos < end) {
                try {
                    pos += d.feed(buf.get() + pos, end - pos, out);
                } catch (...) {
                    pos += d.fed();
                    throw;
                }
                if (*out) return Io::kDone;
                continue;
            }
            size_t need;
            uint8_t *dst = d.buffer(&need);
            size_t n;
            Io r;
            if (need >= kAhead) {
                r = s.read(dst, need, &n);
                if (r == Io::kDone) {
                    *out = d.commit(n);
                    if (*out) return Io::kDone;
                    continue;
                }
            } else {
                r = s.read(buf.get(), kAhead, &n);
                if (r == Io::kDone) {
                    pos = 0;
                    end = n;
                    continue;
                }
            }
            if (r == Io::kEof && !d.idle())
                fail(TENSO_E_CONNECTION, "the peer closed the connection in the middle of a packet");
            return r;
        }
    }
    // Drops n bytes (a refused push's body); returns what is left to drop.
    Io skip(Sock &s, uint64_t *left) {
        while (*left) {
            if (pos < end) {
                const size_t k = size_t(std::min<uint64_t>(*left, end - pos));
                pos += k;
                *left -= k;
                continue;
            }
            size_t n;
            const Io r = s.read(buf.get(), kAhead, &n);
            if (r != Io::kDone) return r == Io::kEof ? (fail(TENSO_E_CONNECTION, "closed"), r) : r;
            pos = 0;
            end = n;
        }
        return Io::kDone;
    }
};

// A packet received as a descriptor: mapped when the sender sealed it against writes and
// shrinking (nobody can change or truncate it under the view), else read into memory.
std::unique_ptr<View> view_from_fd(int fd, uint64_t offset, uint64_t len, const Limits &lim) {
    struct stat st;
    if (fstat(fd, &st) != 0) sys_fail(TENSO_E_IO, "fstat of a passed descriptor");
    if (len == 0 || offset > uint64_t(st.st_size) || len > uint64_t(st.st_size) - offset)
        fail(TENSO_E_MALFORMED, "a passed descriptor is shorter than its packet");
    if (lim.max_packet_bytes && len > lim.max_packet_bytes) fail(TENSO_E_LIMIT, "packet larger than max_packet_bytes");
    const int seals = fcntl(fd, F_GET_SEALS);
    const int need = F_SEAL_SHRINK | F_SEAL_WRITE;
    if (seals >= 0 && (seals & need) == need) {
        const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
        const uint64_t base = offset / page * page;
        const size_t maplen = size_t(offset - base + len);
        void *m = mmap(nullptr, maplen, PROT_READ, MAP_SHARED, fd, off_t(base));
        if (m == MAP_FAILED) sys_fail(TENSO_E_IO, "mmap of a passed descriptor");
        std::shared_ptr<const void> keep(m, [maplen](const void *p) { munmap(const_cast<void *>(p), maplen); });
        const uint8_t *p = static_cast<const uint8_t *>(m) + (offset - base);
        if (frame_length(p, size_t(len), lim) != len)
            fail(TENSO_E_MALFORMED, "the passed packet's length is not the one announced");
        return decode(p, size_t(len), lim, keep);
    }
    std::shared_ptr<uint8_t> buf = alloc_aligned(size_t(len));
    size_t got = 0;
    while (got < len) {
        const ssize_t r = ::pread(fd, buf.get() + got, size_t(len - got), off_t(offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) sys_fail(TENSO_E_IO, "pread of a passed descriptor", r == 0 ? EIO : errno);
        got += size_t(r);
    }
    if (frame_length(buf.get(), size_t(len), lim) != len)
        fail(TENSO_E_MALFORMED, "the passed packet's length is not the one announced");
    return decode(buf.get(), size_t(len), lim, buf);
}

// A sealed memfd holding the packet the segments make.
int packet_memfd(const std::vector<iovec> &iov, uint64_t total) {
    const int fd = memfd_create("tenso-packet", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) sys_fail(TENSO_E_IO, "memfd_create");
    if (ftruncate(fd, off_t(total)) != 0) {
        const int e = errno;
        ::close(fd);
        sys_fail(TENSO_E_IO, "ftruncate of a memfd", e);
    }
    uint64_t off = 0;
    for (const iovec &v : iov) {
        size_t done = 0;
        while (done < v.iov_len) {
            const ssize_t r =
                ::pwrite(fd, static_cast<const uint8_t *>(v.iov_base) + done, v.iov_len - done, off_t(off + done));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                const int e = errno;
                ::close(fd);
                sys_fail(TENSO_E_IO, "write to a memfd", e);
            }
            done += size_t(r);
        }
        off += v.iov_len;
    }
    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    return fd;
}

struct Published {
    std::unique_ptr<Value> value;
    void (*release)(void *) = nullptr;
    void *user = nullptr;
    std::unique_ptr<Plan> plan;  // encoded once; sends write its segments
    std::vector<iovec> iov;
    uint64_t size = 0;
    std::mutex memfd_mu;
    int memfd = -1;  // made the first time a Unix peer pulls it
    ~Published() {
        if (memfd >= 0) ::close(memfd);
        plan.reset();
        value.reset();
        if (release) release(user);
    }
};

Limits value_limits(const NodeOptions &o) {
    Limits l;
    l.max_packet_bytes = o.max_packet_bytes;
    return l;
}
Limits control_limits(const NodeOptions &o) {
    Limits l;
    l.max_packet_bytes = control_packet_limit(o.max_name_bytes);
    return l;
}
DecoderConfig decoder_config(const Limits &l) {
    DecoderConfig c;
    c.limits = l;
    return c;
}

}  // namespace

// ---- cancel tokens ---------------------------------------------------------------------

Cancel::Cancel() {
    fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd_ < 0) sys_fail(TENSO_E_IO, "eventfd");
}
Cancel::~Cancel() { ::close(fd_); }
void Cancel::trigger() {
    flag_.store(true, std::memory_order_release);
    const uint64_t one = 1;
    (void)!::write(fd_, &one, sizeof one);
}

// ---- the node ----------------------------------------------------------------------------

struct Outbound {
    Sock sock;
    Reader reader;
    Decoder ctl, val;
    Address addr;
    Clock::time_point idle_since;
    Outbound(const NodeOptions &o) : ctl(decoder_config(control_limits(o))), val(decoder_config(value_limits(o))) {}
};

struct Listener {
    Address addr;
    int fd = -1;
    std::unique_ptr<asio::posix::stream_descriptor> sd;
    std::string printable;
};

class Inbound;

struct Node::Impl : std::enable_shared_from_this<Node::Impl> {
    NodeOptions opts;
    Limits vlim, clim;
    std::unique_ptr<Tls> tls;
    std::unique_ptr<asio::io_context> io{new asio::io_context};
    std::unique_ptr<asio::steady_timer> reaper;
    std::vector<std::thread> threads;
    std::vector<Listener> listeners;
    int stop_fd = -1, recv_fd = -1;
    std::atomic<bool> stopped{false};
    std::mutex stop_mu;

    // inbound connections
    std::mutex in_mu;
    std::set<std::shared_ptr<Inbound>> inbound;

    // the receive queue
    std::mutex q_mu;
    std::deque<std::unique_ptr<Message>> queue;
    uint64_t queued_bytes = 0;
    std::deque<std::weak_ptr<Inbound>> parked;  // pushes waiting for queue room
    // recv_fd is written once per batch of pushes, not once per push: enqueue notes that the
    // queue became non-empty (wake_pending), the connection's step calls wake() when it stops.
    // `signalled` (under q_mu): recv_fd holds a count, cleared when the queue empties.
    bool signalled = false;
    std::atomic<bool> wake_pending{false};
    void wake();

    // published values
    std::mutex pub_mu;
    std::map<std::string, std::shared_ptr<Published>> published;

    // the outbound pool
    struct Peer {
        std::vector<std::unique_ptr<Outbound>> idle;
        uint32_t busy = 0;
    };
    std::mutex pool_mu;
    std::map<std::string, Peer> pool;
    // Notified (under pool_mu) when a connection comes back or goes (checkin, discard) and at
    // stop: what a checkout at the per-peer maximum waits for.
    std::condition_variable pool_cv;
    // pipelined pushes, per peer (tenso_node_post / tenso_node_flush); under pool_mu
    struct PostStream;
    std::map<std::string, std::shared_ptr<PostStream>> streams;
    std::shared_ptr<PostStream> post_stream(const Address &a);
    // The same by the address text, parsed once.
    std::map<std::string, std::shared_ptr<PostStream>> stream_of_text;
    std::shared_ptr<PostStream> post_stream(const std::string &text);
    void stop_streams();
    // Writes a stream's buffered posts soon after a post leaves them (see PostStream).
    void arm_idle_flush(const std::weak_ptr<PostStream> &ws);
    void idle_flush(const std::weak_ptr<PostStream> &ws);
    template <class F>
    void on_stream(PostStream &s, F &&f);

    uint64_t bytes_sent = 0, bytes_received = 0;  // atomically updated
    std::atomic<uint64_t> opened{0}, reused{0}, refused{0};
    std::atomic<uint32_t> calls{0};

    void start();
    void stop();
    void accept_next(Listener &l);
    void on_accept(Listener &l);
    void refuse_over_limit(int fd);
    void reap();
    // The queue: true when it took the message; false when full (the caller parks).
    // A full queue parks `who` (resumed when a receive makes room) and returns false.
    bool enqueue(std::unique_ptr<Message> &m, const std::shared_ptr<Inbound> &who);
    std::unique_ptr<Outbound> checkout(const Address &a, const Waker &w, const Deadline &d);
    void checkin(std::unique_ptr<Outbound> c);
    void discard(std::unique_ptr<Outbound> c);  // a connection out of step: closed
    std::unique_ptr<Outbound> dial(const Address &a, const Waker &w, const Deadline &d);
    Control call(Outbound &c, Outgoing &out, const Waker &w, const Deadline &d);
    std::unique_ptr<View> read_value(Outbound &c, const Control &reply, const Waker &w, const Deadline &d);
};

// An accepted connection, served on the event loop: one request at a time (read a control
// frame and its value, answer, read the next).
class Inbound : public std::enable_shared_from_this<Inbound> {
public:
    Inbound(Node::Impl &n, int fd, bool unix_, bool tls, std::string peer)
        : n_(n), sd_(*n.io, fd), ctl_(decoder_config(n.clim)), val_(decoder_config(n.vlim)) {
        sock_.fd = fd;
        sock_.unix_ = unix_;
        sock_.peer = std::move(peer);
        sock_.counter_in = &n.bytes_received;
        sock_.counter_out = &n.bytes_sent;
        if (tls) {
            sock_.ssl = new_ssl(n.tls->server(), fd);
            SSL_set_accept_state(sock_.ssl);
            state_ = kHandshake;
        }
    }
    ~Inbound() { sd_.release(); }  // Sock closes the descriptor

    void run() { step(); }
    // At shutdown (the loop has stopped): the connection closes now, the descriptor with the object.
    void close() {
        ::shutdown(sock_.fd, SHUT_RDWR);
        state_ = kClosed;
        asio::error_code ec;
        sd_.cancel(ec);
    }
    // The queue has room again: finish the parked push.
    void resume() {
        asio::post(*n_.io, [self = shared_from_this()] {
            if (self->state_ != kParked) return;
            self->deliver();
            self->step();
        });
    }

private:
    enum State { kHandshake, kReadControl, kReadValue, kSkip, kParked, kWrite, kLinger, kClosed };
    Node::Impl &n_;
    Sock sock_;
    asio::posix::stream_descriptor sd_;
    Reader reader_;
    Decoder ctl_, val_;
    State state_ = kReadControl;
    Control req_;
    std::unique_ptr<Message> msg_;
    uint64_t skip_left_ = 0;
    int32_t skip_status_ = 0;
    std::string skip_msg_;
    Outgoing out_;
    bool close_after_write_ = false;
    State after_write_ = kReadControl;  // where a finished write goes on
    // Pushes queued but not yet acknowledged: answered by one `ok` whose length field is their
    // count (one `ok` each, to a dialer that did not ask for counts), written before the
    // connection next waits for input or answers anything else.
    uint64_t acks_ = 0;
    bool counted_ = false;  // the dialer reads counted oks (kCountedOk): else one `ok` per push
    static constexpr uint64_t kLingerBytes = 16 << 20;
    uint64_t linger_ = 0;

    void wait(Io io) {
        auto self = shared_from_this();
        sd_.async_wait(io == Io::kWantWrite ? asio::posix::stream_descriptor::wait_write
                                            : asio::posix::stream_descriptor::wait_read,
                       [self](const asio::error_code &ec) {
                           if (ec || self->state_ == kClosed) return self->finish();
                           self->step();
                       });
    }
    void finish() {
        state_ = kClosed;
        std::lock_guard<std::mutex> g(n_.in_mu);
        n_.inbound.erase(shared_from_this());
    }
    // The `ok` for the pushes acknowledged by none yet (empty when there are none).
    std::vector<uint8_t> take_acks() {
        if (acks_ == 0) return {};
        n_.wake();  // what it reports queued is announced first
        Control ok;
        ok.op = Op::kOk;
        ok.length = counted_ ? acks_ : 0;
        const std::vector<uint8_t> one = encode_control(ok);
        // A dialer that did not ask for counted oks (1.4.0) reads one per push: as many frames,
        // still written together.
        std::vector<uint8_t> out;
        out.reserve(one.size() * (counted_ ? 1 : acks_));
        for (uint64_t i = 0; i < (counted_ ? 1 : acks_); ++i) out.insert(out.end(), one.begin(), one.end());
        acks_ = 0;
        return out;
    }
    // Writes the pending acknowledgement, then c when given (answers go in request order),
    // then the segments out_ already holds (a value's); goes on in `next`.
    void start_write(const Control *c, bool close_after, State next) {
        out_.head = take_acks();
        if (c) {
            const std::vector<uint8_t> f = encode_control(*c);
            out_.head.insert(out_.head.end(), f.begin(), f.end());
        }
        out_.start();
        close_after_write_ = close_after;
        after_write_ = next;
        state_ = kWrite;
    }
    // Writes the pending acknowledgement, then goes on in `next`.
    void ack_now(State next) {
        out_ = Outgoing{};
        start_write(nullptr, false, next);
    }
    // Answers c, after the pending acknowledgement.
    void reply(const Control &c, bool close_after) {
        out_ = Outgoing{};
        start_write(&c, close_after, kReadControl);
    }
    // Answers an error (counted as a refusal); closes afterwards unless the connection stays in step.
    void refuse(int32_t st, const std::string &why, bool close_after = true) {
        n_.refused.fetch_add(1);
        Control c;
        c.op = Op::kError;
        c.status = st;
        c.message = why;
        reply(c, close_after);
    }
    // Queues the received push (its acknowledgement is pending), or parks (state kParked).
    // A parked connection keeps the acknowledgements of the pushes before it pending too: the
    // dialer waits for the parked push's anyway, and nothing may be written while parked (a
    // resume only finds a connection in kParked).
    void deliver() {
        if (!n_.enqueue(msg_, shared_from_this())) {
            state_ = kParked;
            return;
        }
        ++acks_;
        state_ = kReadControl;
    }
    void serve_get() {
        std::shared_ptr<Published> p;
        {
            std::lock_guard<std::mutex> g(n_.pub_mu);
            auto it = n_.published.find(req_.name);
            if (it != n_.published.end()) p = it->second;
        }
        Control c;
        if (!p) {
            c.op = Op::kError;
            c.status = TENSO_E_NOT_FOUND;
            c.message = "nothing is published under that name";
            return reply(c, false);
        }
        c.length = p->size;
        out_ = Outgoing{};
        out_.keep = p;
        if (sock_.unix_ && !n_.opts.no_fd_passing && p->size >= n_.opts.fd_passing_min_bytes) {
            std::lock_guard<std::mutex> g(p->memfd_mu);
            if (p->memfd < 0) p->memfd = packet_memfd(p->iov, p->size);
            c.op = Op::kValueFd;
            out_.pass_fd = p->memfd;
        } else {
            c.op = Op::kValue;
            out_.iov = p->iov;
        }
        start_write(&c, false, kReadControl);
    }
    void on_control(std::unique_ptr<View> v) {
        req_ = parse_control(*v, n_.opts.max_name_bytes);
        if (req_.op == Op::kGet) return serve_get();
        if (req_.op != Op::kPush && req_.op != Op::kPushFd)
            fail(TENSO_E_MALFORMED, "unexpected control frame from a dialer");
        if (req_.message == kCountedOk) counted_ = true;
        msg_.reset(new Message);
        msg_->name = req_.name;
        msg_->sender = sock_.peer;
        msg_->bytes = req_.length;
        const bool too_big = req_.length > n_.opts.max_packet_bytes || req_.length > n_.opts.max_queued_bytes;
        if (req_.op == Op::kPushFd) {
            if (!sock_.unix_ || sock_.fds.empty()) fail(TENSO_E_MALFORMED, "push-fd without a descriptor");
            const int fd = sock_.fds.front();
            sock_.fds.pop_front();
            std::unique_ptr<View> view;
            try {
                if (too_big) fail(TENSO_E_LIMIT, "the packet is larger than the receiver takes");
                view = view_from_fd(fd, req_.offset, req_.length, n_.vlim);
            } catch (...) {
                ::close(fd);
                throw;
            }
            ::close(fd);
            msg_->view = std::move(view);
            return deliver();
        }
        if (too_big) {
            skip_left_ = req_.length;
            skip_status_ = TENSO_E_LIMIT;
            skip_msg_ = "the packet is larger than the receiver takes (max_packet_bytes / max_queued_bytes)";
            state_ = kSkip;
            return;
        }
        state_ = kReadValue;
    }
    // Runs the state machine until it must wait.
    void step() {
        // However it stops, the receivers hear of the pushes it queued (once for all of them).
        struct Wake {
            Node::Impl &n;
            ~Wake() { n.wake(); }
        } wake{n_};
        try {
            for (;;) {
                Io io = Io::kDone;
                switch (state_) {
                case kClosed: return finish();
                case kParked: return;
                case kHandshake: {
                    const int r = SSL_do_handshake(sock_.ssl);
                    if (r != 1) {
                        const int err = SSL_get_error(sock_.ssl, r);
                        if (err == SSL_ERROR_WANT_READ) return wait(Io::kWantRead);
                        if (err == SSL_ERROR_WANT_WRITE) return wait(Io::kWantWrite);
                        n_.refused.fetch_add(1);
                        ERR_clear_error();
                        return finish();
                    }
                    state_ = kReadControl;
                    try {
                        sock_.peer = n_.tls->check_peer(sock_.ssl, "", true);
                    } catch (const Error &e) {
                        refuse(e.status(), e.what());
                    }
                    continue;
                }
                case kReadControl: {
                    // Every push read ahead is queued before one acknowledgement answers them all.
                    if (acks_ && reader_.pos == reader_.end) {
                        ack_now(kReadControl);
                        continue;
                    }
                    std::unique_ptr<View> v;
                    io = reader_.frame(sock_, ctl_, &v);
                    if (io == Io::kDone) {
                        on_control(std::move(v));
                        continue;
                    }
                    break;
                }
                case kReadValue: {
                    std::unique_ptr<View> v;
                    io = reader_.frame(sock_, val_, &v);
                    if (io == Io::kDone) {
                        if (v->packet_size != req_.length)
                            fail(TENSO_E_MALFORMED, "the value's length is not the one announced");
                        msg_->view = std::move(v);
                        deliver();
                        continue;
                    }
                    if (io == Io::kEof) fail(TENSO_E_CONNECTION, "closed before the value");
                    break;
                }
                case kSkip:
                    io = reader_.skip(sock_, &skip_left_);
                    if (io == Io::kDone) {
                        refuse(skip_status_, skip_msg_, false);
                        continue;
                    }
                    break;
                case kWrite:
                    io = out_.pump(sock_);
                    if (io == Io::kDone) {
                        out_ = Outgoing{};
                        if (close_after_write_) {
                            ::shutdown(sock_.fd, SHUT_WR);
                            state_ = kLinger;
                            continue;
                        }
                        state_ = after_write_;
                        after_write_ = kReadControl;
                        continue;
                    }
                    break;
                case kLinger: {
                    // After a refusal: our side is shut for writing; what the peer still sends
                    // is read and dropped (closing with unread bytes would reset the connection
                    // and could take the refusal with it), up to kLingerBytes.
                    size_t got = 0;
                    io = sock_.read(reader_.buf.get(), Reader::kAhead, &got);
                    linger_ += got;
                    if (io == Io::kDone && linger_ < kLingerBytes) continue;
                    if (io == Io::kDone) return finish();
                    break;
                }
                }
                if (io == Io::kEof) return finish();
                // Never wait for input while owing acknowledgements (the dialer may be waiting for them).
                if (io == Io::kWantRead && acks_ &&
                    (state_ == kReadControl || state_ == kReadValue || state_ == kSkip)) {
                    ack_now(state_);
                    continue;
                }
                return wait(io);
            }
        } catch (const Error &e) {
            // Hostile or broken input: answer with the status (best effort) and close.
            if (state_ == kWrite || state_ == kLinger) return finish();
            refuse(e.status(), e.what());
            step();
        } catch (const std::bad_alloc &) {
            n_.refused.fetch_add(1);
            finish();
        }
    }
};

void Node::Impl::start() {
    stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    recv_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stop_fd < 0 || recv_fd < 0) sys_fail(TENSO_E_IO, "eventfd");
    vlim = value_limits(opts);
    clim = control_limits(opts);
    bool any_tls = false;
    std::vector<Address> addrs;
    if (!opts.no_listen) {
        size_t b = 0;
        const std::string &s = opts.listen;
        while (b <= s.size()) {
            size_t e = s.find(',', b);
            if (e == std::string::npos) e = s.size();
            const std::string one = s.substr(b, e - b);
            b = e + 1;
            if (one.empty()) continue;
            Address a = parse_address(one, true);
            if (a.scheme != Address::kTls && !opts.plaintext)
                fail(TENSO_E_INVALID_ARGUMENT, "plaintext listener '" + one + "' without TENSO_NODE_ALLOW_PLAINTEXT");
            any_tls |= a.scheme == Address::kTls;
            addrs.push_back(a);
        }
    }
    (void)any_tls;
    tls.reset(new Tls(opts.cert_pem, opts.key_pem, opts.ca_pem, opts.pinned_keys));
    for (const Address &a : addrs) {
        Listener l;
        l.addr = a;
        if (a.scheme == Address::kUnix) {
            l.fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
            sockaddr_un sa{};
            sa.sun_family = AF_UNIX;
            std::memcpy(sa.sun_path, a.path.data(), a.path.size());
            if (l.fd < 0 || ::bind(l.fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) != 0 ||
                ::listen(l.fd, 128) != 0) {
                const int e = errno;
                if (l.fd >= 0) ::close(l.fd);
                sys_fail(TENSO_E_IO, "listen on unix://" + a.path, e);
            }
            l.printable = "unix://" + a.path;
        } else {
            addrinfo hints{}, *res = nullptr;
            hints.ai_socktype = SOCK_STREAM;
            hints.ai_flags = AI_PASSIVE;
            if (getaddrinfo(a.host.c_str(), a.port.c_str(), &hints, &res) != 0 || !res)
                fail(TENSO_E_BAD_ADDRESS, "cannot resolve " + a.host);
            l.fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
            const int one = 1;
            if (l.fd >= 0) setsockopt(l.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (l.fd < 0 || ::bind(l.fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(l.fd, 128) != 0) {
                const int e = errno;
                freeaddrinfo(res);
                if (l.fd >= 0) ::close(l.fd);
                sys_fail(TENSO_E_IO, "listen on " + a.host + ":" + a.port, e);
            }
            freeaddrinfo(res);
            sockaddr_storage ss{};
            socklen_t sl = sizeof ss;
            getsockname(l.fd, reinterpret_cast<sockaddr *>(&ss), &sl);
            const int port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6 *>(&ss)->sin6_port)
                                                      : ntohs(reinterpret_cast<sockaddr_in *>(&ss)->sin_port);
            const std::string hp = host_text(a.host) + ":" + std::to_string(port);
            l.printable = a.scheme == Address::kTls ? "tls://" + tls->id() + "@" + hp : "tcp://" + hp;
        }
        l.sd.reset(new asio::posix::stream_descriptor(*io, l.fd));
        listeners.push_back(std::move(l));
    }
    for (Listener &l : listeners) accept_next(l);
    reaper.reset(new asio::steady_timer(*io));
    reap();
    for (uint32_t i = 0; i < opts.threads; ++i) threads.emplace_back([this] { io->run(); });
}

void Node::Impl::accept_next(Listener &l) {
    l.sd->async_wait(asio::posix::stream_descriptor::wait_read, [this, &l](const asio::error_code &ec) {
        if (ec || stopped) return;
        on_accept(l);
        accept_next(l);
    });
}

void Node::Impl::on_accept(Listener &l) {
    for (;;) {
        sockaddr_storage ss{};
        socklen_t sl = sizeof ss;
        const int fd = ::accept4(l.fd, reinterpret_cast<sockaddr *>(&ss), &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;  // EAGAIN, or a transient error: wait for the next
        std::lock_guard<std::mutex> g(in_mu);
        if (inbound.size() >= opts.max_connections) {
            refused.fetch_add(1);
            if (l.addr.scheme != Address::kTls) refuse_over_limit(fd);
            ::close(fd);
            continue;
        }
        std::string peer = "unix:";
        if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
            const int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            char host[INET6_ADDRSTRLEN] = "";
            int port;
            if (ss.ss_family == AF_INET) {
                auto *s4 = reinterpret_cast<sockaddr_in *>(&ss);
                inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);
                port = ntohs(s4->sin_port);
            } else {
                auto *s6 = reinterpret_cast<sockaddr_in6 *>(&ss);
                inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof host);
                port = ntohs(s6->sin6_port);
            }
            peer = "tcp://" + host_text(host) + ":" + std::to_string(port);
        }
        try {
            auto c = std::make_shared<Inbound>(*this, fd, l.addr.scheme == Address::kUnix,
                                               l.addr.scheme == Address::kTls, peer);
            inbound.insert(c);
            asio::post(*io, [c] { c->run(); });
        } catch (...) {
            refused.fetch_add(1);
        }
    }
}

// Tells a dialer over max_connections why it is closed: one `error` frame (TENSO_E_LIMIT), as far
// as the socket takes it at once (a new socket has room for it), then our end shut. What the
// dialer already wrote is read and dropped first, as far as it is here: a close with unread
// input resets the connection, which could reach the dialer before the frame. A TLS dialer
// gets no frame (that would take a handshake): only the close.
void Node::Impl::refuse_over_limit(int fd) {
    Control c;
    c.op = Op::kError;
    c.status = TENSO_E_LIMIT;
    c.message = "the node is at its max_connections";
    try {
        const std::vector<uint8_t> f = encode_control(c);
        (void)!::send(fd, f.data(), f.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    } catch (...) {
        return;  // no frame (out of memory): closed all the same
    }
    ::shutdown(fd, SHUT_WR);
    uint8_t sink[4096];
    while (::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {}
}

void Node::Impl::reap() {
    const uint64_t every = std::clamp<uint64_t>(opts.idle_timeout_ms / 4, 5, 1000);
    reaper->expires_after(std::chrono::milliseconds(every));
    reaper->async_wait([this](const asio::error_code &ec) {
        if (ec || stopped) return;
        std::vector<std::unique_ptr<Outbound>> drop;  // closed outside the lock
        {
            std::lock_guard<std::mutex> g(pool_mu);
            const auto limit = Clock::now() - std::chrono::milliseconds(opts.idle_timeout_ms);
            for (auto it = pool.begin(); it != pool.end();) {
                auto &idle = it->second.idle;
                for (auto &c : idle)
                    if (c->idle_since <= limit) drop.push_back(std::move(c));
                idle.erase(std::remove(idle.begin(), idle.end(), nullptr), idle.end());
                it = idle.empty() && it->second.busy == 0 ? pool.erase(it) : std::next(it);
            }
        }
        reap();
    });
}

bool Node::Impl::enqueue(std::unique_ptr<Message> &m, const std::shared_ptr<Inbound> &who) {
    std::lock_guard<std::mutex> g(q_mu);
    if (!queue.empty() && (queue.size() >= opts.max_queued || queued_bytes + m->bytes > opts.max_queued_bytes)) {
        parked.push_back(who);
        return false;
    }
    queued_bytes += m->bytes;
    queue.push_back(std::move(m));
    if (!signalled) wake_pending.store(true, std::memory_order_relaxed);
    return true;
}

void Node::Impl::wake() {
    if (!wake_pending.exchange(false)) return;
    std::lock_guard<std::mutex> g(q_mu);
    if (queue.empty() || signalled) return;
    const uint64_t one = 1;
    (void)!::write(recv_fd, &one, sizeof one);
    signalled = true;
}

void Node::Impl::stop() {
    std::lock_guard<std::mutex> g(stop_mu);
    if (stopped.exchange(true)) return;
    const uint64_t one = 1;
    (void)!::write(stop_fd, &one, sizeof one);
    {
        // A checkout waiting for a pooled connection wakes (under the lock: it cannot miss it).
        std::lock_guard<std::mutex> l(pool_mu);
        pool_cv.notify_all();
    }
    io->stop();
    for (auto &t : threads) t.join();
    threads.clear();
    {
        std::lock_guard<std::mutex> l(in_mu);
        for (auto &c : inbound) c->close();
        inbound.clear();
    }
    reaper.reset();
    for (Listener &l : listeners) {
        l.sd.reset();
        if (l.addr.scheme == Address::kUnix) ::unlink(l.addr.path.c_str());
    }
    stop_streams();
    // Handlers still queued keep their connections (shut down above) until the node is freed,
    // when the io_context goes; `io` itself stays, so a late post from a receive is harmless.
    {
        std::lock_guard<std::mutex> l(pool_mu);
        for (auto &p : pool) p.second.idle.clear();
    }
}

std::unique_ptr<Outbound> Node::Impl::dial(const Address &a, const Waker &w, const Deadline &d) {
    if (a.scheme != Address::kTls && !opts.plaintext)
        fail(TENSO_E_INVALID_ARGUMENT, "plaintext peer " + a.key() + " without TENSO_NODE_ALLOW_PLAINTEXT");
    std::unique_ptr<Outbound> c(new Outbound(opts));
    c->addr = a;
    c->sock.counter_in = &bytes_received;
    c->sock.counter_out = &bytes_sent;
    auto connect_one = [&](int family, const sockaddr *sa, socklen_t sl) {
        const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) sys_fail(TENSO_E_IO, "socket");
        c->sock.fd = fd;
        if (::connect(fd, sa, sl) != 0) {
            if (errno != EINPROGRESS && errno != EAGAIN) sys_fail(TENSO_E_CONNECTION, "connect to " + a.key());
            w.wait(fd, POLLOUT, d);
            int err = 0;
            socklen_t el = sizeof err;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
            if (err) sys_fail(TENSO_E_CONNECTION, "connect to " + a.key(), err);
        }
    };
    if (a.scheme == Address::kUnix) {
        sockaddr_un sa{};
        sa.sun_family = AF_UNIX;
        std::memcpy(sa.sun_path, a.path.data(), a.path.size());
        connect_one(AF_UNIX, reinterpret_cast<sockaddr *>(&sa), sizeof sa);
        c->sock.unix_ = true;
        c->sock.peer = "unix:";
    } else {
        addrinfo hints{}, *res = nullptr;
        hints.ai_socktype = SOCK_STREAM;
        const int r = getaddrinfo(a.host.c_str(), a.port.c_str(), &hints, &res);
        if (r != 0 || !res) fail(TENSO_E_BAD_ADDRESS, "cannot resolve '" + a.host + "': " + gai_strerror(r));
        std::unique_ptr<addrinfo, void (*)(addrinfo *)> hold(res, freeaddrinfo);
        connect_one(res->ai_family, res->ai_addr, res->ai_addrlen);
        const int one = 1;
        setsockopt(c->sock.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (a.scheme == Address::kTls) {
            c->sock.ssl = new_ssl(tls->client(), c->sock.fd);
            SSL_set_connect_state(c->sock.ssl);
            for (;;) {
                const int h = SSL_do_handshake(c->sock.ssl);
                if (h == 1) break;
                const int err = SSL_get_error(c->sock.ssl, h);
                if (err == SSL_ERROR_WANT_READ) w.wait(c->sock.fd, POLLIN, d);
                else if (err == SSL_ERROR_WANT_WRITE) w.wait(c->sock.fd, POLLOUT, d);
                else c->sock.ssl_fail(err, "TLS handshake");
            }
            c->sock.peer = tls->check_peer(c->sock.ssl, a.fingerprint, false);
        }
    }
    opened.fetch_add(1);
    return c;
}

std::unique_ptr<Outbound> Node::Impl::checkout(const Address &a, const Waker &w, const Deadline &d) {
    const std::string key = a.key();
    for (;;) {
        std::unique_ptr<Outbound> c;
        {
            std::unique_lock<std::mutex> g(pool_mu);
            Peer &p = pool[key];
            while (!p.idle.empty()) {
                std::unique_ptr<Outbound> cand = std::move(p.idle.back());
                p.idle.pop_back();
                // A pooled connection the peer closed (or wrote to unasked) is readable, or its
                // TLS layer holds bytes read ahead: drop it.
                pollfd pf{cand->sock.fd, POLLIN, 0};
                if (::poll(&pf, 1, 0) == 0 && !(cand->sock.ssl && SSL_has_pending(cand->sock.ssl))) {
                    c = std::move(cand);
                    break;
                }
            }
            if (c) {
                ++p.busy;
                reused.fetch_add(1);
                return c;
            }
            if (p.busy < opts.max_connections) {
                ++p.busy;
                break;
            }
            // At the maximum for this peer: wait for a connection to come back, or the deadline,
            // a stop (notified) or a cancel (the token cannot notify: looked at every kCancelMs).
            constexpr auto kCancelMs = std::chrono::milliseconds(5);
            w.check();
            if (!d.none && Clock::now() >= d.at) fail(TENSO_E_TIMEOUT, "timed out waiting for a pooled connection");
            Clock::time_point until = w.cancel ? Clock::now() + kCancelMs : Clock::time_point::max();
            if (!d.none) until = std::min(until, d.at);
            if (until == Clock::time_point::max()) pool_cv.wait(g);
            else pool_cv.wait_until(g, until);
        }
    }
    try {
        return dial(a, w, d);
    } catch (...) {
        std::lock_guard<std::mutex> g(pool_mu);
        --pool[key].busy;
        pool_cv.notify_all();
        throw;
    }
}

void Node::Impl::discard(std::unique_ptr<Outbound> c) {
    {
        std::lock_guard<std::mutex> g(pool_mu);
        --pool[c->addr.key()].busy;
        pool_cv.notify_all();
    }
    c.reset();
}

void Node::Impl::checkin(std::unique_ptr<Outbound> c) {
    std::unique_ptr<Outbound> drop;
    std::lock_guard<std::mutex> g(pool_mu);
    Peer &p = pool[c->addr.key()];
    --p.busy;
    pool_cv.notify_all();
    if (stopped || p.idle.size() >= opts.max_pool_per_peer || !c->val.idle() || !c->ctl.idle()) {
        drop = std::move(c);
        return;
    }
    c->idle_since = Clock::now();
    p.idle.push_back(std::move(c));
}

Control Node::Impl::call(Outbound &c, Outgoing &out, const Waker &w, const Deadline &d) {
    out.start();
    try {
        for (;;) {
            const Io r = out.pump(c.sock);
            if (r == Io::kDone) break;
            w.wait(c.sock.fd, r == Io::kWantRead ? POLLIN : POLLOUT, d);
        }
    } catch (const Error &e) {
        // A peer that refused us closes after its answer: when writing fails, the answer
        // (an error frame) may be waiting to be read, and says more than the broken pipe.
        if (e.status() != TENSO_E_CONNECTION) throw;
        std::unique_ptr<View> v;
        try {
            if (c.reader.frame(c.sock, c.ctl, &v) == Io::kDone) {
                const Control reply = parse_control(*v, opts.max_name_bytes);
                if (reply.op == Op::kError) fail(reply.status, "the peer refused: " + reply.message);
            }
        } catch (const Error &answer) {
            if (answer.status() != TENSO_E_CONNECTION) throw;
        }
        throw;
    }
    for (;;) {
        std::unique_ptr<View> v;
        const Io r = c.reader.frame(c.sock, c.ctl, &v);
        if (r == Io::kDone) {
            Control reply = parse_control(*v, opts.max_name_bytes);
            if (reply.op == Op::kError) fail(reply.status, "the peer refused: " + reply.message);
            // One request is outstanding: an `ok` for more is out of step.
            if (reply.op == Op::kOk && reply.length > 1)
                fail(TENSO_E_MALFORMED, "the peer acknowledged more pushes than were sent");
            return reply;
        }
        if (r == Io::kEof) fail(TENSO_E_CONNECTION, "the peer closed the connection");
        w.wait(c.sock.fd, r == Io::kWantWrite ? POLLOUT : POLLIN, d);
    }
}

std::unique_ptr<View> Node::Impl::read_value(Outbound &c, const Control &reply, const Waker &w, const Deadline &d) {
    if (reply.op == Op::kValueFd) {
        if (!c.sock.unix_ || c.sock.fds.empty()) fail(TENSO_E_MALFORMED, "value-fd without a descriptor");
        const int fd = c.sock.fds.front();
        c.sock.fds.pop_front();
        std::unique_ptr<View> v;
        try {
            v = view_from_fd(fd, reply.offset, reply.length, vlim);
        } catch (...) {
            ::close(fd);
            throw;
        }
        ::close(fd);
        return v;
    }
    if (reply.op != Op::kValue) fail(TENSO_E_MALFORMED, "unexpected reply to a request");
    if (reply.length > opts.max_packet_bytes) fail(TENSO_E_LIMIT, "the value is larger than max_packet_bytes");
    for (;;) {
        std::unique_ptr<View> v;
        const Io r = c.reader.frame(c.sock, c.val, &v);
        if (r == Io::kDone) {
            if (v->packet_size != reply.length) fail(TENSO_E_MALFORMED, "the value's length is not the one announced");
            return v;
        }
        if (r == Io::kEof) fail(TENSO_E_CONNECTION, "the peer closed the connection before the value");
        w.wait(c.sock.fd, r == Io::kWantWrite ? POLLOUT : POLLIN, d);
    }
}

// ---- Node ----------------------------------------------------------------------------------

namespace {
// Counts a call in flight so that the destructor waits for it to leave.
struct CallScope {
    Node::Impl &n;
    explicit CallScope(Node::Impl &i) : n(i) {
        n.calls.fetch_add(1);
        if (n.stopped) {
            n.calls.fetch_sub(1);
            fail(TENSO_E_SHUTDOWN, "the node is shut down");
        }
    }
    ~CallScope() { n.calls.fetch_sub(1); }
};
void check_name(const std::string &name, const NodeOptions &o) {
    if (name.empty() || name.size() > o.max_name_bytes)
        fail(TENSO_E_INVALID_ARGUMENT, "a name is 1.." + std::to_string(o.max_name_bytes) + " bytes");
}
uint64_t effective(uint64_t timeout_ms, const NodeOptions &o) { return timeout_ms == 0 ? o.io_timeout_ms : timeout_ms; }
// What every outbound call starts with: counted in flight, its name and address checked, its
// deadline fixed, and a first look at the cancel token and the stop descriptor.
struct Call {
    CallScope scope;
    Address addr;
    Waker w;
    Deadline d;
    Call(Node::Impl &n, const std::string &address, const std::string &name, uint64_t timeout_ms, Cancel *cancel)
        : scope(n), addr((check_name(name, n.opts), parse_address(address, false))), w{n.stop_fd, cancel, &n.stopped},
          d(Deadline::in(effective(timeout_ms, n.opts))) {
        w.check();
    }
};
}  // namespace

Node::Node(const NodeOptions &opts) : impl_(std::make_shared<Impl>()) {
    impl_->opts = opts;
    try {
        impl_->start();
    } catch (...) {
        impl_->stop();
        throw;
    }
}

Node::~Node() {
    impl_->stop();
    while (impl_->calls.load() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    {
        std::lock_guard<std::mutex> g(impl_->pub_mu);
        impl_->published.clear();
    }
    if (impl_->stop_fd >= 0) ::close(impl_->stop_fd);
    if (impl_->recv_fd >= 0) ::close(impl_->recv_fd);
    for (Listener &l : impl_->listeners)
        if (l.fd >= 0) ::close(l.fd);
}

void Node::shutdown() { impl_->stop(); }

bool Node::addr(uint32_t index, std::string *out) const {
    if (index >= impl_->listeners.size()) return false;
    *out = impl_->listeners[index].printable;
    return true;
}

std::string Node::id() const { return impl_->tls->id(); }

namespace {
// A push ready to write: its control frame and segments, and what they point into.
struct PreparedPush {
    Outgoing out;
    std::unique_ptr<Plan> plan;
    int own_fd = -1;  // a memfd made for the Unix fast path
    PreparedPush() = default;
    PreparedPush(const PreparedPush &) = delete;
    PreparedPush &operator=(const PreparedPush &) = delete;
    ~PreparedPush() {
        if (own_fd >= 0) ::close(own_fd);
    }
};

void prepare_push(PreparedPush &pp, const Address &a, const std::string &name, const Payload &p, const NodeOptions &o) {
    Outgoing &out = pp.out;
    Control c;
    c.op = Op::kPush;
    c.name = name;
    c.message = kCountedOk;  // this dialer reads counted oks
    if (p.value) {
        pp.plan.reset(new Plan(EncodeOptions{}, false));
        pp.plan->add(*p.value);
        out.iov = pp.plan->iovecs();
        c.length = pp.plan->size();
    } else if (p.fd < 0) {
        c.length = p.len;
        out.iov.push_back({const_cast<uint8_t *>(p.packet), p.len});
    } else {
        c.length = p.len;
    }
    const bool unix_fd = a.scheme == Address::kUnix && !o.no_fd_passing;
    if (p.fd >= 0 && unix_fd) {
        c.op = Op::kPushFd;
        c.offset = p.offset;
        out.pass_fd = p.fd;
    } else if (p.fd >= 0) {
        // Not a Unix peer: the bytes travel, read from the descriptor into aligned memory.
        std::shared_ptr<uint8_t> buf = alloc_aligned(size_t(p.len));
        pread_all(p.fd, buf.get(), size_t(p.len), p.offset);
        out.iov.push_back({buf.get(), size_t(p.len)});
        out.keep = buf;
    } else if (unix_fd && c.length >= o.fd_passing_min_bytes) {
        pp.own_fd = packet_memfd(out.iov, c.length);
        out.iov.clear();
        c.op = Op::kPushFd;
        out.pass_fd = pp.own_fd;
    }
    out.head = encode_control(c);
}
}  // namespace

void Node::send(const std::string &addr, const std::string &name, const Payload &p, uint64_t timeout_ms,
                Cancel *cancel) {
    Impl &n = *impl_;
    const Call call(n, addr, name, timeout_ms, cancel);
    PreparedPush pp;
    prepare_push(pp, call.addr, name, p, n.opts);
    std::unique_ptr<Outbound> conn = n.checkout(call.addr, call.w, call.d);
    try {
        n.call(*conn, pp.out, call.w, call.d);
    } catch (...) {
        n.discard(std::move(conn));
        throw;
    }
    n.checkin(std::move(conn));
}

// Pipelined pushes to one peer: one connection written by post, its acknowledgements read as
// they come (and all of them by flush). The mutex orders posts and flushes to the peer.
//
// Small posts (kSmallPost bytes of frames or less) are copied into `buf` and written together
// when it holds kPostBuffer bytes, when a post or flush would otherwise wait, by flush, and, as
// far as the socket takes them at once, by shutdown: one write per ~kPostBuffer bytes instead
// of one per post. A post's value is no longer used when post returns either way.
//
// A caller that never flushes must not leave its last posts in the node: a post that leaves
// bytes buffered arms `idle` on the event loop, which writes what the socket takes
// kIdleFlushMs later. The timer is touched by the event loop only (armed by a posted handler,
// re-armed from its own), so it needs no lock of its own; its handlers hold the stream weakly
// (the stream owns the timer) and the node by pointer (its threads, which run them, are joined
// before it goes).
struct Node::Impl::PostStream {
    static constexpr size_t kSmallPost = 16 * 1024;
    static constexpr size_t kPostBuffer = 128 * 1024;
    static constexpr int kIdleFlushMs = 1;
    Address addr;  // set once, when made
    std::mutex mu;
    asio::steady_timer idle;
    bool idle_armed = false;  // under mu: a write of the buffer is pending on the event loop
    explicit PostStream(asio::io_context &io) : idle(io) {}
    std::unique_ptr<Outbound> conn;
    // Posts on `conn`, counted from its checkout: made, whole on the wire, answered. The peer
    // answering more than were written is a malformed reply.
    uint64_t posted = 0, written = 0, acked = 0;
    std::vector<uint8_t> buf;  // small posts not yet written: frames back to back
    size_t buf_at = 0;         // bytes of buf already written
    std::vector<size_t> ends;  // where each post in buf ends
    size_t ends_at = 0;        // posts of buf whole on the wire
    int32_t first_status = 0;  // the first failure since the last flush
    std::string first_message;
    // Reused from post to post: the plan of a small value, and the control frame of the last
    // (name, length), which a stream of like values sends again and again.
    Plan plan{EncodeOptions{}, false};
    std::string head_name;
    uint64_t head_length = UINT64_MAX;
    std::vector<uint8_t> head;
    const std::vector<uint8_t> &push_head(const std::string &name, uint64_t length) {
        if (length != head_length || name != head_name) {
            Control c;
            c.op = Op::kPush;
            c.name = name;
            c.length = length;
            c.message = kCountedOk;
            head = encode_control(c);
            head_name = name;
            head_length = length;
        }
        return head;
    }
    void note(int32_t st, const std::string &m) {
        if (first_status == 0) {
            first_status = st;
            first_message = m;
        }
    }
    uint64_t unacked() const { return posted - acked; }
    // Forgets the connection's posts (it is checked in, or dropped with them failed).
    void reset() {
        posted = written = acked = 0;
        // The connection leaves the stream: so does the buffer's memory (a node that posted to
        // many peers once keeps no 144 KiB per peer).
        std::vector<uint8_t>().swap(buf);
        buf_at = 0;
        std::vector<size_t>().swap(ends);
        ends_at = 0;
    }
};

namespace {
// Reads acknowledgements of written posts: those readable now (block false), or at least one
// (block true). `ok` answers the count in its length field (0, from a 1.4.0 listener, is 1);
// `error` answers one, noted as the stream's failure; the connection stays in step.
void read_acks(Node::Impl::PostStream &s, const NodeOptions &o, bool block, const Waker &w, const Deadline &d) {
    Outbound &c = *s.conn;
    while (s.acked < s.written) {
        std::unique_ptr<View> v;
        const Io r = c.reader.frame(c.sock, c.ctl, &v);
        if (r == Io::kDone) {
            const Control reply = parse_control(*v, o.max_name_bytes);
            uint64_t n = 1;
            if (reply.op == Op::kError) s.note(reply.status, "the peer refused: " + reply.message);
            else if (reply.op == Op::kOk) n = std::max<uint64_t>(reply.length, 1);
            else fail(TENSO_E_MALFORMED, "unexpected reply to a push");
            if (n > s.written - s.acked) fail(TENSO_E_MALFORMED, "the peer acknowledged more pushes than were sent");
            s.acked += n;
            block = false;
            continue;
        }
        if (r == Io::kEof) fail(TENSO_E_CONNECTION, "the peer closed the connection");
        if (!block) return;
        w.wait(c.sock.fd, r == Io::kWantWrite ? POLLOUT : POLLIN, d);
    }
}

// Writes the buffered posts: all of them (block true), or what the socket takes now. True when
// none is left.
bool drain(Node::Impl::PostStream &s, const NodeOptions &o, bool block, const Waker &w, const Deadline &d) {
    Outbound &c = *s.conn;
    while (s.buf_at < s.buf.size()) {
        // One segment, the same bytes on a retry (what TLS requires after a partial write).
        const iovec v{s.buf.data() + s.buf_at, s.buf.size() - s.buf_at};
        size_t n = 0;
        const Io r = c.sock.write(&v, 1, &n, -1);
        if (r == Io::kDone) {
            s.buf_at += n;
            while (s.ends_at < s.ends.size() && s.ends[s.ends_at] <= s.buf_at) {
                ++s.ends_at;
                ++s.written;
            }
            continue;
        }
        if (!block) return false;
        // The peer may be blocked writing acknowledgements we have not read: read them.
        read_acks(s, o, false, w, d);
        w.wait(c.sock.fd, r == Io::kWantRead ? POLLIN : (POLLOUT | POLLIN), d);
    }
    s.buf.clear();
    s.buf_at = 0;
    s.ends.clear();
    s.ends_at = 0;
    return true;
}
}  // namespace

std::shared_ptr<Node::Impl::PostStream> Node::Impl::post_stream(const Address &a) {
    std::lock_guard<std::mutex> g(pool_mu);
    auto &s = streams[a.key()];
    if (!s) {
        s = std::make_shared<PostStream>(*io);
        s->addr = a;
    }
    return s;
}

std::shared_ptr<Node::Impl::PostStream> Node::Impl::post_stream(const std::string &text) {
    {
        std::lock_guard<std::mutex> g(pool_mu);
        auto it = stream_of_text.find(text);
        if (it != stream_of_text.end()) return it->second;
    }
    std::shared_ptr<PostStream> s = post_stream(parse_address(text, false));
    std::lock_guard<std::mutex> g(pool_mu);
    // Bounded: a caller posting to ever new address texts does not grow it for ever.
    if (stream_of_text.size() >= 1024) stream_of_text.clear();
    stream_of_text[text] = s;
    return s;
}

// Any failure on the stream's connection: the connection is dropped and the posts it still
// owed an acknowledgement, written or buffered, fail (flush reports it).
template <class F>
void Node::Impl::on_stream(PostStream &s, F &&f) {
    try {
        f();
    } catch (const Error &e) {
        if (s.unacked() > 0) s.note(e.status(), e.what());
        s.reset();
        if (s.conn) discard(std::move(s.conn));
        throw;
    }
}

void Node::Impl::arm_idle_flush(const std::weak_ptr<PostStream> &ws) {
    const std::shared_ptr<PostStream> sp = ws.lock();
    if (!sp || stopped) return;
    sp->idle.expires_after(std::chrono::milliseconds(PostStream::kIdleFlushMs));
    sp->idle.async_wait([this, ws](const asio::error_code &ec) {
        if (!ec) idle_flush(ws);
    });
}

// On the event loop: never waits. A stream a caller holds is left to it (the caller writes the
// buffer itself before it waits, or re-arms after) and tried again later; so is a socket
// without room. A failure fails the stream's posts as a post's own would (flush reports it).
void Node::Impl::idle_flush(const std::weak_ptr<PostStream> &ws) {
    const std::shared_ptr<PostStream> sp = ws.lock();
    if (!sp || stopped) return;
    PostStream &s = *sp;
    std::unique_lock<std::mutex> g(s.mu, std::try_to_lock);
    if (!g.owns_lock()) return arm_idle_flush(ws);
    bool done = true;
    if (s.conn) {
        const Waker w{stop_fd, nullptr, &stopped};  // unused: drain(block false) never waits
        try {
            on_stream(s, [&] { done = drain(s, opts, false, w, Deadline::in(0)); });
        } catch (const Error &) {
            // Noted by on_stream as the stream's failure, for flush to report.
            done = true;
        }
    }
    if (!done) return arm_idle_flush(ws);
    s.idle_armed = false;
}

// At shutdown: buffered posts are written as far as the socket takes them now; the posts not
// acknowledged fail (a later flush returns TENSO_E_SHUTDOWN, as every call does).
void Node::Impl::stop_streams() {
    std::vector<std::shared_ptr<PostStream>> all;
    {
        std::lock_guard<std::mutex> g(pool_mu);
        for (auto &e : streams) all.push_back(e.second);
    }
    const Waker w{stop_fd, nullptr, &stopped};
    const Deadline d = Deadline::in(0);
    for (auto &sp : all) {
        // A post or flush in progress holds the lock until the stop descriptor wakes it.
        std::lock_guard<std::mutex> g(sp->mu);
        if (!sp->conn) continue;
        try {
            drain(*sp, opts, false, w, d);
        } catch (const Error &) {
            // The connection failed: its posts fail below like the rest.
        }
        if (sp->unacked() > 0) sp->note(TENSO_E_SHUTDOWN, "the node is shut down");
        sp->reset();
        discard(std::move(sp->conn));
    }
}

void Node::post(const std::string &addr, const std::string &name, const Payload &p, uint64_t timeout_ms,
                Cancel *cancel) {
    Impl &n = *impl_;
    const CallScope scope(n);
    check_name(name, n.opts);
    const Waker w{n.stop_fd, cancel, &n.stopped};
    const Deadline d = Deadline::in(effective(timeout_ms, n.opts));
    w.check();
    const std::shared_ptr<Impl::PostStream> sp = n.post_stream(addr);
    Impl::PostStream &s = *sp;
    const Address *a = &s.addr;
    std::lock_guard<std::mutex> g(s.mu);
    // A shutdown that began while we waited for the lock has written or failed the buffer
    // already: nothing may be added to it now.
    w.check();
    if (!s.conn) s.conn = n.checkout(*a, w, d);
    // Encoding first, outside on_stream: a value that does not encode fails this post alone,
    // not the connection and the posts on it.
    const std::vector<uint8_t> *head = nullptr;
    uint64_t size = 0;
    if (p.value && p.fd < 0) {
        s.plan.clear();
        s.plan.add(*p.value);
        size = s.plan.size();
        const bool as_fd = a->scheme == Address::kUnix && !n.opts.no_fd_passing && size >= n.opts.fd_passing_min_bytes;
        head = &s.push_head(name, size);
        if (as_fd || head->size() + size > Impl::PostStream::kSmallPost) head = nullptr;
    }
    PreparedPush pp;  // a large value (or a descriptor): written straight from its memory
    if (!head) {
        // The reused plan keeps its memory: not that of a large value (a quantized tensor's
        // scales, say, live in its arena), which would stay with the stream for good.
        if (p.value && p.fd < 0) s.plan = Plan{EncodeOptions{}, false};
        prepare_push(pp, *a, name, p, n.opts);
    }
    n.on_stream(s, [&] {
        // The bound on unacknowledged posts (the peer queues at most its max_queued of them).
        const uint64_t bound = std::max<uint64_t>(1, n.opts.max_queued);
        while (s.unacked() >= bound) {
            drain(s, n.opts, true, w, d);
            read_acks(s, n.opts, true, w, d);
        }
        if (head) {
            // Small: encoded behind the posts buffered before it.
            size_t at = s.buf.size();
            // Grown by doubling, but never past what it may hold (kPostBuffer + kSmallPost).
            const size_t need = at + head->size() + size_t(size);
            if (need > s.buf.capacity())
                s.buf.reserve(std::min(std::max(need, 2 * s.buf.capacity()),
                                       Impl::PostStream::kPostBuffer + Impl::PostStream::kSmallPost));
            s.buf.resize(need);
            std::memcpy(s.buf.data() + at, head->data(), head->size());
            at += head->size();
            if (s.plan.write_to(s.buf.data() + at) != size) fail(TENSO_E_INTERNAL, "a plan wrote other than its size");
            s.ends.push_back(at + size_t(size));
            ++s.posted;
            if (s.buf.size() - s.buf_at >= Impl::PostStream::kPostBuffer) drain(s, n.opts, true, w, d);
            if (s.buf_at < s.buf.size() && !s.idle_armed) {
                // One arm per burst of posts: the event loop writes them if no post or flush does.
                s.idle_armed = true;
                Impl *ip = &n;
                asio::post(*n.io, [ip, ws = std::weak_ptr<Impl::PostStream>(sp)] { ip->arm_idle_flush(ws); });
            }
            return;
        }
        // Large: the posts buffered before it first, then it.
        drain(s, n.opts, true, w, d);
        ++s.posted;
        Outgoing &out = pp.out;
        out.start();
        for (;;) {
            const Io r = out.pump(s.conn->sock);
            if (r == Io::kDone) break;
            read_acks(s, n.opts, false, w, d);
            w.wait(s.conn->sock.fd, r == Io::kWantRead ? POLLIN : (POLLOUT | POLLIN), d);
        }
        ++s.written;
        // Acknowledgements are read only when the socket or the bound makes us wait (no read
        // syscall per post); unread, they wait in our receive buffer.
    });
}

void Node::flush(const std::string &addr, uint64_t timeout_ms, Cancel *cancel) {
    Impl &n = *impl_;
    const CallScope scope(n);
    const Waker w{n.stop_fd, cancel, &n.stopped};
    const Deadline d = Deadline::in(effective(timeout_ms, n.opts));
    w.check();
    const std::shared_ptr<Impl::PostStream> sp = n.post_stream(addr);
    Impl::PostStream &s = *sp;
    std::lock_guard<std::mutex> g(s.mu);
    if (s.conn) {
        try {
            n.on_stream(s, [&] {
                drain(s, n.opts, true, w, d);
                while (s.acked < s.posted) read_acks(s, n.opts, true, w, d);
            });
        } catch (const Error &) {
            // Reported below as the first failure among the posts.
        }
        if (s.conn) {
            s.reset();
            n.checkin(std::move(s.conn));
        }
    }
    const int32_t st = s.first_status;
    const std::string m = s.first_message;
    s.first_status = 0;
    s.first_message.clear();
    if (st != 0) fail(st, m);
}

std::unique_ptr<View> Node::request(const std::string &addr, const std::string &name, uint64_t timeout_ms,
                                    Cancel *cancel) {
    Impl &n = *impl_;
    const Call call(n, addr, name, timeout_ms, cancel);
    const Address &a = call.addr;
    const Waker &w = call.w;
    const Deadline &d = call.d;
    Outgoing out;
    Control c;
    c.op = Op::kGet;
    c.name = name;
    out.head = encode_control(c);
    std::unique_ptr<Outbound> conn = n.checkout(a, w, d);
    std::unique_ptr<View> v;
    try {
        const Control reply = n.call(*conn, out, w, d);
        v = n.read_value(*conn, reply, w, d);
    } catch (const Error &e) {
        // "Not found" leaves the connection in step; anything else may not.
        if (e.status() == TENSO_E_NOT_FOUND) n.checkin(std::move(conn));
        else n.discard(std::move(conn));
        throw;
    } catch (...) {
        n.discard(std::move(conn));
        throw;
    }
    n.checkin(std::move(conn));
    return v;
}

std::unique_ptr<Message> Node::receive(uint64_t timeout_ms, Cancel *cancel) {
    CallScope scope(*impl_);
    Impl &n = *impl_;
    const Waker w{n.stop_fd, cancel, &n.stopped};
    const Deadline d = Deadline::in(timeout_ms);
    for (;;) {
        w.check();
        std::unique_ptr<Message> m;
        std::deque<std::weak_ptr<Inbound>> parked;
        {
            std::lock_guard<std::mutex> g(n.q_mu);
            if (!n.queue.empty()) {
                m = std::move(n.queue.front());
                n.queue.pop_front();
                n.queued_bytes -= m->bytes;
                if (n.queue.empty() && n.signalled) {
                    uint64_t v;
                    (void)!::read(n.recv_fd, &v, sizeof v);
                    n.signalled = false;
                }
                parked.swap(n.parked);
            }
        }
        if (m) {
            for (auto &p : parked)
                if (auto c = p.lock()) c->resume();
            return m;
        }
        if (timeout_ms == 0) fail(TENSO_E_TIMEOUT, "no message is waiting");
        w.wait(n.recv_fd, POLLIN, d);
    }
}

int Node::receive_fd() const { return impl_->recv_fd; }

void Node::publish(const std::string &name, std::unique_ptr<Value> &v, void (*release)(void *), void *user) {
    CallScope scope(*impl_);
    check_name(name, impl_->opts);
    auto p = std::make_shared<Published>();
    p->value = std::move(v);
    std::shared_ptr<Published> old;  // released after the lock, once no send holds it
    try {
        p->plan.reset(new Plan(EncodeOptions{}, false));
        p->plan->add(*p->value);
        p->iov = p->plan->iovecs();
        p->size = p->plan->size();
        std::lock_guard<std::mutex> g(impl_->pub_mu);
        auto &slot = impl_->published[name];
        p->release = release;  // the node owns the value (and its release) from here
        p->user = user;
        old = std::move(slot);
        slot = std::move(p);
    } catch (...) {
        // Not taken: the caller keeps the value, and release is not called.
        p->plan.reset();
        v = std::move(p->value);
        throw;
    }
}

bool Node::unpublish(const std::string &name) {
    std::shared_ptr<Published> old;
    std::lock_guard<std::mutex> g(impl_->pub_mu);
    auto it = impl_->published.find(name);
    if (it == impl_->published.end()) return false;
    old = std::move(it->second);
    impl_->published.erase(it);
    return true;
}

NodeStats Node::stats() const {
    Impl &n = *impl_;
    NodeStats s;
    {
        std::lock_guard<std::mutex> g(n.pool_mu);
        for (auto &p : n.pool) s.pool_size += p.second.busy + uint32_t(p.second.idle.size());
    }
    {
        std::lock_guard<std::mutex> g(n.in_mu);
        s.inbound_connections = uint32_t(n.inbound.size());
    }
    {
        std::lock_guard<std::mutex> g(n.q_mu);
        s.queued = uint32_t(n.queue.size());
        s.queued_bytes = n.queued_bytes;
    }
    s.bytes_sent = __atomic_load_n(&n.bytes_sent, __ATOMIC_RELAXED);
    s.bytes_received = __atomic_load_n(&n.bytes_received, __ATOMIC_RELAXED);
    s.connections_opened = n.opened.load();
    s.connections_reused = n.reused.load();
    s.refused = n.refused.load();
    return s;
}

}  // namespace tenso::net
