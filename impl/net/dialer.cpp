// dialer.cpp - the dialer side of a node: connecting (TCP, TLS, Unix), one request and its
// answer on a pooled connection (send, request), on the caller's thread.
#include "net/node_impl.hpp"

#include <cstring>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <openssl/err.h>
#include <openssl/x509.h>

#include "io/io.hpp"
#include "net/fdpass.hpp"
#include "net/value.hpp"

namespace tenso::net {

Outbound::Outbound(Node::Impl &n) : ctl(decoder_config(n.clim)), val(decoder_config(n.vlim)) {
    sock.counter_in = &n.bytes_received;
    sock.counter_out = &n.bytes_sent;
    sock.fd_budget = &n.fds;
}

std::unique_ptr<Outbound> Node::Impl::dial(const Address &a, const Waker &w, const Deadline &d) {
    std::unique_ptr<Outbound> c = dial_start(a, w, d);
    for (;;) {
        const Io r = dial_step(*c);
        if (r == Io::kDone) return c;
        w.wait(c->sock.fd, r == Io::kWantRead ? POLLIN : POLLOUT, d);
    }
}

// The socket made and its connect begun (a name is resolved on a helper thread, waited for
// until d or a stop: see resolve).
std::unique_ptr<Outbound> Node::Impl::dial_start(const Address &a, const Waker &w, const Deadline &d) {
    if (a.scheme != Address::kTls && !opts.plaintext)
        fail(TENSO_E_INVALID_ARGUMENT, "plaintext peer " + a.key() + " without TENSO_NODE_ALLOW_PLAINTEXT");
    std::unique_ptr<Outbound> c(new Outbound(*this));
    c->addr = a;
    auto connect_one = [&](int family, const sockaddr *sa, socklen_t sl) {
        const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) sys_fail(TENSO_E_IO, "socket");
        c->sock.fd = fd;
        if (family != AF_UNIX) {
            const int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        if (::connect(fd, sa, sl) != 0) {
            if (errno != EINPROGRESS && errno != EAGAIN) sys_fail(TENSO_E_CONNECTION, "connect to " + a.key());
            c->dialing = Outbound::kConnecting;
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
        const Resolved res = resolve(a.host, a.port, w, d);
        connect_one(res->ai_family, res->ai_addr, res->ai_addrlen);
    }
    return c;
}

// Connects, then (TLS) shakes hands, without waiting: kDone once the connection is ready.
Io Node::Impl::dial_step(Outbound &o) {
    const Address &a = o.addr;
    if (o.dialing == Outbound::kConnecting) {
        pollfd pf{o.sock.fd, POLLOUT, 0};
        if (::poll(&pf, 1, 0) == 0) return Io::kWantWrite;
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(o.sock.fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) sys_fail(TENSO_E_CONNECTION, "connect to " + a.key(), err);
        o.dialing = Outbound::kConnected;
    }
    if (o.dialing == Outbound::kConnected && a.scheme == Address::kTls) {
        o.sock.ssl = new_ssl(tls->client(), o.sock.fd, &o.sock.kernel_bio);
        SSL_set_connect_state(o.sock.ssl);
        pin_peer(o.sock.ssl, &a.fingerprint);  // a key other than the address's fails the handshake
        o.dialing = Outbound::kHandshake;
    }
    if (o.dialing == Outbound::kHandshake) {
        const int h = o.sock.handshake();
        if (h != 1) {
            const int err = SSL_get_error(o.sock.ssl, h);
            if (err == SSL_ERROR_WANT_READ) return Io::kWantRead;
            if (err == SSL_ERROR_WANT_WRITE) return Io::kWantWrite;
            if (SSL_get_verify_result(o.sock.ssl) == X509_V_ERR_APPLICATION_VERIFICATION) {
                ERR_clear_error();
                fail(TENSO_E_AUTH, "the peer's key is not the one in its address " + a.key() +
                                       " (refused during the handshake, before this node showed its certificate)");
            }
            o.sock.ssl_fail(err, "TLS handshake");
        }
        pin_peer(o.sock.ssl, nullptr);
        o.sock.peer = tls->check_peer(o.sock.ssl, a.fingerprint, false);
        (o.sock.start_kernel_tls() ? tls_kernel : tls_user).fetch_add(1);
    }
    if (o.dialing != Outbound::kReady) {
        o.dialing = Outbound::kReady;
        opened.fetch_add(1);
    }
    return Io::kDone;
}

std::string push_ack_timeout(const Outbound &c, uint64_t ms) {
    return "timed out after " + std::to_string(ms) + " ms waiting for " + c.addr.key() +
           " to acknowledge the push: it has all of it, but its receive queue is full (its "
           "max_queued / max_queued_bytes) and nothing receives from it; the timeout is "
           "the call's, else this node's io_timeout_ms";
}

Control Node::Impl::call(Outbound &c, Outgoing &out, bool get, const Waker &w, const Deadline &d) {
    out.start();
    // A cancel that came while the request was prepared (a large value copied into a memfd, a
    // dial) is honoured before anything is handed over: over unix:// the first write passes
    // the whole value as a descriptor.
    w.check();
    for (;;) {
        Control reply;
        const Io r = call_step(c, out, get, &reply);
        if (r == Io::kDone) return reply;
        // Written whole, the call waits for the answer (a TLS read may want to write first).
        auto wait = [&] {
            if (out.done() && r == Io::kWantRead) w.wait_answer(c.sock.fd, d);
            else w.wait(c.sock.fd, r == Io::kWantWrite ? POLLOUT : POLLIN, d);
        };
        if (!out.done() || get) {
            wait();
            continue;
        }
        // The push is written whole: the peer holds it and has not queued it.
        try {
            wait();
        } catch (const Error &e) {
            if (e.status() != TENSO_E_TIMEOUT) throw;
            fail(TENSO_E_TIMEOUT, push_ack_timeout(c, d.ms));
        }
    }
}

Io Node::Impl::call_step(Outbound &c, Outgoing &out, bool get, Control *reply_out, bool read_at_once) {
    if (!out.done()) try {
            const Io r = out.pump(c.sock);
            if (r != Io::kDone) return r;
            if (!read_at_once) return Io::kWantRead;
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
    std::unique_ptr<View> v;
    const Io r = c.reader.frame(c.sock, c.ctl, &v);
    if (r == Io::kDone) {
        Control reply = parse_control(*v, opts.max_name_bytes);
        if (reply.op == Op::kError) fail(reply.status, "the peer refused: " + reply.message);
        // Only the answer the request expects: anything else is a peer out of step (the
        // caller drops the connection). One request is outstanding: an `ok` for more is too.
        const bool expected =
            get ? (reply.op == Op::kValue || reply.op == Op::kValueFd) : (reply.op == Op::kOk && reply.length <= 1);
        if (reply.op == Op::kOk && reply.length > 1)
            fail(TENSO_E_MALFORMED, "the peer acknowledged more pushes than were sent");
        if (!expected)
            fail(TENSO_E_MALFORMED, std::string("the peer answered a ") + (get ? "get" : "push") + " out of step");
        *reply_out = std::move(reply);
        return Io::kDone;
    }
    if (r == Io::kEof) fail(TENSO_E_CONNECTION, "the peer closed the connection");
    return r;
}

std::unique_ptr<View> Node::Impl::read_value(Outbound &c, const Control &reply, const Waker &w, const Deadline &d) {
    for (;;) {
        std::unique_ptr<View> v;
        const Io r = read_value_step(c, reply, &v);
        if (r == Io::kDone) return v;
        // The answer (its control frame) came: the value's bytes stream, and are not polled for.
        w.wait(c.sock.fd, r == Io::kWantWrite ? POLLOUT : POLLIN, d);
    }
}

Io Node::Impl::read_value_step(Outbound &c, const Control &reply, std::unique_ptr<View> *out) {
    if (reply.length > opts.max_packet_bytes) fail(TENSO_E_LIMIT, "the value is larger than max_packet_bytes");
    if (reply.length == 0) fail(TENSO_E_MALFORMED, "a value of 0 bytes");
    if (reply.op == Op::kValueFd) {
        const int fd = c.sock.take_fd();
        if (fd < 0) fail(TENSO_E_MALFORMED, "value-fd without a descriptor");
        std::unique_ptr<View> raw;
        try {
            raw = packet_from_fd(fd, reply.offset, reply.length, vlim);
        } catch (...) {
            ::close(fd);
            throw;
        }
        ::close(fd);
        Scanned s = scan_received(std::move(raw), vlim);
        *out = bind_received(s, vlim);
        return Io::kDone;
    }
    // The announcement is the value's limit (set before its first byte: a later step finds the
    // decoder inside the packet).
    if (c.val.idle()) c.val.expect(size_t(reply.length));
    std::unique_ptr<View> v;
    const Io r = c.reader.frame(c.sock, c.val, &v);
    if (r == Io::kDone) {
        *out = std::move(v);
        return Io::kDone;
    }
    if (r == Io::kEof) fail(TENSO_E_CONNECTION, "the peer closed the connection before the value");
    return r;
}

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

// ---- Node: send and request --------------------------------------------------------------

void Node::send(const std::string &addr, const std::string &name, const Payload &p, uint64_t timeout_ms,
                Cancel *cancel) {
    Impl &n = *impl_;
    const Call call(n, addr, name, timeout_ms, cancel);
    PreparedPush pp;
    prepare_push(pp, call.addr, name, p, n.opts);
    std::unique_ptr<Outbound> conn = n.checkout(call.addr, call.w, call.d);
    try {
        n.call(*conn, pp.out, false, call.w, call.d);
    } catch (...) {
        n.discard(std::move(conn));
        throw;
    }
    n.checkin(std::move(conn));
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
        const Control reply = n.call(*conn, out, true, w, d);
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

}  // namespace tenso::net
