// listener.cpp - the listener side of a node: listening sockets and accepting, the receive
// queue and published values (the connections themselves: inbound.cpp).
#include "net/node_impl.hpp"

#include <cstring>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "net/inbound.hpp"

namespace tenso::net {

std::vector<Address> Node::Impl::listen_addresses() const {
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
            addrs.push_back(a);
        }
    }
    return addrs;
}

void Node::Impl::bind_listeners(const std::vector<Address> &addrs) {
    for (const Address &a : addrs) {
        Listener l;
        l.addr = a;
        if (a.scheme == Address::kUnix) {
            l.fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
            sockaddr_un sa{};
            sa.sun_family = AF_UNIX;
            std::memcpy(sa.sun_path, a.path.data(), a.path.size());
            if (l.fd < 0 || ::bind(l.fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) != 0 || ::listen(l.fd, 128) != 0) {
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
            auto c = std::make_shared<Inbound>(*this, fd, l.addr.scheme == Address::kUnix, l.addr.scheme == Address::kTls, peer);
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
    while (::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
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

// ---- Node: the receive queue and published values --------------------------------------

std::unique_ptr<Message> Node::Impl::try_receive() {
    std::unique_ptr<Message> m;
    std::deque<std::weak_ptr<Inbound>> resumed;
    {
        std::lock_guard<std::mutex> g(q_mu);
        if (queue.empty()) return m;
        m = std::move(queue.front());
        queue.pop_front();
        queued_bytes -= m->bytes;
        if (queue.empty() && signalled) {
            uint64_t v;
            (void)!::read(recv_fd, &v, sizeof v);
            signalled = false;
        }
        resumed.swap(parked);
    }
    for (auto &p : resumed)
        if (auto c = p.lock()) c->resume();
    return m;
}

std::unique_ptr<Message> Node::receive(uint64_t timeout_ms, Cancel *cancel) {
    CallScope scope(*impl_);
    Impl &n = *impl_;
    const Waker w{n.stop_fd, cancel, &n.stopped};
    const Deadline d = Deadline::in(timeout_ms);
    for (;;) {
        w.check();
        if (std::unique_ptr<Message> m = n.try_receive()) return m;
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

}  // namespace tenso::net
