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

#include "io/io.hpp"
#include "net/fdpass.hpp"

namespace tenso::net {

std::unique_ptr<Outbound> Node::Impl::dial(const Address &a, const Waker &w, const Deadline &d) {
    std::unique_ptr<Outbound> c = dial_start(a);
    for (;;) {
        const Io r = dial_step(*c);
        if (r == Io::kDone) return c;
        w.wait(c->sock.fd, r == Io::kWantRead ? POLLIN : POLLOUT, d);
    }
}

// The socket made and its connect begun (name resolution, when the address is a name, blocks).
std::unique_ptr<Outbound> Node::Impl::dial_start(const Address &a) {
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
        addrinfo hints{}, *res = nullptr;
        hints.ai_socktype = SOCK_STREAM;
        const int r = getaddrinfo(a.host.c_str(), a.port.c_str(), &hints, &res);
        if (r != 0 || !res) fail(TENSO_E_BAD_ADDRESS, "cannot resolve '" + a.host + "': " + gai_strerror(r));
        std::unique_ptr<addrinfo, void (*)(addrinfo *)> hold(res, freeaddrinfo);
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
        o.dialing = Outbound::kHandshake;
    }
    if (o.dialing == Outbound::kHandshake) {
        const int h = o.sock.handshake();
        if (h != 1) {
            const int err = SSL_get_error(o.sock.ssl, h);
            if (err == SSL_ERROR_WANT_READ) return Io::kWantRead;
            if (err == SSL_ERROR_WANT_WRITE) return Io::kWantWrite;
            o.sock.ssl_fail(err, "TLS handshake");
        }
        o.sock.peer = tls->check_peer(o.sock.ssl, a.fingerprint, false);
        (o.sock.start_kernel_tls() ? tls_kernel : tls_user).fetch_add(1);
    }
    if (o.dialing != Outbound::kReady) {
        o.dialing = Outbound::kReady;
        opened.fetch_add(1);
    }
    return Io::kDone;
}

Control Node::Impl::call(Outbound &c, Outgoing &out, const Waker &w, const Deadline &d) {
    out.start();
    for (;;) {
        Control reply;
        const Io r = call_step(c, out, &reply);
        if (r == Io::kDone) return reply;
        w.wait(c.sock.fd, r == Io::kWantRead ? POLLIN : POLLOUT, d);
    }
}

Io Node::Impl::call_step(Outbound &c, Outgoing &out, Control *reply_out, bool read_at_once) {
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
    for (;;) {
        std::unique_ptr<View> v;
        const Io r = c.reader.frame(c.sock, c.ctl, &v);
        if (r == Io::kDone) {
            Control reply = parse_control(*v, opts.max_name_bytes);
            if (reply.op == Op::kError) fail(reply.status, "the peer refused: " + reply.message);
            // One request is outstanding: an `ok` for more is out of step.
            if (reply.op == Op::kOk && reply.length > 1) fail(TENSO_E_MALFORMED, "the peer acknowledged more pushes than were sent");
            *reply_out = std::move(reply);
            return Io::kDone;
        }
        if (r == Io::kEof) fail(TENSO_E_CONNECTION, "the peer closed the connection");
        return r;
    }
}

std::unique_ptr<View> Node::Impl::read_value(Outbound &c, const Control &reply, const Waker &w, const Deadline &d) {
    for (;;) {
        std::unique_ptr<View> v;
        const Io r = read_value_step(c, reply, &v);
        if (r == Io::kDone) return v;
        w.wait(c.sock.fd, r == Io::kWantWrite ? POLLOUT : POLLIN, d);
    }
}

Io Node::Impl::read_value_step(Outbound &c, const Control &reply, std::unique_ptr<View> *out) {
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
        *out = std::move(v);
        return Io::kDone;
    }
    if (reply.op != Op::kValue) fail(TENSO_E_MALFORMED, "unexpected reply to a request");
    if (reply.length > opts.max_packet_bytes) fail(TENSO_E_LIMIT, "the value is larger than max_packet_bytes");
    for (;;) {
        std::unique_ptr<View> v;
        const Io r = c.reader.frame(c.sock, c.val, &v);
        if (r == Io::kDone) {
            if (v->packet_size != reply.length) fail(TENSO_E_MALFORMED, "the value's length is not the one announced");
            *out = std::move(v);
            return Io::kDone;
        }
        if (r == Io::kEof) fail(TENSO_E_CONNECTION, "the peer closed the connection before the value");
        return r;
    }
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

void Node::send(const std::string &addr, const std::string &name, const Payload &p, uint64_t timeout_ms, Cancel *cancel) {
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

std::unique_ptr<View> Node::request(const std::string &addr, const std::string &name, uint64_t timeout_ms, Cancel *cancel) {
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

}  // namespace tenso::net
