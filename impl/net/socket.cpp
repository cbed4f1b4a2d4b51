// socket.cpp - the node's transport layer (see socket.hpp).
#include "net/socket.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <linux/tls.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/err.h>

#include "error.hpp"
#include "net/tls.hpp"

namespace tenso::net {

void sys_fail(int32_t st, const std::string &what, int err) { fail(st, what + ": " + std::strerror(err)); }

// ---- waits ---------------------------------------------------------------------------------

Deadline Deadline::in(uint64_t ms) {
    Deadline d;
    d.ms = ms;
    if (ms != UINT64_MAX) {
        d.none = false;
        d.at = Clock::now() + std::chrono::milliseconds(std::min<uint64_t>(ms, uint64_t(1) << 40));
    }
    return d;
}

int Deadline::poll_ms() const {
    if (none) return -1;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at - Clock::now()).count();
    return left <= 0 ? 0 : int(std::min<long long>(left + 1, INT_MAX));
}

void Waker::check() const {
    if (cancel && cancel->triggered()) fail(TENSO_E_CANCELLED, "cancelled");
    if (stopped->load(std::memory_order_acquire)) fail(TENSO_E_SHUTDOWN, "the node is shut down");
}

void Waker::pause(int ms) const {
    pollfd p[2] = {{stop_fd, POLLIN, 0}, {cancel ? cancel->fd() : -1, POLLIN, 0}};
    ::poll(p, 2, ms);
    check();
}

void BusyPoll::enable(bool on) {
    cpu_set_t cpus;
    on_ = on && (::sched_getaffinity(0, sizeof cpus, &cpus) != 0 || CPU_COUNT(&cpus) > 1);
}

bool BusyPoll::begin() {
    if (!on_) return false;
    const uint32_t skip = skip_.load(std::memory_order_relaxed);
    if (skip != 0) {
        skip_.store(skip - 1, std::memory_order_relaxed);
        return false;
    }
    polls_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

bool BusyPoll::hit() {
    hits_.fetch_add(1, std::memory_order_relaxed);
    misses_.store(0, std::memory_order_relaxed);
    return true;
}

bool BusyPoll::miss(bool preempted) {
    const uint32_t k = preempted ? 8 : std::min<uint32_t>(misses_.load(std::memory_order_relaxed) + 1, 8);
    misses_.store(k, std::memory_order_relaxed);
    skip_.store((1u << k) - 1, std::memory_order_relaxed);
    return false;
}

bool BusyPoll::spin(pollfd *p, unsigned n) {
    return spin_until([&] { return ::poll(p, n, 0) > 0; });
}

void Waker::wait_answer(int fd, const Deadline &d) const {
    if (busy) {
        pollfd p[3] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}, {cancel ? cancel->fd() : -1, POLLIN, 0}};
        if (busy->spin(p, 3) && p[0].revents) {
            check();
            return;
        }
    }
    wait(fd, POLLIN, d);
}

void Waker::wait(int fd, short events, const Deadline &d) const {
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

// ---- addresses -------------------------------------------------------------------------

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

void AddrinfoFree::operator()(addrinfo *a) const {
    if (a) freeaddrinfo(a);
}

Resolved resolve(const std::string &host, const std::string &port, const Waker &w, const Deadline &d) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) == 0 && res) return Resolved(res);
    // A name: looked up by a helper thread, which owns the lookup's state with us.
    struct Lookup {
        std::mutex mu;
        bool done = false;
        int status = 0;
        addrinfo *res = nullptr;
        int efd = -1;
        ~Lookup() {
            if (res) freeaddrinfo(res);
            if (efd >= 0) ::close(efd);
        }
    };
    auto lk = std::make_shared<Lookup>();
    lk->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (lk->efd < 0) sys_fail(TENSO_E_IO, "eventfd");
    std::thread([lk, host, port] {
        addrinfo h{}, *r = nullptr;
        h.ai_socktype = SOCK_STREAM;
        const int st = getaddrinfo(host.c_str(), port.c_str(), &h, &r);
        std::lock_guard<std::mutex> g(lk->mu);
        lk->status = st;
        lk->res = r;
        lk->done = true;
        const uint64_t one = 1;
        (void)!::write(lk->efd, &one, sizeof one);
    }).detach();
    w.wait(lk->efd, POLLIN, d);
    std::lock_guard<std::mutex> g(lk->mu);
    if (lk->status != 0 || !lk->res)
        fail(TENSO_E_BAD_ADDRESS, "cannot resolve '" + host + "': " + gai_strerror(lk->status));
    Resolved out(lk->res);
    lk->res = nullptr;
    return out;
}

// ---- sockets -----------------------------------------------------------------------------

Sock::~Sock() {
    if (ssl) SSL_free(ssl);
    if (fd >= 0) ::close(fd);
    drop_fds();
}

int Sock::take_fd() {
    if (fds.empty()) return -1;
    const int f = fds.front();
    fds.pop_front();
    if (fd_budget) fd_budget->held.fetch_sub(1);
    return f;
}

void Sock::drop_fds() {
    while (!fds.empty()) ::close(take_fd());
}

void Sock::ssl_fail(int err, const char *what) {
    const unsigned long e = ERR_peek_error();
    char buf[256] = "";
    if (e) ERR_error_string_n(e, buf, sizeof buf);
    // A TLS alert from the peer (reason codes from SSL_AD_REASON_OFFSET) is its refusal.
    const bool alert = e && ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) >= 1000;
    ERR_clear_error();
    if (err == SSL_ERROR_SYSCALL && !e) sys_fail(TENSO_E_CONNECTION, what, errno ? errno : ECONNRESET);
    fail(alert ? TENSO_E_AUTH : TENSO_E_CONNECTION, std::string(what) + ": " + buf);
}

