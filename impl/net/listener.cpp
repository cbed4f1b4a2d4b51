// listener.cpp - the listener side of a node: listening sockets and accepting, the receive
// queue and published values (the connections themselves: inbound.cpp).
#include "net/node_impl.hpp"

#include <algorithm>
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
}

void Node::Impl::accept_next(Listener &l) {
    l.sd->async_wait(asio::posix::stream_descriptor::wait_read, [this, &l](const asio::error_code &ec) {
        if (ec || stopped) return;
        const int pause_ms = on_accept(l);
        if (pause_ms) pause_accepting(l, pause_ms);
        else accept_next(l);
    });
}

// The listener stays readable while it has connections waiting: waiting on it again at once
// would spin. It waits a little instead, then accepts what it can.
void Node::Impl::pause_accepting(Listener &l, int ms) {
    if (!l.pause) l.pause.reset(new asio::steady_timer(*io));
    l.pause->expires_after(std::chrono::milliseconds(ms));
    l.pause->async_wait([this, &l](const asio::error_code &ec) {
        if (ec || stopped) return;
        accept_next(l);
    });
}

bool Node::Impl::pre_auth_slot() {
    std::lock_guard<std::mutex> g(in_mu);
    if (unauthenticated < pre_auth_slots(opts)) return true;
    // All taken: the oldest holder goes if it has had a fair chance to finish its handshake
    // (a burst of peers that all complete theirs must not evict each other); else the newcomer
    // waits in the listen backlog.
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
    const int64_t min_age = int64_t(std::clamp<uint64_t>(pre_auth_ms(opts) / 10, 20, 1000)) * 1000000;
    std::shared_ptr<Inbound> oldest;
    for (const auto &c : inbound)
        if (c->slot == Inbound::kPreAuth && (!oldest || c->accepted_at < oldest->accepted_at)) oldest = c;
    if (!oldest || now - oldest->accepted_at < min_age) return false;
    oldest->slot = Inbound::kNoSlot;
    --unauthenticated;
    oldest->expire();
    return true;
}

int Node::Impl::on_accept(Listener &l) {
    // Out of descriptors (EMFILE, ENFILE) or memory, and with every pre-auth slot held by a
    // recent connection, the listener pauses (the connections past their deadlines are closed
    // meanwhile).
    constexpr int kNoResourcesMs = 100, kNoSlotMs = 10;
    for (;;) {
        if (!pre_auth_slot()) return kNoSlotMs;
        sockaddr_storage ss{};
        socklen_t sl = sizeof ss;
        const int fd = ::accept4(l.fd, reinterpret_cast<sockaddr *>(&ss), &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            // EAGAIN, or a connection that went away: wait for the next.
            return errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM ? kNoResourcesMs : 0;
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
        std::lock_guard<std::mutex> g(in_mu);
        try {
            auto c = std::make_shared<Inbound>(*this, fd, l.addr.scheme == Address::kUnix,
                                               l.addr.scheme == Address::kTls, peer);
            inbound.insert(c);
            ++unauthenticated;
            asio::post(*io, [c] { c->run(); });
        } catch (...) {
            refused.fetch_add(1);  // the descriptor went with the half-made connection
        }
    }
}

void Node::Impl::expire_inbound() {
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
    std::lock_guard<std::mutex> g(in_mu);
    for (const auto &c : inbound) {
        const int64_t d = c->deadline();
        if (d && d < now) c->expire();
    }
}

bool Node::Impl::reserve(uint64_t bytes, const std::shared_ptr<Inbound> &who) {
    std::lock_guard<std::mutex> g(q_mu);
    if (queue.size() + reserved_count >= opts.max_queued ||
        queued_bytes + reserved_bytes + bytes > opts.max_queued_bytes) {
        if (who) parked.push_back(who);
        return false;
    }
    reserved_bytes += bytes;
    ++reserved_count;
    return true;
}

bool Node::Impl::grow(uint64_t extra, bool *over, const std::shared_ptr<Inbound> &who) {
    std::lock_guard<std::mutex> g(q_mu);
    if (queued_bytes + reserved_bytes + extra > opts.max_queued_bytes) {
        // Pushes holding reservations could otherwise all wait for each other's room: one at a
        // time may go past the budget (by at most max_queued_bytes, what one push may hold).
        if (overshoot) {
            if (who) parked.push_back(who);
            return false;
        }
        overshoot = true;
        *over = true;
    }
    reserved_bytes += extra;
    return true;
}

void Node::Impl::release(uint64_t bytes, bool over) {
    std::unique_lock<std::mutex> g(q_mu);
    if (bytes) {
        reserved_bytes -= bytes;
        --reserved_count;
    }
    if (over) overshoot = false;
    resume_parked(g);
}

void Node::Impl::resume_parked(std::unique_lock<std::mutex> &q) {
    // Every receive comes here: a deque, even an empty one, costs two allocations (under q_mu).
    if (parked.empty()) return q.unlock();
    std::deque<std::weak_ptr<Inbound>> waiting;
    waiting.swap(parked);
    q.unlock();
    for (auto &p : waiting)
        if (auto c = p.lock()) c->resume();
}

void Node::Impl::enqueue(std::unique_ptr<Message> m) {
    std::lock_guard<std::mutex> g(q_mu);
    reserved_bytes -= m->bytes;
    --reserved_count;
    queued_bytes += m->bytes;
    queue.push_back(std::move(m));
    if (!signalled) wake_pending.store(true, std::memory_order_relaxed);
}

void Node::Impl::wake() {
    if (!wake_pending.exchange(false)) return;
    std::lock_guard<std::mutex> g(q_mu);
    if (queue.empty() || signalled) return;
    const uint64_t one = 1;
    (void)!::write(recv_fd, &one, sizeof one);
    signalled = true;
}

bool Node::Impl::allowed(int op, const std::string &peer, const std::string &name) {
    std::lock_guard<std::mutex> g(access_mu);
    return !access_fn || access_fn(access_user, op, peer.c_str(), name.data(), name.size()) != 0;
}

void Node::Impl::decode_off_loop(std::function<void()> job) {
    std::lock_guard<std::mutex> g(decode_mu);
    if (!decoders) decoders.reset(new asio::thread_pool(1));
    asio::post(*decoders, std::move(job));
}

// ---- Node: the receive queue and published values --------------------------------------

std::unique_ptr<Message> Node::Impl::try_receive() {
    std::unique_ptr<Message> m;
    std::unique_lock<std::mutex> g(q_mu);
    if (queue.empty()) return m;
    m = std::move(queue.front());
    queue.pop_front();
    queued_bytes -= m->bytes;
    if (overshoot && m->overshoot) overshoot = false;
    if (queue.empty() && signalled) {
        uint64_t v;
        (void)!::read(recv_fd, &v, sizeof v);
        signalled = false;
    }
    resume_parked(g);
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

void Node::set_access(AccessFn fn, void *user) {
    std::lock_guard<std::mutex> g(impl_->access_mu);
    impl_->access_fn = fn;
    impl_->access_user = user;
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
