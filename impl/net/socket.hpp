// socket.hpp - the node's transport layer: deadlines and wake-ups for the caller's waits, node
// addresses, and bytes in and out of a plain, TLS or Unix connection without ever blocking
// (Sock), with the frame writer (Outgoing) and reader (Reader) on top.
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <sys/uio.h>

#include <openssl/ssl.h>

#include "format/decoder.hpp"
#include "net/node.hpp"

namespace tenso::net {

using Clock = std::chrono::steady_clock;

// Throws st with what and strerror(err).
[[noreturn]] void sys_fail(int32_t st, const std::string &what, int err = errno);

// ---- waits: a socket, the node's stop descriptor and a cancel token, until a deadline ------

struct Deadline {
    bool none = true;
    Clock::time_point at;
    uint64_t ms = 0;  // as given (for messages)
    static Deadline in(uint64_t ms);
    int poll_ms() const;
};

// Busy polling for an answer. A peer answers a small request in 10-30 us here, but a thread
// that sleeps for the answer is woken through a CPU that went idle meanwhile, which on a
// virtual machine costs 30-80 us more (raw TCP, 1 KiB and a 1-byte answer: 105 us median
// sleeping, 38 us polling). So a wait for an answer first polls its socket for up to kBudget
// before it sleeps, yielding the CPU between polls: the peer, or this process's other threads
// (a receiver's), may need it. A spin that runs out is a miss: the next 2^k waits sleep at
// once (k = misses in a row, up to 8), so a slow peer costs one spin per 256 calls, not one
// per call. Per node; the counters are hints, shared without order.
//
// A yield that comes back kPreemptedNs or more later gave the CPU to a thread with more to do
// (another process, on a busy host) for the rest of its time slice, several ms, where a
// sleeping thread would have been woken at once (beside two CPU hogs, with no such check:
// sends of 700 us instead of 20 us). Then the next 255 waits sleep at once, as after 8 misses.
// Not yielding at all is worse: a spinner then holds the CPU that this process's other
// threads (a receiver's, the peer's) need to answer it (tenso_bench's acknowledged send: 50 us
// median instead of 18-26 us). With one CPU there is nothing to spin for.
class BusyPoll {
public:
    static constexpr int64_t kBudgetNs = 100000;
    static constexpr int64_t kPreemptedNs = 500000;
    void enable(bool on);  // on only where this process may run on more than one CPU
    // Polls p (the socket first) until one is ready or the budget is spent; true when one is.
    bool spin(struct pollfd *p, unsigned n);
    // Calls ready() until it returns true or the budget is spent; true when it did.
    template <class Ready>
    bool spin_until(Ready ready) {
        if (!begin()) return false;
        Clock::time_point now = Clock::now();
        const Clock::time_point until = now + std::chrono::nanoseconds(kBudgetNs);
        do {
            if (ready()) return hit();
            sched_yield();
            const Clock::time_point then = now;
            now = Clock::now();
            if (now - then >= std::chrono::nanoseconds(kPreemptedNs)) return miss(true);
        } while (now < until);
        return miss(false);
    }
    // Spins so far, and those that found their answer (tenso_node_stats).
    void counts(uint64_t *polls, uint64_t *hits) const {
        *polls = polls_.load(std::memory_order_relaxed);
        *hits = hits_.load(std::memory_order_relaxed);
    }

private:
    bool begin();  // false: off, or a wait that backs off
    bool hit();
    bool miss(bool preempted);
    bool on_ = false;
    std::atomic<uint32_t> skip_{0}, misses_{0};
    std::atomic<uint64_t> polls_{0}, hits_{0};
};

struct Waker {
    int stop_fd;
    Cancel *cancel;
    // The node's flag, set before stop_fd is written: checking it costs no syscall (a post
    // checks once per call); the waits below still poll stop_fd to be woken.
    const std::atomic<bool> *stopped;
    // Set for the calls that wait for a peer's answer (wait_answer): their node's busy poll.
    BusyPoll *busy = nullptr;
    void check() const;
    // Sleeps up to ms, waking for a cancel or a stop (which throw).
    void pause(int ms) const;
    // Waits for `events` on fd (fd < 0: only for the deadline, a cancel or a stop).
    void wait(int fd, short events, const Deadline &d) const;
    // wait(fd, POLLIN, d) for an answer to what was written whole: busy polls first.
    void wait_answer(int fd, const Deadline &d) const;
};

// ---- addresses -------------------------------------------------------------------------

struct Address {
    enum Scheme { kTls, kTcp, kUnix } scheme = kTls;
    std::string host, port, path, fingerprint;
    std::string key() const {
        return scheme == kUnix ? "unix://" + path
                               : (scheme == kTls ? "tls://" + fingerprint + "@" : "tcp://") + host + ":" + port;
    }
};

// tls://[fingerprint@]host:port, tcp://host:port or unix://path; a listen address takes no
// fingerprint and may take port 0. Anything else is TENSO_E_BAD_ADDRESS.
Address parse_address(const std::string &s, bool listen);
// A host as it goes before ":port" (an IPv6 literal in brackets).
std::string host_text(const std::string &h);

// host:port resolved (TCP): a literal at once, a name on a helper thread so that the wait
// watches the deadline, the cancel token and the node's stop like every other (getaddrinfo
// cannot be interrupted; an abandoned lookup finishes on its own). TENSO_E_BAD_ADDRESS when
// the name does not resolve.
struct AddrinfoFree {
    void operator()(addrinfo *a) const;
};
using Resolved = std::unique_ptr<addrinfo, AddrinfoFree>;
Resolved resolve(const std::string &host, const std::string &port, const Waker &w, const Deadline &d);

// ---- sockets: bytes in and out of a plain or TLS connection, never blocking -----------------

enum class Io { kDone, kWantRead, kWantWrite, kEof };

// Descriptors a peer passed (SCM_RIGHTS) that no frame has consumed yet: at most
// kPerConnection per connection and `max` for the whole node (docs/net-protocol.md). Each one is
// held only until the frame it came with is read: a connection that goes quiet with one left
// over is out of step and closed.
struct FdBudget {
    static constexpr size_t kPerConnection = 4;
    static constexpr uint32_t kNode = 64;
    std::atomic<uint32_t> held{0};
};

struct Sock {
    int fd = -1;
    SSL *ssl = nullptr;
    // Kernel TLS (tls.hpp): the SSL uses OpenSSL's socket BIO (kernel_bio); once the handshake
    // is done the kernel may encrypt what we send (ktls_tx) and decrypt what we receive
    // (ktls_rx), and those bytes then bypass OpenSSL: plain sendmsg and recvmsg.
    bool kernel_bio = false, ktls_tx = false, ktls_rx = false;
    bool unix_ = false;
    std::deque<int> fds;            // descriptors received (Unix), oldest first
    FdBudget *fd_budget = nullptr;  // counts `fds` (set on Unix connections)
    std::string peer;               // the sender name of messages from it
    uint64_t *counter_in = nullptr, *counter_out = nullptr;
    // What ended a TLS read that had bytes to return already: the answer of every later read
    // (and, a failure, of every write); a pooled connection holding one is not reused.
    std::exception_ptr later;
    bool eof_later = false;

