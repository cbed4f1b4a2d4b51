// node_impl.hpp - the node's shared state (Node::Impl) and what its parts share: the listener
// side (listener.cpp, inbound.cpp), the dialer (dialer.cpp), the pool (pool.cpp), the post
// streams (post.cpp) and the node's life (node.cpp). Private to impl/net.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
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

// A value a request pulls: max_packet_bytes, and what decoding it allocates within the same.
inline Limits value_limits(const NodeOptions &o) {
    Limits l;
    l.max_packet_bytes = o.max_packet_bytes;
    l.max_decoded_bytes = o.max_packet_bytes;
    return l;
}
// A pushed value: it must fit the receive queue's budget decoded, so max_queued_bytes bounds
// its packet and what decoding it allocates.
inline Limits push_limits(const NodeOptions &o) {
    Limits l = value_limits(o);
    l.max_packet_bytes = std::min(o.max_packet_bytes, o.max_queued_bytes);
    l.max_decoded_bytes = o.max_queued_bytes;
    return l;
}
inline Limits control_limits(const NodeOptions &o) {
    Limits l;
    l.max_packet_bytes = control_packet_limit(o.max_name_bytes);
    return l;
}
inline DecoderConfig decoder_config(const Limits &l, bool frame_only = false) {
    DecoderConfig c;
    c.limits = l;
    c.frame_only = frame_only;
    return c;
}

// The rules of inbound connections (docs/net-protocol.md, "Deadlines and slots").
// A connection is unauthenticated until its TLS handshake has made its peer trusted, or, on a
// plaintext listener, until its first control frame: it then holds one of pre_auth_slots(), for
// at most pre_auth_ms(); a newcomer finding them all taken closes the oldest, if that one has
// held its slot a tenth of pre_auth_ms() (20 ms..1 s), else waits in the listen backlog.
inline uint32_t pre_auth_slots(const NodeOptions &o) { return std::max<uint32_t>(4, o.max_connections / 4); }
inline uint64_t pre_auth_ms(const NodeOptions &o) { return std::min<uint64_t>(o.io_timeout_ms, 10000); }
// An authenticated connection with no request in progress is closed after this long (twice the
// pool's idle timeout: a peer with the same setting closes its pooled connection first).
inline uint64_t inbound_idle_ms(const NodeOptions &o) {
    return o.idle_timeout_ms > UINT64_MAX / 2 ? UINT64_MAX : 2 * o.idle_timeout_ms;
}
// A request (control frame, value, answer) must be done within io_timeout_ms plus its bytes at
// kMinRate: a peer cannot hold a connection, or the queue room its push reserved, by trickling.
inline constexpr uint64_t kMinRate = 1 << 20;  // bytes per second
inline uint64_t request_ms(const NodeOptions &o, uint64_t bytes) {
    const uint64_t t = bytes / (kMinRate / 1000);
    return o.io_timeout_ms > UINT64_MAX - t ? UINT64_MAX : o.io_timeout_ms + t;
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
    explicit Outbound(Node::Impl &n);
};

// A listening socket, accepted from on the event loop.
struct Listener {
    Address addr;
    int fd = -1;  // the listening socket, owned (and closed) by sd
    std::unique_ptr<asio::posix::stream_descriptor> sd;
    std::unique_ptr<asio::steady_timer> pause;  // accepting again after running out of descriptors
    std::string printable;
};

class Inbound;
class Queue;

// The node: its options, the event loop serving inbound connections, the receive queue,
// published values, the outbound pool and the post streams.
struct Node::Impl : std::enable_shared_from_this<Node::Impl> {
    NodeOptions opts;
    Limits vlim, plim, clim;  // values pulled, values pushed, control frames
    std::unique_ptr<Tls> tls;
    // Descriptors passed to us, not yet used. Declared before io: connections (and their
    // sockets) can go with the io_context, which must find it still there.
    FdBudget fds;
    std::unique_ptr<asio::io_context> io{new asio::io_context};
    // Binds pushed values that inflate or hash much, off the event loop (made when first
    // needed, one thread; stopped and joined by stop). Declared after io: destroyed before it.
    std::mutex decode_mu;
    std::unique_ptr<asio::thread_pool> decoders;
    void decode_off_loop(std::function<void()> job);
    std::unique_ptr<asio::steady_timer> reaper;
    std::vector<std::thread> threads;
    std::vector<Listener> listeners;
    int stop_fd = -1, recv_fd = -1;
    std::atomic<bool> stopped{false};
    BusyPoll busy;       // the calls' waits for answers (socket.hpp); set up by start()
    BusyPoll loop_busy;  // the event loop's wait for more work (run_loop)
    std::mutex stop_mu;

    // inbound connections; under in_mu, the slots they hold (see pre_auth_slots)
    std::mutex in_mu;
    std::set<std::shared_ptr<Inbound>> inbound;
    uint32_t unauthenticated = 0, authenticated = 0;

