// net.cpp - tenso._tenso.Node, tenso._tenso.Cancel and tenso._tenso.Queue: libtenso's nodes
// (tenso/net.h). Every call that may wait (start, send, receive, request, publish, shutdown,
// close) runs with the GIL released. tenso.net builds the asyncio API on Queue: the node's
// completion-based calls, whose completions resolve asyncio futures when the event loop finds
// the queue's descriptor readable (no thread per call).
#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "common.hpp"

namespace tpy {

namespace {

// Overwrites secret bytes in a way the compiler may not drop (libtenso wipes its own copies).
void OPENSSL_cleanse_like(char *p, size_t n) {
    volatile char *v = p;
    while (n--) *v++ = 0;
}

// The access hook's Python callable, called on the node's event loop threads with the GIL
// taken there: fn("get" | "push", peer, name) -> truthy allows. An exception refuses (and is
// reported as unraisable). Freed under the GIL once tenso_node_set_access has replaced it.
struct AccessHook {
    py::object fn;
    static int call(void *user, int op, const char *peer, const char *name, size_t name_len) {
        py::gil_scoped_acquire gil;
        try {
            py::object nm =
                py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(name, Py_ssize_t(name_len), "surrogateescape"));
            if (!nm) throw py::error_already_set();
            const py::object r =
                static_cast<AccessHook *>(user)->fn(op == TENSO_NODE_ACCESS_GET ? "get" : "push", peer, nm);
            return r.cast<bool>() ? 1 : 0;
        } catch (py::error_already_set &e) {
            e.discard_as_unraisable("tenso node access hook");
        } catch (const std::exception &) {}
        return 0;
    }
};

// The Python objects a published value borrows, handed back by the node's release callback.
// That callback may run on the node's event-loop thread, without the GIL: it only parks the
// object here, and the next Node call (under the GIL) drops it. Taking the GIL in the callback
// instead could deadlock against a thread that holds the GIL while it waits for the loop.
std::mutex g_graveyard_mu;
std::vector<Value *> g_graveyard;

void park_published(void *user) {
    std::lock_guard<std::mutex> lock(g_graveyard_mu);
    g_graveyard.push_back(static_cast<Value *>(user));
}

void bury_published() {
    std::vector<Value *> dead;
    {
        std::lock_guard<std::mutex> lock(g_graveyard_mu);
        dead.swap(g_graveyard);
    }
    for (Value *v : dead) delete v;  // under the GIL: drops the arrays' references
}

class Cancel {
public:
    Cancel() {
        tenso_cancel *c = nullptr;
        check(tenso_cancel_new(&c));
        c_.reset(c);
    }
    void trigger() { tenso_cancel_trigger(c_.get()); }
    bool triggered() const { return tenso_cancel_triggered(c_.get()) != 0; }
    tenso_cancel *get() const { return c_.get(); }

private:
    struct Free {
        void operator()(tenso_cancel *c) const noexcept { tenso_cancel_free(c); }
    };
    std::unique_ptr<tenso_cancel, Free> c_;
};

tenso_cancel *cancel_of(py::handle c) { return c.is_none() ? nullptr : c.cast<Cancel &>().get(); }

// Seconds (None: `none_ms`) -> milliseconds; a negative or NaN timeout is a caller error.
uint64_t timeout_ms(py::handle seconds, uint64_t none_ms) {
    if (seconds.is_none()) return none_ms;
    const double s = seconds.cast<double>();
    if (!(s >= 0)) raise_value_error("timeout must be >= 0 seconds or None");
    const double ms = s * 1000.0;
    if (ms >= 1.8e19) return std::numeric_limits<uint64_t>::max();
    // A positive timeout below a millisecond still waits (0 means "do not wait" for receive).
    return ms > 0 && ms < 1 ? 1 : uint64_t(ms);
}

struct NameArg {
    std::string bytes;
    explicit NameArg(py::handle name) {
        if (!PyUnicode_Check(name.ptr())) raise_type_error("names must be str");
        bytes = name.cast<std::string>();
    }
};

using NodeHandle = Handle<tenso_node, tenso_node_free>;

class Node {
public:
    Node(py::handle listen, uint32_t flags, py::handle cert_pem, py::handle key_pem, py::handle ca_pem,
         const py::iterable &pinned_keys, uint32_t threads, uint64_t max_packet_bytes, uint32_t max_name_bytes,
         uint32_t max_queued, uint64_t max_queued_bytes, uint32_t max_connections, uint32_t max_pool_per_peer,
         uint64_t idle_timeout_ms, uint64_t io_timeout_ms, uint64_t fd_passing_min_bytes) {
        tenso_node_options o;
        check(tenso_node_options_init(&o, TENSO_NODE_OPTIONS_VERSION));
        auto text = [](py::handle s, std::string &keep) -> const char * {
            if (s.is_none()) return nullptr;
            keep = s.cast<std::string>();
            return keep.c_str();
        };
        std::string l, c, k, ca;
        o.flags = flags;
        o.listen = text(listen, l);
        o.cert_pem = text(cert_pem, c);
        o.key_pem = text(key_pem, k);
        o.ca_pem = text(ca_pem, ca);
        std::vector<std::string> pin_text;
        for (py::handle k : pinned_keys) pin_text.push_back(k.cast<std::string>());
        std::vector<const char *> pins;
        for (const std::string &p : pin_text) pins.push_back(p.c_str());
        o.pinned_keys = pins.empty() ? nullptr : pins.data();
        o.pinned_key_count = uint32_t(pins.size());
        o.threads = threads;
        o.max_packet_bytes = max_packet_bytes;
        o.max_name_bytes = max_name_bytes;
        o.max_queued = max_queued;
        o.max_queued_bytes = max_queued_bytes;
        o.max_connections = max_connections;
        o.max_pool_per_peer = max_pool_per_peer;
        o.idle_timeout_ms = idle_timeout_ms;
        o.io_timeout_ms = io_timeout_ms;
        o.fd_passing_min_bytes = fd_passing_min_bytes;
        tenso_node *n = nullptr;
        tenso_status st;
        {
            py::gil_scoped_release nogil;  // binding and key generation
            st = tenso_node_new(&n, &o);
        }
        // The node keeps no copy of the key's text; neither do we (Python's str is the caller's).
        if (!k.empty()) OPENSSL_cleanse_like(&k[0], k.size());
        check(st);
        h_ = std::make_unique<NodeHandle>(n, "tenso node: closed");
    }

