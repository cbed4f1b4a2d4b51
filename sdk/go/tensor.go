package tenso

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Tensor is a decoded packet, or a value to encode: a dense tensor, a bundle or one of the
// composite kinds. Which fields matter depends on Kind:
//
//	KindDense       DType, Shape, Data (C-contiguous little-endian elements)
//	KindBundle      Entries (ordered; keys may repeat)
//	KindSparse*     Shape (2-D), Components: COO data, row, col; CSR data, indices, indptr;
//	                CSC data, indices, indptr (each a dense Tensor)
//	KindQuantized   DType (QInt8...QUInt4), Shape, Data (packed codes), Quant
//	KindString      Shape ([count]), Data (UTF-8 payload), Offsets (count+1)
//	KindRagged      (decode only) DType, Shape, Data (rows), Offsets
//	KindGPUIPCRef   IPC
//
// A zero Kind is treated as KindDense when encoding. Flags, Version, Alignment and
// PacketSize describe the packet a Tensor was decoded from (zero for tensors built in Go)
// and are ignored when encoding, except with EncodeOptions.AsDecoded.
//
// See the package documentation for who owns Data.
type Tensor struct {
	Kind       Kind
	DType      DType
	Shape      []uint64
	Data       []byte
	Entries    []Entry
	Components []*Tensor
	Quant      *Quantization
	Offsets    []uint64
	IPC        *IPCRef

	Flags      uint32 // header flags as on the wire
	Version    uint32 // wire version it was written with (1 to 4); 0: built in Go
	Alignment  uint32 // declared body alignment relative to its packet start
	PacketSize uint64 // length of the packet it was decoded from

	owner    *owner // C memory that Data (and its children's) alias; nil for Go memory
	ragged   *raggedInfo
	shapeBuf [4]uint64 // Shape's storage for decoded tensors of up to 4 dimensions
}

// raggedInfo marks a bundle that libtenso (tenso_view_ragged) recognised as a ragged array.
type raggedInfo struct {
	flat, offsets int // entry indices
}

// liveViews counts tenso views held by Tensors, liveHandles the shared-memory, cache and
// archive handles (tests check that Close and cleanups free them).
var liveViews, liveHandles atomic.Int64

// owner is one C object (a view, or a handle) whose memory some Go values alias or use. free
// is the C free function (so this file stays free of cgo); the cleanup registered at creation
// is the safety net that Close cancels; live counts the objects not yet freed.
type owner struct {
	view    atomic.Pointer[byte]
	free    func(unsafe.Pointer)
	live    *atomic.Int64
	cleanup runtime.Cleanup
	// tensors alias the view (set by the walker); close empties their Data so that a use
	// after Close reads nothing instead of freed memory.
	tensors []*Tensor
}

func newOwner(view unsafe.Pointer, free func(unsafe.Pointer)) *owner {
	return newTracked(view, free, &liveViews)
}

func newTracked(view unsafe.Pointer, free func(unsafe.Pointer), live *atomic.Int64) *owner {
	o := &owner{free: free, live: live}
	o.view.Store((*byte)(view))
	live.Add(1)
	o.cleanup = runtime.AddCleanup(o, func(v unsafe.Pointer) {
		free(v)
		live.Add(-1)
	}, view)
	return o
}

// ptr is the C object, or nil once closed.
func (o *owner) ptr() unsafe.Pointer { return unsafe.Pointer(o.view.Load()) }

func (o *owner) close() {
	if v := o.view.Swap(nil); v != nil {
		for _, t := range o.tensors {
			t.Data = nil
		}
		o.cleanup.Stop()
		o.free(unsafe.Pointer(v))
		o.live.Add(-1)
	}
}

// handle is a libtenso handle (segment, cache, archive, writer) whose methods may run on
// several goroutines while another calls Close: each call holds it shared (acquire, then a
// deferred release), and close frees it only after the calls in flight have returned. Once
// close has begun, new calls fail at once (acquire returns nil) instead of queueing behind
// it: a call made from inside another (Archive.Verify's progress callback) must not wait for
// a Close that itself waits for the outer call - a sync.RWMutex would deadlock there.
type handle struct {
	mu      sync.Mutex
	idle    sync.Cond // signalled when active drops to 0 while closing
	active  int       // calls holding the handle
	closing bool
	o       *owner
}

