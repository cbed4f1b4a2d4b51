// completion.hpp - completion-based calls (tenso/net.h: tenso_node_queue_*, tenso_node_*_start,
// tenso_node_op_*): an operation is a state machine that never blocks (Operation::step), driven by the
// completion queue it was started on (Queue). The queue's descriptor is an epoll instance
// holding the descriptors its operations wait for (their sockets, the receive descriptor), a
// timerfd for their deadlines and an eventfd for completions made elsewhere (cancel, shutdown,
// another thread finishing a post ahead of them). Whoever reaps the queue runs the steps, so an
// outbound call needs no thread of the node's: the caller's event loop does its I/O.
//
// The steps are the blocking calls' own (dial_step, call_step, read_value_step, the post
// stream's drain and read_acks with block = false); ops.cpp holds send, request and receive,
// post.cpp the posts and flushes, which keep their peer's order with the blocking ones.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "net/node_impl.hpp"

namespace tenso::net {

// Inside a catch block: the status and message of the exception being handled (an operation
// ends with a status whatever its step threw).
int32_t current_status(std::string *m);

// What an operation waits for when a step cannot go on.
struct Want {
    enum Kind { kDone, kFd, kWake } kind = kDone;
    int fd = -1;
    uint32_t events = 0;  // EPOLLIN / EPOLLOUT
    bool answer = false;  // the peer's answer to what was written whole: busy polled for
    static Want done() { return Want{}; }
    // The connection fd until r (kWantRead or kWantWrite) no longer holds.
    static Want io(int fd, Io r);
    static Want readable(int fd);
    // io(fd, r), the answer to a request written whole when r is kWantRead.
    static Want answer_on(int fd, Io r) {
        Want w = io(fd, r);
        w.answer = r == Io::kWantRead;
        return w;
    }
    // Until notify_waiters (a pool slot or the post stream came free), or the deadline.
    static Want wake() {
        Want w;
        w.kind = kWake;
        return w;
    }
};

// One call in flight (a tenso_node_op is a tenso::net::Operation). Made by a start function, owned by
// the caller; its queue steps it under the queue's lock until it completes.
class Operation {
public:
    enum Kind { kSend, kPost, kFlush, kRequest, kReceive };
    // timeout_ms: the call's, resolved (UINT64_MAX: none); the deadline counts from the first
    // wait (a start's steps take microseconds), which saves the clock read of calls done at once.
    Operation(Kind k, void *p, uint64_t timeout_ms) : kind(k), payload(p), timeout_ms_(timeout_ms) {}
    virtual ~Operation() = default;
    Operation(const Operation &) = delete;
    Operation &operator=(const Operation &) = delete;

    // Runs until it must wait, never blocking; kDone when it has succeeded. Throws Error to
    // fail. A set stop status (cancel, deadline, shutdown) makes it end with that status, as
    // soon as it may (a post behind a blocking call to its peer: when that call lets go).
    virtual Want step(Node::Impl &n) = 0;
    // Once, when it has completed (succeeded or failed): gives back what it holds.
    virtual void finish(Node::Impl &, int32_t /*status*/) noexcept {}

    const Kind kind;
    void *const payload;

    // The result (written before done is set, under the queue's lock).
    std::atomic<bool> done{false};
    int32_t status = 0;
    std::string message;
    std::unique_ptr<View> view;    // a request's value
    std::unique_ptr<Message> msg;  // a received push

    // Why it must end now (0: it need not), with a message (a string literal): set by the queue
    // or a stopping node, read by steps that may run on another thread (a blocking post driving
    // the posts ahead of it). The first request wins.
    std::atomic<int32_t> stop{0};
    void request_stop(int32_t st, const char *why) {
        const char *none = nullptr;
        if (why_.compare_exchange_strong(none, why)) stop.store(st);
    }
    // Throws the stop status when one is set.
    void check_stop() const {
        const int32_t st = stop.load();
        if (st) fail(st, why_.load());
    }

    uint64_t timeout_ms() const { return timeout_ms_; }
    // The queue it was started on (set by Queue::start).
    Queue *queue() const { return queue_; }

private:
    friend class Queue;
    std::atomic<const char *> why_{nullptr};
    uint64_t timeout_ms_;
    Deadline deadline_;  // once it first waits
    Queue *queue_ = nullptr;
    std::shared_ptr<Queue> keep_;  // the queue stays while the op does
    int watch_fd_ = -1;            // the descriptor it waits for, if any
    uint32_t watch_events_ = 0;
    bool answer_ = false;  // its watch is for an answer (Want::answer)
    bool waking_ = false;  // waits for notify_waiters
    bool timed_ = false;
    std::multimap<Clock::time_point, Operation *>::iterator timer_;
    bool listed_ = false;  // in the queue's completions, not reaped yet
};

// A completion queue (tenso_node_queue): the operations started on it, their waits and their
// completions. Descriptor mode: the caller reaps (tenso_node_queue_reap) when fd() is readable.
// Callback mode: a thread of the queue's waits on fd() and calls the callback per completion.
class Queue : public std::enable_shared_from_this<Queue> {
public:
    using Callback = std::function<void(Operation *)>;
    static std::shared_ptr<Queue> make(const std::shared_ptr<Node::Impl> &n, Callback cb);
    ~Queue();
    Queue(const Queue &) = delete;
    Queue &operator=(const Queue &) = delete;

