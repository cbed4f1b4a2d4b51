/**
 * @file tenso/net.h
 * @brief tenso nodes: push and pull named values between peers (tenso_node_*).
 * Included by tenso/tenso.h; may also be included on its own.
 *
 * A node listens on TCP (IPv4/IPv6) and/or Unix-domain sockets, dials peers by address, pushes
 * named values to them and serves the values it publishes to peers that pull them. Every byte on
 * the wire is a Tenso packet, framed by the one stream decoder (tenso_decoder); the protocol is
 * described in docs/net-protocol.md.
 *
 * Addresses ("tickets"), as tenso_node_addr() prints them and tenso_node_send() takes them:
 * @verbatim
   tls://<sha256 of the node's public key, 64 hex>@<host>:<port>   TLS 1.3 (the default)
   tcp://<host>:<port>                                               plain TCP (opt-in)
   unix://<path>                                                     Unix socket (opt-in, same host)
   @endverbatim
 * `<host>` is an IPv4 literal, an IPv6 literal in brackets, or a name. A tls:// ticket carries the
 * peer's identity: dialing it refuses any peer whose key does not hash to it.
 *
 * Security. TLS 1.3 through OpenSSL, mutually authenticated. A node's identity is its key: the
 * certificate and key given, else an ephemeral P-256 key and self-signed certificate made at
 * start. The dialer checks the listener's key against the ticket (and against ca_pem when set).
 * The listener accepts a dialer whose certificate chains to ca_pem, or whose key is among
 * pinned_keys; with neither set it accepts any dialer that proves a key (its fingerprint is
 * the message's sender). Refusals: TENSO_E_AUTH. Plain TCP and Unix sockets are used only with
 * TENSO_NODE_ALLOW_PLAINTEXT. Without an access hook (tenso_node_set_access, @since 1.5) every
 * trusted dialer may get every published value and push under any name. Where the kernel
 * offers TLS (Linux's `tls` module, kTLS), OpenSSL hands it the traffic keys after each
 * handshake and the kernel encrypts (and, where it can, decrypts) the records, written straight
 * from the value's memory; elsewhere OpenSSL does it in this process. tenso_node_stats counts
 * the connections of each kind (since 1.5).
 *
 * Threads and lifetimes. A node runs its own event loop (standalone Asio) on `threads` threads.
 * Every call is thread-safe; blocking calls may run on many threads at once. tenso_node_shutdown
 * stops the loop, closes every connection and fails every pending call with TENSO_E_SHUTDOWN (as
 * it does every later call); tenso_node_free shuts down if needed, then frees. Messages and views
 * a call returned stay valid after the node is freed.
 *
 * Timeouts and cancellation. Blocking calls take timeout_ms (0 = do not wait at all for
 * receive, and the node's io_timeout_ms for the others; UINT64_MAX = no deadline) and a cancel
 * token (may be NULL); expiry is TENSO_E_TIMEOUT, a triggered token TENSO_E_CANCELLED.
 * A push (send, send_packet, send_fd) is stopped by a cancel or its deadline only until it is
 * handed over: while its bytes are still being written, or, to a unix:// peer, before its
 * descriptor is passed (a cancel that came while the value was being prepared is honoured
 * then). After that the peer has it: the call still ends at once with TENSO_E_CANCELLED or
 * TENSO_E_TIMEOUT if the acknowledgement has not come, but the value may still be received. So
 * TENSO_E_CANCELLED does not guarantee non-delivery; TENSO_OK guarantees delivery.
 *
 * Hostile peers. A node bounds what any peer can make it hold (docs/threat-model.md,
 * docs/net-protocol.md): inbound connections are unauthenticated until the TLS handshake has
 * shown a trusted key (plaintext listeners: until their first frame), and meanwhile hold one of
 * max(4, max_connections / 4) pre-authentication slots for at most min(io_timeout_ms, 10 s)
 * (a newcomer finding them full closes the oldest once that one had a tenth of that time);
 * authenticated connections are at most
 * max_connections and are closed after 2 * idle_timeout_ms with no request, or when a request
 * takes longer than io_timeout_ms plus its bytes at 1 MiB/s; received pushes hold at most
 * max_queued_bytes, counted as decoded (inflated) bytes and reserved before their bytes are
 * read; at most 64 passed descriptors wait for their frames.
 *
 * Completion-based calls (1.5). Every push, post, flush, request and receive can also be
 * started without blocking (tenso_node_send_start, ...) on a completion queue: the caller's
 * event loop waits on the queue's one descriptor, and learns of each call's completion by
 * reaping it, or through a callback. See "Completion-based calls" below.
 *
 * @since 1.4 for everything in this header but the completion-based calls (1.5).
 */
