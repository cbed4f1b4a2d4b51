//go:build cgo

package tenso

/*
#include "tgo.h"
static inline tgo_info tgo_read_fd(int fd, tenso_decode_options o) {
    tenso_view *v = NULL;
    tenso_status st = tenso_read_fd(&v, fd, &o);
    return tgo_owned_view(st, v);
}
*/
import "C"

import (
	"os"
	"runtime"
)

// LoadsEntry decodes the bundle packet at the start of data and returns only its entry named
// key, found by libtenso (tenso_view_bundle_find) without building the other entries. Data
// slices alias data, as with Loads. A key that is not there wraps ErrInvalidArgument ("key
// not found", libtenso's status for it); a packet that is not a bundle, ErrUnsupportedKind.
func LoadsEntry(data []byte, key string) (*Tensor, error) {
	return DecodeOptions{}.LoadsEntry(data, key)
}

// LoadsEntry is LoadsEntry under these options.
func (o DecodeOptions) LoadsEntry(data []byte, key string) (*Tensor, error) {
	const op = "LoadsEntry"
	if versionErr != nil {
		return nil, versionErr
	}
	base, n := cbytes(data)
	var pin runtime.Pinner
	defer pin.Unpin()
	if base != nil {
		pin.Pin(base)
	}
	root := C.tgo_loads_view(base, n, o.c())
	if err := fail(root.res, op); err != nil {
		return nil, err
	}
	defer C.tenso_view_free(root.view)
	kp, kn := cname(key)
	e := C.tgo_view_find(root.view, kp, kn, base, n)
	runtime.KeepAlive(key)
	if err := fail(e.res, op); err != nil {
		return nil, err
	}
	w := walker{input: data, base: base, n: n}
	return w.walk(&e)
}

// ReadFd reads one packet from f (a socket, pipe or file, read from its current position)
// into memory libtenso allocates, through the same stream decoder as ReadPacket; nothing past
// the packet is consumed. The Tensor aliases that memory until Close (or until it is
// unreachable). The calling goroutine's thread blocks in the read. A clean end of stream
// before the first byte wraps ErrEndOfStream.
func (o DecodeOptions) ReadFd(f *os.File) (*Tensor, error) {
	const op = "ReadFd"
	if versionErr != nil {
		return nil, versionErr
	}
	if f == nil {
		return nil, &Error{Status: ErrInvalidArgument, Op: op, Message: "nil file"}
	}
	info := C.tgo_read_fd(C.int(f.Fd()), o.c())
	runtime.KeepAlive(f)
	if err := fail(info.res, op); err != nil {
		return nil, err
	}
	return ownedTree(&info)
}
