// ops.cpp - the completion-based send, request and receive (see completion.hpp): the steps of
// the blocking calls (checkout, dial, call, read_value; the receive queue) without their waits.
#include <sys/epoll.h>

#include "net/completion.hpp"

namespace tenso::net {

namespace {

// A send or a request: one exchange on a pooled connection, dialed when none is idle.
class ExchangeOp : public Operation {
public:
    ExchangeOp(Kind k, void *user, uint64_t timeout_ms) : Operation(k, user, timeout_ms) {}

    Address addr;
    PreparedPush push;  // a send's frames; a request's control frame (push.out.head)
    Control reply;

    Want step(Node::Impl &n) override {
        try {
            check_stop();
        } catch (const Error &e) {
            // A push written whole and not acknowledged: say why, as the blocking send does.
            if (e.status() == TENSO_E_TIMEOUT && kind == kSend && written_ && conn_)
                fail(TENSO_E_TIMEOUT, push_ack_timeout(*conn_, timeout_ms()));
            throw;
        }
        for (;;) switch (stage_) {
            case kCheckout: {
                const Node::Impl::Slot s = n.try_checkout(addr, &conn_);
                if (s == Node::Impl::Slot::kFull) return Want::wake();
                if (s == Node::Impl::Slot::kDial) {
                    try {
                        // A name is resolved on a helper thread; this step waits for it (until
                        // the deadline or a stop).
                        conn_ = n.dial_start(addr, Waker{n.stop_fd, nullptr, &n.stopped}, Deadline::in(timeout_ms()));
                    } catch (...) {
                        n.release_slot(addr);
                        throw;
                    }
                    stage_ = kDial;
                } else {
                    begin_call();
                }
                continue;
            }
            case kDial: {
                const Io r = n.dial_step(*conn_);
                if (r != Io::kDone) return Want::io(conn_->sock.fd, r);
                begin_call();
                continue;
            }
            case kCall: {
                // Nothing can be read before the peer has the request: after writing it, the
                // step waits for the reply rather than trying a read that finds nothing. A TLS
                // connection holds nothing read ahead (a pooled one with bytes pending is not
                // reused), so waiting for the socket is safe.
                const Io r = n.call_step(*conn_, push.out, kind == kRequest, &reply, written_);
                written_ = push.out.done();
                if (r != Io::kDone) return written_ ? Want::answer_on(conn_->sock.fd, r) : Want::io(conn_->sock.fd, r);
                if (kind == kSend) return Want::done();
                stage_ = kValue;
                continue;
            }
            case kValue: {
                const Io r = n.read_value_step(*conn_, reply, &view);
                if (r != Io::kDone) return Want::io(conn_->sock.fd, r);  // streaming: not polled for
                return Want::done();
            }
            }
    }

    void finish(Node::Impl &n, int32_t st) noexcept override {
        if (!conn_) return;
        try {
            // As the blocking calls: "not found" leaves the connection in step; anything else may not.
            if (st == TENSO_OK || (kind == kRequest && st == TENSO_E_NOT_FOUND)) n.checkin(std::move(conn_));
            else n.discard(std::move(conn_));
        } catch (...) {
            conn_.reset();  // out of memory in the pool's books: the connection is closed
        }
    }

private:
    enum Stage { kCheckout, kDial, kCall, kValue } stage_ = kCheckout;
    bool written_ = false;  // the request is on the wire
    std::unique_ptr<Outbound> conn_;

    void begin_call() {
        push.out.start();
        stage_ = kCall;
    }
};

class ReceiveOp : public Operation {
public:
    ReceiveOp(void *user, uint64_t timeout_ms) : Operation(kReceive, user, timeout_ms), now_only_(timeout_ms == 0) {}

    Want step(Node::Impl &n) override {
        check_stop();
        msg = n.try_receive();
        if (msg) return Want::done();
        if (now_only_) fail(TENSO_E_TIMEOUT, "no message is waiting");
        return Want::readable(n.recv_fd);
    }

private:
    bool now_only_;
};

}  // namespace

std::unique_ptr<Operation> make_send(Node::Impl &n, const std::string &addr, const std::string &name, const Value &v,
                                     uint64_t timeout_ms, void *payload) {
    check_name(name, n.opts);
    std::unique_ptr<ExchangeOp> op(new ExchangeOp(Operation::kSend, payload, effective(timeout_ms, n.opts)));
    op->addr = parse_address(addr, false);
    Payload p;
    p.value = std::shared_ptr<const Value>(&v, [](const Value *) {});  // borrowed until it completes
    prepare_push(op->push, op->addr, name, p, n.opts);
    return op;
}

std::unique_ptr<Operation> make_request(Node::Impl &n, const std::string &addr, const std::string &name,
                                        uint64_t timeout_ms, void *payload) {
    check_name(name, n.opts);
    std::unique_ptr<ExchangeOp> op(new ExchangeOp(Operation::kRequest, payload, effective(timeout_ms, n.opts)));
    op->addr = parse_address(addr, false);
    Control c;
    c.op = Op::kGet;
    c.name = name;
    op->push.out.head = encode_control(c);
    return op;
}

std::unique_ptr<Operation> make_receive(Node::Impl &, uint64_t timeout_ms, void *payload) {
    return std::unique_ptr<Operation>(new ReceiveOp(payload, timeout_ms));
}

}  // namespace tenso::net