#ifndef TENSO_NET_H
#define TENSO_NET_H

#include "tenso/tenso.h"

TENSO_BEGIN_DECL

/** A node: its listeners, its connection pool and its event loop. */
typedef struct tenso_node tenso_node;

/* ============================================================================================
 * Cancel tokens
 * ========================================================================================== */

/** A cancel token: triggering it ends the blocking calls given it with TENSO_E_CANCELLED. */
typedef struct tenso_cancel tenso_cancel;

/** A new, untriggered token. */
TENSO_API tenso_status tenso_cancel_new(tenso_cancel **out);
/** Cancels every call waiting on the token now and any later call given it. Thread-safe. */
TENSO_API void tenso_cancel_trigger(tenso_cancel *c);
/** 1 once the token was triggered, else 0 (also for NULL). */
TENSO_API int tenso_cancel_triggered(const tenso_cancel *c);
/** The token must not be in use by a pending call. NULL is accepted. */
TENSO_API void tenso_cancel_free(tenso_cancel *c);

/* ============================================================================================
 * Starting a node
 * ========================================================================================== */

/** tenso_node_options.flags: allow tcp:// and unix:// listeners and peers (no TLS). */
#define TENSO_NODE_ALLOW_PLAINTEXT 0x1u
/** tenso_node_options.flags: never pass descriptors over Unix sockets (always send bytes). */
#define TENSO_NODE_NO_FD_PASSING 0x2u
/** tenso_node_options.flags: do not listen at all (a node that only dials). */
#define TENSO_NODE_NO_LISTEN 0x4u
/** tenso_node_options.flags: no busy polling. Without it, a send waiting for its
 *  acknowledgement, or a request for its value, polls its socket for up to 100 us before it
 *  sleeps (posts and flushes never poll), and the node's event loop, after work, polls for
 *  more for up to 100 us before it sleeps. Polling saves the 30-80 us a sleeping thread takes
 *  to wake through an idle CPU (notably in virtual machines), at the cost of that CPU time;
 *  each backs off by itself while nothing comes in time (see docs/net-protocol.md
 *  "Latency"). @since 1.5 */
#define TENSO_NODE_NO_BUSY_POLL 0x8u

/** Zero means "default" in every field. */
typedef struct tenso_node_options {
    uint32_t version;               /**< TENSO_NODE_OPTIONS_VERSION */
    uint32_t flags;                 /**< TENSO_NODE_* bits */
    const char *listen;             /**< comma-separated listen addresses ("tls://127.0.0.1:0",
                                       "tcp://[::1]:0", "unix:///run/x.sock"; the tls:// form
                                       takes no fingerprint here); NULL = "tls://127.0.0.1:0" */
    const char *cert_pem;           /**< this node's certificate chain, PEM text; NULL = ephemeral */
    const char *key_pem;            /**< its private key, PEM text */
    const char *ca_pem;             /**< trust peers whose chain ends at this CA (PEM text) */
    const char *const *pinned_keys; /**< trust peers with these key fingerprints (64 hex each) */
    uint32_t pinned_key_count;      /**< entries of pinned_keys */
    uint32_t threads;               /**< event loop threads; 0 = 1 */
    uint64_t max_packet_bytes;      /**< largest packet accepted from a peer; 0 = 16 GiB */
    uint32_t max_name_bytes;        /**< longest value name; 0 = 4096 */
    uint32_t max_queued;            /**< received pushes waiting for tenso_node_receive; 0 = 1024 */
    uint64_t max_queued_bytes;      /**< the bytes they hold, decoded (compressed bodies count
                                       inflated), with those of the pushes being read; 0 = 1 GiB.
                                       A full queue stops reading from the pushing peers
                                       (backpressure); a push larger than this is refused */
    uint32_t max_connections;       /**< authenticated inbound connections, and pooled ones per
                                       peer; 0 = 64 (a quarter of it, at least 4, more for
                                       connections not yet authenticated) */
    uint32_t max_pool_per_peer;     /**< idle pooled connections kept per peer; 0 = 4 */
    uint64_t idle_timeout_ms;       /**< a pooled connection idle this long is closed (an inbound
                                       one after twice this); 0 = 300000 */
    uint64_t io_timeout_ms;         /**< default deadline of blocking calls, and of an inbound
                                       request (plus 1 ms per KiB); 0 = 60000 */
    uint64_t fd_passing_min_bytes;  /**< Unix peers: packets this large travel as a descriptor
                                       (SCM_RIGHTS of a memfd) instead of bytes; 0 = 1 MiB */
} tenso_node_options;