    ~Node() {
        if (h_) drop_access();
        if (h_ && !h_->closed()) h_->close();
        bury_published();
    }

    py::list addrs() const {
        auto n = h_->lease();
        py::list out;
        for (uint32_t i = 0;; ++i) {
            size_t len = 0;
            tenso_status st = tenso_node_addr(nullptr, 0, &len, n.get(), i);
            if (st == TENSO_E_NOT_FOUND) break;
            if (st != TENSO_E_BUFFER_TOO_SMALL) check(st);
            std::string s(len + 1, '\0');
            check(tenso_node_addr(s.data(), s.size(), &len, n.get(), i));
            s.resize(len);
            out.append(py::str(s));
        }
        return out;
    }

    std::string id() const {
        char buf[65];
        check(tenso_node_id(buf, h_->get()));
        return std::string(buf, 64);
    }

    // Sends `value` (a tenso._tenso.Value, kept alive by the caller for the call).
    void send(const std::string &addr, py::handle name, const Value &value, py::handle timeout, py::handle cancel) {
        push(tenso_node_send, addr, name, value, timeout, cancel);
    }

    // A pipelined push (tenso_node_post): returns once written; the value may change afterwards.
    void post(const std::string &addr, py::handle name, const Value &value, py::handle timeout, py::handle cancel) {
        push(tenso_node_post, addr, name, value, timeout, cancel);
    }

    // A tenso_value over a numpy array's memory, which `ta` keeps borrowed.
    static ValuePtr array_value(TensorArg &ta, py::handle array, bool strict) {
        prepare_tensor(ta, array, strict);
        tenso_value *raw = nullptr;
        check(tenso_value_new_tensor(&raw, &ta.t));
        return ValuePtr(raw);
    }

