//go:build cgo

package tenso

/*
#include "tgo.h"
*/
import "C"

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
)

// DumpTo writes the packet for t to w with the default options.
func DumpTo(w io.Writer, t *Tensor) (int64, error) { return EncodeOptions{}.DumpTo(w, t) }

// ReadFrom reads exactly one packet from r with the default limits; see
// DecodeOptions.ReadPacket.
func ReadFrom(r io.Reader) (*Tensor, error) { return DecodeOptions{}.ReadPacket(r) }

// rawConn returns the file descriptor access of the streams libtenso can use directly: files,
// pipes, TCP and Unix stream sockets. Datagram sockets and everything else (bufio, TLS,
// net.Pipe, buffers) go through the io.Reader / io.Writer path.
//
// socket reports a network connection: there the first byte of a packet is waited for by Go's
// poller (see ready), so deadlines and Close interrupt an idle wait.
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

// ReadPacket reads exactly one packet from r: nothing after it is consumed, so packets can be
// read one after another. At the end of the stream (no byte of a new packet) it returns an
// error wrapping both ErrEndOfStream and io.EOF; a stream that ends inside a packet gives
// ErrTruncated (and io.ErrUnexpectedEOF).
//
// From files, pipes and stream sockets libtenso reads the descriptor itself into one aligned
// buffer that the Tensor aliases: Close the Tensor when done. On a socket the wait for the
// first byte is Go's (deadlines and Close apply); once a packet has started, libtenso waits
// for the rest itself and deadlines no longer interrupt it (a peer that stalls mid-packet
// holds the goroutine and its thread). Wrap the connection in another io.Reader (e.g.
// bufio.Reader) to have every wait in Go. From any other reader the
// packet is framed with PacketLength (the headers say how many bytes to read next), read into
// Go memory and decoded with Loads. Memory grows with the bytes actually received, never to
// a size a header merely claims; MaxPacketBytes and MaxDecodedBytes bound it.
func (o DecodeOptions) ReadPacket(r io.Reader) (*Tensor, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	if r == nil {
		return nil, &Error{Status: ErrInvalidArgument, Op: "ReadFrom", Message: "nil reader"}
	}
	if rc, socket, ok := rawConn(r); ok {
		var info C.tgo_info
		opts := o.c()
		rerr := rc.Read(func(fd uintptr) bool {
			if !ready(fd, socket, false) {
				return false
			}
			info = C.tgo_read_fd(C.int(fd), opts)
			return true
		})
		if rerr != nil {
			return nil, &Error{Status: ErrIO, Op: "ReadFrom", Err: rerr}
		}
		if err := fail(info.res, "ReadFrom"); err != nil {
			return nil, withEOF(err)
		}
		return viewTree(&info, false)
	}
	return o.readFramed(r)
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

const firstChunk = 64 << 10

func (o DecodeOptions) readFramed(r io.Reader) (*Tensor, error) {
	buf := alignedBytes(64)
	have := 0
	for {
		need, err := PacketLength(buf[:have])
		if err == nil {
			break
		}
		if !errors.Is(err, ErrTruncated) || need <= have {
			return nil, err
		}
		if o.MaxPacketBytes != 0 && uint64(need) > o.MaxPacketBytes {
			return nil, &Error{Status: ErrLimit, Op: "ReadFrom",
				Message: "packet is larger than MaxPacketBytes"}
		}
		// The buffer is memory the decode holds: MaxDecodedBytes bounds it too.
		if o.MaxDecodedBytes != 0 && uint64(need) > o.MaxDecodedBytes {
			return nil, &Error{Status: ErrLimit, Op: "ReadFrom",
				Message: "packet is larger than MaxDecodedBytes"}
		}
		for have < need {
			if len(buf) == have {
				// Grow geometrically towards need, so a lying header costs at most twice
				// what was really received.
				grown := alignedBytes(min(need, max(2*len(buf), firstChunk)))
				copy(grown, buf[:have])
				buf = grown
			}
			m, rerr := io.ReadFull(r, buf[have:min(need, len(buf))])
			have += m
			if rerr != nil {
				switch {
				case have == 0 && rerr == io.EOF:
					return nil, &Error{Status: ErrEndOfStream, Op: "ReadFrom", Message: "end of stream", Err: io.EOF}
				case rerr == io.EOF || rerr == io.ErrUnexpectedEOF:
					return nil, &Error{Status: ErrTruncated, Op: "ReadFrom",
						Message: "stream ended inside a packet", Err: io.ErrUnexpectedEOF}
				default:
					return nil, &Error{Status: ErrIO, Op: "ReadFrom", Err: rerr}
				}
			}
		}
	}
	return o.Loads(buf[:have])
}