#define TENSO_NODE_OPTIONS_VERSION 1 /**< the tenso_node_options version these headers declare */

/** Fills *opts with defaults for struct version `version` (1).
 *  @return TENSO_E_INVALID_ARGUMENT for a NULL opts or an unknown version. */
TENSO_API tenso_status tenso_node_options_init(tenso_node_options *opts, uint32_t version);

/** Starts a node: binds its listeners (port 0 picks a free one) and starts its event loop.
 *  The node does not keep key_pem's text (its copies are wiped once read); the caller's is the
 *  caller's to wipe.
 *  @return TENSO_E_BAD_ADDRESS for an unparsable listen address; TENSO_E_IO when binding
 *  fails; TENSO_E_AUTH for an unusable certificate or key (an encrypted key_pem, a certificate
 *  for another key, or cert_pem, key_pem or ca_pem given as empty or certificate-less text:
 *  pass NULL for "not set"); TENSO_E_INVALID_ARGUMENT for a plaintext listener without
 *  TENSO_NODE_ALLOW_PLAINTEXT. */
TENSO_API tenso_status tenso_node_new(tenso_node **out, const tenso_node_options *opts);

/** Stops the node (see above). Idempotent. */
TENSO_API void tenso_node_shutdown(tenso_node *n);
/** Shuts the node down if needed, then frees it. NULL is accepted. */
TENSO_API void tenso_node_free(tenso_node *n);

/** The index-th address a peer can dial (in listen order, ports resolved), NUL-terminated.
 *  @param buf, cap  where the address goes, and its size in bytes.
 *  @param len_out receives the length without the NUL (also when the buffer is too small).
 *  @param n       the node.
 *  @param index   0 for the first listener.
 *  @return TENSO_E_NOT_FOUND past the last one; TENSO_E_BUFFER_TOO_SMALL. */
TENSO_API tenso_status tenso_node_addr(char *buf, size_t cap, size_t *len_out, const tenso_node *n, uint32_t index);

/** This node's key fingerprint (64 hex + NUL into buf[65]). */
TENSO_API tenso_status tenso_node_id(char buf[65], const tenso_node *n);

/* ============================================================================================
 * Push: send a named value to a peer; the peer receives it from its queue
 * ========================================================================================== */

/** Sends `v` (any kind) to the peer at `addr` under `name` (UTF-8, 1..max_name_bytes). Returns
 *  once the peer has queued it (its acknowledgement), so a full peer queue blocks the sender.
 *  Dense bodies are written straight from their memory (vectored writes of header + body).
 *  @return TENSO_E_BAD_ADDRESS, TENSO_E_CONNECTION, TENSO_E_AUTH, TENSO_E_TIMEOUT,
 *  TENSO_E_CANCELLED, TENSO_E_SHUTDOWN, TENSO_E_LIMIT (the peer refused its size). */
TENSO_API tenso_status tenso_node_send(tenso_node *n, const char *addr, const char *name, size_t name_len,
                                       const tenso_value *v, uint64_t timeout_ms, tenso_cancel *cancel);