    // post for a numpy array: its tenso_value lives for the call only (no Python Value object),
    // what post_tensor does for the common case of one array.
    void post_array(const std::string &addr, py::handle name, py::handle array, bool strict, py::handle timeout,
                    py::handle cancel) {
        bury_published();
        NameArg nm(name);
        TensorArg ta;
        const ValuePtr v = array_value(ta, array, strict);
        const uint64_t ms = timeout_ms(timeout, 0);
        tenso_cancel *c = cancel_of(cancel);
        auto n = h_->lease();
        tenso_status st;
        {
            // Released: a post may wait (the peer's acknowledgements, a full socket).
            py::gil_scoped_release nogil;
            st = tenso_node_post(n.get(), addr.c_str(), nm.bytes.data(), nm.bytes.size(), v.get(), ms, c);
        }
        check(st);
    }

    // Posts many values to one peer, in order: (name, array or Value) pairs, converted under the
    // GIL a chunk at a time and posted with it released once per chunk (one Python call for
    // many small posts). The first failure is raised; the items before it were posted, those
    // after it were not.
    void post_many(const std::string &addr, const py::iterable &items, bool strict, py::handle timeout,
                   py::handle cancel) {
        bury_published();
        const uint64_t ms = timeout_ms(timeout, 0);
        tenso_cancel *c = cancel_of(cancel);
        auto n = h_->lease();
        constexpr size_t kChunk = 256;
        struct Item {
            std::string name;
            TensorArg ta;     // an array's, when the item is one
            ValuePtr owned;   // its tenso_value
            py::object keep;  // or the Value given
            const tenso_value *v = nullptr;
        };
        std::vector<Item> chunk;
        chunk.reserve(kChunk);
        auto send = [&] {
            tenso_status st = TENSO_OK;
            {
                py::gil_scoped_release nogil;
                for (const Item &it : chunk) {
                    st = tenso_node_post(n.get(), addr.c_str(), it.name.data(), it.name.size(), it.v, ms, c);
                    if (st != TENSO_OK) break;
                }
            }
            chunk.clear();  // under the GIL: the arrays' references
            check(st);
        };
        try {
            for (py::handle pair : items) {
                const py::tuple t = py::reinterpret_borrow<py::object>(pair).cast<py::tuple>();
                if (t.size() != 2) raise_value_error("post_many takes (name, value) pairs");
                Item it;
                it.name = NameArg(t[0]).bytes;
                if (py::isinstance<Value>(t[1])) {
                    it.keep = py::reinterpret_borrow<py::object>(t[1]);
                    it.v = it.keep.cast<const Value &>().get();
                } else {
                    it.owned = array_value(it.ta, t[1], strict);
                    it.v = it.owned.get();
                }
                chunk.push_back(std::move(it));
                if (chunk.size() == kChunk) send();
            }
        } catch (...) {
            // A bad item: the ones before it are posted (a failure among them comes first).
            if (!chunk.empty()) send();
            throw;
        }
        if (!chunk.empty()) send();
    }

    using PushFn = tenso_status (*)(tenso_node *, const char *, const char *, size_t, const tenso_value *, uint64_t,
                                    tenso_cancel *);
    void push(PushFn fn, const std::string &addr, py::handle name, const Value &value, py::handle timeout,
              py::handle cancel) {
        bury_published();
        NameArg nm(name);
        const uint64_t ms = timeout_ms(timeout, 0);
        tenso_cancel *c = cancel_of(cancel);
        auto n = h_->lease();
        tenso_status st;
        {
            py::gil_scoped_release nogil;
            st = fn(n.get(), addr.c_str(), nm.bytes.data(), nm.bytes.size(), value.get(), ms, c);
        }
        check(st);
    }

