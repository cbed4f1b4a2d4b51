// post.cpp - pipelined pushes (tenso_node_post / tenso_node_flush): one connection per peer,
// small posts buffered and written together, acknowledgements read as they come.
#include "net/node_impl.hpp"

#include <algorithm>
#include <cstring>

#include <poll.h>
#include <sys/epoll.h>

#include "net/completion.hpp"

namespace tenso::net {

class StreamOp;

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
    // Set under mu and line_mu: the reaper took the stream out of the node's maps (idle,
    // nothing owed, nobody in line); a caller that fetched it before looks it up again.
    bool retired = false;
    Clock::time_point last_use = Clock::now();
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
    // Completion-based posts and flushes waiting their turn, oldest first. The first may be
    // part way (dialing the connection, or a large post partly written): whoever holds mu
    // moves them on (post_backlog) before it writes anything of its own. An operation joins
    // it when it starts, under line_mu alone (held for a few instructions, inside mu when
    // both are held), since mu may be held by a blocking post or the idle flush: joining only
    // once it held mu let a later start that found mu free overtake one that did not.
    // Entries leave under both.
    std::mutex line_mu;
    std::deque<StreamOp *> pending;
    bool in_line() {
        std::lock_guard<std::mutex> g(line_mu);
        return !pending.empty();
    }
    StreamOp *first_in_line() {
        std::lock_guard<std::mutex> g(line_mu);
        return pending.empty() ? nullptr : pending.front();
    }
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
    // A flush's result: the first failure noted since the last flush (thrown, and forgotten).
    void report_noted() {
        const int32_t st = first_status;
        const std::string m = first_message;
        first_status = 0;
        first_message.clear();
        if (st != 0) fail(st, m);
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
    if (s.acked == s.written && !block) {
        // Nothing is owed: input now (the socket woke a wait for room) is a peer writing unasked
        // or closing. Left unread it would wake every such wait again: a spin until the deadline.
        std::unique_ptr<View> v;
        const Io r = c.reader.frame(c.sock, c.ctl, &v);
        if (r == Io::kEof) fail(TENSO_E_CONNECTION, "the peer closed the connection");
        if (r == Io::kDone || !c.ctl.idle() || c.reader.pos != c.reader.end)
            fail(TENSO_E_MALFORMED, "the peer wrote without being asked");
        return;
    }
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
        // No busy polling here (Waker::wait_answer): a post stream is throughput-bound, and a
        // spinning sender takes a CPU from the receiver it waits for.
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

std::shared_ptr<Node::Impl::PostStream> Node::Impl::lock_stream(const std::string &text,
                                                                std::unique_lock<std::mutex> *g) {
    for (;;) {
        std::shared_ptr<PostStream> sp = post_stream(text);
        *g = std::unique_lock<std::mutex>(sp->mu);
        if (!sp->retired) return sp;
        g->unlock();
    }
}

// On the reaper's timer: a stream idle for idle_timeout_ms with nothing owed (acknowledgements
// that came are read now) gives its connection back to the pool and leaves the node's maps, so
// a node that posted to many peers keeps nothing for them. One with a failure flush has not
// reported yet stays until that flush. A stream a caller holds is left for the next round.
void Node::Impl::reap_streams() {
    std::vector<std::shared_ptr<PostStream>> all;
    {
        std::lock_guard<std::mutex> g(pool_mu);
        for (auto &e : streams) all.push_back(e.second);
    }
    const auto limit =
        Clock::now() - std::chrono::milliseconds(std::min<uint64_t>(opts.idle_timeout_ms, uint64_t(1) << 40));
    const Waker w{stop_fd, nullptr, &stopped};  // unused: read_acks(block false) never waits
    for (auto &sp : all) {
        PostStream &s = *sp;
        std::unique_lock<std::mutex> g(s.mu, std::try_to_lock);
        // Completion-based posts or flushes in line keep it (they hold it until they are done).
        if (!g.owns_lock() || s.last_use > limit || s.buf_at < s.buf.size() || s.in_line()) continue;
        if (s.conn && s.written > s.acked) {
            try {
                on_stream(s, [&] { read_acks(s, opts, false, w, Deadline::in(0)); });
            } catch (const Error &) {
                // noted by on_stream, for flush
            }
        }
        if (s.unacked() > 0 || s.first_status != 0) continue;
        {
            // An operation that joins the line now finds the stream retired and looks again.
            std::lock_guard<std::mutex> l(s.line_mu);
            if (!s.pending.empty()) continue;
            s.retired = true;
        }
        if (s.conn) {
            s.reset();
            checkin(std::move(s.conn));
        }
        g.unlock();
        std::lock_guard<std::mutex> p(pool_mu);
        auto it = streams.find(s.addr.key());
        if (it != streams.end() && it->second == sp) streams.erase(it);
        for (auto t = stream_of_text.begin(); t != stream_of_text.end();)
            t = t->second == sp ? stream_of_text.erase(t) : std::next(t);
    }
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
    const NotifyOnExit notify{*this};
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
        fail_backlog(*sp, TENSO_E_SHUTDOWN, "the node is shut down");
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

namespace {
// What post and flush start with: counted in flight, the name checked (a post's), the deadline
// fixed, a first look at the cancel token and the stop descriptor, and the peer's stream locked.
// Its end wakes the completion-based calls waiting for the stream (notify: after the unlock).
struct StreamCall {
    CallScope scope;
    NotifyOnExit notify;
    Waker w;
    Deadline d;
    std::unique_lock<std::mutex> g;
    std::shared_ptr<Node::Impl::PostStream> sp;
    StreamCall(Node::Impl &n, const std::string &addr, const std::string *name, uint64_t timeout_ms, Cancel *cancel)
        : scope(n), notify{n}, w{n.stop_fd, cancel, &n.stopped}, d(Deadline::in(effective(timeout_ms, n.opts))) {
        if (name) check_name(*name, n.opts);
        w.check();
        sp = n.lock_stream(addr, &g);
        sp->last_use = Clock::now();
    }
};
}  // namespace

void Node::post(const std::string &addr, const std::string &name, const Payload &p, uint64_t timeout_ms,
                Cancel *cancel) {
    Impl &n = *impl_;
    StreamCall call(n, addr, &name, timeout_ms, cancel);
    const Waker &w = call.w;
    const Deadline &d = call.d;
    const std::shared_ptr<Impl::PostStream> &sp = call.sp;
    Impl::PostStream &s = *sp;
    const Address *a = &s.addr;
    // A shutdown that began while we waited for the lock has written or failed the buffer
    // already: nothing may be added to it now.
    w.check();
    n.post_backlog(s, w, d);
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
    StreamCall call(n, addr, nullptr, timeout_ms, cancel);
    const Waker &w = call.w;
    const Deadline &d = call.d;
    Impl::PostStream &s = *call.sp;
    n.post_backlog(s, w, d);
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
    s.report_noted();
}

// ---- completion-based posts and flushes ----------------------------------------------------
//
// A post or flush started on a completion queue takes its place among the posts to its peer
// when it starts: it joins the stream's `pending` and, first in line and the stream free, is
// tried at once (a small post is then done when it returns, as a blocking one is); otherwise it
// is moved on, first in first out, by its queue's steps (which only try the stream's lock) or by
// a blocking post or flush, which drives those ahead of it before its own (post_backlog).

class StreamOp : public Operation {
public:
    StreamOp(Kind k, void *user, uint64_t timeout_ms, Node::Impl &n, const std::string &addr)
        : Operation(k, user, timeout_ms), addr_(addr), sp(n.post_stream(addr)) {}
    const std::string addr_;  // as the caller gave it: the stream is looked up again if retired
    std::shared_ptr<Node::Impl::PostStream> sp;

    Want step(Node::Impl &n) override {
        const NotifyOnExit notify{n};  // after the unlock: the next one may go on
        // The first step runs within the start: the operation takes its place in line now,
        // whoever holds the stream. The reaper retires only streams with nobody in line, so
        // one retired before it joined is left for the peer's current stream (as lock_stream).
        while (!queued_) {
            {
                std::lock_guard<std::mutex> l(sp->line_mu);
                if (!sp->retired) {
                    sp->pending.push_back(this);
                    queued_ = true;
                    break;
                }
            }
            sp = n.post_stream(addr_);
        }
        std::unique_lock<std::mutex> g(sp->mu, std::try_to_lock);
        if (!g.owns_lock()) return Want::wake();
        sp->last_use = Clock::now();
        return run(n);
    }

    // Under the stream's lock, in line.
    Want run(Node::Impl &n) {
        Node::Impl::PostStream &s = *sp;
        if (stop.load()) {
            leave(n);
            check_stop();
        }
        if (s.first_in_line() != this) return Want::wake();
        Want w;
        try {
            w = advance(n, s);
        } catch (...) {
            leave(n);
            throw;
        }
        if (w.kind == Want::kDone) leave(n);
        return w;
    }

protected:
    // At the front of the stream: goes on without waiting.
    virtual Want advance(Node::Impl &n, Node::Impl::PostStream &s) = 0;
    // Leaves the stream (done, failed or stopped): what it holds part way is given back.
    // `first`: it was first in line, the only place where it can have used the connection.
    virtual void abandon(Node::Impl &, bool /*first*/) {}
    // The stream's connection, dialed when it has none; null while the dial goes on (*w says
    // what it waits for).
    Outbound *connection(Node::Impl &n, Node::Impl::PostStream &s, Want *w) {
        if (s.conn) return s.conn.get();
        if (!dialing_) {
            std::unique_ptr<Outbound> c;
            const Node::Impl::Slot slot = n.try_checkout(s.addr, &c);
            if (slot == Node::Impl::Slot::kFull) {
                *w = Want::wake();
                return nullptr;
            }
            if (slot == Node::Impl::Slot::kIdle) {
                s.conn = std::move(c);
                return s.conn.get();
            }
            try {
                dialing_ = n.dial_start(s.addr, Waker{n.stop_fd, nullptr, &n.stopped}, Deadline::in(timeout_ms()));
            } catch (...) {
                n.release_slot(s.addr);
                throw;
            }
        }
        const Io r = n.dial_step(*dialing_);
        if (r != Io::kDone) {
            *w = Want::io(dialing_->sock.fd, r);
            return nullptr;
        }
        s.conn = std::move(dialing_);
        return s.conn.get();
    }
    // Waits for the connection to take bytes (and reads acknowledgements meanwhile).
    static Want room(const Outbound &c) {
        Want w = Want::io(c.sock.fd, Io::kWantWrite);
        w.events |= EPOLLIN;
        return w;
    }

private:
    bool queued_ = false;
    std::unique_ptr<Outbound> dialing_;

    void leave(Node::Impl &n) {
        Node::Impl::PostStream &s = *sp;
        bool first = false;
        if (queued_) {
            std::lock_guard<std::mutex> l(s.line_mu);
            first = s.pending.front() == this;
            s.pending.erase(std::find(s.pending.begin(), s.pending.end(), this));
            queued_ = false;
        }
        if (dialing_) n.discard(std::move(dialing_));
        abandon(n, first);
    }
};

namespace {

class PostOp : public StreamOp {
public:
    PostOp(void *user, uint64_t timeout_ms, Node::Impl &n, const std::string &addr)
        : StreamOp(kPost, user, timeout_ms, n, addr) {}
    std::string name;
    const Value *value = nullptr;  // borrowed until it completes

protected:
    Want advance(Node::Impl &n, Node::Impl::PostStream &s) override {
        Want w;
        Outbound *c = connection(n, s, &w);
        if (!c) return w;
        const NodeOptions &o = n.opts;
        // Encoded into the stream's reused plan, outside on_stream (as the blocking post): a
        // value that does not encode fails this post alone. Nothing else uses the plan while
        // this post is first in line.
        if (!decided_) {
            s.plan.clear();
            s.plan.add(*value);
            size_ = s.plan.size();
            const bool as_fd = s.addr.scheme == Address::kUnix && !o.no_fd_passing && size_ >= o.fd_passing_min_bytes;
            small_ = !as_fd && s.push_head(name, size_).size() + size_ <= Node::Impl::PostStream::kSmallPost;
            if (!small_) {
                // The reused plan keeps no large value's memory (see the blocking post).
                s.plan = Plan{EncodeOptions{}, false};
                Payload p;
                p.value = std::shared_ptr<const Value>(value, [](const Value *) {});
                prepare_push(large_, s.addr, name, p, o);
            }
            decided_ = planned_ = true;
        }
        const Waker nw{n.stop_fd, nullptr, &n.stopped};  // never waited on (block = false)
        const Deadline nd{};
        n.on_stream(s, [&] {
            w = Want::done();
            // Waits for room on the socket, reading the acknowledgements the peer may be
            // blocked on meanwhile.
            auto wait_room = [&] {
                read_acks(s, o, false, nw, nd);
                w = room(*c);
            };
            // The bound on unacknowledged posts, as the blocking post's.
            const uint64_t bound = std::max<uint64_t>(1, o.max_queued);
            while (!started_ && s.unacked() >= bound) {
                if (!drain(s, o, false, nw, nd)) return wait_room();
                read_acks(s, o, false, nw, nd);
                if (s.unacked() >= bound) return void(w = Want::readable(c->sock.fd));
            }
            if (small_) {
                if (s.buf.size() - s.buf_at >= Node::Impl::PostStream::kPostBuffer && !drain(s, o, false, nw, nd))
                    return wait_room();
                if (!planned_) {  // it waited: the plan is encoded again (the same bytes)
                    s.plan.clear();
                    s.plan.add(*value);
                }
                const std::vector<uint8_t> &head = s.push_head(name, size_);
                size_t at = s.buf.size();
                const size_t need = at + head.size() + size_t(size_);
                if (need > s.buf.capacity())
                    s.buf.reserve(std::min(std::max(need, 2 * s.buf.capacity()),
                                           Node::Impl::PostStream::kPostBuffer + Node::Impl::PostStream::kSmallPost));
                s.buf.resize(need);
                std::memcpy(s.buf.data() + at, head.data(), head.size());
                at += head.size();
                if (s.plan.write_to(s.buf.data() + at) != size_)
                    fail(TENSO_E_INTERNAL, "a plan wrote other than its size");
                s.ends.push_back(at + size_t(size_));
                ++s.posted;
                if (s.buf.size() - s.buf_at >= Node::Impl::PostStream::kPostBuffer) drain(s, o, false, nw, nd);
                if (s.buf_at < s.buf.size() && !s.idle_armed) {
                    s.idle_armed = true;
                    Node::Impl *ip = &n;
                    asio::post(*n.io, [ip, ws = std::weak_ptr<Node::Impl::PostStream>(sp)] { ip->arm_idle_flush(ws); });
                }
                return;
            }
            // Large: the buffered posts first, then its frames straight from its memory. While
            // it is part way nothing else is written on the connection (it is first in line).
            if (!started_) {
                if (!drain(s, o, false, nw, nd)) return wait_room();
                ++s.posted;
                large_.out.start();
                started_ = true;
            }
            const Io r = large_.out.pump(c->sock);
            if (r != Io::kDone) {
                read_acks(s, o, false, nw, nd);
                w = Want::io(c->sock.fd, r);
                w.events |= EPOLLIN;
                return;
            }
            ++s.written;
            started_ = false;
        });
        if (w.kind != Want::kDone) planned_ = false;
        return w;
    }

    // A large post stopped part way leaves its frame unfinished: the connection is dropped and
    // the posts it owed an acknowledgement fail, as after any failure on it.
    void abandon(Node::Impl &n, bool) override {
        if (!started_) return;  // only the first in line starts
        started_ = false;
        Node::Impl::PostStream &s = *sp;
        if (s.unacked() > 0) s.note(stop.load() ? stop.load() : TENSO_E_CONNECTION, "a post was stopped part way");
        s.reset();
        if (s.conn) n.discard(std::move(s.conn));
    }

private:
    bool decided_ = false, small_ = false, planned_ = false, started_ = false;
    uint64_t size_ = 0;
    PreparedPush large_;
};

class FlushOp : public StreamOp {
public:
    FlushOp(void *user, uint64_t timeout_ms, Node::Impl &n, const std::string &addr)
        : StreamOp(kFlush, user, timeout_ms, n, addr) {}

protected:
    Want advance(Node::Impl &n, Node::Impl::PostStream &s) override {
        Want w = Want::done();
        if (s.conn) {
            const Waker nw{n.stop_fd, nullptr, &n.stopped};  // never waited on
            const Deadline nd{};
            try {
                n.on_stream(s, [&] {
                    Outbound &c = *s.conn;
                    const bool written = drain(s, n.opts, false, nw, nd);
                    read_acks(s, n.opts, false, nw, nd);
                    if (!written) return void(w = room(c));
                    if (s.acked < s.posted) w = Want::readable(c.sock.fd);
                });
            } catch (const Error &) {
                // Reported below as the first failure among the posts.
            }
            if (w.kind != Want::kDone) return w;
            if (s.conn) {
                s.reset();
                n.checkin(std::move(s.conn));
            }
        }
        s.report_noted();
        return w;
    }

    // Stopped while it waited for acknowledgements: as the blocking flush, the connection is
    // closed and the posts still unacknowledged fail (this flush reports it). Stopped while
    // still behind others in line, it only leaves the line: the connection is theirs (a large
    // post ahead may be part way through its frame).
    void abandon(Node::Impl &n, bool first) override {
        Node::Impl::PostStream &s = *sp;
        if (!first || !stop.load() || !s.conn || s.unacked() == 0) return;
        s.reset();
        n.discard(std::move(s.conn));
    }
};

}  // namespace

void Node::Impl::post_backlog(PostStream &s, const Waker &w, const Deadline &d) {
    // Those in line when the caller got the stream go first; ones started since go after it.
    // Only the holder of mu takes them out of line, so `last` stays in line until run here.
    StreamOp *last = nullptr;
    {
        std::lock_guard<std::mutex> l(s.line_mu);
        if (s.pending.empty()) return;
        last = s.pending.back();
    }
    for (;;) {
        StreamOp *op = s.first_in_line();
        const bool final = op == last;
        Want want;
        int32_t st = TENSO_OK;
        std::string m;
        try {
            want = op->run(*this);
        } catch (...) {
            st = current_status(&m);
        }
        if (st != TENSO_OK || want.kind == Want::kDone) {
            Queue::complete_elsewhere(op, st, m);
            if (final) return;
        } else if (want.kind == Want::kFd)
            w.wait(want.fd, short(((want.events & EPOLLIN) ? POLLIN : 0) | ((want.events & EPOLLOUT) ? POLLOUT : 0)),
                   d);
        else w.pause(1);  // it dials and the peer's connections are all busy
    }
}

void Node::Impl::fail_backlog(PostStream &s, int32_t st, const char *why) {
    while (StreamOp *op = s.first_in_line()) {
        op->request_stop(st, why);
        try {
            op->run(*this);  // leaves the stream and throws the stop status
        } catch (const Error &e) {
            Queue::complete_elsewhere(op, e.status(), e.what());
            continue;
        } catch (...) {}
        Queue::complete_elsewhere(op, st, why);
    }
}

std::unique_ptr<Operation> make_post(Node::Impl &n, const std::string &addr, const std::string &name, const Value &v,
                                     uint64_t timeout_ms, void *payload) {
    check_name(name, n.opts);
    std::unique_ptr<PostOp> op(new PostOp(payload, effective(timeout_ms, n.opts), n, addr));
    op->name = name;
    op->value = &v;
    return op;
}

std::unique_ptr<Operation> make_flush(Node::Impl &n, const std::string &addr, uint64_t timeout_ms, void *payload) {
    return std::unique_ptr<Operation>(new FlushOp(payload, effective(timeout_ms, n.opts), n, addr));
}

}  // namespace tenso::net