/** A pipelined push: as tenso_node_send, but returns without waiting for the peer's
 *  acknowledgement, once the packet is written to the peer's connection or, for a small value,
 *  copied into the node's buffer for that peer. When post returns the value's memory is no
 *  longer used, so the caller may change or free it at once. A large value is written by the
 *  calling thread (vectored, straight from its memory). Small values (packet and control frame
 *  of at most 16 KiB) are gathered, so that many travel in one write: the buffer is written
 *  when it holds 128 KiB, when a post to the peer must wait (for acknowledgements or socket
 *  room) or is large, by tenso_node_flush, at shutdown as far as the socket takes it at once,
 *  and otherwise by the node's event loop about 1 ms after a post left it unwritten (as far as
 *  the socket takes it; retried while the socket is full), so posts are sent without a flush.
 *  Call tenso_node_flush to learn their fate. Posts to one peer travel on one
 *  connection in call order and are received in that order. Backpressure: the socket's, and a
 *  bound of max_queued (this node's option) unacknowledged posts per peer, beyond which post
 *  waits for acknowledgements. A failed post returns its status; the peer's refusal of an
 *  earlier post (e.g. TENSO_E_LIMIT) is returned by tenso_node_flush. After a connection
 *  failure the posts still unacknowledged on it, written or buffered, fail (flush returns the
 *  failure); after shutdown, flush returns TENSO_E_SHUTDOWN (posts not acknowledged by then,
 *  buffered ones included, are not known to have arrived).
 *  @return the statuses of tenso_node_send.
 *  @since 1.4 */
TENSO_API tenso_status tenso_node_post(tenso_node *n, const char *addr, const char *name, size_t name_len,
                                       const tenso_value *v, uint64_t timeout_ms, tenso_cancel *cancel);

/** Waits until every tenso_node_post to `addr` (the same address text) is acknowledged, then
 *  returns the first failure among the posts since the previous flush (and forgets it), or
 *  TENSO_OK. When the wait ends early (TENSO_E_TIMEOUT, TENSO_E_CANCELLED, TENSO_E_SHUTDOWN)
 *  the connection is closed and the posts still unacknowledged fail with that status.
 *  @since 1.4 */
TENSO_API tenso_status tenso_node_flush(tenso_node *n, const char *addr, uint64_t timeout_ms, tenso_cancel *cancel);

/** As tenso_node_send, for a packet the caller already encoded (`len` bytes, checked with
 *  tenso_packet_length before anything is sent). */
TENSO_API tenso_status tenso_node_send_packet(tenso_node *n, const char *addr, const char *name, size_t name_len,
                                              const void *packet, size_t len, uint64_t timeout_ms,
                                              tenso_cancel *cancel);

/** As tenso_node_send_packet, for a packet stored in `fd` at [offset, offset + len) (a memfd, a
 *  tenso_shm segment's descriptor or a file). To a unix:// peer the descriptor itself travels
 *  (SCM_RIGHTS): O(1) in the packet's size. To others the bytes are sent (sendfile). */
TENSO_API tenso_status tenso_node_send_fd(tenso_node *n, const char *addr, const char *name, size_t name_len, int fd,
                                          uint64_t offset, uint64_t len, uint64_t timeout_ms, tenso_cancel *cancel);

/** A received push: its name, its sender and the decoded value. */
typedef struct tenso_node_message tenso_node_message;

/** Takes the oldest received push. @return TENSO_E_TIMEOUT when none arrived in time
 *  (timeout_ms 0: none is waiting now). */
TENSO_API tenso_status tenso_node_receive(tenso_node_message **out, tenso_node *n, uint64_t timeout_ms,
                                          tenso_cancel *cancel);

/** A descriptor that is readable while received pushes wait (for poll/epoll/asyncio); owned by
 *  the node. Reading it is not needed (tenso_node_receive keeps it in step). */
TENSO_API int tenso_node_receive_fd(const tenso_node *n);

/** The name (not NUL-terminated; *len_out gets its length). */
TENSO_API const char *tenso_node_message_name(const tenso_node_message *m, size_t *len_out);
/** The sender: its key fingerprint (TLS) or "tcp://host:port" / "unix:" of the connection. */
TENSO_API const char *tenso_node_message_sender(const tenso_node_message *m);
/** The value, owned by the message (aligned, received straight into its buffer). */
TENSO_API const tenso_view *tenso_node_message_view(const tenso_node_message *m);
/** Moves the view out; the caller frees it with tenso_view_free. */
TENSO_API tenso_status tenso_node_message_take_view(tenso_view **out, tenso_node_message *m);
/** Frees a message (and its view, unless taken); NULL is accepted. */
TENSO_API void tenso_node_message_free(tenso_node_message *m);