    // Waits for every post to addr to be acknowledged (tenso_node_flush); raises the first failure.
    void flush(const std::string &addr, py::handle timeout, py::handle cancel) {
        const uint64_t ms = timeout_ms(timeout, 0);
        tenso_cancel *c = cancel_of(cancel);
        auto n = h_->lease();
        tenso_status st;
        {
            py::gil_scoped_release nogil;
            st = tenso_node_flush(n.get(), addr.c_str(), ms, c);
        }
        check(st);
    }

    // Sends an encoded packet (any C-contiguous buffer), checked by the library first.
    void send_packet(const std::string &addr, py::handle name, py::handle packet, py::handle timeout,
                     py::handle cancel) {
        NameArg nm(name);
        BufferHold b;
        b.acquire(packet, PyBUF_C_CONTIGUOUS);
        const uint64_t ms = timeout_ms(timeout, 0);
        tenso_cancel *c = cancel_of(cancel);
        auto n = h_->lease();
        tenso_status st;
        {
            py::gil_scoped_release nogil;
            st = tenso_node_send_packet(n.get(), addr.c_str(), nm.bytes.data(), nm.bytes.size(), b.data(), b.size(), ms,
                                        c);
        }
        check(st);
    }

    // (name, sender, object), or None when nothing arrived in time.
    py::object receive(py::handle timeout, py::handle cancel) {
        bury_published();
        const uint64_t ms = timeout_ms(timeout, std::numeric_limits<uint64_t>::max());
        tenso_cancel *c = cancel_of(cancel);
        auto n = h_->lease();
        tenso_node_message *m = nullptr;
        tenso_status st;
        if (ms == 0) {
            st = tenso_node_receive(&m, n.get(), 0, c);  // a poll: not worth a GIL round trip
        } else {
            py::gil_scoped_release nogil;
            st = tenso_node_receive(&m, n.get(), ms, c);
        }
        if (st == TENSO_E_TIMEOUT) return py::none();
        check(st);
        return message_tuple(m);
    }

    // (name, sender, object) of a received message, which it frees.
    static py::object message_tuple(tenso_node_message *m) {
        std::unique_ptr<tenso_node_message, void (*)(tenso_node_message *)> msg(m, tenso_node_message_free);
        size_t name_len = 0;
        const char *name = tenso_node_message_name(m, &name_len);
        py::object py_name =
            py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(name, Py_ssize_t(name_len), "surrogateescape"));
        if (!py_name) throw py::error_already_set();
        py::str sender(tenso_node_message_sender(m));
        tenso_view *v = nullptr;
        check(tenso_node_message_take_view(&v, m));
        return py::make_tuple(py_name, sender, view_to_python(v, false));
    }

    int receive_fd() const { return tenso_node_receive_fd(h_->get()); }

    // Publishes `value`: its tenso_value moves into the node, the objects it borrows stay alive
    // (in a heap Value) until the node's release callback.
    void publish(py::handle name, Value &value) {
        bury_published();
        NameArg nm(name);
        if (!value.value) raise_value_error("tenso node: this value was already published");
        auto n = h_->lease();
        auto kept = std::make_unique<Value>();
        kept->keep = std::move(value.keep);
        kept->buffers = std::move(value.buffers);
        tenso_value *raw = value.value.release();
        tenso_status st;
        {
            py::gil_scoped_release nogil;  // may wait for a send of the value it replaces
            st = tenso_node_publish(n.get(), nm.bytes.data(), nm.bytes.size(), raw, park_published, kept.get());
        }
        if (st != TENSO_OK) {
            // Not taken (net.h): the value and what it borrows stay with the caller.
            value.value.reset(raw);
            value.keep = std::move(kept->keep);
            value.buffers = std::move(kept->buffers);
            check(st);
        }
        kept.release();  // the node gives it back through park_published
        bury_published();
        check(st);
    }

    void unpublish(py::handle name) {
        NameArg nm(name);
        auto n = h_->lease();
        tenso_status st;
        {
            py::gil_scoped_release nogil;
            st = tenso_node_unpublish(n.get(), nm.bytes.data(), nm.bytes.size());
        }
        bury_published();
        check(st);
    }

