//go:build cgo

package tenso

/*
#include "tgo.h"

// Node calls: each copies tenso_last_error() in the same cgo call (see tgo.h).
// tenso_node_send, or tenso_node_post when post is set (the same arguments).
static inline tgo_res tgo_node_push(tenso_node *n, const char *addr, const char *name, size_t name_len,
                                    const tenso_value *v, uint64_t timeout_ms, tenso_cancel *c, int post) {
    tenso_status st = post ? tenso_node_post(n, addr, name, name_len, v, timeout_ms, c)
                           : tenso_node_send(n, addr, name, name_len, v, timeout_ms, c);
    return tgo_res_of(st, 0);
}
static inline tgo_res tgo_node_flush(tenso_node *n, const char *addr, uint64_t timeout_ms, tenso_cancel *c) {
    return tgo_res_of(tenso_node_flush(n, addr, timeout_ms, c), 0);
}
static inline tgo_res tgo_node_send_packet(tenso_node *n, const char *addr, const char *name, size_t name_len,
                                           const void *p, size_t len, uint64_t timeout_ms, tenso_cancel *c) {
    return tgo_res_of(tenso_node_send_packet(n, addr, name, name_len, p, len, timeout_ms, c), 0);
}

typedef struct {
    tgo_info info;          // the value (info.view owns every byte)
    tenso_node_message *m;  // name and sender; freed by Go after copying them
} tgo_msg;

static inline tgo_msg tgo_node_receive(tenso_node *n, uint64_t timeout_ms, tenso_cancel *c) {
    tgo_msg r;
    memset(&r, 0, sizeof r);
    tenso_node_message *m = NULL;
    tenso_status st = tenso_node_receive(&m, n, timeout_ms, c);
    if (st != TENSO_OK) {
        r.info.res = tgo_res_of(st, 0);
        return r;
    }
    tenso_view *v = NULL;
    st = tenso_node_message_take_view(&v, m);
    if (st != TENSO_OK) {
        r.info.res = tgo_res_of(st, 0);
        tenso_node_message_free(m);
        return r;
    }
    r.m = m;
    r.info = tgo_owned_view(TENSO_OK, v);
    return r;
}

static inline tgo_info tgo_node_request(tenso_node *n, const char *addr, const char *name, size_t name_len,
                                        uint64_t timeout_ms, tenso_cancel *c) {
    tenso_view *v = NULL;
    tenso_status st = tenso_node_request(&v, n, addr, name, name_len, timeout_ms, c);
    return tgo_owned_view(st, v);
}

static void tgo_free_user(void *p) { free(p); }

// Publishes a copy of an encoded packet (Go memory cannot stay borrowed by C after the call),
// in 64-byte aligned C memory that the node frees through the release callback.
static inline tgo_res tgo_node_publish_copy(tenso_node *n, const char *name, size_t name_len, const void *p,
                                            size_t len) {
    void *copy = NULL;
    if (posix_memalign(&copy, 64, len ? len : 1) != 0) return tgo_res_of(TENSO_E_NO_MEMORY, 0);
    memcpy(copy, p, len);
    tenso_value *v = NULL;
    tenso_status st = tenso_value_new_packet(&v, copy, len);
    if (st != TENSO_OK) {
        tgo_res r = tgo_res_of(st, 0);
        free(copy);
        return r;
    }
    st = tenso_node_publish(n, name, name_len, v, tgo_free_user, copy);
    tgo_res r = tgo_res_of(st, 0);
    if (st != TENSO_OK) {  // not taken (net.h): the value and its copy are still ours
        tenso_value_free(v);
        free(copy);
    }
    return r;
}

static inline tgo_res tgo_node_unpublish(tenso_node *n, const char *name, size_t name_len) {
    return tgo_res_of(tenso_node_unpublish(n, name, name_len), 0);
}

static inline tgo_res tgo_node_new(tenso_node **out, const tenso_node_options *o) {
    return tgo_res_of(tenso_node_new(out, o), 0);
}

static inline tgo_res tgo_node_addr(char *buf, size_t cap, const tenso_node *n, uint32_t index) {
    size_t len = 0;
    tenso_status st = tenso_node_addr(buf, cap, &len, n, index);
    return tgo_res_of(st, len);
}

static inline tgo_res tgo_node_stats(tenso_node_stats *s, const tenso_node *n) {
    memset(s, 0, sizeof *s);
    s->version = TENSO_NODE_STATS_VERSION;
    return tgo_res_of(tenso_node_stats_get(s, n), 0);
}

static inline tgo_res tgo_node_id(char *buf, const tenso_node *n) {
    return tgo_res_of(tenso_node_id(buf, n), 64);
}

// The access hook: libtenso calls the trampoline, which calls the Go function the handle names.
extern int goTensoAccess(uintptr_t h, int op, char *peer, char *name, size_t name_len);
static int tgo_access_trampoline(void *user, int op, const char *peer, const char *name, size_t name_len) {
    return goTensoAccess((uintptr_t)user, op, (char *)peer, (char *)name, name_len);
}
static inline tgo_res tgo_node_set_access(tenso_node *n, uintptr_t h) {
    return tgo_res_of(tenso_node_set_access(n, h ? tgo_access_trampoline : NULL, (void *)h), 0);
}

// Overwrites a secret's C copy before it is freed.
static inline void tgo_wipe(char *p) {
    if (!p) return;
    volatile char *v = p;
    while (*v) *v++ = 0;
}

static inline tgo_res tgo_node_options_init(tenso_node_options *o) {
    return tgo_res_of(tenso_node_options_init(o, TENSO_NODE_OPTIONS_VERSION), 0);
}
*/
import "C"