func newHandle(p unsafe.Pointer, free func(unsafe.Pointer)) *handle {
	h := &handle{o: newTracked(p, free, &liveHandles)}
	h.idle.L = &h.mu
	return h
}

// acquire is the C handle, held until release; nil (and nothing held) once closing.
func (h *handle) acquire() unsafe.Pointer {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.o.ptr()
	if h.closing || p == nil {
		return nil
	}
	h.active++
	return p
}

func (h *handle) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.active--; h.active == 0 && h.closing {
		h.idle.Broadcast()
	}
}

func (h *handle) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closing = true
	for h.active > 0 {
		h.idle.Wait()
	}
	h.o.close()
}

// Close releases the C memory an aliased Tensor (from LoadFileAliased, Archive.GetAliased,
// Shm.GetAliased or a CacheView) points into: a mapping or a pinned cache entry. Every Tensor
// of the same packet (bundle entries, components) shares it; their Data become nil, and no
// slice taken from them earlier may be used afterwards. Tensors in Go memory (from Loads,
// ReadFrom, LoadFile, Archive.Get, Shm.Get, or built in Go) hold no C memory: Close does
// nothing. Close is idempotent and returns nil.
func (t *Tensor) Close() error {
	if t != nil && t.owner != nil {
		t.owner.close()
	}
	return nil
}

// OwnsCMemory reports whether Data aliases C memory that Close releases (an aliased
// Tensor; see the package documentation).
func (t *Tensor) OwnsCMemory() bool { return t != nil && t.owner != nil }

// closed reports an aliased Tensor whose memory was released.
func (t *Tensor) closed() bool { return t.owner != nil && t.owner.ptr() == nil }

// NewTensor describes a dense tensor over data (borrowed, not copied): C-contiguous
// little-endian elements of dtype, product(shape) * dtype.ItemSize() bytes. An empty shape is
// a scalar.
func NewTensor(dtype DType, shape []uint64, data []byte) *Tensor {
	return &Tensor{Kind: KindDense, DType: dtype, Shape: shape, Data: data}
}