    py::object request(const std::string &addr, py::handle name, py::handle timeout, py::handle cancel) {
        bury_published();
        NameArg nm(name);
        const uint64_t ms = timeout_ms(timeout, 0);
        tenso_cancel *c = cancel_of(cancel);
        auto n = h_->lease();
        tenso_view *v = nullptr;
        tenso_status st;
        {
            py::gil_scoped_release nogil;
            st = tenso_node_request(&v, n.get(), addr.c_str(), nm.bytes.data(), nm.bytes.size(), ms, c);
        }
        check(st);
        return view_to_python(v, false);
    }

    py::dict stats() const {
        bury_published();
        tenso_node_stats s;
        std::memset(&s, 0, sizeof s);
        s.version = TENSO_NODE_STATS_VERSION;
        check(tenso_node_stats_get(&s, h_->get()));
        py::dict d;
        d["pool_size"] = s.pool_size;
        d["inbound_connections"] = s.inbound_connections;
        d["queued"] = s.queued;
        d["queued_bytes"] = s.queued_bytes;
        d["bytes_sent"] = s.bytes_sent;
        d["bytes_received"] = s.bytes_received;
        d["connections_opened"] = s.connections_opened;
        d["connections_reused"] = s.connections_reused;
        d["refused"] = s.refused;
        d["tls_kernel"] = s.tls_kernel;
        d["tls_user"] = s.tls_user;
        d["busy_polls"] = s.busy_polls;
        d["busy_poll_hits"] = s.busy_poll_hits;
        return d;
    }

    void shutdown() {
        if (h_->closed()) return;
        auto n = h_->lease();
        {
            py::gil_scoped_release nogil;
            tenso_node_shutdown(n.get());
        }
        bury_published();
    }

    void close() {
        drop_access();
        if (!h_->closed()) h_->close();  // frees once no call holds a lease
        bury_published();
    }

    // Sets (or, with None, removes) the access hook. The GIL is released while the node swaps
    // it: a call of the old one may be waiting for the GIL on an event loop thread.
    void set_access(py::handle fn) {
        auto n = h_->lease();
        std::unique_ptr<AccessHook> hook;
        if (!fn.is_none()) {
            if (!PyCallable_Check(fn.ptr())) raise_type_error("the access hook must be callable or None");
            hook.reset(new AccessHook{py::reinterpret_borrow<py::object>(fn)});
        }
        tenso_status st;
        {
            py::gil_scoped_release nogil;
            st = tenso_node_set_access(n.get(), hook ? &AccessHook::call : nullptr, hook.get());
        }
        check(st);
        access_ = std::move(hook);  // the old one goes: no call of it is running
    }

    bool closed() const { return h_->closed(); }
    std::shared_ptr<tenso_node> lease() const { return h_->lease(); }

private:
    std::unique_ptr<NodeHandle> h_;
    std::unique_ptr<AccessHook> access_;

    // Removes the access hook from the node before its Python callable goes: a call in flight
    // on an event loop thread finishes first (the GIL released meanwhile).
    void drop_access() {
        if (!access_) return;
        if (!h_->closed()) {
            auto n = h_->lease();
            py::gil_scoped_release nogil;
            tenso_node_set_access(n.get(), nullptr, nullptr);
        }
        access_.reset();
    }
};

// A completion queue of the node (tenso_node_queue, descriptor mode) for one asyncio event loop:
// tenso.net's coroutines start calls on it and await futures that reap() resolves, which the
// loop calls when fd() is readable (loop.add_reader). Every method runs on the loop's thread.
class Queue {
public:
    explicit Queue(const Node &node) {
        auto n = node.lease();
        tenso_node_queue *q = nullptr;
        check(tenso_node_queue_new(&q, n.get(), nullptr));
        q_.reset(q);
    }
    ~Queue() { close(); }

    int fd() const { return tenso_node_queue_fd(q_.get()); }

