// completion.cpp - completion queues (see completion.hpp): the epoll instance that drives the
// operations started on a queue, their deadlines, wakes and completions.
#include "net/completion.hpp"

#include <algorithm>
#include <cstring>

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

namespace tenso::net {

Want Want::io(int fd, Io r) {
    Want w;
    w.kind = kFd;
    w.fd = fd;
    w.events = r == Io::kWantWrite ? EPOLLOUT : EPOLLIN;
    return w;
}

Want Want::readable(int fd) { return io(fd, Io::kWantRead); }

// ---- the node's side --------------------------------------------------------------------

void Node::Impl::notify_waiters() {
    wake_gen.fetch_add(1);
    if (async_waiting.load() == 0) return;
    std::lock_guard<std::mutex> g(queues_mu);
    for (const std::weak_ptr<Queue> &w : queues)
        if (std::shared_ptr<Queue> q = w.lock()) q->wake();
}

void Node::Impl::stop_queues() {
    std::vector<std::shared_ptr<Queue>> all;
    {
        std::lock_guard<std::mutex> g(queues_mu);
        for (const std::weak_ptr<Queue> &w : queues)
            if (std::shared_ptr<Queue> q = w.lock()) all.push_back(std::move(q));
    }
    for (const std::shared_ptr<Queue> &q : all) q->fail_all(TENSO_E_SHUTDOWN, "the node is shut down");
}

// ---- the queue -----------------------------------------------------------------------------

std::shared_ptr<Queue> Queue::make(const std::shared_ptr<Node::Impl> &n, Callback cb) {
    const CallScope scope(*n);
    std::shared_ptr<Queue> q(new Queue(n, std::move(cb)));
    {
        std::lock_guard<std::mutex> g(n->queues_mu);
        auto &v = n->queues;
        v.erase(std::remove_if(v.begin(), v.end(), [](const std::weak_ptr<Queue> &w) { return w.expired(); }), v.end());
        v.push_back(q);
    }
    // The thread holds the queue until it quits (close), so a callback that frees the queue's
    // handle does not free the queue under it.
    if (q->cb_) q->thread_ = std::thread([self = q] { self->run_callbacks(); });
    return q;
}

Queue::Queue(const std::shared_ptr<Node::Impl> &n, Callback cb) : n_(n), cb_(std::move(cb)) {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    auto add = [this](int fd) {
        epoll_event e{};
        e.events = EPOLLIN;
        e.data.fd = fd;
        return epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &e) == 0;
    };
    if (ep_ < 0 || event_fd_ < 0 || timer_fd_ < 0 || !add(event_fd_) || !add(timer_fd_)) {
        const int e = errno;
        for (int fd : {ep_, event_fd_, timer_fd_})
            if (fd >= 0) ::close(fd);
        sys_fail(TENSO_E_IO, "a completion queue's descriptors", e);
    }
}

Queue::~Queue() {
    ::close(ep_);
    ::close(event_fd_);
    ::close(timer_fd_);
}

void Queue::signal() {
    const uint64_t one = 1;
    (void)!::write(event_fd_, &one, sizeof one);
}

void Queue::start(Operation *op) {
    op->queue_ = this;
    op->keep_ = shared_from_this();
    std::lock_guard<std::mutex> g(mu_);
    inflight_.insert(op);
    starting_ = op;
    advance(op);
    // The one call in flight, waiting for its answer: that answer is usually a few microseconds
    // away, and the start polls for it rather than making the caller's loop sleep and wake.
    if (!op->done && op->answer_ && inflight_.size() == 1 && answer_ready()) poll_events();
    starting_ = nullptr;
}

int32_t current_status(std::string *m) {
    try {
        throw;
    } catch (const Error &e) {
        *m = e.what();
        return e.status();
    } catch (const std::bad_alloc &) {
        *m = "out of memory";
        return TENSO_E_NO_MEMORY;
    } catch (const std::exception &e) {
        *m = e.what();
        return TENSO_E_INTERNAL;
    } catch (...) {
        *m = "an unknown exception";
        return TENSO_E_INTERNAL;
    }
}

void Queue::advance(Operation *op) {
    if (op->done) return;
    unwait(op);
    // Read before the step: a wake between the step and the wait's registration is not lost.
    const uint64_t gen = n_->wake_gen.load();
    bool retried = false;
    for (;;) {
        if (n_->stopped && !op->stop) op->request_stop(TENSO_E_SHUTDOWN, "the node is shut down");
        Want w;
        int32_t st = TENSO_OK;
        std::string m;
        try {
            w = op->step(*n_);
        } catch (...) {
            st = current_status(&m);
        }
        if (st != TENSO_OK || w.kind == Want::kDone) return complete(op, st, std::move(m), delivers(op));
        // Past its deadline: it ends now (the timer may not have fired yet).
        if (!retried && !op->stop && !op->deadline_.none && Clock::now() >= op->deadline_.at) {
            op->request_stop(TENSO_E_TIMEOUT, "timed out");
            retried = true;
            continue;
        }
        wait_for(op, w);
        if (w.kind == Want::kWake && n_->wake_gen.load() != gen) {
            wake_pending_ = true;
            signal();
        }
        return;
    }
}