import (
	"context"
	"errors"
	"math"
	"runtime"
	"runtime/cgo"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Node is a libtenso node (tenso_node): it listens for pushes and pulls, dials peers by
// address and pools connections to them. Every method may be called from many goroutines at
// once. Calls take a context: its deadline becomes the call's timeout and its cancellation
// cancels the call (the error wraps ErrCancelled and ctx.Err(), or ErrTimeout).
type Node struct {
	h        *handle
	shutOnce sync.Once
	accessMu sync.Mutex
	access   cgo.Handle // the AccessFunc set by SetAccess (0: none)
}

func freeNode(p unsafe.Pointer) { C.tenso_node_free((*C.tenso_node)(p)) }

func millis(d time.Duration) C.uint64_t {
	if d <= 0 {
		return 0
	}
	return C.uint64_t((d + time.Millisecond - 1) / time.Millisecond)
}

// NewNode starts a node: binds its listeners (port 0 picks a free one) and starts its event
// loop. Errors wrap ErrBadAddress, ErrIO (binding), ErrAuth (certificate or key) or
// ErrInvalidArgument (a plaintext listener without AllowPlaintext).
func NewNode(o NodeOptions) (*Node, error) {
	const op = "NewNode"
	if versionErr != nil {
		return nil, versionErr
	}
	var co C.tenso_node_options
	if err := fail(C.tgo_node_options_init(&co), op); err != nil {
		return nil, err
	}
	// Every string lives in C memory for the call (the struct holds the pointers).
	var frees []unsafe.Pointer
	defer func() {
		for _, p := range frees {
			C.free(p)
		}
	}()
	cstr := func(s string) *C.char {
		if s == "" {
			return nil
		}
		p := C.CString(s)
		frees = append(frees, unsafe.Pointer(p))
		return p
	}
	// The key's C copy is wiped before it is freed (libtenso keeps no copy of its own).
	var keyCopy *C.char
	defer func() { C.tgo_wipe(keyCopy) }()
	for _, s := range append(append([]string{}, o.Listen...), o.CertPEM, o.KeyPEM, o.CAPEM) {
		if strings.IndexByte(s, 0) >= 0 {
			return nil, &Error{Status: ErrInvalidArgument, Op: op, Message: "option contains a NUL byte"}
		}
	}
	if o.AllowPlaintext {
		co.flags |= C.TENSO_NODE_ALLOW_PLAINTEXT
	}
	if o.NoFDPassing {
		co.flags |= C.TENSO_NODE_NO_FD_PASSING
	}
	if o.NoListen {
		co.flags |= C.TENSO_NODE_NO_LISTEN
	}
	if o.NoBusyPoll {
		co.flags |= C.TENSO_NODE_NO_BUSY_POLL
	}
	co.listen = cstr(strings.Join(o.Listen, ","))
	co.cert_pem = cstr(o.CertPEM)
	keyCopy = cstr(o.KeyPEM)
	co.key_pem = keyCopy
	co.ca_pem = cstr(o.CAPEM)
	if len(o.PinnedKeys) > 0 {
		arr := (**C.char)(C.calloc(C.size_t(len(o.PinnedKeys)), C.size_t(unsafe.Sizeof(uintptr(0)))))
		frees = append(frees, unsafe.Pointer(arr))
		pins := unsafe.Slice(arr, len(o.PinnedKeys))
		for i, k := range o.PinnedKeys {
			pins[i] = cstr(k)
		}
		co.pinned_keys = arr
		co.pinned_key_count = C.uint32_t(len(o.PinnedKeys))
	}
	co.threads = C.uint32_t(o.Threads)
	co.max_packet_bytes = C.uint64_t(o.MaxPacketBytes)
	co.max_name_bytes = C.uint32_t(o.MaxNameBytes)
	co.max_queued = C.uint32_t(o.MaxQueued)
	co.max_queued_bytes = C.uint64_t(o.MaxQueuedBytes)
	co.max_connections = C.uint32_t(o.MaxConnections)
	co.max_pool_per_peer = C.uint32_t(o.MaxPoolPerPeer)
	co.idle_timeout_ms = millis(o.IdleTimeout)
	co.io_timeout_ms = millis(o.IOTimeout)
	co.fd_passing_min_bytes = C.uint64_t(o.FDPassingMinBytes)
	var n *C.tenso_node
	if err := fail(C.tgo_node_new(&n, &co), op); err != nil {
		return nil, err
	}
	return &Node{h: newHandle(unsafe.Pointer(n), freeNode)}, nil
}

func (n *Node) ptr(op string) (*C.tenso_node, error) {
	if n == nil {
		return nil, errClosed(op, "the node")
	}
	p := n.h.acquire()
	if p == nil {
		return nil, errClosed(op, "the node")
	}
	return (*C.tenso_node)(p), nil
}

// Shutdown stops the node: closes every connection and fails every pending and later call
// with ErrShutdown. Idempotent; it does not wait for the calls to return (Close does).
func (n *Node) Shutdown() {
	p, err := n.ptr("Node.Shutdown")
	if err != nil {
		return
	}
	defer n.h.release()
	C.tenso_node_shutdown(p)
}

// Close shuts the node down, waits for calls in flight to return, and frees it.
func (n *Node) Close() error {
	if n == nil {
		return nil
	}
	n.shutOnce.Do(n.Shutdown)
	n.h.close()
	// The node is freed: no call of the access hook is left.
	n.accessMu.Lock()
	if n.access != 0 {
		n.access.Delete()
		n.access = 0
	}
	n.accessMu.Unlock()
	return nil
}

// Addrs returns every address a peer can dial, in listen order ("tls://<fingerprint>@host:port",
// "tcp://host:port", "unix://path").
func (n *Node) Addrs() ([]string, error) {
	const op = "Node.Addrs"
	p, err := n.ptr(op)
	if err != nil {
		return nil, err
	}
	defer n.h.release()
	var out []string
	buf := make([]byte, 256)
	for i := C.uint32_t(0); ; i++ {
		r := C.tgo_node_addr((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), p, i)
		if Status(r.status) == ErrBufferTooSmall {
			C.free(unsafe.Pointer(r.msg))
			buf = make([]byte, int(r.n)+1)
			i--
			continue
		}
		if Status(r.status) == ErrNotFound {
			C.free(unsafe.Pointer(r.msg))
			return out, nil
		}
		if err := fail(r, op); err != nil {
			return nil, err
		}
		out = append(out, string(buf[:int(r.n)]))
	}
}

// Addr returns the first address a peer can dial.
func (n *Node) Addr() (string, error) {
	a, err := n.Addrs()
	if err != nil {
		return "", err
	}
	if len(a) == 0 {
		return "", &Error{Status: ErrNotFound, Op: "Node.Addr", Message: "the node does not listen"}
	}
	return a[0], nil
}

// ID returns this node's key fingerprint (64 hex).
func (n *Node) ID() (string, error) {
	p, err := n.ptr("Node.ID")
	if err != nil {
		return "", err
	}
	defer n.h.release()
	var buf [65]C.char
	if err := fail(C.tgo_node_id(&buf[0], p), "Node.ID"); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// call runs fn with the timeout and cancel token that ctx asks for. noDeadline is the timeout
// when ctx has no deadline (UINT64_MAX for Receive, 0 - the node's io_timeout - otherwise).
func call(ctx context.Context, op string, noDeadline C.uint64_t, fn func(C.uint64_t, *C.tenso_cancel) C.tgo_res) error {
	if err := ctx.Err(); err != nil {
		return ctxError(op, err)
	}
	timeout := noDeadline
	d, fromCtx := ctx.Deadline()
	if fromCtx {
		left := time.Until(d)
		if left <= 0 {
			return &Error{Status: ErrTimeout, Op: op, Message: "deadline exceeded", Err: context.DeadlineExceeded}
		}
		timeout = millis(left)
	}
	var tok *C.tenso_cancel
	if ctx.Done() != nil {
		if st := C.tenso_cancel_new(&tok); st != 0 {
			return &Error{Status: Status(st), Op: op, Message: "tenso_cancel_new failed"}
		}
		done := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			C.tenso_cancel_trigger(tok)
			close(done)
		})
		defer func() {
			if !stop() {
				<-done // the trigger runs: the token must outlive it
			}
			C.tenso_cancel_free(tok)
		}()
	}
	err := fail(fn(timeout, tok), op)
	var e *Error
	if errors.As(err, &e) && e.Err == nil {
		switch {
		case e.Status == ErrTimeout && fromCtx:
			// libtenso's deadline was ctx's (it may expire a moment before ctx's timer fires).
			e.Err = context.DeadlineExceeded
		case e.Status == ErrCancelled && errors.Is(ctx.Err(), context.DeadlineExceeded):
			// ctx's timer fired first and triggered the token: still the deadline.
			return &Error{Status: ErrTimeout, Op: op, Message: "deadline exceeded", Err: context.DeadlineExceeded}
		case e.Status == ErrCancelled && ctx.Err() != nil:
			e.Err = ctx.Err()
		}
	}
	return err
}

