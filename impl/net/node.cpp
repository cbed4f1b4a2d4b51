// node.cpp - a node's life: cancel tokens, start and stop, and its statistics. The parts:
// socket.cpp (transport), fdpass.cpp (descriptor passing), listener.cpp and inbound.cpp (the
// listener side), dialer.cpp, pool.cpp, post.cpp. See node.hpp and docs/net-protocol.md.
#include "net/node_impl.hpp"

#include <sys/eventfd.h>
#include <sys/socket.h>

#include "net/inbound.hpp"

#include <openssl/crypto.h>

namespace tenso::net {

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

void Node::Impl::start() {
    stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    recv_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stop_fd < 0 || recv_fd < 0) sys_fail(TENSO_E_IO, "eventfd");
    busy.enable(!opts.no_busy_poll);
    loop_busy.enable(!opts.no_busy_poll);
    vlim = value_limits(opts);
    plim = push_limits(opts);
    clim = control_limits(opts);
    const std::vector<Address> addrs = listen_addresses();
    tls.reset(new Tls(opts.cert_pem, opts.key_pem, opts.ca_pem, opts.ca_set, opts.pinned_keys));
    // The contexts hold the key now: its text is not kept (Node's caller wipes its own copy).
    wipe(opts.key_pem);
    bind_listeners(addrs);
    reaper.reset(new asio::steady_timer(*io));
    reap();
    for (uint32_t i = 0; i < opts.threads; ++i)
        threads.emplace_back([this] {
            NoSigpipe::block_sigpipe_for_good();  // kernel TLS writes through write(2)
            // The event loop's last boundary: a handler that throws (each catches what it
            // expects) does not take the process down; the loop goes on.
            for (;;) {
                try {
                    run_loop();
                    return;
                } catch (...) {}
            }
        });
}

// io->run(), but after work the loop polls for more for a while (BusyPoll) before it sleeps
// in epoll: a caller that waits for each answer sends its next request ~10 us after it, and a
// loop woken from sleep on an idle CPU costs 30-80 us more here (the sender's own busy poll
// saves its half of the round trip; this is the other half).
void Node::Impl::run_loop() {
    const auto more = [this] { return io->poll() > 0; };
    while (!io->stopped()) {
        if (more() || loop_busy.spin_until(more)) continue;
        if (io->run_one() == 0) return;
    }
}

void Node::Impl::stop() {
    std::lock_guard<std::mutex> g(stop_mu);
    if (stopped.exchange(true)) return;
    const uint64_t one = 1;
    (void)!::write(stop_fd, &one, sizeof one);
    {
        // The receive descriptor turns readable for good: a caller waiting on it (asyncio's
        // receive) wakes and its receive returns TENSO_E_SHUTDOWN.
        std::lock_guard<std::mutex> q(q_mu);
        if (!signalled) (void)!::write(recv_fd, &one, sizeof one);
        signalled = true;
    }
    {
        // A checkout waiting for a pooled connection wakes (under the lock: it cannot miss it).
        std::lock_guard<std::mutex> l(pool_mu);
        pool_cv.notify_all();
    }
    io->stop();
    for (auto &t : threads) t.join();
    threads.clear();
    {
        // A decode in progress finishes (its return to the stopped loop is dropped); queued
        // ones are dropped.
        std::lock_guard<std::mutex> d(decode_mu);
        if (decoders) {
            decoders->stop();
            decoders->join();
        }
    }
    {
        std::lock_guard<std::mutex> l(in_mu);
        for (auto &c : inbound) c->close();
        inbound.clear();
    }
    reaper.reset();
    for (Listener &l : listeners) {
        l.sd.reset();  // closes the listening socket: the descriptor owns l.fd
        l.fd = -1;
        if (l.addr.scheme == Address::kUnix) ::unlink(l.addr.path.c_str());
    }
    stop_streams();
    stop_queues();
    // Handlers still queued keep their connections (shut down above) until the node is freed,
    // when the io_context goes; `io` itself stays, so a late post from a receive is harmless.
    {
        std::lock_guard<std::mutex> l(pool_mu);
        for (auto &p : pool) p.second.idle.clear();
    }
}

void wipe(std::string &secret) {
    if (!secret.empty()) OPENSSL_cleanse(&secret[0], secret.size());
    secret.clear();
    secret.shrink_to_fit();
}

Node::Node(const NodeOptions &opts) : impl_(std::make_shared<Impl>()) {
    impl_->opts = opts;
    try {
        impl_->start();
    } catch (...) {
        wipe(impl_->opts.key_pem);
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
}

void Node::shutdown() { impl_->stop(); }

bool Node::addr(uint32_t index, std::string *out) const {
    if (index >= impl_->listeners.size()) return false;
    *out = impl_->listeners[index].printable;
    return true;
}

std::string Node::id() const { return impl_->tls->id(); }

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
    s.tls_kernel = n.tls_kernel.load();
    s.tls_user = n.tls_user.load();
    n.busy.counts(&s.busy_polls, &s.busy_poll_hits);
    return s;
}

}  // namespace tenso::net
