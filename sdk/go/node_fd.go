//go:build cgo

package tenso

/*
#include "tgo.h"
static inline tgo_res tgo_node_send_fd(tenso_node *n, const char *addr, const char *name, size_t name_len, int fd,
                                       uint64_t offset, uint64_t len, uint64_t timeout_ms, tenso_cancel *c) {
    return tgo_res_of(tenso_node_send_fd(n, addr, name, name_len, fd, offset, len, timeout_ms, c), 0);
}
typedef struct {
    tgo_info info;          // the message's view, borrowed (info.view is NOT to be freed)
    tenso_node_message *m;  // owns the view; freed by Go
} tgo_msg_borrowed;
static inline tgo_msg_borrowed tgo_node_receive_borrowed(tenso_node *n, uint64_t timeout_ms, tenso_cancel *c) {
    tgo_msg_borrowed r;
    memset(&r, 0, sizeof r);
    tenso_status st = tenso_node_receive(&r.m, n, timeout_ms, c);
    if (st != TENSO_OK) {
        r.info.res = tgo_res_of(st, 0);
        return r;
    }
    r.info = tgo_view_info(tenso_node_message_view(r.m), NULL, 0);
    return r;
}
static void tgo_message_free(void *m) { tenso_node_message_free((tenso_node_message *)m); }
*/
import "C"

import (
	"context"
	"math"
	"os"
	"runtime"
	"unsafe"
)

// Descriptor passing and borrowed receives (tenso/net.h). Kept apart from node.go: these are
// the calls that move a packet without copying it through Go memory.

// SendFd sends the packet stored in f at [offset, offset+length) (a memfd, a shared-memory
// segment's descriptor or a file) under name, and returns once the peer has queued it. To a
// unix:// peer the descriptor itself travels (SCM_RIGHTS): O(1) in the packet's size; to
// others the bytes are sent from the file (sendfile). The packet is checked before anything is
// sent. f stays open and owned by the caller.
func (n *Node) SendFd(ctx context.Context, addr, name string, f *os.File, offset, length uint64) error {
	const op = "Node.SendFd"
	if f == nil {
		return &Error{Status: ErrInvalidArgument, Op: op, Message: "nil file"}
	}
	return n.withPeer(op, addr, func(p *C.tenso_node, caddr *C.char) error {
		nm, nl := cname(name)
		fd := C.int(f.Fd())
		err := call(ctx, op, 0, func(ms C.uint64_t, tok *C.tenso_cancel) C.tgo_res {
			return C.tgo_node_send_fd(p, caddr, nm, nl, fd, C.uint64_t(offset), C.uint64_t(length), ms, tok)
		})
		runtime.KeepAlive(name)
		runtime.KeepAlive(f)
		return err
	})
}

// ReceiveFd is a descriptor that is readable while received pushes wait, for an event loop
// that polls it rather than blocking in Receive (tenso_node_receive_fd). It is owned by the
// node: do not close or read it, and do not use it after Close.
func (n *Node) ReceiveFd() (uintptr, error) {
	const op = "Node.ReceiveFd"
	p, err := n.ptr(op)
	if err != nil {
		return 0, err
	}
	defer n.h.release()
	fd := int(C.tenso_node_receive_fd(p))
	if fd < 0 {
		return 0, &Error{Status: ErrInvalidArgument, Op: op, Message: "the node has no receive descriptor"}
	}
	return uintptr(fd), nil
}

// ReceiveFunc takes the oldest received push, as Receive does, and hands it to fn without
// copying or detaching its value: m.Tensor (and every entry of a bundle) aliases the message's
// own buffer, which is released when fn returns. Keep nothing of m.Tensor's data past fn
// (copy what must outlive it); afterwards its Data slices are emptied. fn's error is returned.
func (n *Node) ReceiveFunc(ctx context.Context, fn func(m *Message) error) error {
	const op = "Node.ReceiveFunc"
	p, err := n.ptr(op)
	if err != nil {
		return err
	}
	defer n.h.release()
	var r C.tgo_msg_borrowed
	err = call(ctx, op, C.uint64_t(math.MaxUint64), func(ms C.uint64_t, tok *C.tenso_cancel) C.tgo_res {
		r = C.tgo_node_receive_borrowed(p, ms, tok)
		return r.info.res
	})
	if err != nil {
		return err
	}
	var nl C.size_t
	np := C.tenso_node_message_name(r.m, &nl)
	m := &Message{
		Name:   C.GoStringN(np, C.int(nl)),
		Sender: C.GoString(C.tenso_node_message_sender(r.m)),
	}
	w := walker{owner: newOwner(unsafe.Pointer(r.m), freeMessage)}
	defer w.owner.close()
	t, err := w.walk(&r.info)
	if err != nil {
		return err
	}
	m.Tensor = t
	return fn(m)
}

func freeMessage(m unsafe.Pointer) { C.tgo_message_free(m) }