/* ============================================================================================
 * Pull: publish named values; peers request them by name
 * ========================================================================================== */

/** Called once when the node no longer uses a published value (unpublished, replaced, or the
 *  node freed, after any send of it in progress has finished). May be NULL. */
typedef void (*tenso_node_release_fn)(void *user);

/** Publishes `v` under `name`, replacing any value of that name. On TENSO_OK the node takes
 *  ownership of the value (it frees it) and sends it straight from its memory; memory the value
 *  borrows must stay valid until `release` is called. On any failure (TENSO_E_SHUTDOWN,
 *  TENSO_E_INVALID_ARGUMENT for a bad name, TENSO_E_NO_MEMORY, ...) the node does not take the value:
 *  the caller still owns `v` (and frees it), and `release` is not called.
 *  (Until 1.4's fix-up a failure took the value; the rule is now the one above.) @since 1.4 */
TENSO_API tenso_status tenso_node_publish(tenso_node *n, const char *name, size_t name_len, tenso_value *v,
                                          tenso_node_release_fn release, void *user);

/** tenso_node_access_fn's `op`: a peer asks for a published value (get). @since 1.5 */
#define TENSO_NODE_ACCESS_GET 1
/** tenso_node_access_fn's `op`: a peer pushes a value (push, send_fd). @since 1.5 */
#define TENSO_NODE_ACCESS_PUSH 2

/** Decides whether the peer may get or push `name` (not NUL-terminated, name_len bytes): nonzero
 *  allows. `peer` is the sender name of its messages: its key fingerprint over TLS, else
 *  "tcp://host:port" or "unix:". Called on the node's event loop threads for every get and push,
 *  before the value is read or served, one call at a time: it must be quick and must not call
 *  tenso_node_* functions of this node. @since 1.5 */
typedef int (*tenso_node_access_fn)(void *user, int op, const char *peer, const char *name, size_t name_len);

/** Sets the node's access hook (NULL: every trusted peer may get every published value and push
 *  any name, the default). A refused get or push is answered with TENSO_E_AUTH (the pusher's
 *  send returns it; a refused push's bytes are read and dropped) and counts in `refused`; the
 *  connection stays usable. Takes effect for the requests read after it returns; when it
 *  returns, no call of the previous hook is running, so its `user` may be freed.
 *  @since 1.5 */
TENSO_API tenso_status tenso_node_set_access(tenso_node *n, tenso_node_access_fn fn, void *user);

/** @return TENSO_E_NOT_FOUND when nothing of that name is published. */
TENSO_API tenso_status tenso_node_unpublish(tenso_node *n, const char *name, size_t name_len);

/** Requests `name` from the peer at `addr`.
 *  @return TENSO_E_NOT_FOUND when the peer publishes nothing of that name; the statuses of
 *  tenso_node_send otherwise. */
TENSO_API tenso_status tenso_node_request(tenso_view **out, tenso_node *n, const char *addr, const char *name,
                                          size_t name_len, uint64_t timeout_ms, tenso_cancel *cancel);

/* ============================================================================================
 * Statistics
 * ========================================================================================== */

/** A node's counters, for tenso_node_stats_get(). */
typedef struct tenso_node_stats {
    uint32_t version;             /**< TENSO_NODE_STATS_VERSION, set by the caller */
    uint32_t pool_size;           /**< outbound connections held in the pool (idle or busy) */
    uint32_t inbound_connections; /**< connections peers opened to this node, open now */
    uint32_t queued;              /**< received pushes waiting */
    uint64_t queued_bytes;        /**< their packet bytes */
    uint64_t bytes_sent;          /**< bytes written to peers so far */
    uint64_t bytes_received;      /**< bytes read from peers so far */
    uint64_t connections_opened;  /**< outbound dials so far (pool misses) */
    uint64_t connections_reused;  /**< outbound calls served by a pooled connection */
    uint64_t refused;             /**< inbound peers refused (auth, limits, hostile frames) */
    /** TLS connections (dialed and accepted) since start whose records the kernel encrypts
        (kTLS, used automatically where the kernel offers it: its `tls` module). @since 1.5
        (reserved, zero, before) */
    uint64_t tls_kernel;
    /** TLS connections since start whose records OpenSSL encrypts in this process (the
        fallback). @since 1.5 (reserved, zero, before) */
    uint64_t tls_user;
    /** Waits for a peer's answer that busy polled first (see TENSO_NODE_NO_BUSY_POLL).
        @since 1.5 (reserved, zero, before) */
    uint64_t busy_polls;
    /** Those whose answer came while polling: busy_polls - busy_poll_hits slept after all.
        @since 1.5 (reserved, zero, before) */
    uint64_t busy_poll_hits;
} tenso_node_stats;