func ctxError(op string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Status: ErrTimeout, Op: op, Message: "deadline exceeded", Err: err}
	}
	return &Error{Status: ErrCancelled, Op: op, Message: "cancelled", Err: err}
}

var emptyName = [1]byte{}

// cname is a name's bytes for one call (pointer into Go memory, length passed alongside).
func cname(name string) (*C.char, C.size_t) {
	if name == "" {
		return (*C.char)(unsafe.Pointer(&emptyName[0])), 0 // not NULL: libtenso checks the length
	}
	return (*C.char)(unsafe.Pointer(unsafe.StringData(name))), C.size_t(len(name))
}

// withPeer runs fn with the node held and addr as a C string (both valid for the call).
func (n *Node) withPeer(op, addr string, fn func(p *C.tenso_node, caddr *C.char) error) error {
	p, err := n.ptr(op)
	if err != nil {
		return err
	}
	defer n.h.release()
	caddr, keep, err := cpath(addr, op)
	if err != nil {
		return err
	}
	err = fn(p, caddr)
	runtime.KeepAlive(keep)
	return err
}

// Send sends t under name to the node at addr and returns once the peer has queued it (a full
// peer queue blocks the sender: backpressure). Dense bodies are written straight from t's
// memory. Errors wrap ErrBadAddress, ErrConnection, ErrAuth, ErrTimeout, ErrCancelled,
// ErrShutdown or ErrLimit (the peer refused the size).
func (n *Node) Send(ctx context.Context, addr, name string, t *Tensor) error {
	return n.push(ctx, "Node.Send", addr, name, t, 0)
}