Io Sock::ssl_result(int r, size_t n, uint64_t *counter, const char *what) {
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

int Sock::handshake() {
    const NoSigpipe guard(kernel_bio);
    return SSL_do_handshake(ssl);
}

bool Sock::start_kernel_tls() {
    if (!kernel_bio) return false;
    ktls_tx = BIO_get_ktls_send(SSL_get_wbio(ssl));
    ktls_rx = BIO_get_ktls_recv(SSL_get_rbio(ssl));
    return ktls_tx;
}

Io Sock::read(void *p, size_t cap, size_t *n) {
    *n = 0;
    if (ssl && !ktls_rx) {
        if (later) std::rethrow_exception(later);
        if (eof_later) return Io::kEof;
        const NoSigpipe guard(kernel_bio);
        // Sequenced: *n is set by the read (an argument list may evaluate *n before the call).
        const int r = SSL_read_ex(ssl, p, cap, n);
        const Io io = ssl_result(r, *n, counter_in, "TLS read");
        // OpenSSL returns one record (16 KiB at most) a call: the records it has read ahead
        // are taken too, so that a node's reader (which acknowledges once per read) fills its
        // 64 KiB. What ends that is the next read's answer (ssl_fail clears the thread's error
        // queue, which every SSL call on the thread depends on), and a failure every later
        // call's: OpenSSL has sent its alert, so the pushes of this read go unacknowledged, as
        // on any connection cut before its `ok`.
        while (io == Io::kDone && *n < cap && SSL_has_pending(ssl)) {
            size_t more = 0;
            const int m = SSL_read_ex(ssl, static_cast<uint8_t *>(p) + *n, cap - *n, &more);
            if (m == 1) {
                *n += more;
                if (counter_in) __atomic_add_fetch(counter_in, more, __ATOMIC_RELAXED);
                continue;
            }
            try {
                eof_later = ssl_result(m, 0, nullptr, "TLS read") == Io::kEof;
            } catch (const Error &) {
                later = std::current_exception();
            }
            break;
        }
        return io;
    }
    ssize_t r;
    if (ktls_rx) {
        // The kernel decrypts straight into p; a record other than application data comes
        // alone, with its type in a control message.
        alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(unsigned char))];
        iovec iov{p, cap};
        msghdr m{};
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = cbuf;
        m.msg_controllen = sizeof cbuf;
        do r = ::recvmsg(fd, &m, 0);
        while (r < 0 && errno == EINTR);
        if (r > 0)
            for (cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
                if (c->cmsg_level == SOL_TLS && c->cmsg_type == TLS_GET_RECORD_TYPE) {
                    const unsigned char type = *CMSG_DATA(c);
                    if (type == 21) return Io::kEof;  // an alert: the peer closes (close_notify) or gives up
                    if (type != 23)
                        fail(TENSO_E_CONNECTION, "the peer sent a TLS record of type " + std::to_string(type) +
                                                     " after the handshake (kernel TLS takes application data only)");
                }
    } else if (unix_) {
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
            // Every descriptor is owned (closed if over budget) before anything can fail.
            bool over = (m.msg_flags & MSG_CTRUNC) != 0;  // the kernel dropped some already
            for (cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                    const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                    for (size_t i = 0; i < k; ++i) {
                        int f;
                        std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
                        const bool room = fds.size() < FdBudget::kPerConnection &&
                                          (!fd_budget || fd_budget->held.fetch_add(1) < FdBudget::kNode);
                        if (!room) {
                            if (fds.size() < FdBudget::kPerConnection && fd_budget) fd_budget->held.fetch_sub(1);
                            ::close(f);
                            over = true;
                            continue;
                        }
                        fds.push_back(f);
                    }
                }
            if (over)
                fail(TENSO_E_LIMIT, "the peer passed more descriptors than its frames use (at most " +
                                        std::to_string(FdBudget::kPerConnection) + " per connection, " +
                                        std::to_string(FdBudget::kNode) + " per node, waiting)");
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

Io Sock::tls_write(const iovec *iov, size_t cnt, size_t *n) {
    const NoSigpipe guard(kernel_bio);
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
    if (!kernel_bio) set_send_more(ssl, total > len);
    const int r = SSL_write_ex(ssl, p, len, n);
    if (!kernel_bio) set_send_more(ssl, false);
    return ssl_result(r, *n, counter_out, "TLS write");
}

Io Sock::write(const iovec *iov, size_t cnt, size_t *n, int pass_fd) {
    *n = 0;
    if (later) std::rethrow_exception(later);  // the connection failed (read())
    if (ssl && !ktls_tx) return tls_write(iov, cnt, n);
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

Io Outgoing::pump(Sock &s) {
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

Io Reader::frame(Sock &s, Decoder &d, std::unique_ptr<View> *out) {
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

Io Reader::frame_here(Sock &s, Decoder &d, View *here, std::unique_ptr<View> *out) {
    if (pos < end)
        if (const size_t len = d.whole(buf.get() + pos, end - pos)) {
            *here = View();
            decode_into(*here, buf.get() + pos, len, d.config().limits);
            pos += len;
            return Io::kDone;
        }
    return frame(s, d, out);
}

Io Reader::skip(Sock &s, uint64_t *left) {
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

}  // namespace tenso::net