#define TENSO_NODE_STATS_VERSION 1 /**< the tenso_node_stats version these headers declare */

/** Fills *out (whose version the caller sets) with the node's counters now.
 *  @return TENSO_E_INVALID_ARGUMENT for an unknown version. */
TENSO_API tenso_status tenso_node_stats_get(tenso_node_stats *out, const tenso_node *n);

/* ============================================================================================
 * Completion-based calls
 *
 * The calls above block their thread until they are done. The calls below start the same work
 * and return at once; an event loop then waits on one descriptor per completion queue (usually
 * one queue per node and event loop) instead of a thread per call:
 *
 *     tenso_node_queue *q;
 *     tenso_node_queue_new(&q, node, NULL);               // descriptor mode
 *     tenso_node_op *op;
 *     tenso_node_send_start(&op, q, addr, "w", 1, v, 0, my_state);
 *     if (!tenso_node_op_done(op)) {
 *         ... poll(tenso_node_queue_fd(q)) readable ...
 *         tenso_node_op *done[16];
 *         size_t n;
 *         tenso_node_queue_reap(done, 16, &n, q, 0);       // done[i] == op, one day
 *     }
 *     tenso_status st = tenso_node_op_result(op);          // as tenso_node_send's
 *     tenso_node_op_free(op);
 *
 * Who does the work. A queue's descriptor is readable when one of its operations can make
 * progress (its socket is ready, its deadline passed) or has completed; tenso_node_queue_reap
 * runs that progress on the calling thread (non-blocking reads and writes of the operations'
 * sockets, a TLS handshake step, ...) and hands out the operations that completed. An
 * operation moves on only while its queue is reaped: a loop that stops reaping stalls its own
 * outbound calls (the node's threads keep serving inbound connections). Work is also done by
 * the start function itself, until the operation would wait: a small post is usually done
 * before tenso_node_post_start returns, a send has written its request. A send or request
 * start whose operation is the only one in flight on its queue polls for the peer's answer
 * for up to 100 us before returning (busy polling, see TENSO_NODE_NO_BUSY_POLL and
 * docs/net-protocol.md), so a quick answer completes the operation within its start. In
 * callback mode (tenso_node_queue_new with fn) the queue runs a thread of its own that reaps
 * it and calls fn for each completion.
 *
 * Completion at once. In descriptor mode, an operation that completes within its start function
 * (tenso_node_op_done is 1 when the start function returns) is not delivered to the queue:
 * there is nothing to wait for. Check tenso_node_op_done after every start. In callback mode
 * every operation is called back exactly once, also one that completed within its start
 * function (the queue's thread may complete an operation the moment its start returns, so
 * tenso_node_op_done after the start could not tell the two apart): the callback owns it.
 *
 * Ownership. A start function that returns TENSO_OK gives the caller a new operation, which the
 * caller frees with tenso_node_op_free in every case (completed, failed, cancelled; delivered or
 * not). A start function that fails starts nothing and sets *out to NULL (an invalid argument,
 * a bad address, a bad name, a send's value that does not encode, TENSO_E_SHUTDOWN, out of
 * memory); every other outcome is the operation's, through tenso_node_op_result (a post's
 * value is encoded when the post's turn comes, and one that does not encode fails that post). The value given to
 * tenso_node_send_start / tenso_node_post_start, and the memory it borrows, must stay valid and
 * unchanged until the operation has completed (or tenso_node_op_free has returned): bodies are
 * written straight from it. Results (a request's value, a received message) belong to the
 * operation until taken with tenso_node_op_take_view / tenso_node_op_take_message.
 *
 * Ordering. Posts to one peer, blocking or not, are written and received in the order they were
 * started; a flush waits for every post to that peer started before it, and posts started after
 * it wait for the flush. Completions are delivered in the order the operations completed, which
 * for sends and requests need not be the order they started. Receive operations take received
 * pushes in the order the operations started (and interleave with blocking receives).
 *
 * Deadlines and cancellation. timeout_ms is the blocking call's (0 = the node's io_timeout_ms,
 * receive: 0 = only what is waiting now; UINT64_MAX = none). An operation past its deadline
 * completes with TENSO_E_TIMEOUT; tenso_node_op_cancel ends it with TENSO_E_CANCELLED. Either
 * closes the connection the operation was using part way (a send or request), as the blocking
 * calls do; a post or flush that stops part way fails the posts its connection owed an
 * acknowledgement (flush reports them), as a blocking flush that times out.
 *
 * Shutdown. tenso_node_shutdown (and tenso_node_free) completes every operation in flight on
 * the node's queues with TENSO_E_SHUTDOWN, delivered as usual; later start functions fail with
 * TENSO_E_SHUTDOWN. Queues and operations stay valid after their node is freed: reap them and
 * free them in any order.
 *
 * Threads. Every function below is thread-safe: operations may be started, reaped, cancelled
 * and freed on any thread, a queue reaped by one thread at a time or several (each completion is
 * handed out once). Progress is made under the queue's lock, so reaping from two threads does
 * not make one queue faster: use a queue per thread instead.
 * ========================================================================================== */

