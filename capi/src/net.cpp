// net.cpp - the C ABI of tenso nodes (tenso/net.h): argument checks and conversions; the engine
// is tenso::net::Node (impl/net/).
#include <cstring>
#include <new>

#include "firewall.hpp"
#include "format/decoder.hpp"
#include "net/completion.hpp"
#include "net/node.hpp"

struct tenso_cancel {
    tenso::net::Cancel c;
};
struct tenso_node {
    tenso::net::Node n;
    explicit tenso_node(const tenso::net::NodeOptions &o) : n(o) {}
};
struct tenso_node_message {
    std::unique_ptr<tenso::net::Message> m;
};
struct tenso_node_queue {
    std::shared_ptr<tenso::net::Queue> q;
};
// tenso_node_op is never defined: a tenso_node_op* is a tenso::net::Operation*.

using tenso::capi::release_view;
using tenso::capi::set_error;

namespace {

tenso::net::Operation *O(tenso_node_op *op) { return reinterpret_cast<tenso::net::Operation *>(op); }
const tenso::net::Operation *O(const tenso_node_op *op) { return reinterpret_cast<const tenso::net::Operation *>(op); }
tenso_node_op *H(tenso::net::Operation *op) { return reinterpret_cast<tenso_node_op *>(op); }

tenso::net::NodeOptions node_options(const tenso_node_options *o) {
    tenso::net::NodeOptions r;
    if (!o) return r;
    if (o->version != TENSO_NODE_OPTIONS_VERSION)
        tenso::fail(TENSO_E_INVALID_ARGUMENT, "tenso_node_options.version is not TENSO_NODE_OPTIONS_VERSION");
    const uint32_t known =
        TENSO_NODE_ALLOW_PLAINTEXT | TENSO_NODE_NO_FD_PASSING | TENSO_NODE_NO_LISTEN | TENSO_NODE_NO_BUSY_POLL;
    if (o->flags & ~known) tenso::fail(TENSO_E_INVALID_ARGUMENT, "unknown tenso_node_options.flags bits");
    r.plaintext = o->flags & TENSO_NODE_ALLOW_PLAINTEXT;
    r.no_fd_passing = o->flags & TENSO_NODE_NO_FD_PASSING;
    r.no_listen = o->flags & TENSO_NODE_NO_LISTEN;
    r.no_busy_poll = o->flags & TENSO_NODE_NO_BUSY_POLL;
    if (o->listen) r.listen = o->listen;
    // Given but empty is an error, not "unset" (an empty key or CA file must not pass silently).
    if (o->cert_pem && !*o->cert_pem)
        tenso::fail(TENSO_E_AUTH, "cert_pem is empty; pass NULL for an ephemeral identity");
    if (o->key_pem && !*o->key_pem) tenso::fail(TENSO_E_AUTH, "key_pem is empty; pass NULL for an ephemeral identity");
    if (o->cert_pem) r.cert_pem = o->cert_pem;
    if (o->key_pem) r.key_pem = o->key_pem;
    if (o->ca_pem) r.ca_pem = o->ca_pem;
    r.ca_set = o->ca_pem != nullptr;
    if (o->pinned_key_count && !o->pinned_keys) tenso::fail(TENSO_E_INVALID_ARGUMENT, "pinned_keys is NULL");
    for (uint32_t i = 0; i < o->pinned_key_count; ++i) {
        const char *k = o->pinned_keys[i];
        if (!k || std::strlen(k) != 64 || std::strspn(k, "0123456789abcdefABCDEF") != 64)
            tenso::fail(TENSO_E_INVALID_ARGUMENT, "a pinned key is not 64 hex digits");
        std::string s(k);
        for (char &c : s) c = char(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
        r.pinned_keys.push_back(s);
    }
    if (o->threads) r.threads = o->threads;
    if (o->max_packet_bytes) r.max_packet_bytes = o->max_packet_bytes;
    if (o->max_name_bytes) r.max_name_bytes = o->max_name_bytes;
    if (o->max_queued) r.max_queued = o->max_queued;
    if (o->max_queued_bytes) r.max_queued_bytes = o->max_queued_bytes;
    if (o->max_connections) r.max_connections = o->max_connections;
    if (o->max_pool_per_peer) r.max_pool_per_peer = o->max_pool_per_peer;
    if (o->idle_timeout_ms) r.idle_timeout_ms = o->idle_timeout_ms;
    if (o->io_timeout_ms) r.io_timeout_ms = o->io_timeout_ms;
    if (o->fd_passing_min_bytes) r.fd_passing_min_bytes = o->fd_passing_min_bytes;
    if (r.threads > 256) tenso::fail(TENSO_E_INVALID_ARGUMENT, "more than 256 event loop threads");
    return r;
}

}  // namespace

extern "C" {

tenso_status tenso_cancel_new(tenso_cancel **out) {
    CHECK_ARG(out);
    *out = nullptr;
    TENSO_API_BEGIN
    *out = new tenso_cancel;
    TENSO_API_END
}
void tenso_cancel_trigger(tenso_cancel *c) {
    if (c) c->c.trigger();
}
int tenso_cancel_triggered(const tenso_cancel *c) { return c && c->c.triggered() ? 1 : 0; }
void tenso_cancel_free(tenso_cancel *c) { delete c; }

tenso_status tenso_node_options_init(tenso_node_options *opts, uint32_t version) {
    CHECK_ARG(opts);
    if (version != TENSO_NODE_OPTIONS_VERSION)
        return set_error(TENSO_E_INVALID_ARGUMENT, "unknown tenso_node_options version");
    std::memset(opts, 0, sizeof *opts);
    opts->version = version;
    return TENSO_OK;
}

tenso_status tenso_node_new(tenso_node **out, const tenso_node_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    TENSO_API_BEGIN
    // The key's text is wiped once the node has read it, also when starting fails.
    struct Options {
        tenso::net::NodeOptions o;
        ~Options() { tenso::net::wipe(o.key_pem); }
    } o{node_options(opts)};
    *out = new tenso_node(o.o);
    TENSO_API_END
}

void tenso_node_shutdown(tenso_node *n) {
    if (n) n->n.shutdown();
}
void tenso_node_free(tenso_node *n) { delete n; }

tenso_status tenso_node_addr(char *buf, size_t cap, size_t *len_out, const tenso_node *n, uint32_t index) {
    CHECK_ARG(len_out);
    *len_out = 0;
    CHECK_ARG(n);
    CHECK_ARG(buf || !cap);
    TENSO_API_BEGIN
    std::string a;
    if (!n->n.addr(index, &a)) return set_error(TENSO_E_NOT_FOUND, "no address of that index");
    *len_out = a.size();
    if (cap < a.size() + 1) return set_error(TENSO_E_BUFFER_TOO_SMALL, "the address does not fit");
    std::memcpy(buf, a.c_str(), a.size() + 1);
    TENSO_API_END
}

tenso_status tenso_node_id(char buf[65], const tenso_node *n) {
    CHECK_ARG(buf);
    CHECK_ARG(n);
    TENSO_API_BEGIN
    const std::string id = n->n.id();
    std::memcpy(buf, id.c_str(), 65);
    TENSO_API_END
}

namespace {
// tenso_node_send and tenso_node_post: the same arguments, one waits for the acknowledgement.
tenso_status push_value(tenso_node *n, const char *addr, const char *name, size_t name_len, const tenso_value *v,
                        uint64_t timeout_ms, tenso_cancel *cancel, bool pipelined) {
    CHECK_ARG(n);
    CHECK_ARG(addr);
    CHECK_ARG(name);
    CHECK_ARG(v);
    TENSO_API_BEGIN
    tenso::net::Payload p;
    p.value = std::shared_ptr<const tenso::Value>(&v->v, [](const tenso::Value *) {});  // borrowed for the call
    tenso::net::Cancel *c = cancel ? &cancel->c : nullptr;
    if (pipelined) n->n.post(addr, std::string(name, name_len), p, timeout_ms, c);
    else n->n.send(addr, std::string(name, name_len), p, timeout_ms, c);
    TENSO_API_END
}
}  // namespace

tenso_status tenso_node_send(tenso_node *n, const char *addr, const char *name, size_t name_len, const tenso_value *v,
                             uint64_t timeout_ms, tenso_cancel *cancel) {
    return push_value(n, addr, name, name_len, v, timeout_ms, cancel, false);
}

tenso_status tenso_node_post(tenso_node *n, const char *addr, const char *name, size_t name_len, const tenso_value *v,
                             uint64_t timeout_ms, tenso_cancel *cancel) {
    return push_value(n, addr, name, name_len, v, timeout_ms, cancel, true);
}

tenso_status tenso_node_flush(tenso_node *n, const char *addr, uint64_t timeout_ms, tenso_cancel *cancel) {
    CHECK_ARG(n);
    CHECK_ARG(addr);
    TENSO_API_BEGIN
    n->n.flush(addr, timeout_ms, cancel ? &cancel->c : nullptr);
    TENSO_API_END
}

tenso_status tenso_node_send_packet(tenso_node *n, const char *addr, const char *name, size_t name_len,
                                    const void *packet, size_t len, uint64_t timeout_ms, tenso_cancel *cancel) {
    CHECK_ARG(n);
    CHECK_ARG(addr);
    CHECK_ARG(name);
    CHECK_ARG(packet);
    TENSO_API_BEGIN
    const auto *b = static_cast<const uint8_t *>(packet);
    try {
        if (tenso::packet_length(b, len, tenso::Limits{}) != len)
            return set_error(TENSO_E_INVALID_ARGUMENT, "len is not the length of one packet");
    } catch (const tenso::NeedMore &) {
        return set_error(TENSO_E_INVALID_ARGUMENT, "len is shorter than the packet");
    }
    tenso::net::Payload p;
    p.packet = b;
    p.len = len;
    n->n.send(addr, std::string(name, name_len), p, timeout_ms, cancel ? &cancel->c : nullptr);
    TENSO_API_END
}

tenso_status tenso_node_send_fd(tenso_node *n, const char *addr, const char *name, size_t name_len, int fd,
                                uint64_t offset, uint64_t len, uint64_t timeout_ms, tenso_cancel *cancel) {
    CHECK_ARG(n);
    CHECK_ARG(addr);
    CHECK_ARG(name);
    CHECK_ARG(fd >= 0);
    CHECK_ARG(len > 0);
    TENSO_API_BEGIN
    tenso::net::Payload p;
    p.fd = fd;
    p.offset = offset;
    p.len = len;
    n->n.send(addr, std::string(name, name_len), p, timeout_ms, cancel ? &cancel->c : nullptr);
    TENSO_API_END
}

tenso_status tenso_node_receive(tenso_node_message **out, tenso_node *n, uint64_t timeout_ms, tenso_cancel *cancel) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(n);
    TENSO_API_BEGIN
    std::unique_ptr<tenso_node_message> m(new tenso_node_message);
    m->m = n->n.receive(timeout_ms, cancel ? &cancel->c : nullptr);
    *out = m.release();
    TENSO_API_END
}

int tenso_node_receive_fd(const tenso_node *n) { return n ? n->n.receive_fd() : -1; }

const char *tenso_node_message_name(const tenso_node_message *m, size_t *len_out) {
    if (len_out) *len_out = m ? m->m->name.size() : 0;
    return m ? m->m->name.data() : nullptr;
}
const char *tenso_node_message_sender(const tenso_node_message *m) { return m ? m->m->sender->c_str() : nullptr; }
const tenso_view *tenso_node_message_view(const tenso_node_message *m) {
    return m ? tenso::capi::H(m->m->view.get()) : nullptr;
}
tenso_status tenso_node_message_take_view(tenso_view **out, tenso_node_message *m) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(m);
    if (!m->m->view) return set_error(TENSO_E_INVALID_ARGUMENT, "the view was already taken");
    *out = release_view(std::move(m->m->view));
    return TENSO_OK;
}
void tenso_node_message_free(tenso_node_message *m) { delete m; }

