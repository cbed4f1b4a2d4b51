//go:build cgo

package tenso

/*
#include "tgo.h"
*/
import "C"

import (
	"errors"
	"io"
	"os"
	"runtime"
	"unsafe"
)

// Loads decodes the packet at the start of data (trailing bytes are ignored) with the
// default limits. The returned Tensor aliases data; see the package documentation.
func Loads(data []byte) (*Tensor, error) { return DecodeOptions{}.Loads(data) }

// LoadFile loads the first packet of a file into Go memory with the default limits.
func LoadFile(path string, mode LoadMode) (*Tensor, error) {
	return DecodeOptions{}.LoadFile(path, mode)
}

// LoadFileAliased maps the first packet of a file with the default limits; see
// DecodeOptions.LoadFileAliased.
func LoadFileAliased(path string) (*Tensor, error) { return DecodeOptions{}.LoadFileAliased(path) }

// Loads decodes the packet at the start of data under these options. Data slices of the
// result alias data: keep it unmodified while the Tensor is in use. So do the slices [Values]
// returns for them (when aligned, as a dense packet's body is): writing data later changes
// those values. Cost without integrity or
// compression: O(ndim + bundle entries), one cgo call for a dense packet.
func (o DecodeOptions) Loads(data []byte) (*Tensor, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	base, n := cbytes(data)
	opts := o.c()
	// Fast path: a dense packet. Its view holds no pointer into data once the helper returns
	// (freed, or owning all it points to), so no pinning is needed.
	info := C.tgo_loads_fast(base, n, opts)
	if err := fail(info.res, "Loads"); err != nil {
		return nil, err
	}
	if info.slow == 0 {
		t := &Tensor{}
		w := walker{input: data}
		w.fill(t, &info) // copies a body the view owns into Go memory
		if info.view != nil {
			C.tenso_view_free(info.view)
		}
		return t, nil
	}
	// Other kinds keep a view (C memory) that points into data while it is walked: pin data
	// for exactly that long, copy what the view owns, then free the view.
	var pin runtime.Pinner
	defer pin.Unpin()
	if base != nil {
		pin.Pin(base)
	}
	info = C.tgo_loads_view(base, n, opts)
	if err := fail(info.res, "Loads"); err != nil {
		return nil, err
	}
	defer C.tenso_view_free(info.view)
	w := walker{input: data, base: base, n: n}
	return w.walk(&info)
}

// LoadFile loads the first packet of the file at path into Go memory the garbage collector
// owns: the Tensor and every slice of it stay valid for as long as they are reachable, and
// Close does nothing. LoadRead reads the file; LoadMmap maps it and copies the bodies out of
// the mapping (so only the packet's pages are touched). For a zero-copy view of the mapping
// use LoadFileAliased.
func (o DecodeOptions) LoadFile(path string, mode LoadMode) (*Tensor, error) {
	return o.loadFile(path, mode, false, "LoadFile")
}

// LoadFileAliased maps the file at path and decodes its first packet without copying: Data
// (and every bundle entry's, component's...) points into the mapping. The mapping is
// released by Close, or by a cleanup once the Tensor is unreachable - the slices alone do not
// keep it: a slice used after either faults. For callers who manage that lifetime
// (defer t.Close(), runtime.KeepAlive(t) after the last use); LoadFile is the safe form.
func (o DecodeOptions) LoadFileAliased(path string) (*Tensor, error) {
	return o.loadFile(path, LoadMmap, true, "LoadFileAliased")
}

func (o DecodeOptions) loadFile(path string, mode LoadMode, alias bool, op string) (*Tensor, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	if mode == LoadRead && !alias {
		return o.readFile(path, op)
	}
	cp, keep, err := cpath(path, op)
	if err != nil {
		return nil, err
	}
	info := C.tgo_load_file(cp, C.uint32_t(mode), o.c())
	runtime.KeepAlive(keep)
	if err := fail(info.res, op); err != nil {
		return nil, err
	}
	return viewTree(&info, alias)
}