// Post is a pipelined Send: it returns once t is written to the connection to addr, or, for a
// small t, copied into the node's buffer for addr (written with others within about 1 ms,
// without a Flush), without waiting for the peer's acknowledgement (t's memory is not used after it
// returns). Posts to one peer arrive in order; Flush waits for them and returns the first
// failure among them. Post blocks while the node's MaxQueued posts to addr are unacknowledged.
func (n *Node) Post(ctx context.Context, addr, name string, t *Tensor) error {
	return n.push(ctx, "Node.Post", addr, name, t, 1)
}

// push is Send (post 0) and Post (post 1).
func (n *Node) push(ctx context.Context, op, addr, name string, t *Tensor, post C.int) error {
	if err := precheck(t, op); err != nil {
		return err
	}
	return n.withPeer(op, addr, func(p *C.tenso_node, caddr *C.char) error {
		var b builder
		defer b.release()
		v, err := b.build(EncodeOptions{}, t, op)
		if err != nil {
			return err
		}
		nm, nl := cname(name)
		err = call(ctx, op, 0, func(ms C.uint64_t, tok *C.tenso_cancel) C.tgo_res {
			return C.tgo_node_push(p, caddr, nm, nl, v, ms, tok, post)
		})
		runtime.KeepAlive(name)
		runtime.KeepAlive(t)
		return err
	})
}

