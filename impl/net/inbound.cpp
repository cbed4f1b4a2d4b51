// inbound.cpp - an accepted connection (see inbound.hpp): the listener side of the protocol.
#include "net/inbound.hpp"

#include <sys/socket.h>

#include <openssl/err.h>

#include "net/fdpass.hpp"

namespace tenso::net {

namespace {
int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
int64_t after_ms(uint64_t ms) {
    const uint64_t cap = uint64_t(1) << 40;  // ~35 years: "no deadline" in practice, no overflow
    return now_ns() + int64_t(std::min(ms, cap)) * 1000000;
}
}  // namespace

Inbound::Inbound(Node::Impl &n, int fd, bool unix_, bool tls, std::string peer)
    : accepted_at(now_ns()), n_(n), sd_(*n.io, fd), ctl_(decoder_config(n.clim)),
      val_(decoder_config(n.plim, /*frame_only=*/true)) {
    sock_.fd = fd;
    sock_.unix_ = unix_;
    sock_.peer = std::move(peer);
    sock_.counter_in = &n.bytes_received;
    sock_.counter_out = &n.bytes_sent;
    if (unix_) sock_.fd_budget = &n.fds;
    if (tls) {
        sock_.ssl = new_ssl(n.tls->server(), fd, &sock_.kernel_bio);
        SSL_set_accept_state(sock_.ssl);
        state_ = kHandshake;
    }
    deadline_ = after_ms(pre_auth_ms(n.opts));
}

Inbound::~Inbound() {
    // Nothing of the node is touched here: a connection may go with the node's io_context,
    // after the rest of the node (finish gave its queue budget back when it still mattered).
    if (push_fd_ >= 0) ::close(push_fd_);
    sd_.release();  // Sock closes the descriptor
}

void Inbound::close() {
    ::shutdown(sock_.fd, SHUT_RDWR);
    state_ = kClosed;
    asio::error_code ec;
    sd_.cancel(ec);
}

void Inbound::expire() {
    expired_ = true;
    ::shutdown(sock_.fd, SHUT_RDWR);
}

void Inbound::resume() {
    if (!parked_.exchange(false)) return;  // one resume per park
    asio::post(*n_.io, [self = shared_from_this()] { self->step(); });
}

void Inbound::arm_deadline() {
    int64_t d = 0;
    if (slot != kAuthenticated && state_ != kWrite && state_ != kLinger) {
        d = accepted_at + int64_t(std::min<uint64_t>(pre_auth_ms(n_.opts), uint64_t(1) << 40)) * 1000000;
    } else if (state_ == kReadControl && reader_.pos == reader_.end && ctl_.idle() && acks_ == 0) {
        request_deadline_ = 0;  // between requests
        d = after_ms(inbound_idle_ms(n_.opts));
    } else if (state_ == kLinger) {
        d = request_deadline_ ? request_deadline_ : after_ms(n_.opts.io_timeout_ms);
    } else {
        // A request in progress (its control frame begun: the rest of it, its value, its answer).
        if (!request_deadline_) request_deadline_ = after_ms(request_ms(n_.opts, 0));
        d = request_deadline_;
    }
    deadline_.store(d, std::memory_order_relaxed);
}

void Inbound::wait(Io io) {
    // Descriptors are passed with the first byte of the frame that uses them: any still held
    // when no frame is in progress came with none (and would otherwise be held for good).
    if (!sock_.fds.empty() && state_ == kReadControl && reader_.pos == reader_.end && ctl_.idle())
        fail(TENSO_E_MALFORMED, "the peer passed a descriptor that no frame uses");
    if (expired_) return finish();
    arm_deadline();
    auto self = shared_from_this();
    sd_.async_wait(
        io == Io::kWantWrite ? asio::posix::stream_descriptor::wait_write : asio::posix::stream_descriptor::wait_read,
        [self](const asio::error_code &ec) {
            if (ec || self->state_ == kClosed) return self->finish();
            self->step();
        });
}

void Inbound::finish() {
    state_ = kClosed;
    drop_push();
    if (expired_.exchange(false)) n_.refused.fetch_add(1);
    std::lock_guard<std::mutex> g(n_.in_mu);
    if (slot == kPreAuth) --n_.unauthenticated;
    if (slot == kAuthenticated) --n_.authenticated;
    slot = kNoSlot;
    n_.inbound.erase(shared_from_this());
}

bool Inbound::authenticate() {
    {
        std::lock_guard<std::mutex> g(n_.in_mu);
        if (slot != kPreAuth) return slot == kAuthenticated;  // evicted meanwhile: its socket is shut
        if (n_.authenticated < n_.opts.max_connections) {
            --n_.unauthenticated;
            ++n_.authenticated;
            slot = kAuthenticated;
            return true;
        }
    }
    // Over the limit: answered, then closed; it keeps its pre-auth slot (and deadline) meanwhile.
    refuse(TENSO_E_LIMIT, "the node is at its max_connections (" + std::to_string(n_.opts.max_connections) + ")");
    return false;
}

std::vector<uint8_t> Inbound::take_acks() {
    if (acks_ == 0) return {};
    n_.wake();  // what it reports queued is announced first
    Control ok;
    ok.op = Op::kOk;
    ok.length = counted_ ? acks_ : 0;
    const std::vector<uint8_t> one = encode_control(ok);
    // A dialer that did not ask for counted oks (1.4.0) reads one per push: as many frames,
    // still written together.
    std::vector<uint8_t> out;
    out.reserve(one.size() * (counted_ ? 1 : acks_));
    for (uint64_t i = 0; i < (counted_ ? 1 : acks_); ++i) out.insert(out.end(), one.begin(), one.end());
    acks_ = 0;
    return out;
}

void Inbound::start_write(const Control *c, bool close_after, State next) {
    out_.head = take_acks();
    if (c) {
        const std::vector<uint8_t> f = encode_control(*c);
        out_.head.insert(out_.head.end(), f.begin(), f.end());
    }
    out_.start();
    close_after_write_ = close_after;
    after_write_ = next;
    state_ = kWrite;
}

void Inbound::ack_now(State next) {
    out_ = Outgoing{};
    start_write(nullptr, false, next);
}

void Inbound::reply(const Control &c, bool close_after) {
    out_ = Outgoing{};
    start_write(&c, close_after, kReadControl);
}

void Inbound::refuse(int32_t st, const std::string &why, bool close_after) {
    n_.refused.fetch_add(1);
    Control c;
    c.op = Op::kError;
    c.status = st;
    c.message = why;
    reply(c, close_after);
}

void Inbound::drop_push() {
    if (push_fd_ >= 0) ::close(push_fd_);
    push_fd_ = -1;
    if (reserved_ || over_ || msg_) {
        n_.release(reserved_, over_);
        reserved_ = 0;
        over_ = false;
    }
    msg_.reset();
    scanned_ = Scanned{};
}

void Inbound::received(std::unique_ptr<View> raw) {
    scanned_ = scan_received(std::move(raw), n_.plim);
    const uint64_t held = scanned_.held();  // read before drop_push() empties scanned_
    if (held > n_.opts.max_queued_bytes) {
        // Framed, so the connection stays in step.
        drop_push();
        return refuse(TENSO_E_LIMIT,
                      "the value decodes to " + std::to_string(held) +
                          " bytes, more than the receiver's max_queued_bytes (" +
                          std::to_string(n_.opts.max_queued_bytes) + ")",
                      false);
    }
    state_ = kGrow;
}

void Inbound::bind_value() {
    // Inflating or hashing much would hold up every connection the loop serves.
    constexpr uint64_t kOffLoopWork = 1 << 20;
    if (scanned_.work() < kOffLoopWork) return deliver(bind_received(scanned_, n_.plim));
    state_ = kDecoding;
    n_.decode_off_loop([self = shared_from_this()] {
        try {
            self->decoded_ = bind_received(self->scanned_, self->n_.plim);
        } catch (const Error &e) {
            self->decode_status_ = e.status();
            self->decode_message_ = e.what();
        } catch (const std::bad_alloc &) {
            self->decode_status_ = TENSO_E_NO_MEMORY;
            self->decode_message_ = "out of memory decoding the value";
        } catch (...) {
            self->decode_status_ = TENSO_E_INTERNAL;
            self->decode_message_ = "decoding the value failed";
        }
        asio::post(*self->n_.io, [self] {
            self->state_ = kDecoded;
            self->step();
        });
    });
}

void Inbound::deliver(std::unique_ptr<View> v) {
    msg_->view = std::move(v);
    msg_->bytes = reserved_;
    msg_->overshoot = over_;
    reserved_ = 0;
    over_ = false;
    scanned_ = Scanned{};
    n_.enqueue(std::move(msg_));
    ++acks_;
    state_ = kReadControl;
}

void Inbound::serve_get() {
    if (!n_.allowed(kAccessGet, sock_.peer, req_.name))
        return refuse(TENSO_E_AUTH, "this peer may not get '" + req_.name + "' (the node's access hook)", false);
    std::shared_ptr<Published> p;
    {
        std::lock_guard<std::mutex> g(n_.pub_mu);
        auto it = n_.published.find(req_.name);
        if (it != n_.published.end()) p = it->second;
    }
    Control c;
    if (!p) {
        c.op = Op::kError;
        c.status = TENSO_E_NOT_FOUND;
        c.message = "nothing is published under that name";
        return reply(c, false);
    }
    c.length = p->size;
    request_deadline_ = after_ms(request_ms(n_.opts, p->size));  // a slow reader has as long as a slow writer
    out_ = Outgoing{};
    out_.keep = p;
    if (sock_.unix_ && !n_.opts.no_fd_passing && p->size >= n_.opts.fd_passing_min_bytes) {
        std::lock_guard<std::mutex> g(p->memfd_mu);
        if (p->memfd < 0) p->memfd = packet_memfd(p->iov, p->size);
        c.op = Op::kValueFd;
        out_.pass_fd = p->memfd;
    } else {
        c.op = Op::kValue;
        out_.iov = p->iov;
    }
    start_write(&c, false, kReadControl);
}

void Inbound::on_control(const View &v) {
    req_ = parse_control(v, n_.opts.max_name_bytes);
    if (req_.op != Op::kGet && req_.op != Op::kPush && req_.op != Op::kPushFd)
        fail(TENSO_E_MALFORMED, "unexpected control frame from a dialer");
    // A plaintext peer is trusted by the transport: its first frame takes an authenticated slot.
    if (slot != kAuthenticated && !authenticate()) return;
    if (req_.op == Op::kGet) return serve_get();
    if (req_.message == kCountedOk) counted_ = true;
    if (req_.op == Op::kPushFd) {
        push_fd_ = sock_.take_fd();
        if (!sock_.unix_ || push_fd_ < 0) fail(TENSO_E_MALFORMED, "push-fd without a descriptor");
    }
    const bool fd = req_.op == Op::kPushFd;
    // Its bytes (none for a descriptor) are read and dropped: the connection stays in step.
    auto refuse_push = [&](int32_t st, const std::string &why) {
        drop_push();
        if (fd) return refuse(st, why, false);
        skip_left_ = req_.length;
        skip_status_ = st;
        skip_msg_ = why;
        state_ = kSkip;
    };
    request_deadline_ = after_ms(request_ms(n_.opts, req_.length));
    if (req_.length == 0) fail(TENSO_E_MALFORMED, "a push of 0 bytes");
    if (req_.length > n_.opts.max_packet_bytes || req_.length > n_.opts.max_queued_bytes)
        return refuse_push(TENSO_E_LIMIT,
                           "the packet is larger than the receiver takes (max_packet_bytes / max_queued_bytes)");
    if (!n_.allowed(kAccessPush, sock_.peer, req_.name))
        return refuse_push(TENSO_E_AUTH, "this peer may not push '" + req_.name + "' (the node's access hook)");
    msg_.reset(new Message);
    msg_->name = req_.name;
    // The peer's name is fixed once it may push (plaintext: at accept; TLS: at the handshake).
    if (!sender_) sender_ = std::make_shared<const std::string>(sock_.peer);
    msg_->sender = sender_;
    state_ = kReserve;
}

void Inbound::step() {
    // However it stops, the receivers hear of the pushes it queued (once for all of them).
    struct Wake {
        Node::Impl &n;
        ~Wake() { n.wake(); }
    } wake{n_};
    int32_t st = 0;
    std::string why;
    try {
        for (;;) {
            Io io = Io::kDone;
            switch (state_) {
            case kClosed: return finish();
            case kDecoding: return;  // the decode's return steps on
            case kHandshake: {
                const int r = sock_.handshake();
                if (r != 1) {
                    const int err = SSL_get_error(sock_.ssl, r);
                    if (err == SSL_ERROR_WANT_READ) return wait(Io::kWantRead);
                    if (err == SSL_ERROR_WANT_WRITE) return wait(Io::kWantWrite);
                    n_.refused.fetch_add(1);
                    ERR_clear_error();
                    return finish();
                }
                state_ = kReadControl;
                (sock_.start_kernel_tls() ? n_.tls_kernel : n_.tls_user).fetch_add(1);
                try {
                    sock_.peer = n_.tls->check_peer(sock_.ssl, "", true);
                } catch (const Error &e) {
                    refuse(e.status(), e.what());
                    continue;
                }
                // A trusted peer: over max_connections it is now told so (an `error` frame).
                authenticate();
                continue;
            }
            case kReadControl: {
                // Every push read ahead is queued before one acknowledgement answers them all.
                if (acks_ && reader_.pos == reader_.end) {
                    ack_now(kReadControl);
                    continue;
                }
                std::unique_ptr<View> v;
                io = reader_.frame_here(sock_, ctl_, &ctl_here_, &v);
                if (io == Io::kDone) {
                    on_control(v ? *v : ctl_here_);
                    continue;
                }
                break;
            }
            case kReserve:
                if (!n_.reserve(req_.length, nullptr)) {
                    // The dialer hears of its pushes already queued before this one waits.
                    if (acks_) {
                        ack_now(kReserve);
                        continue;
                    }
                    // Parked: no deadline (the wait is the application's, not the peer's). Once
                    // parked, a resume may step on another thread: nothing is touched after.
                    deadline_.store(0, std::memory_order_relaxed);
                    parked_ = true;
                    if (!n_.reserve(req_.length, shared_from_this())) return;  // resumed when room is made
                    parked_ = false;
                }
                reserved_ = req_.length;
                if (push_fd_ >= 0) {
                    std::unique_ptr<View> raw = packet_from_fd(push_fd_, req_.offset, req_.length, n_.plim);
                    ::close(push_fd_);
                    push_fd_ = -1;
                    received(std::move(raw));
                    continue;
                }
                val_.expect(size_t(req_.length));  // the announcement is the value's limit
                state_ = kReadValue;
                continue;
            case kReadValue: {
                std::unique_ptr<View> v;
                io = reader_.frame(sock_, val_, &v);
                if (io == Io::kDone) {
                    received(std::move(v));
                    continue;
                }
                if (io == Io::kEof) fail(TENSO_E_CONNECTION, "closed before the value");
                break;
            }
            case kGrow: {
                const uint64_t extra = scanned_.held() - reserved_;
                if (extra) {
                    if (!n_.grow(extra, &over_, nullptr)) {
                        if (acks_) {
                            ack_now(kGrow);
                            continue;
                        }
                        deadline_.store(0, std::memory_order_relaxed);
                        parked_ = true;
                        if (!n_.grow(extra, &over_, shared_from_this())) return;
                        parked_ = false;
                    }
                    reserved_ += extra;
                }
                bind_value();
                continue;
            }
            case kDecoded:
                if (!decoded_) {
                    const int32_t s = decode_status_;
                    drop_push();
                    fail(s, decode_message_);
                }
                deliver(std::move(decoded_));
                continue;
            case kSkip:
                io = reader_.skip(sock_, &skip_left_);
                if (io == Io::kDone) {
                    refuse(skip_status_, skip_msg_, false);
                    continue;
                }
                break;
            case kWrite:
                io = out_.pump(sock_);
                if (io == Io::kDone) {
                    out_ = Outgoing{};
                    if (close_after_write_) {
                        ::shutdown(sock_.fd, SHUT_WR);
                        state_ = kLinger;
                        continue;
                    }
                    state_ = after_write_;
                    after_write_ = kReadControl;
                    continue;
                }
                break;
            case kLinger: {
                // After a refusal: our side is shut for writing; what the peer still sends
                // is read and dropped (closing with unread bytes would reset the connection
                // and could take the refusal with it), up to kLingerBytes.
                size_t got = 0;
                io = sock_.read(reader_.buf.get(), Reader::kAhead, &got);
                linger_ += got;
                if (io == Io::kDone && linger_ < kLingerBytes) continue;
                if (io == Io::kDone) return finish();
                break;
            }
            }
            if (io == Io::kEof) return finish();
            // Never wait for input while owing acknowledgements (the dialer may be waiting for them).
            if (io == Io::kWantRead && acks_ && (state_ == kReadControl || state_ == kReadValue || state_ == kSkip)) {
                ack_now(state_);
                continue;
            }
            return wait(io);
        }
    } catch (const Error &e) {
        st = e.status();
        why = e.what();
    } catch (const NeedMore &) {
        st = TENSO_E_MALFORMED;
        why = "a packet is shorter than its headers say";
    } catch (const std::bad_alloc &) {
        st = TENSO_E_NO_MEMORY;
        why = "out of memory";
    } catch (const std::exception &e) {
        st = TENSO_E_INTERNAL;
        why = e.what();
    } catch (...) {
        st = TENSO_E_INTERNAL;
        why = "unknown internal error";
    }
    // The event loop's boundary: whatever failed, the connection answers with its status (best
    // effort) and closes; the node and its other connections go on.
    drop_push();
    if (state_ == kWrite || state_ == kLinger || expired_ || st == TENSO_E_NO_MEMORY) {
        n_.refused.fetch_add(1);
        return finish();
    }
    try {
        refuse(st, why);
    } catch (...) {
        return finish();
    }
    step();
}

}  // namespace tenso::net
