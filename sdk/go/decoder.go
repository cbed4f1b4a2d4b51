//go:build cgo

package tenso

/*
#include "tgo.h"

// Defined in decoder_export.go (a cgo.Handle's value arrives as `user`).
extern void *goTensoAlloc(uintptr_t user, size_t size, size_t alignment);
extern void goTensoRelease(uintptr_t user, void *ptr, size_t size);

static void *tgo_alloc(void *user, size_t size, size_t alignment) {
	return goTensoAlloc((uintptr_t)user, size, alignment);
}
static void tgo_release(void *user, void *ptr, size_t size) { goTensoRelease((uintptr_t)user, ptr, size); }

typedef struct {
	tgo_res res;
	tenso_decoder *d;
} tgo_decoder_res;

// A decoder whose packet buffers come from Go (alloc_user: the cgo.Handle of a goAllocator).
static inline tgo_decoder_res tgo_decoder_new(tenso_decode_options o, uintptr_t handle) {
	tgo_decoder_res r;
	tenso_decoder_options d = TENSO_DECODER_OPTIONS_INIT;
	d.decode = &o; // copied by _new
	d.alloc = tgo_alloc;
	d.release = tgo_release;
	d.alloc_user = (void *)handle;
	r.d = NULL;
	r.res = tgo_res_of(tenso_decoder_new(&r.d, &d), 0);
	return r;
}

typedef struct {
	tgo_res res;
	void *dst;
} tgo_buffer_res;

// res.n: how many bytes the decoder needs next, to be written at dst.
static inline tgo_buffer_res tgo_decoder_buffer(tenso_decoder *d) {
	tgo_buffer_res r;
	size_t n = 0;
	tenso_status st;
	r.dst = NULL;
	st = tenso_decoder_buffer(d, &r.dst, &n);
	r.res = tgo_res_of(st, n);
	return r;
}

// Commits n bytes; a completed packet comes back filled in (its view set), with the ranges
// inside the packet buffer [base, base+len) expressed as offsets into it.
static inline tgo_info tgo_decoder_commit(tenso_decoder *d, size_t n, const void *base, size_t len) {
	tgo_info i;
	tenso_view *v = NULL;
	tenso_status st = tenso_decoder_commit(d, n, &v);
	memset(&i, 0, sizeof i);
	if (st != TENSO_OK) {
		i.res = tgo_res_of(st, 0);
		return i;
	}
	if (v) tgo_fill(&i, v, base, len);
	return i;
}

static inline tgo_res tgo_decoder_finish(tenso_decoder *d) { return tgo_res_of(tenso_decoder_finish(d), 0); }
*/
import "C"

import (
	"errors"
	"io"
	"runtime"
	"runtime/cgo"
	"syscall"
	"unsafe"
)

// goAllocator hands libtenso's stream decoder its packet buffers as Go memory, pinned while
// libtenso holds them: the packet is received in place, and once its view is freed the
// buffer is ordinary garbage-collected memory that the Tensors slice. One per ReadPacket call
// (one goroutine).
type goAllocator struct {
	buf    []byte // the packet buffer handed out last (nil: none)
	pinner runtime.Pinner
	refuse error // why the last allocation was refused
}

// physicalMemory bounds one packet buffer: a length no machine here could hold is refused
// (ErrNoMemory) rather than letting make() abort the process. Limits in DecodeOptions are the
// real bound; this only keeps a hostile header within what the decoder may ask for from
// becoming a fatal out-of-memory error.
var physicalMemory = func() uint64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil || si.Totalram == 0 {
		return 1 << 62
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}()

func (g *goAllocator) alloc(size, alignment uintptr) unsafe.Pointer {
	if g.buf != nil || alignment == 0 || alignment&(alignment-1) != 0 || alignment > MaxAlignment ||
		uint64(size) > physicalMemory || size > uintptr(maxInt-int(alignment)) {
		g.refuse = &Error{Status: ErrNoMemory, Op: "ReadFrom", Message: "packet buffer refused (larger than this machine's memory)"}
		return nil
	}
	b := make([]byte, int(size)+int(alignment)-1)
	off := int((alignment - uintptr(unsafe.Pointer(unsafe.SliceData(b)))%alignment) % alignment)
	g.buf = b[off : off+int(size) : off+int(size)]
	p := unsafe.Pointer(unsafe.SliceData(g.buf))
	g.pinner.Pin(p)
	return p
}

