// pool.cpp - the outbound connection pool: per-peer idle connections reused by calls, at most
// max_pool_per_peer kept and max_connections in use per peer, idle ones closed after idle_timeout_ms.
#include "net/node_impl.hpp"

#include <algorithm>

#include <poll.h>

namespace tenso::net {

void Node::Impl::reap() {
    // Often enough for the shortest of the deadlines it enforces; at most once a second.
    const uint64_t shortest = std::min({opts.idle_timeout_ms, pre_auth_ms(opts), opts.io_timeout_ms});
    const uint64_t every = std::clamp<uint64_t>(shortest / 4, 5, 1000);
    reaper->expires_after(std::chrono::milliseconds(every));
    reaper->async_wait([this](const asio::error_code &ec) {
        if (ec || stopped) return;
        expire_inbound();
        reap_streams();
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

Node::Impl::Slot Node::Impl::try_checkout(const Address &a, std::unique_ptr<Outbound> *c) {
    std::lock_guard<std::mutex> g(pool_mu);
    Peer &p = pool[a.key()];
    while (!p.idle.empty()) {
        std::unique_ptr<Outbound> cand = std::move(p.idle.back());
        p.idle.pop_back();
        // A pooled connection the peer closed (or wrote to unasked) is readable, or its
        // TLS layer holds bytes read ahead: drop it.
        pollfd pf{cand->sock.fd, POLLIN, 0};
        if (::poll(&pf, 1, 0) == 0 && !(cand->sock.ssl && SSL_has_pending(cand->sock.ssl))) {
            *c = std::move(cand);
            ++p.busy;
            reused.fetch_add(1);
            return Slot::kIdle;
        }
    }
    if (p.busy < opts.max_connections) {
        ++p.busy;
        return Slot::kDial;
    }
    return Slot::kFull;
}

void Node::Impl::release_slot(const Address &a) {
    std::lock_guard<std::mutex> g(pool_mu);
    --pool[a.key()].busy;
    pool_cv.notify_all();
    notify_waiters();
}

std::unique_ptr<Outbound> Node::Impl::checkout(const Address &a, const Waker &w, const Deadline &d) {
    for (;;) {
        std::unique_ptr<Outbound> c;
        const Slot s = try_checkout(a, &c);
        if (s == Slot::kIdle) return c;
        if (s == Slot::kDial) break;
        std::unique_lock<std::mutex> g(pool_mu);
        if (pool[a.key()].busy < opts.max_connections || !pool[a.key()].idle.empty()) continue;
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
    try {
        return dial(a, w, d);
    } catch (...) {
        release_slot(a);
        throw;
    }
}

void Node::Impl::discard(std::unique_ptr<Outbound> c) {
    {
        std::lock_guard<std::mutex> g(pool_mu);
        --pool[c->addr.key()].busy;
        pool_cv.notify_all();
        notify_waiters();
    }
    c.reset();
}

void Node::Impl::checkin(std::unique_ptr<Outbound> c) {
    std::unique_ptr<Outbound> drop;
    std::lock_guard<std::mutex> g(pool_mu);
    Peer &p = pool[c->addr.key()];
    --p.busy;
    pool_cv.notify_all();
    notify_waiters();
    // Out of step (bytes or descriptors left over from the peer) or ended: not reused.
    if (stopped || p.idle.size() >= opts.max_pool_per_peer || !c->val.idle() || !c->ctl.idle() ||
        !c->sock.fds.empty() || c->reader.pos != c->reader.end || c->sock.later || c->sock.eof_later) {
        drop = std::move(c);
        return;
    }
    c->idle_since = Clock::now();
    p.idle.push_back(std::move(c));
}

}  // namespace tenso::net