/** A completion queue: where operations are started and their completions handed out. */
typedef struct tenso_node_queue tenso_node_queue;
/** One completion-based call. */
typedef struct tenso_node_op tenso_node_op;

/** A completion callback: called once per delivered completion, on the queue's thread, with the
 *  operation and the payload given to its start function. The callback may start, cancel and
 *  free operations (this one included) and reap nothing; it must not block (no blocking node
 *  call, no tenso_node_shutdown, tenso_node_free or tenso_node_queue_free of its own queue's
 *  node), since the queue's other completions wait for it. @since 1.5 */
typedef void (*tenso_node_op_fn)(tenso_node_op *op, void *payload);

/** Makes a completion queue for node `n`.
 *  @param out receives the new queue (NULL on failure); free it with tenso_node_queue_free.
 *  @param n the node whose calls are started on the queue.
 *  @param fn NULL: descriptor mode (the caller reaps; see tenso_node_queue_fd). Else callback
 *  mode: the queue starts one thread that waits on its descriptor, does the operations' work and
 *  calls fn for each completion (every operation started on it, once, possibly before its
 *  start function has returned: the caller hands the operation to the callback and does not
 *  touch it after starting it); tenso_node_queue_reap is then refused.
 *  @return TENSO_E_SHUTDOWN once the node is shut down; TENSO_E_IO when the kernel refuses a
 *  descriptor. The queue holds a reference to the node's engine, not to the tenso_node handle.
 *  @since 1.5 */
TENSO_API tenso_status tenso_node_queue_new(tenso_node_queue **out, tenso_node *n, tenso_node_op_fn fn);

/** The queue's descriptor (an epoll instance; -1 for NULL): readable while reaping can make
 *  progress or hand out a completion. Owned by the queue: poll it, never read or close it. A
 *  readable descriptor may yield no completion (the progress was a step of an operation in
 *  flight). Edge-triggered waiters (tokio's AsyncFd) reap until a reap returns fewer
 *  completions than asked for, then wait again. @since 1.5 */
TENSO_API int tenso_node_queue_fd(const tenso_node_queue *q);

/** Makes what progress the queue's operations can, and hands out up to `cap` completed ones,
 *  oldest completion first, into ops[0..*count_out). Waits up to timeout_ms for at least one
 *  (0: does not wait; UINT64_MAX: no deadline); *count_out 0 with TENSO_OK when none came.
 *  The operations handed out are done (tenso_node_op_done is 1) and still the caller's.
 *  @return TENSO_E_INVALID_ARGUMENT for a callback-mode queue. @since 1.5 */
TENSO_API tenso_status tenso_node_queue_reap(tenso_node_op **ops, size_t cap, size_t *count_out, tenso_node_queue *q,
                                             uint64_t timeout_ms);