    // Each start returns a future of `loop` (done already when the call completed at once),
    // except post, which returns None when the post is done at once (the common case).
    py::object send(py::handle loop, const std::string &addr, py::handle name, py::handle value, bool strict,
                    py::handle timeout) {
        return push(tenso_node_send_start, loop, addr, name, value, strict, timeout, false);
    }
    py::object post(py::handle loop, const std::string &addr, py::handle name, py::handle value, bool strict,
                    py::handle timeout) {
        return push(tenso_node_post_start, loop, addr, name, value, strict, timeout, true);
    }
    py::object flush(py::handle loop, const std::string &addr, py::handle timeout) {
        auto p = std::make_unique<Pending>();
        tenso_node_op *op = nullptr;
        check(tenso_node_flush_start(&op, live(), addr.c_str(), timeout_ms(timeout, 0), p.get()));
        return started(loop, std::move(p), op, false);
    }
    py::object request(py::handle loop, const std::string &addr, py::handle name, py::handle timeout) {
        NameArg nm(name);
        auto p = std::make_unique<Pending>();
        tenso_node_op *op = nullptr;
        check(tenso_node_request_start(&op, live(), addr.c_str(), nm.bytes.data(), nm.bytes.size(),
                                       timeout_ms(timeout, 0), p.get()));
        return started(loop, std::move(p), op, false);
    }
    // Resolves to (name, sender, object), or None when nothing came in time.
    py::object receive(py::handle loop, py::handle timeout) {
        if (!stash_.empty()) {  // taken by a receive that was cancelled after it completed
            py::object fut = loop.attr("create_future")();
            fut.attr("set_result")(stash_.front());
            stash_.pop_front();
            return fut;
        }
        auto p = std::make_unique<Pending>();
        p->receive = true;
        tenso_node_op *op = nullptr;
        check(
            tenso_node_receive_start(&op, live(), timeout_ms(timeout, std::numeric_limits<uint64_t>::max()), p.get()));
        return started(loop, std::move(p), op, false);
    }

    // Hands out what completed: resolves the futures (the loop's reader callback).
    void reap() {
        if (!q_) return;
        tenso_node_op *ops[64];
        size_t n = 0;
        do {
            tenso_status st;
            {
                py::gil_scoped_release nogil;  // the operations' socket work runs here
                st = tenso_node_queue_reap(ops, 64, &n, q_.get(), 0);
            }
            check(st);
            for (size_t i = 0; i < n; ++i) {
                std::unique_ptr<Pending> p(static_cast<Pending *>(tenso_node_op_payload(ops[i])));
                in_flight_.erase(p->fut.ptr());
                resolve(*p);
            }
        } while (n == 64);
    }

    // The awaiting task was cancelled: so is the call (its completion is reaped as usual).
    void cancel(py::handle fut) {
        auto it = in_flight_.find(fut.ptr());
        if (it != in_flight_.end()) tenso_node_op_cancel(it->second->op);
    }

    // Frees the queue; calls in flight are cancelled, and their futures with them.
    void close() {
        if (!q_) return;
        std::unordered_map<PyObject *, Pending *> left;
        left.swap(in_flight_);
        for (auto &e : left) {
            std::unique_ptr<Pending> p(e.second);
            {
                py::gil_scoped_release nogil;  // may wait for a blocking post to the same peer
                tenso_node_op_free(p->op);
            }
            p->op = nullptr;
            if (!p->fut.attr("done")().cast<bool>()) p->fut.attr("cancel")();
        }
        py::gil_scoped_release nogil;
        q_.reset();
    }

private:
    // What a call keeps until it completes: its future, its operation, its value's memory.
    struct Pending {
        py::object fut;
        tenso_node_op *op = nullptr;
        TensorArg ta;     // an array's
        ValuePtr owned;   // its tenso_value
        py::object keep;  // or the tenso._tenso.Value given
        bool receive = false;
        ~Pending() { tenso_node_op_free(op); }
    };
    struct QueueFree {
        void operator()(tenso_node_queue *q) const noexcept { tenso_node_queue_free(q); }
    };
    std::unique_ptr<tenso_node_queue, QueueFree> q_;
    std::unordered_map<PyObject *, Pending *> in_flight_;  // by future
    std::deque<py::object> stash_;                         // messages received for cancelled receives, in order