    int fd() const { return ep_; }
    bool callback_mode() const { return bool(cb_); }
    Node::Impl &node() const { return *n_; }

    // Makes an operation (make() may throw: then none is started) and runs its first steps on
    // the calling thread, counted as a call of the node. Completed at once (op->done): not
    // delivered. The caller owns the operation.
    template <class Make>
    Operation *launch(Make &&make) {
        const CallScope scope(*n_);
        std::unique_ptr<Operation> op = make();
        start(op.get());
        return op.release();
    }
    // Descriptor mode: runs what is ready and moves up to cap completions to out, oldest first;
    // waits up to timeout_ms (UINT64_MAX: no deadline) for at least one.
    size_t reap(Operation **out, size_t cap, uint64_t timeout_ms);
    // Ends op with TENSO_E_CANCELLED (unless it completes first): at once, or, for a post or
    // flush held up by a blocking call to its peer, when that call lets go of the peer.
    void cancel(Operation *op);
    // Before the caller deletes op: cancels it if in flight and waits until the node no longer
    // uses it, and forgets it (its completion is not delivered).
    void forget(Operation *op);
    // The handle is freed: the operations in flight are cancelled, the callback thread stops.
    void close();

    // A completion made on a thread that holds no queue lock (a blocking post that drove op).
    static void complete_elsewhere(Operation *op, int32_t st, const std::string &m);
    // notify_waiters: retry the operations waiting for a wake.
    void wake();
    // At the node's stop: every operation in flight fails with st.
    void fail_all(int32_t st, const char *why);

private:
    Queue(const std::shared_ptr<Node::Impl> &n, Callback cb);
    void start(Operation *op);
    void run_callbacks();
    // Under mu_:
    void poll_events();           // epoll_wait(0) and the steps it allows
    void advance(Operation *op);  // steps op; completes it or registers its wait
    void wait_for(Operation *op, const Want &w);
    void unwait(Operation *op);
    void complete(Operation *op, int32_t st, std::string m, bool deliver);
    void end(Operation *op, int32_t st, const char *why);  // request_stop + advance
    void arm_timer();
    void signal();
    // Busy polls the queue's descriptor (the node's BusyPoll) while an operation waits for an
    // answer; true when something became ready (the caller then steps it). Under mu_.
    bool answer_ready();

    std::shared_ptr<Node::Impl> n_;
    Callback cb_;
    int ep_ = -1, event_fd_ = -1, timer_fd_ = -1;
    std::mutex mu_;
    std::condition_variable cv_;                       // forget() waits here for a callback or a stream
    std::map<int, std::vector<Operation *>> watches_;  // fd -> ops waiting for it (EPOLLONESHOT)
    std::multimap<Clock::time_point, Operation *> timers_;
    Clock::time_point timer_at_ = Clock::time_point::max();
    std::vector<Operation *> waking_;
    std::atomic<uint32_t> nwaking_{0};
    uint32_t answering_ = 0;  // operations whose watch is for an answer
    std::atomic<bool> wake_pending_{false};
    Operation *starting_ = nullptr;  // the op whose start runs now: its completion is not delivered
    // Whether op's completion now is delivered: always in callback mode (the caller cannot tell
    // a completion within the start from one on the queue's thread just after it), else unless
    // it completes within its start.
    bool delivers(const Operation *op) const { return cb_ || op != starting_; }
    bool reaping_ = false;  // completions made now are collected by this reap: no signal
    std::deque<Operation *> completed_;
    std::unordered_set<Operation *> inflight_;  // every op started and not completed (for cancel-all)
    bool closed_ = false;
    // callback mode
    std::thread thread_;
    std::atomic<bool> quit_{false};
    Operation *delivering_ = nullptr;  // whose callback runs now
    std::deque<Operation *> batch_;    // completions taken for callbacks, not called yet
};

// The operations (ops.cpp, post.cpp). Arguments are checked here (a failure throws and no
// operation is made); a send encodes its value here, a post when it is first in line (a value
// that does not encode fails that post). The value (and what it borrows) stays in use until
// the operation completes.
std::unique_ptr<Operation> make_send(Node::Impl &n, const std::string &addr, const std::string &name, const Value &v,
                                     uint64_t timeout_ms, void *payload);
std::unique_ptr<Operation> make_request(Node::Impl &n, const std::string &addr, const std::string &name,
                                        uint64_t timeout_ms, void *payload);
std::unique_ptr<Operation> make_receive(Node::Impl &n, uint64_t timeout_ms, void *payload);
std::unique_ptr<Operation> make_post(Node::Impl &n, const std::string &addr, const std::string &name, const Value &v,
                                     uint64_t timeout_ms, void *payload);
std::unique_ptr<Operation> make_flush(Node::Impl &n, const std::string &addr, uint64_t timeout_ms, void *payload);

}  // namespace tenso::net
