// inbound.hpp - an accepted connection, served on the node's event loop (inbound.cpp).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "net/node_impl.hpp"
#include "net/value.hpp"

namespace tenso::net {

// An accepted connection, served on the event loop: one request at a time (read a control
// frame and its value, answer, read the next). At most one handler of a connection is pending
// at any time (a socket wait, a resume, or the off-loop decode's return), so its state needs no
// lock; the reaper only reads its deadline and shuts its socket.
class Inbound : public std::enable_shared_from_this<Inbound> {
public:
    Inbound(Node::Impl &n, int fd, bool unix_, bool tls, std::string peer);
    ~Inbound();

    void run() { step(); }
    // At shutdown (the loop has stopped): the connection closes now, the descriptor with the object.
    void close();
    // The budget has room again: retry the reservation the connection is parked on.
    void resume();

    // For the reaper and the accept loop (under the node's in_mu): when the connection must be
    // done with what it is doing (steady-clock ns; 0 = no deadline), and the end of it: its
    // socket is shut, so its next step finds it closed.
    int64_t deadline() const { return deadline_.load(std::memory_order_relaxed); }
    void expire();
    enum Slot { kNoSlot, kPreAuth, kAuthenticated };
    std::atomic<Slot> slot{kPreAuth};  // changed under in_mu
    const int64_t accepted_at;

private:
    enum State {
        kHandshake,    // TLS handshake
        kReadControl,  // a control frame
        kReserve,      // queue budget for the announced push (parked while there is none)
        kReadValue,    // the push's value packet
        kGrow,         // queue budget for what the value inflates to (parked while none)
        kDecoding,     // bound off the event loop
        kDecoded,      // back from there
        kSkip,         // a refused push's bytes, dropped
        kWrite,        // answers
        kLinger,       // after a refusal: reading what the peer still sends
        kClosed
    };
    Node::Impl &n_;
    Sock sock_;
    asio::posix::stream_descriptor sd_;
    Reader reader_;
    Decoder ctl_, val_;
    View ctl_here_;  // the last control frame decoded where it lay (Reader::frame_here)
    State state_ = kReadControl;
    Control req_;
    // sock_.peer for the messages it queues, once it is known: one string per connection.
    std::shared_ptr<const std::string> sender_;
    std::unique_ptr<Message> msg_;
    int push_fd_ = -1;               // a push-fd's descriptor until it is read
    uint64_t reserved_ = 0;          // queue budget this push holds
    bool over_ = false;              // ... past max_queued_bytes (Message::overshoot)
    Scanned scanned_;                // the value between its scan and its bind
    std::unique_ptr<View> decoded_;  // kDecoded: the value, or
    int32_t decode_status_ = 0;      // why not
    std::string decode_message_;
    std::atomic<bool> parked_{false};  // in the node's parked list, not resumed yet
    std::atomic<bool> expired_{false};
    std::atomic<int64_t> deadline_{0};
    int64_t request_deadline_ = 0;  // of the request in progress (0: none in progress)
    uint64_t skip_left_ = 0;
    int32_t skip_status_ = 0;
    std::string skip_msg_;
    Outgoing out_;
    bool close_after_write_ = false;
    State after_write_ = kReadControl;  // where a finished write goes on
    // Pushes queued but not yet acknowledged: answered by one `ok` whose length field is their
    // count (one `ok` each, to a dialer that did not ask for counts), written before the
    // connection next waits for input or answers anything else.
    uint64_t acks_ = 0;
    bool counted_ = false;  // the dialer reads counted oks (kCountedOk): else one `ok` per push
    static constexpr uint64_t kLingerBytes = 16 << 20;
    uint64_t linger_ = 0;

    void wait(Io io);
    // Sets the deadline of what the connection waits for next.
    void arm_deadline();
    void finish();
    // The slot: a trusted peer's connection leaves the pre-auth ones for an authenticated one,
    // or is refused when max_connections are taken. False when refused.
    bool authenticate();
    // The `ok` for the pushes acknowledged by none yet (empty when there are none).
    std::vector<uint8_t> take_acks();
    // Writes the pending acknowledgement, then c when given (answers go in request order),
    // then the segments out_ already holds (a value's); goes on in `next`.
    void start_write(const Control *c, bool close_after, State next);
    // Writes the pending acknowledgement, then goes on in `next`.
    void ack_now(State next);
    // Answers c, after the pending acknowledgement.
    void reply(const Control &c, bool close_after);
    // Answers an error (counted as a refusal); closes afterwards unless the connection stays in step.
    void refuse(int32_t st, const std::string &why, bool close_after = true);
    // Gives back the push's queue budget and descriptor (a push that will not be queued).
    void drop_push();
    // The value is framed (socket or descriptor): scanned, then charged (kGrow).
    void received(std::unique_ptr<View> raw);
    // The value is charged: bound here, or off the loop when that is much work.
    void bind_value();
    // Queues the received push (its acknowledgement is pending).
    void deliver(std::unique_ptr<View> v);
    void serve_get();
    void on_control(const View &v);
    // Runs the state machine until it must wait.
    void step();
};

}  // namespace tenso::net
