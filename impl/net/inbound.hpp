// inbound.hpp - an accepted connection, served on the node's event loop (inbound.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "net/node_impl.hpp"

namespace tenso::net {

// An accepted connection, served on the event loop: one request at a time (read a control
// frame and its value, answer, read the next).
class Inbound : public std::enable_shared_from_this<Inbound> {
public:
    Inbound(Node::Impl &n, int fd, bool unix_, bool tls, std::string peer);
    ~Inbound();

    void run() { step(); }
    // At shutdown (the loop has stopped): the connection closes now, the descriptor with the object.
    void close();
    // The queue has room again: finish the parked push.
    void resume();

private:
    enum State { kHandshake, kReadControl, kReadValue, kSkip, kParked, kWrite, kLinger, kClosed };
    Node::Impl &n_;
    Sock sock_;
    asio::posix::stream_descriptor sd_;
    Reader reader_;
    Decoder ctl_, val_;
    State state_ = kReadControl;
    Control req_;
    std::unique_ptr<Message> msg_;
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
    void finish();
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
    // Queues the received push (its acknowledgement is pending), or parks (state kParked).
    // A parked connection keeps the acknowledgements of the pushes before it pending too: the
    // dialer waits for the parked push's anyway, and nothing may be written while parked (a
    // resume only finds a connection in kParked).
    void deliver();
    void serve_get();
    void on_control(std::unique_ptr<View> v);
    // Runs the state machine until it must wait.
    void step();
};

}  // namespace tenso::net