    Sock() = default;
    Sock(const Sock &) = delete;
    Sock &operator=(const Sock &) = delete;
    ~Sock();
    // The oldest descriptor received (the caller owns it), or -1.
    int take_fd();
    // Closes the descriptors no frame consumed.
    void drop_fds();

    [[noreturn]] void ssl_fail(int err, const char *what);
    // A step of the TLS handshake (SSL_do_handshake).
    int handshake();
    // After the handshake: which directions the kernel took (see above); true when it encrypts.
    bool start_kernel_tls();
    // What an SSL_read_ex / SSL_write_ex call returned (r), as an Io; n bytes moved.
    Io ssl_result(int r, size_t n, uint64_t *counter, const char *what);
    // Reads into p; *n gets the bytes. TLS reads ahead (tls.cpp): OpenSSL may hold whole
    // records the socket no longer shows as readable, so callers wait for POLLIN only after a
    // read returned kWantRead (OpenSSL says so only when it holds no complete record).
    Io read(void *p, size_t cap, size_t *n);

    // TLS writes one record (up to kRecord bytes) per SSL_write_ex (partial writes). Segments
    // shorter than a record (a control frame, a packet header, a small body) are packed with
    // what follows into one record: a tiny record costs a cipher call, 22 bytes and, alone, a
    // segment of its own. Records that more of this write follows are gathered by the BIO and
    // sent together (set_send_more); the last one sends them all before it counts as written.
    // After WANT_WRITE the caller retries with the same segments, so the packed record is the
    // same bytes again, at the same address, as OpenSSL requires.
    static constexpr size_t kRecord = 16384;  // TLS's largest plaintext record
    std::unique_ptr<uint8_t[]> stage;         // a packed record
    Io tls_write(const iovec *iov, size_t cnt, size_t *n);

    // Writes from iov[0, cnt); *n gets the bytes. pass_fd (Unix): sent with the first byte.
    Io write(const iovec *iov, size_t cnt, size_t *n, int pass_fd);
};

// A list of segments being written, front first.
struct Outgoing {
    std::vector<uint8_t> head;         // the control frame
    std::vector<iovec> iov;            // head, then the value's segments
    size_t at = 0;                     // first segment not fully written
    int pass_fd = -1;                  // sent with the first byte (not owned)
    std::shared_ptr<const void> keep;  // what the segments point into
    void start() { iov.insert(iov.begin(), iovec{head.data(), head.size()}); }
    bool done() const { return at == iov.size(); }
    // Writes what the socket takes now.
    Io pump(Sock &s);
};

// Frames in: a read-ahead buffer feeding the stream decoder, or, for large packets with nothing
// read ahead, reads straight into the decoder's (aligned) packet buffer.
struct Reader {
    static constexpr size_t kAhead = 64 * 1024;
    std::unique_ptr<uint8_t[]> buf{new uint8_t[kAhead]};
    size_t pos = 0, end = 0;

    Io frame(Sock &s, Decoder &d, std::unique_ptr<View> *out);
    // frame(), but a packet all in the read-ahead bytes is decoded where it lies, into *here
    // (what it held before is dropped), and *out stays null: no copy, buffer or view is made.
    // *here is good until the next read: for control frames, parsed at once.
    Io frame_here(Sock &s, Decoder &d, View *here, std::unique_ptr<View> *out);
    // Drops n bytes (a refused push's body); returns what is left to drop.
    Io skip(Sock &s, uint64_t *left);
};

}  // namespace tenso::net