void Queue::wait_for(Operation *op, const Want &w) {
    if (w.kind == Want::kFd) {
        std::vector<Operation *> &v = watches_[w.fd];
        v.push_back(op);
        op->watch_fd_ = w.fd;
        op->watch_events_ = w.events;
        op->answer_ = w.answer;
        answering_ += w.answer;
        uint32_t events = 0;
        for (Operation *o : v) events |= o->watch_events_;
        epoll_event e{};
        e.events = events | EPOLLONESHOT;
        e.data.fd = w.fd;
        // Registered once per descriptor and left registered (disarmed) between waits: the next
        // wait is one MOD. A closed descriptor leaves the set by itself.
        if (epoll_ctl(ep_, EPOLL_CTL_MOD, w.fd, &e) != 0 &&
            (errno != ENOENT || epoll_ctl(ep_, EPOLL_CTL_ADD, w.fd, &e) != 0)) {
            const int err = errno;
            return complete(op, TENSO_E_IO, std::string("epoll_ctl: ") + std::strerror(err), delivers(op));
        }
    } else {
        waking_.push_back(op);
        op->waking_ = true;
        nwaking_.fetch_add(1);
        n_->async_waiting.fetch_add(1);
    }
    if (!op->timed_ && op->timeout_ms_ != UINT64_MAX) {
        if (op->deadline_.none) op->deadline_ = Deadline::in(op->timeout_ms_);
        op->timer_ = timers_.emplace(op->deadline_.at, op);
        op->timed_ = true;
        if (op->deadline_.at < timer_at_) arm_timer();
    }
}

void Queue::unwait(Operation *op) {
    if (op->watch_fd_ >= 0) {
        auto it = watches_.find(op->watch_fd_);
        if (it != watches_.end()) {
            auto &v = it->second;
            v.erase(std::remove(v.begin(), v.end(), op), v.end());
            if (v.empty()) watches_.erase(it);
        }
        op->watch_fd_ = -1;
        answering_ -= op->answer_;
        op->answer_ = false;
    }
    if (op->waking_) {
        waking_.erase(std::remove(waking_.begin(), waking_.end(), op), waking_.end());
        op->waking_ = false;
        nwaking_.fetch_sub(1);
        n_->async_waiting.fetch_sub(1);
    }
}

void Queue::arm_timer() {
    itimerspec its{};
    timer_at_ = timers_.empty() ? Clock::time_point::max() : timers_.begin()->first;
    if (!timers_.empty()) {
        // timerfd's CLOCK_MONOTONIC is steady_clock's clock; a deadline already past fires now.
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timer_at_.time_since_epoch()).count();
        its.it_value.tv_sec = std::max<long long>(ns, 1) / 1000000000;
        its.it_value.tv_nsec = std::max<long long>(ns, 1) % 1000000000;
    }
    timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &its, nullptr);
}

void Queue::complete(Operation *op, int32_t st, std::string m, bool deliver) {
    unwait(op);
    if (op->timed_) {
        timers_.erase(op->timer_);
        op->timed_ = false;
    }
    op->finish(*n_, st);
    op->status = st;
    op->message = std::move(m);
    inflight_.erase(op);
    op->done.store(true, std::memory_order_release);
    if (deliver && !closed_) {
        completed_.push_back(op);
        op->listed_ = true;
        if (!reaping_) signal();
    }
    cv_.notify_all();
}

void Queue::complete_elsewhere(Operation *op, int32_t st, const std::string &m) {
    Queue &q = *op->queue_;
    std::lock_guard<std::mutex> g(q.mu_);
    if (!op->done) q.complete(op, st, m, true);
}

void Queue::end(Operation *op, int32_t st, const char *why) {
    if (op->done) return;
    op->request_stop(st, why);
    advance(op);
}

void Queue::poll_events() {
    epoll_event ev[64];
    for (;;) {
        const int k = epoll_wait(ep_, ev, 64, 0);
        for (int i = 0; i < k; ++i) {
            const int fd = ev[i].data.fd;
            if (fd == event_fd_) {
                uint64_t v;
                (void)!::read(event_fd_, &v, sizeof v);
                if (wake_pending_.exchange(false)) {
                    const std::vector<Operation *> retry = waking_;
                    for (Operation *op : retry) advance(op);
                }
            } else if (fd == timer_fd_) {
                uint64_t v;
                (void)!::read(timer_fd_, &v, sizeof v);
                const Clock::time_point now = Clock::now();
                std::vector<Operation *> late;
                while (!timers_.empty() && timers_.begin()->first <= now) {
                    Operation *op = timers_.begin()->second;
                    timers_.erase(timers_.begin());
                    op->timed_ = false;
                    late.push_back(op);
                }
                arm_timer();
                for (Operation *op : late) end(op, TENSO_E_TIMEOUT, "timed out");
            } else {
                auto it = watches_.find(fd);
                if (it == watches_.end()) continue;
                const std::vector<Operation *> ready = std::move(it->second);
                watches_.erase(it);
                for (Operation *op : ready) {
                    op->watch_fd_ = -1;
                    answering_ -= op->answer_;
                    op->answer_ = false;
                    advance(op);
                }
            }
        }
        if (k < 64) return;
    }
}