    // the receive queue, and its budget: max_queued pushes and max_queued_bytes bytes held by
    // the queue and by the pushes being read or decoded (reserved before their bytes are read)
    std::mutex q_mu;
    std::deque<std::unique_ptr<Message>> queue;
    uint64_t queued_bytes = 0;
    uint64_t reserved_bytes = 0;
    uint32_t reserved_count = 0;
    bool overshoot = false;  // one push's inflation past the byte budget is held (Message::overshoot)
    std::deque<std::weak_ptr<Inbound>> parked;  // pushes waiting for budget
    // recv_fd is written once per batch of pushes, not once per push: enqueue notes that the
    // queue became non-empty (wake_pending), the connection's step calls wake() when it stops.
    // `signalled` (under q_mu): recv_fd holds a count, cleared when the queue empties.
    bool signalled = false;
    std::atomic<bool> wake_pending{false};
    void wake();

    // published values
    std::mutex pub_mu;
    std::map<std::string, std::shared_ptr<Published>> published;

    // the application's access hook (held while it runs, so a replacement waits for it)
    std::mutex access_mu;
    AccessFn access_fn = nullptr;
    void *access_user = nullptr;
    bool allowed(int op, const std::string &peer, const std::string &name);

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
    // The stream of that address text, locked (*g), never one the reaper retired.
    std::shared_ptr<PostStream> lock_stream(const std::string &text, std::unique_lock<std::mutex> *g);
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
    void run_loop();
    void stop();
    // listener.cpp
    std::vector<Address> listen_addresses() const;  // opts.listen, parsed
    void bind_listeners(const std::vector<Address> &addrs);
    void accept_next(Listener &l);
    int on_accept(Listener &l);  // 0, or for how many ms to pause (out of descriptors or slots)
    void pause_accepting(Listener &l, int ms);
    // Room for one more unauthenticated connection: a free slot, or the oldest holder closed
    // once it has had a fair chance to finish its handshake. False: the newcomer waits.
    bool pre_auth_slot();
    // The budget. reserve: room for one more push of `bytes`, or false and `who`, unless null,
    // is parked (resumed when room is made). grow: `extra` more for a push holding a reservation; past the
    // byte budget only while no other push does so (*over set), else parked and false.
    bool reserve(uint64_t bytes, const std::shared_ptr<Inbound> &who);
    bool grow(uint64_t extra, bool *over, const std::shared_ptr<Inbound> &who);
    // Gives back a reservation that will not be queued, and resumes the parked pushes.
    void release(uint64_t bytes, bool over);
    // Queues m, which holds a reservation of m->bytes.
    void enqueue(std::unique_ptr<Message> m);
    void resume_parked(std::unique_lock<std::mutex> &q);  // releases q
    // The oldest received push, or null when none waits (resumes the parked connections).
    std::unique_ptr<Message> try_receive();
    // pool.cpp
    // On a timer: closes pooled connections idle for idle_timeout_ms, retires idle post
    // streams, and ends inbound connections past their deadline.
    void reap();
    void reap_streams();    // post.cpp
    void expire_inbound();  // listener.cpp
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
    // Writes a request and reads its answer: for a get, `value`/`value-fd`; for a push, `ok`.
    // An `error` frame throws its status; any other answer is TENSO_E_MALFORMED.
    Control call(Outbound &c, Outgoing &out, bool get, const Waker &w, const Deadline &d);
    std::unique_ptr<View> read_value(Outbound &c, const Control &reply, const Waker &w, const Deadline &d);
    // The steps of the three above, which never wait (the completion-based calls drive them):
    // kDone when finished, else what to wait for on the connection's descriptor.
    std::unique_ptr<Outbound> dial_start(const Address &a, const Waker &w, const Deadline &d);
    Io dial_step(Outbound &c);
    // After out.start(). read_at_once false: once the request is written, wait for the reply
    // before reading (the read right after a write finds nothing: a syscall saved).
    Io call_step(Outbound &c, Outgoing &out, bool get, Control *reply, bool read_at_once = true);
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
inline uint64_t effective(uint64_t timeout_ms, const NodeOptions &o) {
    return timeout_ms == 0 ? o.io_timeout_ms : timeout_ms;
}
// What every outbound call starts with: counted in flight, its name and address checked, its
// deadline fixed, and a first look at the cancel token and the stop descriptor.
struct Call {
    CallScope scope;
    Address addr;
    Waker w;
    Deadline d;
    Call(Node::Impl &n, const std::string &address, const std::string &name, uint64_t timeout_ms, Cancel *cancel)
        : scope(n),
          addr((check_name(name, n.opts), parse_address(address, false))), w{n.stop_fd, cancel, &n.stopped, &n.busy},
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
// The message of a push timed out after it was written whole, waiting for its acknowledgement.
std::string push_ack_timeout(const Outbound &c, uint64_t ms);
void prepare_push(PreparedPush &pp, const Address &a, const std::string &name, const Payload &p, const NodeOptions &o);

}  // namespace tenso::net