    tenso_node_queue *live() const {
        if (!q_) raise_value_error("tenso node queue: closed");
        return q_.get();
    }

    using StartFn = tenso_status (*)(tenso_node_op **, tenso_node_queue *, const char *, const char *, size_t,
                                     const tenso_value *, uint64_t, void *);
    py::object push(StartFn fn, py::handle loop, const std::string &addr, py::handle name, py::handle value,
                    bool strict, py::handle timeout, bool none_when_done) {
        bury_published();
        NameArg nm(name);
        auto p = std::make_unique<Pending>();
        const tenso_value *v;
        if (py::isinstance<Value>(value)) {
            p->keep = py::reinterpret_borrow<py::object>(value);
            v = p->keep.cast<const Value &>().get();
        } else {
            p->owned = Node::array_value(p->ta, value, strict);
            v = p->owned.get();
        }
        const uint64_t ms = timeout_ms(timeout, 0);
        tenso_node_op *op = nullptr;
        tenso_status st;
        if (p->ta.t.nbytes >= kReleaseGilBytes) {
            py::gil_scoped_release nogil;  // the first steps write what the socket takes
            st = fn(&op, live(), addr.c_str(), nm.bytes.data(), nm.bytes.size(), v, ms, p.get());
        } else {
            st = fn(&op, live(), addr.c_str(), nm.bytes.data(), nm.bytes.size(), v, ms, p.get());
        }
        check(st);
        return started(loop, std::move(p), op, none_when_done);
    }

    py::object started(py::handle loop, std::unique_ptr<Pending> p, tenso_node_op *op, bool none_when_done) {
        p->op = op;
        if (tenso_node_op_done(op)) {
            if (none_when_done) {
                check(tenso_node_op_result(op));
                return py::none();
            }
            p->fut = loop.attr("create_future")();
            resolve(*p);
            return std::move(p->fut);
        }
        p->fut = loop.attr("create_future")();
        py::object fut = p->fut;
        in_flight_.emplace(fut.ptr(), p.release());
        return fut;
    }

    // Sets the future from the completed operation.
    void resolve(Pending &p) {
        const tenso_status st = tenso_node_op_result(p.op);
        py::object result = py::none();
        py::object error;
        try {
            if (st == TENSO_OK) {
                tenso_view *v = nullptr;
                tenso_node_message *m = nullptr;
                if (tenso_node_op_take_view(&v, p.op) == TENSO_OK) result = view_to_python(v, false);
                else if (tenso_node_op_take_message(&m, p.op) == TENSO_OK) result = Node::message_tuple(m);
                tenso_error_clear();
            } else if (st != TENSO_E_TIMEOUT || !p.receive) {
                raise_status(st);
            }
        } catch (py::error_already_set &e) {
            error = e.value();
        }
        if (p.fut.attr("done")().cast<bool>()) {
            // Cancelled: a message it took goes to the next receive, not lost.
            if (p.receive && !result.is_none()) stash_.push_back(std::move(result));
            return;
        }
        if (error) p.fut.attr("set_exception")(error);
        else p.fut.attr("set_result")(result);
    }
};

}  // namespace

