// node_impl.hpp - the node's shared state (Node::Impl) and what its parts share: the listener
// side (listener.cpp, inbound.cpp), the dialer (dialer.cpp), the pool (pool.cpp), the post
// streams (post.cpp) and the node's life (node.cpp). Private to impl/net.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <asio.hpp>

#include "error.hpp"
#include "format/decoder.hpp"
#include "net/control.hpp"
#include "net/node.hpp"
#include "net/socket.hpp"
#include "net/tls.hpp"

namespace tenso::net {

// A value published under a name (tenso_node_publish), shared by the gets that send it.
struct Published {
    std::unique_ptr<Value> value;
    void (*release)(void *) = nullptr;
    void *user = nullptr;
    std::unique_ptr<Plan> plan;  // encoded once; sends write its segments
    std::vector<iovec> iov;
    uint64_t size = 0;
    std::mutex memfd_mu;
    int memfd = -1;  // made the first time a Unix peer pulls it
    ~Published() {
        if (memfd >= 0) ::close(memfd);
        plan.reset();
        value.reset();
        if (release) release(user);
    }
};

inline Limits value_limits(const NodeOptions &o) {
    Limits l;
    l.max_packet_bytes = o.max_packet_bytes;
    return l;
}
inline Limits control_limits(const NodeOptions &o) {
    Limits l;
    l.max_packet_bytes = control_packet_limit(o.max_name_bytes);
    return l;
}
inline DecoderConfig decoder_config(const Limits &l) {
    DecoderConfig c;
    c.limits = l;
    return c;
}

// A dialed connection: checked out of the pool by one call at a time.
struct Outbound {
    Sock sock;
    Reader reader;
    Decoder ctl, val;
    Address addr;
    Clock::time_point idle_since;
    // Where a dial stands (dial_step): connecting, connected, in the TLS handshake, ready.
    enum Dialing { kConnecting, kConnected, kHandshake, kReady } dialing = kConnected;
    Outbound(const NodeOptions &o) : ctl(decoder_config(control_limits(o))), val(decoder_config(value_limits(o))) {}
};

// A listening socket, accepted from on the event loop.
struct Listener {
    Address addr;
    int fd = -1;
    std::unique_ptr<asio::posix::stream_descriptor> sd;
    std::string printable;
};

class Inbound;
class Queue;

// The node: its options, the event loop serving inbound connections, the receive queue,
// published values, the outbound pool and the post streams.
struct Node::Impl : std::enable_shared_from_this<Node::Impl> {
    NodeOptions opts;
    Limits vlim, clim;
    std::unique_ptr<Tls> tls;
    std::unique_ptr<asio::io_context> io{new asio::io_context};
    std::unique_ptr<asio::steady_timer> reaper;
    std::vector<std::thread> threads;
    std::vector<Listener> listeners;
    int stop_fd = -1, recv_fd = -1;
    std::atomic<bool> stopped{false};
    std::mutex stop_mu;

    // inbound connections
    std::mutex in_mu;
    std::set<std::shared_ptr<Inbound>> inbound;

    // the receive queue
    std::mutex q_mu;
    std::deque<std::unique_ptr<Message>> queue;
    uint64_t queued_bytes = 0;
    std::deque<std::weak_ptr<Inbound>> parked;  // pushes waiting for queue room
    // recv_fd is written once per batch of pushes, not once per push: enqueue notes that the
    // queue became non-empty (wake_pending), the connection's step calls wake() when it stops.
    // `signalled` (under q_mu): recv_fd holds a count, cleared when the queue empties.
    bool signalled = false;
    std::atomic<bool> wake_pending{false};
    void wake();

    // published values
    std::mutex pub_mu;
    std::map<std::string, std::shared_ptr<Published>> published;

    // the outbound pool
    struct Peer {
        std::vector<std::unique_ptr<Outbound>> idle;
        uint32_t busy = 0;
    };
    std::mutex pool_mu;
    std::map<std::string, Peer> pool;
    // Notified (under pool_mu) when a connection comes back or goes (checkin, discard) and at
    // stop: what a checkout at the per-peer maximum waits for.
    std::condition_variable pool_cv;
    // pipelined pushes, per peer (tenso_node_post / tenso_node_flush); under pool_mu
    struct PostStream;
    std::map<std::string, std::shared_ptr<PostStream>> streams;
    std::shared_ptr<PostStream> post_stream(const Address &a);
    // The same by the address text, parsed once.
    std::map<std::string, std::shared_ptr<PostStream>> stream_of_text;
    std::shared_ptr<PostStream> post_stream(const std::string &text);
    void stop_streams();
    // The completion-based posts and flushes waiting on the stream (under its lock): moved on
    // (the calling thread waits as a blocking call), or all failed with st.
    void post_backlog(PostStream &s, const Waker &w, const Deadline &d);
    void fail_backlog(PostStream &s, int32_t st, const char *why);
    // Writes a stream's buffered posts soon after a post leaves them (see PostStream).
    void arm_idle_flush(const std::weak_ptr<PostStream> &ws);
    void idle_flush(const std::weak_ptr<PostStream> &ws);
    template <class F>
    void on_stream(PostStream &s, F &&f);

    uint64_t bytes_sent = 0, bytes_received = 0;  // atomically updated
    std::atomic<uint64_t> opened{0}, reused{0}, refused{0};
    std::atomic<uint64_t> tls_kernel{0}, tls_user{0};  // TLS connections by who encrypts (kTLS or OpenSSL)
    std::atomic<uint32_t> calls{0};

