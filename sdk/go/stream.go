//go:build cgo

package tenso

/*
#include "tgo.h"
*/
import "C"

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"time"
)

// DumpTo writes the packet for t to w with the default options.
func DumpTo(w io.Writer, t *Tensor) (int64, error) { return EncodeOptions{}.DumpTo(w, t) }

// ReadFrom reads exactly one packet from r with the default limits; see
// DecodeOptions.ReadPacket.
func ReadFrom(r io.Reader) (*Tensor, error) { return DecodeOptions{}.ReadPacket(r) }

// rawConn returns the file descriptor access of the streams libtenso writes to directly:
// files, pipes, TCP and Unix stream sockets. Datagram sockets and everything else (bufio,
// TLS, net.Pipe, buffers) go through the io.Writer path.
//
// socket reports a network connection: there Go's poller waits until it is writable (see
// ready), so deadlines and Close interrupt that wait.
func rawConn(x any) (rc syscall.RawConn, socket bool, ok bool) {
	var err error
	switch c := x.(type) {
	case *os.File:
		rc, err = c.SyscallConn()
	case *net.TCPConn:
		rc, err = c.SyscallConn()
		socket = true
	case *net.UnixConn:
		if a := c.LocalAddr(); a == nil || a.Network() != "unix" {
			return nil, false, false
		}
		rc, err = c.SyscallConn()
		socket = true
	default:
		return nil, false, false
	}
	return rc, socket, err == nil
}

// ready says whether libtenso may start on fd: always for files and pipes (which block as
// they are), for sockets only once readable / writable, so that RawConn waits in Go.
func ready(fd uintptr, socket, writing bool) bool {
	if !socket {
		return true
	}
	w := C.int(0)
	if writing {
		w = 1
	}
	return C.tgo_ready(C.int(fd), w) != 0
}

// DumpTo writes the packet for t to w. For files, pipes and stream sockets libtenso writes
// to the file descriptor with vectored I/O (headers from a small buffer, bodies straight from
// t's memory, never copied); other writers get the packet from Dumps in one Write call. It
// returns the bytes written, also on failure.
//
// On a socket, Go waits until the socket is writable (deadlines and Close apply); once
// libtenso has started the packet it waits on the descriptor itself until the packet is out,
// and deadlines no longer interrupt it. Wrap the connection in another io.Writer to have
// every wait in Go.
func (o EncodeOptions) DumpTo(w io.Writer, t *Tensor) (int64, error) {
	if err := precheck(t, "DumpTo"); err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(t)
	if rc, socket, ok := rawConn(w); ok {
		var res C.tgo_res
		var werr error
		if d, dense := o.dense(t); dense {
			data, nbytes := cbytes(t.Data)
			shape, ndim := cshape(t.Shape)
			opts := d.c()
			werr = rc.Write(func(fd uintptr) bool {
				if !ready(fd, socket, true) {
					return false
				}
				res = C.tgo_write_fd(C.int(fd), data, C.uint64_t(nbytes), shape, ndim, C.int32_t(t.DType), opts)
				return true
			})
		} else {
			var b builder
			defer b.release()
			v, err := b.build(o, t, "DumpTo")
			if err != nil {
				return 0, err
			}
			werr = rc.Write(func(fd uintptr) bool {
				if !ready(fd, socket, true) {
					return false
				}
				res = C.tgo_value_write_fd(C.int(fd), v, b.opts)
				return true
			})
		}
		if werr != nil {
			return 0, &Error{Status: ErrIO, Op: "DumpTo", Err: werr}
		}
		return int64(res.n), fail(res, "DumpTo")
	}
	pkt, err := o.Dumps(t)
	if err != nil {
		return 0, err
	}
	n, err := w.Write(pkt)
	if err == nil && n != len(pkt) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return int64(n), &Error{Status: ErrIO, Op: "DumpTo", Err: err}
	}
	return int64(n), nil
}

// ReadFromContext is ReadFrom that gives up when ctx is done; see
// DecodeOptions.ReadPacketContext.
func ReadFromContext(ctx context.Context, r io.Reader) (*Tensor, error) {
	return DecodeOptions{}.ReadPacketContext(ctx, r)
}

// deadliner is a reader whose blocked reads a deadline interrupts (net.Conn, *os.File
// pipes and sockets).
type deadliner interface {
	SetReadDeadline(time.Time) error
}

// aLongTimeAgo is a deadline in the past: it wakes a blocked read at once.
var aLongTimeAgo = time.Unix(1, 0)

// ReadPacketContext reads one packet from r like ReadPacket, giving up when ctx is
// cancelled or its deadline passes: the error then matches ctx.Err() (context.Canceled or
// context.DeadlineExceeded). The wait is interrupted through r's read deadline (net.Conn,
// and *os.File for pipes and sockets): r's deadline is set from ctx for the call and cleared
// afterwards, replacing one the caller set. Other readers are checked for ctx only before
// reading. A packet cut off by cancellation leaves the stream mid-packet: close it.
func (o DecodeOptions) ReadPacketContext(ctx context.Context, r io.Reader) (*Tensor, error) {
	if err := ctx.Err(); err != nil {
		return nil, &Error{Status: ErrIO, Op: "ReadFrom", Err: err}
	}
	d, ok := r.(deadliner)
	if !ok || ctx.Done() == nil {
		return o.ReadPacket(r)
	}
	dl, hasDeadline := ctx.Deadline()
	if hasDeadline {
		if d.SetReadDeadline(dl) != nil {
			return o.ReadPacket(r) // a file without deadlines (a regular file): it never blocks long
		}
	}
	woken := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		d.SetReadDeadline(aLongTimeAgo)
		close(woken)
	})
	t, err := o.ReadPacket(r)
	if !stop() {
		<-woken // the wake-up ran: clear its deadline only after it
	}
	d.SetReadDeadline(time.Time{})
	if err == nil {
		return t, nil
	}
	cerr := ctx.Err()
	if cerr == nil && hasDeadline && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(dl) {
		cerr = context.DeadlineExceeded // the read's deadline fired before the context's timer
	}
	if cerr != nil {
		return nil, &Error{Status: ErrIO, Op: "ReadFrom", Message: cerr.Error(), Err: errors.Join(cerr, err)}
	}
	return nil, err
}

// withEOF lets stream ends match io.EOF / io.ErrUnexpectedEOF too.
func withEOF(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Err == nil {
		switch e.Status {
		case ErrEndOfStream:
			e.Err = io.EOF
		case ErrTruncated:
			e.Err = io.ErrUnexpectedEOF
		}
	}
	return err
}