// readFile receives the file's first packet through the stream decoder straight into Go
// memory (no C buffer, no copy).
func (o DecodeOptions) readFile(path, op string) (*Tensor, error) {
	if _, _, err := cpath(path, op); err != nil {
		return nil, err // a NUL byte: refused as the C path would be
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{Status: ErrIO, Op: op, Err: err}
	}
	defer f.Close()
	t, err := o.ReadPacket(f)
	var e *Error
	if errors.As(err, &e) {
		e.Op = op
		if e.Status == ErrEndOfStream { // an empty file holds no packet: truncated, as a mapping says
			return nil, &Error{Status: ErrTruncated, Op: op, Message: "empty file", Err: io.ErrUnexpectedEOF}
		}
	}
	return t, err
}

// viewTree turns a view that owns all its memory (files, segments, caches, archives) into
// Tensors: aliasing it (alias; the Tensors own the view until closed) or copies in Go memory
// (the view is freed before returning).
func viewTree(info *C.tgo_info, alias bool) (*Tensor, error) {
	if !alias {
		defer C.tenso_view_free(info.view)
		var w walker // no input, no owner: every byte is copied into Go memory
		return w.walk(info)
	}
	return ownedTree(info)
}

// ownedTree wraps a view that owns all its memory in Tensors that alias it.
func ownedTree(info *C.tgo_info) (*Tensor, error) {
	w := walker{owner: newOwner(unsafe.Pointer(info.view), freeView)}
	t, err := w.walk(info)
	if err != nil {
		w.owner.close()
		return nil, err
	}
	return t, nil
}

// walker turns a view tree into Tensors. With owner == nil (Loads) every byte ends up in Go
// memory: ranges inside the input are sub-slices of it, anything the view owns is copied.
// With an owner (streams, files) ranges alias the view's C memory.
type walker struct {
	input []byte
	base  unsafe.Pointer
	n     C.size_t
	owner *owner
}

func (w *walker) bytes(r C.tgo_ref) []byte {
	if r.in_input != 0 {
		return w.input[r.off : r.off+r.n : r.off+r.n]
	}
	if r.n == 0 || r.ptr == nil {
		return nil
	}
	c := unsafe.Slice((*byte)(r.ptr), int(r.n))
	if w.owner != nil {
		return c
	}
	out := alignedBytes(len(c))
	copy(out, c)
	return out
}

func (w *walker) fill(t *Tensor, info *C.tgo_info) {
	t.Kind = Kind(info.kind)
	t.DType = DType(info.dtype)
	t.Flags = uint32(info.flags)
	t.Version = uint32(info.version)
	t.Alignment = uint32(info.alignment)
	t.PacketSize = uint64(info.packet_size)
	ndim := int(info.ndim)
	if ndim <= len(t.shapeBuf) {
		t.Shape = t.shapeBuf[:ndim:ndim] // one allocation per Tensor, not two
	} else {
		t.Shape = make([]uint64, ndim)
	}
	for i := 0; i < ndim; i++ {
		t.Shape[i] = uint64(info.shape[i])
	}
	t.Data = w.bytes(info.data)
	if w.owner != nil {
		t.owner = w.owner
		w.owner.tensors = append(w.owner.tensors, t)
	}
}