tenso_status tenso_node_publish(tenso_node *n, const char *name, size_t name_len, tenso_value *v,
                                tenso_node_release_fn release, void *user) {
    CHECK_ARG(n);
    CHECK_ARG(name);
    CHECK_ARG(v);
    TENSO_API_BEGIN
    const std::string nm(name, name_len);
    std::unique_ptr<tenso::Value> val(new tenso::Value(std::move(v->v)));
    try {
        n->n.publish(nm, val, release, user);
    } catch (...) {
        v->v = std::move(*val);  // not taken: the caller still owns v
        throw;
    }
    delete v;  // the node owns the value now
    TENSO_API_END
}

tenso_status tenso_node_set_access(tenso_node *n, tenso_node_access_fn fn, void *user) {
    CHECK_ARG(n);
    TENSO_API_BEGIN
    n->n.set_access(fn, user);
    TENSO_API_END
}

tenso_status tenso_node_unpublish(tenso_node *n, const char *name, size_t name_len) {
    CHECK_ARG(n);
    CHECK_ARG(name);
    TENSO_API_BEGIN
    if (!n->n.unpublish(std::string(name, name_len)))
        return set_error(TENSO_E_NOT_FOUND, "nothing is published under that name");
    TENSO_API_END
}

tenso_status tenso_node_request(tenso_view **out, tenso_node *n, const char *addr, const char *name, size_t name_len,
                                uint64_t timeout_ms, tenso_cancel *cancel) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(n);
    CHECK_ARG(addr);
    CHECK_ARG(name);
    TENSO_API_BEGIN
    *out = release_view(n->n.request(addr, std::string(name, name_len), timeout_ms, cancel ? &cancel->c : nullptr));
    TENSO_API_END
}

