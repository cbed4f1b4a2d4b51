// inbound.cpp - an accepted connection (see inbound.hpp): the listener side of the protocol.
#include "net/inbound.hpp"

#include <sys/socket.h>

#include <openssl/err.h>

#include "net/fdpass.hpp"

namespace tenso::net {

Inbound::Inbound(Node::Impl &n, int fd, bool unix_, bool tls, std::string peer)
    : n_(n), sd_(*n.io, fd), ctl_(decoder_config(n.clim)), val_(decoder_config(n.vlim)) {
    sock_.fd = fd;
    sock_.unix_ = unix_;
    sock_.peer = std::move(peer);
    sock_.counter_in = &n.bytes_received;
    sock_.counter_out = &n.bytes_sent;
    if (tls) {
        sock_.ssl = new_ssl(n.tls->server(), fd, &sock_.kernel_bio);
        SSL_set_accept_state(sock_.ssl);
        state_ = kHandshake;
    }
}

Inbound::~Inbound() { sd_.release(); }  // Sock closes the descriptor

void Inbound::close() {
    ::shutdown(sock_.fd, SHUT_RDWR);
    state_ = kClosed;
    asio::error_code ec;
    sd_.cancel(ec);
}

void Inbound::resume() {
    asio::post(*n_.io, [self = shared_from_this()] {
        if (self->state_ != kParked) return;
        self->deliver();
        self->step();
    });
}

void Inbound::wait(Io io) {
    auto self = shared_from_this();
    sd_.async_wait(io == Io::kWantWrite ? asio::posix::stream_descriptor::wait_write
                                        : asio::posix::stream_descriptor::wait_read,
                   [self](const asio::error_code &ec) {
                       if (ec || self->state_ == kClosed) return self->finish();
                       self->step();
                   });
}

void Inbound::finish() {
    state_ = kClosed;
    std::lock_guard<std::mutex> g(n_.in_mu);
    n_.inbound.erase(shared_from_this());
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

void Inbound::deliver() {
    if (!n_.enqueue(msg_, shared_from_this())) {
        state_ = kParked;
        return;
    }
    ++acks_;
    state_ = kReadControl;
}

void Inbound::serve_get() {
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

void Inbound::on_control(std::unique_ptr<View> v) {
    req_ = parse_control(*v, n_.opts.max_name_bytes);
    if (req_.op == Op::kGet) return serve_get();
    if (req_.op != Op::kPush && req_.op != Op::kPushFd) fail(TENSO_E_MALFORMED, "unexpected control frame from a dialer");
    if (req_.message == kCountedOk) counted_ = true;
    msg_.reset(new Message);
    msg_->name = req_.name;
    msg_->sender = sock_.peer;
    msg_->bytes = req_.length;
    const bool too_big = req_.length > n_.opts.max_packet_bytes || req_.length > n_.opts.max_queued_bytes;
    if (req_.op == Op::kPushFd) {
        if (!sock_.unix_ || sock_.fds.empty()) fail(TENSO_E_MALFORMED, "push-fd without a descriptor");
        const int fd = sock_.fds.front();
        sock_.fds.pop_front();
        std::unique_ptr<View> view;
        try {
            if (too_big) fail(TENSO_E_LIMIT, "the packet is larger than the receiver takes");
            view = view_from_fd(fd, req_.offset, req_.length, n_.vlim);
        } catch (...) {
            ::close(fd);
            throw;
        }
        ::close(fd);
        msg_->view = std::move(view);
        return deliver();
    }
    if (too_big) {
        skip_left_ = req_.length;
        skip_status_ = TENSO_E_LIMIT;
        skip_msg_ = "the packet is larger than the receiver takes (max_packet_bytes / max_queued_bytes)";
        state_ = kSkip;
        return;
    }
    state_ = kReadValue;
}

void Inbound::step() {
    // However it stops, the receivers hear of the pushes it queued (once for all of them).
    struct Wake {
        Node::Impl &n;
        ~Wake() { n.wake(); }
    } wake{n_};
    try {
        for (;;) {
            Io io = Io::kDone;
            switch (state_) {
            case kClosed: return finish();
            case kParked: return;
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
                }
                continue;
            }
            case kReadControl: {
                // Every push read ahead is queued before one acknowledgement answers them all.
                if (acks_ && reader_.pos == reader_.end) {
                    ack_now(kReadControl);
                    continue;
                }
                std::unique_ptr<View> v;
                io = reader_.frame(sock_, ctl_, &v);
                if (io == Io::kDone) {
                    on_control(std::move(v));
                    continue;
                }
                break;
            }
            case kReadValue: {
                std::unique_ptr<View> v;
                io = reader_.frame(sock_, val_, &v);
                if (io == Io::kDone) {
                    if (v->packet_size != req_.length) fail(TENSO_E_MALFORMED, "the value's length is not the one announced");
                    msg_->view = std::move(v);
                    deliver();
                    continue;
                }
                if (io == Io::kEof) fail(TENSO_E_CONNECTION, "closed before the value");
                break;
            }
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
        // Hostile or broken input: answer with the status (best effort) and close.
        if (state_ == kWrite || state_ == kLinger) return finish();
        refuse(e.status(), e.what());
        step();
    } catch (const std::bad_alloc &) {
        n_.refused.fetch_add(1);
        finish();
    }
}

}  // namespace tenso::net