func (g *goAllocator) release(ptr unsafe.Pointer) {
	if g.buf != nil && ptr == unsafe.Pointer(unsafe.SliceData(g.buf)) {
		g.pinner.Unpin()
	}
}

const maxInt = int(^uint(0) >> 1)

// ReadPacket reads exactly one packet from r: nothing after it is consumed, so packets can be
// read one after another. At the end of the stream (no byte of a new packet) it returns an
// error wrapping both ErrEndOfStream and io.EOF; a stream that ends inside a packet gives
// ErrTruncated (and io.ErrUnexpectedEOF).
//
// The bytes are moved by Go (r.Read) into libtenso's stream decoder, which frames and checks
// them: the headers first, into a small area, then - once the headers have fixed the
// packet's exact length and it passed the limits - the rest straight into one Go buffer of
// that length, which the returned Tensor slices (no copy). The Tensor is Go memory: keep it
// as long as you like; Close does nothing. The buffer is allocated once, at the length the
// headers claim (after MaxElements, MaxPacketBytes and MaxDecodedBytes accepted it; a claim
// beyond the machine's memory is ErrNoMemory): set MaxPacketBytes for untrusted peers, so
// that a short lying header cannot reserve gigabytes. Every wait is in r.Read, so a net.Conn's deadlines
// apply to the whole packet (the error then matches os.ErrDeadlineExceeded) and closing the
// connection interrupts the read; see ReadPacketContext for a context.Context.
func (o DecodeOptions) ReadPacket(r io.Reader) (*Tensor, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	if r == nil {
		return nil, &Error{Status: ErrInvalidArgument, Op: "ReadFrom", Message: "nil reader"}
	}
	g := &goAllocator{}
	h := cgo.NewHandle(g)
	defer h.Delete()
	dr := C.tgo_decoder_new(o.c(), C.uintptr_t(h))
	if err := fail(dr.res, "ReadFrom"); err != nil {
		return nil, err
	}
	// Freeing the decoder mid-packet releases (unpins) the buffer.
	defer C.tenso_decoder_free(dr.d)
	got := 0 // bytes of this packet received
	stalls := 0
	for {
		b := C.tgo_decoder_buffer(dr.d)
		if err := fail(b.res, "ReadFrom"); err != nil {
			return nil, err
		}
		// dst is the decoder's header area (C memory) or the pinned Go packet buffer; the
		// reader gets it for this call only (io.Reader must not retain it).
		dst := unsafe.Slice((*byte)(b.dst), int(b.res.n))
		n, rerr := r.Read(dst)
		if n < 0 || n > len(dst) {
			return nil, &Error{Status: ErrIO, Op: "ReadFrom", Message: "the reader returned an invalid count"}
		}
		if n > 0 {
			stalls = 0
			got += n
			base, blen := cbytes(g.buf)
			info := C.tgo_decoder_commit(dr.d, C.size_t(n), base, blen)
			if err := fail(info.res, "ReadFrom"); err != nil {
				if g.refuse != nil && errors.Is(err, ErrNoMemory) {
					return nil, g.refuse
				}
				return nil, err
			}
			if info.view != nil {
				return finishPacket(g, &info)
			}
		}
		switch {
		case rerr == io.EOF && got == 0:
			return nil, &Error{Status: ErrEndOfStream, Op: "ReadFrom", Message: "end of stream", Err: io.EOF}
		case rerr == io.EOF || rerr == io.ErrUnexpectedEOF:
			if err := fail(C.tgo_decoder_finish(dr.d), "ReadFrom"); err != nil {
				return nil, withEOF(err)
			}
			return nil, &Error{Status: ErrTruncated, Op: "ReadFrom", Message: "stream ended inside a packet", Err: io.ErrUnexpectedEOF}
		case rerr != nil:
			return nil, &Error{Status: ErrIO, Op: "ReadFrom", Err: rerr}
		case n == 0:
			// io.Reader allows (0, nil) but not forever (bufio's own limit).
			if stalls++; stalls >= 100 {
				return nil, &Error{Status: ErrIO, Op: "ReadFrom", Err: io.ErrNoProgress}
			}
		}
	}
}

// finishPacket turns a completed packet's view into Tensors slicing the Go buffer (anything
// the view owns itself, such as a decompressed body, is copied), then frees the view.
func finishPacket(g *goAllocator, info *C.tgo_info) (*Tensor, error) {
	defer C.tenso_view_free(info.view) // releases the buffer: unpinned, now the GC's
	base, n := cbytes(g.buf)
	w := walker{input: g.buf, base: base, n: n}
	return w.walk(info)
}