tenso_status tenso_node_stats_get(tenso_node_stats *out, const tenso_node *n) {
    CHECK_ARG(out);
    CHECK_ARG(n);
    if (out->version != TENSO_NODE_STATS_VERSION)
        return set_error(TENSO_E_INVALID_ARGUMENT, "tenso_node_stats.version is not TENSO_NODE_STATS_VERSION");
    TENSO_API_BEGIN
    const tenso::net::NodeStats s = n->n.stats();
    std::memset(out, 0, sizeof *out);
    out->version = TENSO_NODE_STATS_VERSION;
    out->pool_size = s.pool_size;
    out->inbound_connections = s.inbound_connections;
    out->queued = s.queued;
    out->queued_bytes = s.queued_bytes;
    out->bytes_sent = s.bytes_sent;
    out->bytes_received = s.bytes_received;
    out->connections_opened = s.connections_opened;
    out->connections_reused = s.connections_reused;
    out->refused = s.refused;
    out->tls_kernel = s.tls_kernel;
    out->tls_user = s.tls_user;
    out->busy_polls = s.busy_polls;
    out->busy_poll_hits = s.busy_poll_hits;
    TENSO_API_END
}

// ---- completion-based calls ----------------------------------------------------------------

tenso_status tenso_node_queue_new(tenso_node_queue **out, tenso_node *n, tenso_node_op_fn fn) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(n);
    TENSO_API_BEGIN
    tenso::net::Queue::Callback cb;
    if (fn) cb = [fn](tenso::net::Operation *op) { fn(H(op), op->payload); };
    std::unique_ptr<tenso_node_queue> q(new tenso_node_queue);
    q->q = tenso::net::Queue::make(n->n.impl(), std::move(cb));
    *out = q.release();
    TENSO_API_END
}