void init_net(py::module_ &m) {
    m.attr("NODE_ALLOW_PLAINTEXT") = uint32_t(TENSO_NODE_ALLOW_PLAINTEXT);
    m.attr("NODE_NO_FD_PASSING") = uint32_t(TENSO_NODE_NO_FD_PASSING);
    m.attr("NODE_NO_LISTEN") = uint32_t(TENSO_NODE_NO_LISTEN);
    m.attr("NODE_NO_BUSY_POLL") = uint32_t(TENSO_NODE_NO_BUSY_POLL);

    py::class_<Cancel>(m, "Cancel", "A cancel token (tenso_cancel): trigger() fails the calls given it.")
        .def(py::init<>())
        .def("trigger", &Cancel::trigger)
        .def_property_readonly("triggered", &Cancel::triggered);

    py::class_<Node>(m, "Node", "A libtenso node (tenso_node). tenso.net.TensorNode is the Python API.")
        .def(py::init<py::handle, uint32_t, py::handle, py::handle, py::handle, const py::iterable &, uint32_t,
                      uint64_t, uint32_t, uint32_t, uint64_t, uint32_t, uint32_t, uint64_t, uint64_t, uint64_t>(),
             py::arg("listen") = py::none(), py::arg("flags") = 0u, py::arg("cert_pem") = py::none(),
             py::arg("key_pem") = py::none(), py::arg("ca_pem") = py::none(), py::arg("pinned_keys") = py::tuple(),
             py::arg("threads") = 0u, py::arg("max_packet_bytes") = 0u, py::arg("max_name_bytes") = 0u,
             py::arg("max_queued") = 0u, py::arg("max_queued_bytes") = 0u, py::arg("max_connections") = 0u,
             py::arg("max_pool_per_peer") = 0u, py::arg("idle_timeout_ms") = 0u, py::arg("io_timeout_ms") = 0u,
             py::arg("fd_passing_min_bytes") = 0u)
        .def("addrs", &Node::addrs)
        .def("id", &Node::id)
        .def("send", &Node::send, py::arg("addr"), py::arg("name"), py::arg("value"), py::arg("timeout") = py::none(),
             py::arg("cancel") = py::none())
        .def("post", &Node::post, py::arg("addr"), py::arg("name"), py::arg("value"), py::arg("timeout") = py::none(),
             py::arg("cancel") = py::none())
        .def("post_array", &Node::post_array, py::arg("addr"), py::arg("name"), py::arg("array"),
             py::arg("strict") = false, py::arg("timeout") = py::none(), py::arg("cancel") = py::none())
        .def("post_many", &Node::post_many, py::arg("addr"), py::arg("items"), py::arg("strict") = false,
             py::arg("timeout") = py::none(), py::arg("cancel") = py::none())
        .def("flush", &Node::flush, py::arg("addr"), py::arg("timeout") = py::none(), py::arg("cancel") = py::none())
        .def("send_packet", &Node::send_packet, py::arg("addr"), py::arg("name"), py::arg("packet"),
             py::arg("timeout") = py::none(), py::arg("cancel") = py::none())
        .def("receive", &Node::receive, py::arg("timeout") = py::none(), py::arg("cancel") = py::none())
        .def("receive_fd", &Node::receive_fd)
        .def("publish", &Node::publish, py::arg("name"), py::arg("value"))
        .def("unpublish", &Node::unpublish, py::arg("name"))
        .def("request", &Node::request, py::arg("addr"), py::arg("name"), py::arg("timeout") = py::none(),
             py::arg("cancel") = py::none())
        .def("stats", &Node::stats)
        .def("set_access", &Node::set_access, py::arg("fn"))
        .def("shutdown", &Node::shutdown)
        .def("close", &Node::close)
        .def_property_readonly("closed", &Node::closed);

    py::class_<Queue>(m, "Queue",
                      "A completion queue of a node for one asyncio loop (tenso_node_queue); used by tenso.net.")
        .def(py::init<const Node &>(), py::arg("node"))
        .def("fd", &Queue::fd)
        .def("send", &Queue::send, py::arg("loop"), py::arg("addr"), py::arg("name"), py::arg("value"),
             py::arg("strict") = false, py::arg("timeout") = py::none())
        .def("post", &Queue::post, py::arg("loop"), py::arg("addr"), py::arg("name"), py::arg("value"),
             py::arg("strict") = false, py::arg("timeout") = py::none())
        .def("flush", &Queue::flush, py::arg("loop"), py::arg("addr"), py::arg("timeout") = py::none())
        .def("request", &Queue::request, py::arg("loop"), py::arg("addr"), py::arg("name"),
             py::arg("timeout") = py::none())
        .def("receive", &Queue::receive, py::arg("loop"), py::arg("timeout") = py::none())
        .def("reap", &Queue::reap)
        .def("cancel", &Queue::cancel, py::arg("future"))
        .def("close", &Queue::close);
}

}  // namespace tpy
