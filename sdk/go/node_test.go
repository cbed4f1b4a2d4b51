//go:build cgo

package tenso

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

func newTestNode(t *testing.T, o NodeOptions) *Node {
	t.Helper()
	n, err := NewNode(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func nodeAddr(t *testing.T, n *Node) string {
	t.Helper()
	a, err := n.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestNodePushPullTLS(t *testing.T) {
	rx := newTestNode(t, NodeOptions{})
	tx := newTestNode(t, NodeOptions{NoListen: true})
	ctx := testCtx(t)
	addr := nodeAddr(t, rx)
	id, err := rx.ID()
	if err != nil || len(id) != 64 || addr[:6+64] != "tls://"+id {
		t.Fatalf("addr %q id %q err %v", addr, id, err)
	}
	data := make([]float64, 1000)
	for i := range data {
		data[i] = float64(i) * 1.5
	}
	in := must(FromSlice([]int{10, 100}, data))
	if err := tx.Send(ctx, addr, "w", in); err != nil {
		t.Fatal(err)
	}
	msg, err := rx.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	txID, _ := tx.ID()
	if msg.Name != "w" || msg.Sender != txID {
		t.Fatalf("name %q sender %q, want w %q", msg.Name, msg.Sender, txID)
	}
	got, err := Values[float64](msg.Tensor)
	if err != nil || fmt.Sprint(msg.Tensor.Shape) != "[10 100]" || fmt.Sprint(got) != fmt.Sprint(data) {
		t.Fatalf("got %v %v", msg.Tensor.Shape, err)
	}
	msg.Tensor.Close()

	// pull, replace, not found
	if err := rx.Publish("b", Vector([]int32{1, 2, 3})); err != nil {
		t.Fatal(err)
	}
	b, err := tx.Request(ctx, addr, "b")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := Values[int32](b); fmt.Sprint(v) != "[1 2 3]" {
		t.Fatalf("pulled %v", v)
	}
	if err := rx.Unpublish("b"); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Request(ctx, addr, "b")
	wantStatus(t, "missing", err, ErrNotFound)
	wantStatus(t, "unpublish missing", rx.Unpublish("b"), ErrNotFound)

	if n, err := tx.PoolSize(); err != nil || n != 1 {
		t.Fatalf("pool size %d %v", n, err)
	}
	st, _ := tx.Stats()
	if st.ConnectionsOpened != 1 || st.ConnectionsReused != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestNodeBundleAndStrings(t *testing.T) {
	rx := newTestNode(t, NodeOptions{})
	tx := newTestNode(t, NodeOptions{NoListen: true})
	ctx := testCtx(t)
	s := must(NewStrings([]string{"α", "", "β"}))
	in := NewBundle(Entry{Key: "x", Value: Vector([]uint8{9, 8})}, Entry{Key: "s", Value: s})
	if err := tx.Send(ctx, nodeAddr(t, rx), "bundle", in); err != nil {
		t.Fatal(err)
	}
	msg, err := rx.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := Values[uint8](msg.Tensor.Get("x"))
	if fmt.Sprint(x) != "[9 8]" {
		t.Fatalf("x %v", x)
	}
	strs, err := msg.Tensor.Get("s").Strings()
	if err != nil || fmt.Sprint(strs) != "[α  β]" {
		t.Fatalf("strings %q %v", strs, err)
	}
}

func TestNodeConcurrentSenders(t *testing.T) {
	rx := newTestNode(t, NodeOptions{})
	tx := newTestNode(t, NodeOptions{NoListen: true})
	ctx := testCtx(t)
	addr := nodeAddr(t, rx)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- tx.Send(ctx, addr, fmt.Sprint(i), Vector([]int32{int32(i)}))
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for i := 0; i < 32; i++ {
		msg, err := rx.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := Values[int32](msg.Tensor)
		if fmt.Sprint(v[0]) != msg.Name {
			t.Fatalf("%s carried %v", msg.Name, v)
		}
		seen[msg.Name] = true
	}
	if len(seen) != 32 {
		t.Fatalf("%d distinct", len(seen))
	}
}

func TestNodeContextDeadlineAndCancel(t *testing.T) {
	rx := newTestNode(t, NodeOptions{})
	// Deadline: nothing arrives.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := rx.Receive(ctx)
	wantStatus(t, "deadline", err, ErrTimeout)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v does not wrap context.DeadlineExceeded", err)
	}
	// Cancellation of a blocked Receive.
	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := rx.Receive(ctx2)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel2()
	err = <-done
	wantStatus(t, "cancel", err, ErrCancelled)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v does not wrap context.Canceled", err)
	}
	// Already cancelled: fails before calling libtenso.
	_, err = rx.Receive(ctx2)
	if !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("pre-cancelled: %v", err)
	}
}

func TestNodeBadAddressAndConnection(t *testing.T) {
	tx := newTestNode(t, NodeOptions{NoListen: true, AllowPlaintext: true})
	ctx := testCtx(t)
	for _, a := range []string{"", "nonsense", "ftp://x:1", "tls://zz@127.0.0.1:1"} {
		wantStatus(t, a, tx.Send(ctx, a, "x", Vector([]int8{1})), ErrBadAddress)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nobody listens there now
	wantStatus(t, "refused", tx.Send(ctx, fmt.Sprintf("tcp://127.0.0.1:%d", port), "x", Vector([]int8{1})),
		ErrConnection)
}

func TestNodeShutdown(t *testing.T) {
	rx := newTestNode(t, NodeOptions{})
	done := make(chan error, 1)
	go func() {
		_, err := rx.Receive(context.Background())
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	rx.Shutdown()
	wantStatus(t, "pending receive", <-done, ErrShutdown)
	wantStatus(t, "after shutdown", rx.Publish("x", Vector([]int8{1})), ErrShutdown)
	if err := rx.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := rx.Addrs()
	wantStatus(t, "after close", err, ErrInvalidArgument)
}

func TestNodePlaintextUnix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rx.sock")
	rx := newTestNode(t, NodeOptions{Listen: []string{"unix://" + path, "tcp://127.0.0.1:0"}, AllowPlaintext: true})
	tx := newTestNode(t, NodeOptions{NoListen: true, AllowPlaintext: true})
	ctx := testCtx(t)
	addrs, err := rx.Addrs()
	if err != nil || len(addrs) != 2 || addrs[0] != "unix://"+path {
		t.Fatalf("addrs %v %v", addrs, err)
	}
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	for _, a := range addrs {
		if err := tx.Send(ctx, a, "big", Vector(big)); err != nil {
			t.Fatal(err)
		}
		msg, err := rx.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(msg.Tensor.Data) != string(big) {
			t.Fatalf("via %s: bytes differ", a)
		}
		msg.Tensor.Close()
	}
	// Plaintext needs the flag.
	_, err = NewNode(NodeOptions{Listen: []string{"tcp://127.0.0.1:0"}})
	wantStatus(t, "plaintext without flag", err, ErrInvalidArgument)
}

// Every blocked call ends promptly with ErrShutdown when its node closes: a Receive, and a
// Send the peer holds un-acknowledged (its queue full).
func TestNodeCloseEndsBlockedCalls(t *testing.T) {
	rx := newTestNode(t, NodeOptions{MaxQueued: 1})
	addr := nodeAddr(t, rx)
	tx := newTestNode(t, NodeOptions{NoListen: true})
	if err := tx.Send(testCtx(t), addr, "fills", Vector([]int8{1})); err != nil {
		t.Fatal(err)
	}
	w := newTestNode(t, NodeOptions{NoListen: true})
	sent, got := make(chan error, 1), make(chan error, 1)
	go func() { sent <- tx.Send(context.Background(), addr, "held", Vector([]int8{2})) }()
	go func() {
		_, err := w.Receive(context.Background())
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	tx.Close()
	w.Close()
	wantStatus(t, "blocked send", <-sent, ErrShutdown)
	wantStatus(t, "blocked receive", <-got, ErrShutdown)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the calls ended %v after Close", d)
	}
}

// The access hook: a refused get or push is ErrAuth; nil restores the default.
func TestNodeAccessHook(t *testing.T) {
	rx := newTestNode(t, NodeOptions{})
	addr := nodeAddr(t, rx)
	a := newTestNode(t, NodeOptions{NoListen: true})
	b := newTestNode(t, NodeOptions{NoListen: true})
	trusted, err := b.ID()
	if err != nil {
		t.Fatal(err)
	}
	if err := rx.SetAccess(func(op AccessOp, peer, name string) bool {
		if op == AccessGet {
			return name != "secret" || peer == trusted
		}
		return name != "forbidden"
	}); err != nil {
		t.Fatal(err)
	}
	if err := rx.Publish("secret", Vector([]int8{7})); err != nil {
		t.Fatal(err)
	}
	_, err = a.Request(testCtx(t), addr, "secret")
	wantStatus(t, "untrusted get", err, ErrAuth)
	v, err := b.Request(testCtx(t), addr, "secret")
	if err != nil {
		t.Fatal(err)
	}
	v.Close()
	wantStatus(t, "forbidden push", a.Send(testCtx(t), addr, "forbidden", Vector([]int8{1})), ErrAuth)
	if err := rx.SetAccess(nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Send(testCtx(t), addr, "forbidden", Vector([]int8{1})); err != nil {
		t.Fatal(err)
	}
}

// A wait for the peer's answer polls first (counted in Stats); NoBusyPoll never does, nor does
// a listener answering. The peer answers 1 ms late (its access hook sleeps): an answer already
// there when the sender first reads would need no wait at all.
func TestNodeBusyPollCountedAndOff(t *testing.T) {
	rx := newTestNode(t, NodeOptions{})
	if err := rx.SetAccess(func(AccessOp, string, string) bool { time.Sleep(time.Millisecond); return true }); err != nil {
		t.Fatal(err)
	}
	tx := newTestNode(t, NodeOptions{NoListen: true})
	sleeper := newTestNode(t, NodeOptions{NoListen: true, NoBusyPoll: true})
	ctx := testCtx(t)
	addr := nodeAddr(t, rx)
	for _, n := range []*Node{tx, sleeper} {
		for i := 0; i < 3; i++ {
			if err := n.Send(ctx, addr, "x", Vector([]float32{1, 2})); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, err1 := tx.Stats()
	s, err2 := sleeper.Stats()
	r, err3 := rx.Stats()
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatal(err1, err2, err3)
	}
	// A process allowed one CPU never polls (its peer needs that CPU to answer).
	if oneCPU := runtime.NumCPU() == 1; (oneCPU && a.BusyPolls != 0) || (!oneCPU && a.BusyPolls < 1) || a.BusyPollHits != 0 {
		t.Fatalf("busy-polling node: %+v", a)
	}
	if s.BusyPolls != 0 || s.BusyPollHits != 0 || r.BusyPolls != 0 {
		t.Fatalf("NoBusyPoll node %+v, listener %+v", s, r)
	}
	if a.TLSKernel+a.TLSUser != 1 {
		t.Fatalf("one TLS connection: %+v", a)
	}
}