// Element is a Go type whose memory layout is a tenso dtype (on a little-endian machine).
type Element interface {
	~bool | ~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// DTypeOf is the dtype of a Go element type (uint16 for float16/bfloat16 bits).
func DTypeOf[T Element]() DType {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Bool:
		return Bool
	case reflect.Int8:
		return Int8
	case reflect.Uint8:
		return Uint8
	case reflect.Int16:
		return Int16
	case reflect.Uint16:
		return Uint16
	case reflect.Int32:
		return Int32
	case reflect.Uint32:
		return Uint32
	case reflect.Int64:
		return Int64
	case reflect.Uint64:
		return Uint64
	case reflect.Float32:
		return Float32
	case reflect.Float64:
		return Float64
	case reflect.Complex64:
		return Complex64
	case reflect.Complex128:
		return Complex128
	}
	return 0
}

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// AsBytes reinterprets a slice of elements as its bytes, without copying.
func AsBytes[T Element](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

// FromSlice describes a dense tensor of the given shape over the elements of s, without
// copying them. The shape is checked now: every dimension >= 0, at most MaxNDim of them,
// multiplying to len(s) (an empty shape is a scalar: len(s) == 1); the error wraps
// ErrInvalidArgument or ErrTooManyDims. The dtype follows T (DTypeOf).
//
// Changed in 1.3: the shape is []int (was []uint64) and a bad one is an error here (it was
// reported by Dumps).
func FromSlice[T Element](shape []int, s []T) (*Tensor, error) {
	if !littleEndian {
		return nil, &Error{Status: ErrNotAvailable, Op: "FromSlice", Message: "big-endian machine (the wire is little-endian)"}
	}
	u, err := shapeFromInts(shape, "FromSlice")
	if err != nil {
		return nil, err
	}
	if n, ok := numel(u); !ok || n != uint64(len(s)) {
		return nil, &Error{Status: ErrInvalidArgument, Op: "FromSlice",
			Message: fmt.Sprintf("shape %v holds %d elements, the slice %d", shape, n, len(s))}
	}
	return NewTensor(DTypeOf[T](), u, AsBytes(s)), nil
}

// shapeFromInts converts a Go shape to the wire's, refusing negative dimensions and more than
// MaxNDim of them.
func shapeFromInts(shape []int, op string) ([]uint64, error) {
	if len(shape) > MaxNDim {
		return nil, &Error{Status: ErrTooManyDims, Op: op, Message: fmt.Sprintf("%d dimensions", len(shape))}
	}
	u := make([]uint64, len(shape))
	for i, d := range shape {
		if d < 0 {
			return nil, &Error{Status: ErrInvalidArgument, Op: op, Message: fmt.Sprintf("dimension %d is %d", i, d)}
		}
		u[i] = uint64(d)
	}
	return u, nil
}

// Vector describes a 1-D dense tensor over s, without copying it.
func Vector[T Element](s []T) *Tensor {
	return NewTensor(DTypeOf[T](), []uint64{uint64(len(s))}, AsBytes(s))
}

// Scalar describes a 0-dimensional dense tensor holding v (copied).
func Scalar[T Element](v T) *Tensor {
	return NewTensor(DTypeOf[T](), []uint64{}, AsBytes([]T{v}))
}

// Dims is the shape as []int. A dimension above math.MaxInt (a hand-built shape, or an empty
// tensor with one huge dimension) is an error wrapping ErrInvalidArgument, never a negative
// int.
func (t *Tensor) Dims() ([]int, error) { return intDims(t.Shape, "Tensor.Dims") }

// Dims is the shape as []int (an error wrapping ErrInvalidArgument for a dimension above
// math.MaxInt).
func (p PacketInfo) Dims() ([]int, error) { return intDims(p.Shape, "PacketInfo.Dims") }

// Dims is the shape as []int (an error wrapping ErrInvalidArgument for a dimension above
// math.MaxInt).
func (e ArchiveEntry) Dims() ([]int, error) { return intDims(e.Shape, "ArchiveEntry.Dims") }

func intDims(shape []uint64, op string) ([]int, error) {
	out := make([]int, len(shape))
	for i, d := range shape {
		if d > math.MaxInt {
			return nil, &Error{Status: ErrInvalidArgument, Op: op,
				Message: fmt.Sprintf("dimension %d is %d: more than an int holds", i, d)}
		}
		out[i] = int(d)
	}
	return out, nil
}

// Values returns the elements of a dense tensor (or of a sparse component) as a []T that
// is safe to keep: Go memory the garbage collector owns, valid whatever happens to t. It
// aliases Data when Data is Go memory aligned for T - so on the result of [Loads], whose Data
// slices the caller's input, it aliases that input: a later write to the input shows in the
// values (copy them, or the input, to keep them apart) - and copies otherwise: when Data is not
// aligned for T (bodies nested in bundles are only aligned relative to their own packet) and
// when t is an aliased Tensor (its Data is a mapping or a cache entry that Close releases;
// use [ValuesAliased] there for a zero-copy view). T must match the dtype; uint16 is also
// accepted for float16 and bfloat16 bits. Bool data must hold only 0 and 1. An aliased Tensor
// that was closed gives an error matching os.ErrClosed.
func Values[T Element](t *Tensor) ([]T, error) { return values[T](t, false, "Values") }

// ValuesAliased is Values without the copy for aliased Tensors: the slice points into the
// mapping or cache entry that t's Close (or, when t becomes unreachable, its cleanup)
// releases. Only for callers who keep t reachable and open while the slice is used
// (runtime.KeepAlive(t) after the last use); a use after that faults or reads reused memory.
// It still copies data that is not aligned for T.
func ValuesAliased[T Element](t *Tensor) ([]T, error) { return values[T](t, true, "ValuesAliased") }

func values[T Element](t *Tensor, alias bool, op string) ([]T, error) {
	if t == nil {
		return nil, &Error{Status: ErrInvalidArgument, Op: op, Message: "nil tensor"}
	}
	if t.closed() {
		return nil, errClosed(op, "the tensor")
	}
	defer runtime.KeepAlive(t)
	want := DTypeOf[T]()
	if want != t.DType && !(want == Uint16 && (t.DType == Float16 || t.DType == BFloat16)) {
		return nil, &Error{Status: ErrBadDType, Op: op,
			Message: fmt.Sprintf("tensor holds %v, not %v", t.DType, want)}
	}
	if !littleEndian {
		return nil, &Error{Status: ErrNotAvailable, Op: op, Message: "big-endian machine"}
	}
	var zero T
	size := int(unsafe.Sizeof(zero))
	if len(t.Data)%size != 0 {
		return nil, &Error{Status: ErrMalformed, Op: op,
			Message: fmt.Sprintf("%d bytes is not a whole number of %v elements", len(t.Data), t.DType)}
	}
	n := len(t.Data) / size
	if n == 0 {
		return []T{}, nil
	}
	if want == Bool {
		for i, b := range t.Data {
			if b > 1 {
				return nil, &Error{Status: ErrMalformed, Op: op,
					Message: fmt.Sprintf("bool element %d is %d", i, b)}
			}
		}
	}
	p := unsafe.Pointer(unsafe.SliceData(t.Data))
	if uintptr(p)%unsafe.Alignof(zero) == 0 && (t.owner == nil || alias) {
		return unsafe.Slice((*T)(p), n), nil
	}
	out := make([]T, n)
	copy(AsBytes(out), t.Data)
	return out, nil
}

// NumElements is the product of the shape (1 for a scalar).
func (t *Tensor) NumElements() uint64 {
	n := uint64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// NewBundle describes a bundle of the given entries, in order.
func NewBundle(entries ...Entry) *Tensor {
	return &Tensor{Kind: KindBundle, Entries: entries}
}

// Get returns the value of the first bundle entry with the given key, or nil.
func (t *Tensor) Get(key string) *Tensor {
	if t == nil {
		return nil
	}
	for i := range t.Entries {
		if t.Entries[i].Key == key {
			return t.Entries[i].Value
		}
	}
	return nil
}

// NewIPCRef describes a GPU IPC reference packet.
func NewIPCRef(ref IPCRef) *Tensor {
	r := ref
	return &Tensor{Kind: KindGPUIPCRef, IPC: &r}
}

// Strings returns the strings of a string tensor (copies).
func (t *Tensor) Strings() ([]string, error) {
	if t == nil || t.Kind != KindString {
		return nil, &Error{Status: ErrUnsupportedKind, Op: "Strings", Message: "not a string tensor"}
	}
	if len(t.Offsets) == 0 {
		return nil, &Error{Status: ErrMalformed, Op: "Strings", Message: "no offsets"}
	}
	out := make([]string, len(t.Offsets)-1)
	for i := range out {
		a, b := t.Offsets[i], t.Offsets[i+1]
		if a > b || b > uint64(len(t.Data)) {
			return nil, &Error{Status: ErrMalformed, Op: "Strings", Message: fmt.Sprintf("offset %d out of range", i)}
		}
		out[i] = string(t.Data[a:b])
	}
	return out, nil
}

// Ragged returns the rows of a ragged array: a bundle that libtenso recognised, when it
// decoded it, as a ragged array (built by NewRagged or upstream's RaggedArray). Row i is
// flat's elements offsets[i] to offsets[i+1].
func (t *Tensor) Ragged() (flat *Tensor, offsets []uint64, err error) {
	if t == nil || t.Kind != KindBundle || t.ragged == nil {
		return nil, nil, &Error{Status: ErrUnsupportedKind, Op: "Ragged",
			Message: "not a decoded ragged-array bundle"}
	}
	offs := t.Entries[t.ragged.offsets].Value
	offsets = make([]uint64, len(offs.Data)/8)
	for i := range offsets {
		offsets[i] = binary.LittleEndian.Uint64(offs.Data[8*i:])
	}
	return t.Entries[t.ragged.flat].Value, offsets, nil
}

// IsRagged reports whether Ragged would succeed.
func (t *Tensor) IsRagged() bool { return t != nil && t.Kind == KindBundle && t.ragged != nil }

// writtenWith is the EncodeOptions the decoded tensor t was written with.
func (t *Tensor) writtenWith(base EncodeOptions) EncodeOptions {
	o := base
	o.AsDecoded = false
	o.Integrity = t.Flags&FlagIntegrity != 0
	o.Compress = t.Flags&FlagCompression != 0
	o.Alignment = t.Alignment
	if o.Alignment == 0 {
		o.Alignment = DefaultAlignment
	}
	return o
}

func (t *Tensor) decoded() bool { return t.Version != 0 }

func (t *Tensor) kind() Kind {
	if t.Kind == 0 {
		return KindDense
	}
	return t.Kind
}

// numel is the element count of shape, false beyond MaxElements (checked before multiplying
// further, so it cannot overflow).
func numel(shape []uint64) (uint64, bool) {
	n := uint64(1)
	for _, d := range shape {
		if d != 0 && n > MaxElements/d {
			return 0, false
		}
		n *= d
	}
	return n, n <= MaxElements
}