/** Frees the queue. Operations still in flight on it are cancelled, and no completion is
 *  delivered any more (a callback-mode queue's thread is stopped, waiting for a callback that
 *  runs, unless called from that callback); the operations stay valid and are still freed one
 *  by one with tenso_node_op_free. NULL is accepted. @since 1.5 */
TENSO_API void tenso_node_queue_free(tenso_node_queue *q);

/** Starts tenso_node_send on queue `q` (its node): `payload` is handed back with the
 *  completion. @return see Ownership above; the operation's result is tenso_node_send's. @since 1.5 */
TENSO_API tenso_status tenso_node_send_start(tenso_node_op **out, tenso_node_queue *q, const char *addr,
                                             const char *name, size_t name_len, const tenso_value *v,
                                             uint64_t timeout_ms, void *payload);

/** Starts tenso_node_post. The operation completes when the post is buffered or written (the
 *  value's memory is then no longer used), usually within this call; its result is
 *  tenso_node_post's. @since 1.5 */
TENSO_API tenso_status tenso_node_post_start(tenso_node_op **out, tenso_node_queue *q, const char *addr,
                                             const char *name, size_t name_len, const tenso_value *v,
                                             uint64_t timeout_ms, void *payload);

/** Starts tenso_node_flush of every post to `addr` started before it. @since 1.5 */
TENSO_API tenso_status tenso_node_flush_start(tenso_node_op **out, tenso_node_queue *q, const char *addr,
                                              uint64_t timeout_ms, void *payload);

/** Starts tenso_node_request; the value is taken with tenso_node_op_take_view. @since 1.5 */
TENSO_API tenso_status tenso_node_request_start(tenso_node_op **out, tenso_node_queue *q, const char *addr,
                                                const char *name, size_t name_len, uint64_t timeout_ms, void *payload);

/** Starts tenso_node_receive (timeout_ms 0: completes at once, with a message or
 *  TENSO_E_TIMEOUT); the message is taken with tenso_node_op_take_message. @since 1.5 */
TENSO_API tenso_status tenso_node_receive_start(tenso_node_op **out, tenso_node_queue *q, uint64_t timeout_ms,
                                                void *payload);

/** 1 once the operation has completed (0 for NULL). Thread-safe; the result may be read once it
 *  is 1. @since 1.5 */
TENSO_API int tenso_node_op_done(const tenso_node_op *op);

/** The completed operation's status: what the blocking call would have returned. On failure
 *  tenso_last_error() is set to the operation's message (kept by the operation, so reading it
 *  again gives the same). @return TENSO_E_INVALID_ARGUMENT while it has not completed. @since 1.5 */
TENSO_API tenso_status tenso_node_op_result(const tenso_node_op *op);

/** The payload given to its start function. @since 1.5 */
TENSO_API void *tenso_node_op_payload(const tenso_node_op *op);

/** Moves a completed request's value out; the caller frees it with tenso_view_free.
 *  @return TENSO_E_INVALID_ARGUMENT when it is not a request that succeeded, or the value was
 *  taken already. @since 1.5 */
TENSO_API tenso_status tenso_node_op_take_view(tenso_view **out, tenso_node_op *op);

/** Moves a completed receive's message out; the caller frees it with tenso_node_message_free.
 *  @return TENSO_E_INVALID_ARGUMENT when it is not a receive that succeeded, or the message was
 *  taken already. @since 1.5 */
TENSO_API tenso_status tenso_node_op_take_message(tenso_node_message **out, tenso_node_op *op);

/** Ends the operation with TENSO_E_CANCELLED, unless it completes first; its completion is
 *  delivered as any other. A send, request or receive has completed when this returns; a post
 *  or flush also, unless a blocking post or flush to its peer on another thread holds the peer's
 *  connection, in which case it completes once that call lets go of it. Done or NULL: nothing.
 *  Thread-safe. @since 1.5 */
TENSO_API void tenso_node_op_cancel(tenso_node_op *op);

/** Frees the operation. One still in flight is cancelled first, and this waits until the node
 *  no longer uses it or its value (see tenso_node_op_cancel); its completion is then not
 *  delivered. A completion handed out or not yet reaped is forgotten, with a result not taken.
 *  NULL is accepted. @since 1.5 */
TENSO_API void tenso_node_op_free(tenso_node_op *op);

TENSO_END_DECL

#endif /* TENSO_NET_H */