int tenso_node_queue_fd(const tenso_node_queue *q) { return q ? q->q->fd() : -1; }

tenso_status tenso_node_queue_reap(tenso_node_op **ops, size_t cap, size_t *count_out, tenso_node_queue *q,
                                   uint64_t timeout_ms) {
    CHECK_ARG(count_out);
    *count_out = 0;
    CHECK_ARG(q);
    CHECK_ARG(ops || !cap);
    if (q->q->callback_mode())
        return set_error(TENSO_E_INVALID_ARGUMENT, "a callback-mode queue is reaped by its own thread");
    TENSO_API_BEGIN
    tenso::net::Operation *chunk[64];
    size_t total = 0;
    do {
        const size_t want = std::min<size_t>(64, cap - total);
        const size_t k = q->q->reap(chunk, want, total ? 0 : timeout_ms);
        for (size_t i = 0; i < k; ++i) ops[total + i] = H(chunk[i]);
        total += k;
        *count_out = total;
        if (k < want) break;
    } while (total < cap);
    TENSO_API_END
}

void tenso_node_queue_free(tenso_node_queue *q) {
    if (!q) return;
    q->q->close();
    delete q;
}

}  // extern "C"

namespace {
using tenso::net::Operation;
// tenso_node_send_start and tenso_node_post_start: the same arguments.
template <class Make>
tenso_status start_push(tenso_node_op **out, tenso_node_queue *q, const char *addr, const char *name, size_t name_len,
                        const tenso_value *v, uint64_t timeout_ms, void *payload, Make make) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(q);
    CHECK_ARG(addr);
    CHECK_ARG(name);
    CHECK_ARG(v);
    TENSO_API_BEGIN
    tenso::net::Queue &qu = *q->q;
    // Borrowed until the operation completes (net.h).
    *out = H(qu.launch([&] { return make(qu.node(), addr, std::string(name, name_len), v->v, timeout_ms, payload); }));
    TENSO_API_END
}
}  // namespace