// Flush waits until every Post to addr is acknowledged and returns the first failure among the
// posts since the previous Flush (ErrLimit when the peer refused one's size, for example).
func (n *Node) Flush(ctx context.Context, addr string) error {
	const op = "Node.Flush"
	return n.withPeer(op, addr, func(p *C.tenso_node, caddr *C.char) error {
		return call(ctx, op, 0, func(ms C.uint64_t, tok *C.tenso_cancel) C.tgo_res {
			return C.tgo_node_flush(p, caddr, ms, tok)
		})
	})
}

// SendPacket sends an encoded packet (checked by libtenso before anything is sent) under name.
func (n *Node) SendPacket(ctx context.Context, addr, name string, packet []byte) error {
	const op = "Node.SendPacket"
	return n.withPeer(op, addr, func(p *C.tenso_node, caddr *C.char) error {
		nm, nl := cname(name)
		data, dn := cbytes(packet)
		err := call(ctx, op, 0, func(ms C.uint64_t, tok *C.tenso_cancel) C.tgo_res {
			return C.tgo_node_send_packet(p, caddr, nm, nl, data, dn, ms, tok)
		})
		runtime.KeepAlive(name)
		runtime.KeepAlive(packet)
		return err
	})
}

// Receive takes the oldest received push, waiting until ctx is done (no deadline in ctx: no
// deadline at all). The error wraps ErrTimeout when ctx's deadline passed first.
func (n *Node) Receive(ctx context.Context) (*Message, error) {
	const op = "Node.Receive"
	p, err := n.ptr(op)
	if err != nil {
		return nil, err
	}
	defer n.h.release()
	var r C.tgo_msg
	err = call(ctx, op, C.uint64_t(math.MaxUint64), func(ms C.uint64_t, tok *C.tenso_cancel) C.tgo_res {
		r = C.tgo_node_receive(p, ms, tok)
		return r.info.res
	})
	if err != nil {
		return nil, err
	}
	var nl C.size_t
	np := C.tenso_node_message_name(r.m, &nl)
	m := &Message{
		Name:   C.GoStringN(np, C.int(nl)),
		Sender: C.GoString(C.tenso_node_message_sender(r.m)),
	}
	C.tenso_node_message_free(r.m)
	t, err := ownedTree(&r.info)
	if err != nil {
		return nil, err
	}
	m.Tensor = t
	return m, nil
}