    // completion queues (completion.cpp): those of this node, and how many of their operations
    // wait for a pool slot or a post stream (notify_waiters wakes them when one comes free).
    std::mutex queues_mu;
    std::vector<std::weak_ptr<Queue>> queues;
    std::atomic<uint32_t> async_waiting{0};
    std::atomic<uint64_t> wake_gen{0};  // counts notify_waiters calls (see Queue::wait_for)
    void notify_waiters();
    void stop_queues();  // at stop: the operations in flight fail with TENSO_E_SHUTDOWN

    // node.cpp
    void start();
    void stop();
    // listener.cpp
    std::vector<Address> listen_addresses() const;  // opts.listen, parsed
    void bind_listeners(const std::vector<Address> &addrs);
    void accept_next(Listener &l);
    void on_accept(Listener &l);
    void refuse_over_limit(int fd);
    // The queue: true when it took the message; false when full (the caller parks).
    // A full queue parks `who` (resumed when a receive makes room) and returns false.
    bool enqueue(std::unique_ptr<Message> &m, const std::shared_ptr<Inbound> &who);
    // The oldest received push, or null when none waits (resumes the parked connections).
    std::unique_ptr<Message> try_receive();
    // pool.cpp
    void reap();  // closes pooled connections idle for idle_timeout_ms, on a timer
    std::unique_ptr<Outbound> checkout(const Address &a, const Waker &w, const Deadline &d);
    // Without waiting: kIdle (*c is a pooled connection), kDial (a slot is taken: dial, and
    // give it back with discard or release_slot on failure) or kFull (max_connections busy).
    enum class Slot { kIdle, kDial, kFull };
    Slot try_checkout(const Address &a, std::unique_ptr<Outbound> *c);
    void release_slot(const Address &a);
    void checkin(std::unique_ptr<Outbound> c);
    void discard(std::unique_ptr<Outbound> c);  // a connection out of step: closed
    // dialer.cpp
    std::unique_ptr<Outbound> dial(const Address &a, const Waker &w, const Deadline &d);
    Control call(Outbound &c, Outgoing &out, const Waker &w, const Deadline &d);
    std::unique_ptr<View> read_value(Outbound &c, const Control &reply, const Waker &w, const Deadline &d);
    // The steps of the three above, which never wait (the completion-based calls drive them):
    // kDone when finished, else what to wait for on the connection's descriptor.
    std::unique_ptr<Outbound> dial_start(const Address &a);
    Io dial_step(Outbound &c);
    // After out.start(). read_at_once false: once the request is written, wait for the reply
    // before reading (the read right after a write finds nothing: a syscall saved).
    Io call_step(Outbound &c, Outgoing &out, Control *reply, bool read_at_once = true);
    Io read_value_step(Outbound &c, const Control &reply, std::unique_ptr<View> *out);
};

// ---- what every call shares ---------------------------------------------------------------

// Counts a call in flight so that the destructor waits for it to leave.
struct CallScope {
    Node::Impl &n;
    explicit CallScope(Node::Impl &i) : n(i) {
        n.calls.fetch_add(1);
        if (n.stopped) {
            n.calls.fetch_sub(1);
            fail(TENSO_E_SHUTDOWN, "the node is shut down");
        }
    }
    ~CallScope() { n.calls.fetch_sub(1); }
};
// Wakes the completion-based calls waiting for what the scope held (a post stream's lock) when
// it ends: declared before the lock, so that it runs after the unlock.
struct NotifyOnExit {
    Node::Impl &n;
    ~NotifyOnExit() { n.notify_waiters(); }
};
inline void check_name(const std::string &name, const NodeOptions &o) {
    if (name.empty() || name.size() > o.max_name_bytes)
        fail(TENSO_E_INVALID_ARGUMENT, "a name is 1.." + std::to_string(o.max_name_bytes) + " bytes");
}
inline uint64_t effective(uint64_t timeout_ms, const NodeOptions &o) { return timeout_ms == 0 ? o.io_timeout_ms : timeout_ms; }
// What every outbound call starts with: counted in flight, its name and address checked, its
// deadline fixed, and a first look at the cancel token and the stop descriptor.
struct Call {
    CallScope scope;
    Address addr;
    Waker w;
    Deadline d;
    Call(Node::Impl &n, const std::string &address, const std::string &name, uint64_t timeout_ms, Cancel *cancel)
        : scope(n), addr((check_name(name, n.opts), parse_address(address, false))), w{n.stop_fd, cancel, &n.stopped},
          d(Deadline::in(effective(timeout_ms, n.opts))) {
        w.check();
    }
};

// A push ready to write: its control frame and segments, and what they point into.
struct PreparedPush {
    Outgoing out;
    std::unique_ptr<Plan> plan;
    int own_fd = -1;  // a memfd made for the Unix fast path
    PreparedPush() = default;
    PreparedPush(const PreparedPush &) = delete;
    PreparedPush &operator=(const PreparedPush &) = delete;
    ~PreparedPush() {
        if (own_fd >= 0) ::close(own_fd);
    }
};

// The push of p to a: encoded (a value), read from its descriptor (not a Unix peer) or passed as
// a descriptor (a Unix peer; a memfd made for a large packet).
void prepare_push(PreparedPush &pp, const Address &a, const std::string &name, const Payload &p, const NodeOptions &o);

}  // namespace tenso::net