extern "C" {

tenso_status tenso_node_send_start(tenso_node_op **out, tenso_node_queue *q, const char *addr, const char *name,
                                   size_t name_len, const tenso_value *v, uint64_t timeout_ms, void *payload) {
    return start_push(out, q, addr, name, name_len, v, timeout_ms, payload, tenso::net::make_send);
}

tenso_status tenso_node_post_start(tenso_node_op **out, tenso_node_queue *q, const char *addr, const char *name,
                                   size_t name_len, const tenso_value *v, uint64_t timeout_ms, void *payload) {
    return start_push(out, q, addr, name, name_len, v, timeout_ms, payload, tenso::net::make_post);
}

tenso_status tenso_node_flush_start(tenso_node_op **out, tenso_node_queue *q, const char *addr, uint64_t timeout_ms,
                                    void *payload) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(q);
    CHECK_ARG(addr);
    TENSO_API_BEGIN
    tenso::net::Queue &qu = *q->q;
    *out = H(qu.launch([&] { return tenso::net::make_flush(qu.node(), addr, timeout_ms, payload); }));
    TENSO_API_END
}

tenso_status tenso_node_request_start(tenso_node_op **out, tenso_node_queue *q, const char *addr, const char *name,
                                      size_t name_len, uint64_t timeout_ms, void *payload) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(q);
    CHECK_ARG(addr);
    CHECK_ARG(name);
    TENSO_API_BEGIN
    tenso::net::Queue &qu = *q->q;
    *out = H(qu.launch(
        [&] { return tenso::net::make_request(qu.node(), addr, std::string(name, name_len), timeout_ms, payload); }));
    TENSO_API_END
}

tenso_status tenso_node_receive_start(tenso_node_op **out, tenso_node_queue *q, uint64_t timeout_ms, void *payload) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(q);
    TENSO_API_BEGIN
    tenso::net::Queue &qu = *q->q;
    *out = H(qu.launch([&] { return tenso::net::make_receive(qu.node(), timeout_ms, payload); }));
    TENSO_API_END
}

int tenso_node_op_done(const tenso_node_op *op) { return op && O(op)->done.load(std::memory_order_acquire) ? 1 : 0; }

tenso_status tenso_node_op_result(const tenso_node_op *op) {
    CHECK_ARG(op);
    const Operation *o = O(op);
    if (!o->done.load(std::memory_order_acquire))
        return set_error(TENSO_E_INVALID_ARGUMENT, "the operation has not completed");
    if (o->status != TENSO_OK) return set_error(o->status, o->message.c_str());
    tenso::capi::clear_error();
    return TENSO_OK;
}

void *tenso_node_op_payload(const tenso_node_op *op) { return op ? O(op)->payload : nullptr; }

tenso_status tenso_node_op_take_view(tenso_view **out, tenso_node_op *op) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(op);
    Operation *o = O(op);
    if (!o->done.load(std::memory_order_acquire) || o->kind != Operation::kRequest || !o->view)
        return set_error(TENSO_E_INVALID_ARGUMENT,
                         "no value to take: not a completed request that succeeded, or taken");
    *out = release_view(std::move(o->view));
    return TENSO_OK;
}

tenso_status tenso_node_op_take_message(tenso_node_message **out, tenso_node_op *op) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(op);
    Operation *o = O(op);
    if (!o->done.load(std::memory_order_acquire) || o->kind != Operation::kReceive || !o->msg)
        return set_error(TENSO_E_INVALID_ARGUMENT,
                         "no message to take: not a completed receive that succeeded, or taken");
    TENSO_API_BEGIN
    std::unique_ptr<tenso_node_message> m(new tenso_node_message);
    m->m = std::move(o->msg);
    *out = m.release();
    TENSO_API_END
}

void tenso_node_op_cancel(tenso_node_op *op) {
    if (op && !O(op)->done.load(std::memory_order_acquire)) O(op)->queue()->cancel(O(op));
}

void tenso_node_op_free(tenso_node_op *op) {
    if (!op) return;
    Operation *o = O(op);
    o->queue()->forget(o);
    delete o;
}

}  // extern "C"