bool Queue::answer_ready() {
    pollfd p{ep_, POLLIN, 0};
    return answering_ && n_->busy.spin(&p, 1);
}

size_t Queue::reap(Operation **out, size_t cap, uint64_t timeout_ms) {
    const Deadline d = Deadline::in(timeout_ms);
    for (bool spun = false;; spun = true) {
        size_t n = 0;
        {
            std::lock_guard<std::mutex> g(mu_);
            reaping_ = true;
            poll_events();
            // About to sleep for an answer: poll for it first (once per reap).
            if (completed_.empty() && timeout_ms != 0 && !spun && answer_ready()) poll_events();
            reaping_ = false;
            while (n < cap && !completed_.empty()) {
                Operation *op = completed_.front();
                completed_.pop_front();
                op->listed_ = false;
                out[n++] = op;
            }
            if (!completed_.empty()) signal();  // more than cap: the descriptor stays readable
        }
        if (n || timeout_ms == 0 || cap == 0) return n;
        const int ms = d.poll_ms();
        if (ms == 0) return 0;
        pollfd p{ep_, POLLIN, 0};
        if (::poll(&p, 1, ms) < 0 && errno != EINTR) sys_fail(TENSO_E_IO, "poll");
    }
}

void Queue::run_callbacks() {
    bool ready = false;  // the last round's busy poll found events: no sleep
    for (;;) {
        pollfd p{ep_, POLLIN, 0};
        if (!ready) (void)::poll(&p, 1, -1);
        std::unique_lock<std::mutex> g(mu_);
        if (quit_) return;
        reaping_ = true;
        poll_events();
        reaping_ = false;
        for (Operation *op : completed_) op->listed_ = false;
        batch_.insert(batch_.end(), completed_.begin(), completed_.end());
        completed_.clear();
        while (!batch_.empty() && !quit_) {
            Operation *op = batch_.front();
            batch_.pop_front();
            delivering_ = op;
            g.unlock();
            cb_(op);  // may free op: not touched afterwards
            g.lock();
            delivering_ = nullptr;
            cv_.notify_all();
        }
        // Before sleeping again: an answer due is polled for (and stepped next round).
        ready = !quit_ && answer_ready();
    }
}

void Queue::cancel(Operation *op) {
    std::lock_guard<std::mutex> g(mu_);
    end(op, TENSO_E_CANCELLED, "cancelled");
}

void Queue::forget(Operation *op) {
    std::unique_lock<std::mutex> g(mu_);
    if (!op->done) end(op, TENSO_E_CANCELLED, "cancelled");
    // A post or flush held up by a blocking call to its peer ends when the call lets go (it
    // notifies waiters, which wakes cv_); looked at every millisecond as well.
    while (!op->done) {
        cv_.wait_for(g, std::chrono::milliseconds(1));
        advance(op);
    }
    if (op->listed_) {
        completed_.erase(std::remove(completed_.begin(), completed_.end(), op), completed_.end());
        op->listed_ = false;
    }
    batch_.erase(std::remove(batch_.begin(), batch_.end(), op), batch_.end());
    // Its callback runs on the queue's thread: wait for it to return (unless this is it).
    while (delivering_ == op && std::this_thread::get_id() != thread_.get_id()) cv_.wait(g);
}

void Queue::close() {
    {
        std::lock_guard<std::mutex> g(mu_);
        closed_ = true;
        const std::vector<Operation *> all(inflight_.begin(), inflight_.end());
        for (Operation *op : all) end(op, TENSO_E_CANCELLED, "the completion queue was freed");
        // Not delivered: the operations stay their owners' to free.
        for (Operation *op : completed_) op->listed_ = false;
        completed_.clear();
        batch_.clear();
    }
    if (thread_.joinable()) {
        quit_ = true;
        signal();
        if (std::this_thread::get_id() == thread_.get_id()) thread_.detach();  // freed from its callback
        else thread_.join();
    }
}

void Queue::wake() {
    if (nwaking_.load() == 0) return;
    wake_pending_ = true;
    signal();
    cv_.notify_all();
}

void Queue::fail_all(int32_t st, const char *why) {
    std::lock_guard<std::mutex> g(mu_);
    const std::vector<Operation *> all(inflight_.begin(), inflight_.end());
    for (Operation *op : all) end(op, st, why);
}

}  // namespace tenso::net