// Publish serves t under name (replacing any value of that name) to peers that Request it.
// t is encoded once, into C memory the node owns: later changes to t are not seen.
func (n *Node) Publish(name string, t *Tensor) error {
	const op = "Node.Publish"
	pkt, err := Dumps(t)
	if err != nil {
		return err
	}
	p, err := n.ptr(op)
	if err != nil {
		return err
	}
	defer n.h.release()
	nm, nl := cname(name)
	data, dn := cbytes(pkt)
	err = fail(C.tgo_node_publish_copy(p, nm, nl, data, dn), op)
	runtime.KeepAlive(name)
	runtime.KeepAlive(pkt)
	return err
}

// Unpublish stops serving name; the error wraps ErrNotFound when nothing of that name is
// published.
func (n *Node) Unpublish(name string) error {
	const op = "Node.Unpublish"
	p, err := n.ptr(op)
	if err != nil {
		return err
	}
	defer n.h.release()
	nm, nl := cname(name)
	err = fail(C.tgo_node_unpublish(p, nm, nl), op)
	runtime.KeepAlive(name)
	return err
}

// SetAccess installs a per-peer access policy (nil removes it: every trusted peer may get and
// push everything, the default). fn is called on the node's event loop threads for every get
// and push, before the value is read or served, with op AccessGet or AccessPush, the peer's
// sender name (its key fingerprint over TLS) and the value's name; false refuses, and the peer
// gets ErrAuth. fn must be quick, safe for concurrent use, and must not call this node's
// methods; a panic in it refuses. When SetAccess returns, no call of the previous fn is running.
func (n *Node) SetAccess(fn AccessFunc) error {
	const op = "Node.SetAccess"
	p, err := n.ptr(op)
	if err != nil {
		return err
	}
	defer n.h.release()
	n.accessMu.Lock()
	defer n.accessMu.Unlock()
	var h cgo.Handle
	if fn != nil {
		h = cgo.NewHandle(fn)
	}
	if err := fail(C.tgo_node_set_access(p, C.uintptr_t(h)), op); err != nil {
		if h != 0 {
			h.Delete()
		}
		return err
	}
	if n.access != 0 {
		n.access.Delete()
	}
	n.access = h
	return nil
}

// Request pulls the value the node at addr publishes as name. The Tensor aliases C memory
// until Tensor.Close (or garbage collection). The error wraps ErrNotFound when the peer
// publishes nothing of that name, and the errors of Send otherwise.
func (n *Node) Request(ctx context.Context, addr, name string) (*Tensor, error) {
	const op = "Node.Request"
	var info C.tgo_info
	err := n.withPeer(op, addr, func(p *C.tenso_node, caddr *C.char) error {
		nm, nl := cname(name)
		err := call(ctx, op, 0, func(ms C.uint64_t, tok *C.tenso_cancel) C.tgo_res {
			info = C.tgo_node_request(p, caddr, nm, nl, ms, tok)
			return info.res
		})
		runtime.KeepAlive(name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ownedTree(&info)
}

// Stats returns the node's counters.
func (n *Node) Stats() (NodeStats, error) {
	const op = "Node.Stats"
	p, err := n.ptr(op)
	if err != nil {
		return NodeStats{}, err
	}
	defer n.h.release()
	var s C.tenso_node_stats
	if err := fail(C.tgo_node_stats(&s, p), op); err != nil {
		return NodeStats{}, err
	}
	return NodeStats{
		PoolSize:           uint32(s.pool_size),
		InboundConnections: uint32(s.inbound_connections),
		Queued:             uint32(s.queued),
		QueuedBytes:        uint64(s.queued_bytes),
		BytesSent:          uint64(s.bytes_sent),
		BytesReceived:      uint64(s.bytes_received),
		ConnectionsOpened:  uint64(s.connections_opened),
		ConnectionsReused:  uint64(s.connections_reused),
		Refused:            uint64(s.refused),
		TLSKernel:          uint64(s.tls_kernel),
		TLSUser:            uint64(s.tls_user),
		BusyPolls:          uint64(s.busy_polls),
		BusyPollHits:       uint64(s.busy_poll_hits),
	}, nil
}

// PoolSize returns the number of outbound connections held in the pool.
func (n *Node) PoolSize() (int, error) {
	s, err := n.Stats()
	return int(s.PoolSize), err
}