func (w *walker) walk(info *C.tgo_info) (*Tensor, error) {
	t := &Tensor{}
	w.fill(t, info)
	v := info.view
	switch t.Kind {
	case KindBundle:
		t.Entries = make([]Entry, int(info.count))
		for i := range t.Entries {
			e := C.tgo_view_entry(v, C.uint32_t(i), w.base, w.n)
			if err := fail(e.res, "Loads"); err != nil {
				return nil, err
			}
			child, err := w.walk(&e)
			if err != nil {
				return nil, err
			}
			t.Entries[i] = Entry{Key: string(w.bytes(e.key)), Value: child}
		}
		if len(t.Entries) == 3 {
			// libtenso decides whether this bundle is a ragged array (and checks its offsets).
			r := C.tgo_view_ragged(v)
			if r.res.status == 0 && r.flat_index >= 0 && r.offsets_index >= 0 {
				t.ragged = &raggedInfo{flat: int(r.flat_index), offsets: int(r.offsets_index)}
			}
			if r.res.msg != nil {
				C.free(unsafe.Pointer(r.res.msg))
			}
		}
	case KindSparseCOO, KindSparseCSR, KindSparseCSC:
		t.Components = make([]*Tensor, 3)
		for i := range t.Components {
			c := C.tgo_view_component(v, C.uint32_t(i), w.base, w.n)
			if err := fail(c.res, "Loads"); err != nil {
				return nil, err
			}
			child, err := w.walk(&c)
			if err != nil {
				return nil, err
			}
			t.Components[i] = child
		}
	case KindQuantized:
		q := C.tgo_view_quantized(v, w.base, w.n)
		if err := fail(q.res, "Loads"); err != nil {
			return nil, err
		}
		t.Data = w.bytes(q.data)
		t.Quant = quantFrom(&q)
	case KindString, KindRagged:
		s := C.tgo_view_strings(v, w.base, w.n)
		if err := fail(s.res, "Loads"); err != nil {
			return nil, err
		}
		count := 0
		if len(t.Shape) > 0 {
			count = int(t.Shape[0])
		}
		t.Offsets = make([]uint64, count+1)
		copy(t.Offsets, unsafe.Slice((*uint64)(unsafe.Pointer(s.offsets)), count+1))
		t.Data = w.bytes(s.payload)
	case KindGPUIPCRef:
		r := C.tgo_view_ipc(v)
		if err := fail(r.res, "Loads"); err != nil {
			return nil, err
		}
		ref := &IPCRef{ByteOffset: uint64(r.ref.byte_offset), NBytes: uint64(r.ref.nbytes)}
		copy(ref.Handle[:], unsafe.Slice((*byte)(unsafe.Pointer(&r.ref.handle[0])), ipcHandleLen))
		copy(ref.DeviceUUID[:], unsafe.Slice((*byte)(unsafe.Pointer(&r.ref.device_uuid[0])), ipcDeviceUUIDLen))
		t.IPC = ref
		t.Data = nil
	}
	return t, nil
}

// quantFrom copies quantization parameters out of C memory.
func quantFrom(q *C.tgo_quant) *Quantization {
	n := int(q.num_scales)
	out := &Quantization{
		Scheme:     QuantScheme(q.scheme),
		Axis:       int32(q.axis),
		GroupSize:  uint32(q.group_size),
		Scales:     make([]float32, n),
		ZeroPoints: make([]float32, n),
	}
	if n > 0 {
		copy(out.Scales, unsafe.Slice((*float32)(unsafe.Pointer(q.scales)), n))
		copy(out.ZeroPoints, unsafe.Slice((*float32)(unsafe.Pointer(q.zero_points)), n))
	}
	return out
}

// alignedBytes allocates n bytes starting at a 64-byte boundary, so that a packet written
// there (or a body copied there) keeps its body aligned for any element type.
func alignedBytes(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	b := make([]byte, n+63)
	off := int((64 - uintptr(unsafe.Pointer(unsafe.SliceData(b)))%64) % 64)
	return b[off : off+n : off+n]
}

// Inspect reads a packet's header (and shape and metadata) without touching its body; with
// enough bytes PacketSize is filled in.
func Inspect(data []byte) (PacketInfo, error) {
	if versionErr != nil {
		return PacketInfo{}, versionErr
	}
	base, n := cbytes(data)
	r := C.tgo_inspect(base, n)
	if err := fail(r.res, "Inspect"); err != nil {
		return PacketInfo{}, err
	}
	return packetInfoFrom(&r.info), nil
}

// packetInfoFrom copies a tenso_packet_info (Inspect, Cache.Info).
func packetInfoFrom(in *C.tenso_packet_info) PacketInfo {
	pi := PacketInfo{
		Version: uint32(in.version), Flags: uint32(in.flags), Kind: Kind(in.kind),
		DType: DType(in.dtype), EntryCount: uint32(in.entry_count), Alignment: uint32(in.alignment),
		BodyOffset: uint64(in.body_offset), BodySize: uint64(in.body_size), PacketSize: uint64(in.packet_size),
		Shape: make([]uint64, int(min(in.ndim, MaxNDim))),
	}
	for i := range pi.Shape {
		pi.Shape[i] = uint64(in.shape[i])
	}
	return pi
}

// PacketLength returns the exact length of the packet at the start of data, worked out from
// its headers alone. When data is too short it returns an error wrapping ErrTruncated and,
// as n, the total number of bytes needed before a new call can make progress.
func PacketLength(data []byte) (n int, err error) {
	if versionErr != nil {
		return 0, versionErr
	}
	base, ln := cbytes(data)
	r := C.tgo_packet_length(base, ln)
	return int(r.n), fail(r, "PacketLength")
}
