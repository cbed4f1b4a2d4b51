//go:build cgo

package tenso

/*
#include "tgo.h"
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// Dumps encodes t with the default options into a new 64-byte-aligned slice.
func Dumps(t *Tensor) ([]byte, error) { return EncodeOptions{}.Dumps(t) }

// DumpsInto encodes t with the default options into dst; see EncodeOptions.DumpsInto.
func DumpsInto(dst []byte, t *Tensor) (int, error) { return EncodeOptions{}.DumpsInto(dst, t) }

// DumpsBound is the packet size of t with the default options.
func DumpsBound(t *Tensor) (int, error) { return EncodeOptions{}.DumpsBound(t) }

// SaveFile saves t at path with the default options, atomically.
func SaveFile(path string, t *Tensor) error { return EncodeOptions{}.SaveFile(path, t) }

// Dumps encodes t into a new slice, whose start is 64-byte aligned so that its body is
// aligned too. One copy of each body (none of the header); with Compress, the LZ4 frame.
func (o EncodeOptions) Dumps(t *Tensor) ([]byte, error) {
	if err := precheck(t, "Dumps"); err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(t)
	if d, ok := o.dense(t); ok {
		data, nbytes := cbytes(t.Data)
		shape, ndim := cshape(t.Shape)
		opts := d.c()
		r := C.tgo_dumps_bound(data, C.uint64_t(nbytes), shape, ndim, C.int32_t(t.DType), opts)
		if err := fail(r, "Dumps"); err != nil {
			return nil, err
		}
		buf := alignedBytes(int(r.n))
		dst, cp := cbytes(buf)
		r = C.tgo_dumps_into(dst, cp, data, C.uint64_t(nbytes), shape, ndim, C.int32_t(t.DType), opts)
		if err := fail(r, "Dumps"); err != nil {
			return nil, err
		}
		return buf[:int(r.n)], nil
	}
	var b builder
	defer b.release()
	v, err := b.build(o, t, "Dumps")
	if err != nil {
		return nil, err
	}
	r := C.tgo_value_dumps_bound(v, b.opts)
	if err := fail(r, "Dumps"); err != nil {
		return nil, err
	}
	buf := alignedBytes(int(r.n))
	dst, cp := cbytes(buf)
	r = C.tgo_value_dumps_into(dst, cp, v, b.opts)
	if err := fail(r, "Dumps"); err != nil {
		return nil, err
	}
	return buf[:int(r.n)], nil
}

// DumpsInto encodes t into dst and returns the packet length. When dst is too small it
// returns an error wrapping ErrBufferTooSmall and, as n, the size needed (an upper bound
// when compressing). The body is aligned in memory when dst is 64-byte aligned.
func (o EncodeOptions) DumpsInto(dst []byte, t *Tensor) (n int, err error) {
	if err := precheck(t, "DumpsInto"); err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(t)
	out, cp := cbytes(dst)
	if d, ok := o.dense(t); ok {
		data, nbytes := cbytes(t.Data)
		shape, ndim := cshape(t.Shape)
		r := C.tgo_dumps_into(out, cp, data, C.uint64_t(nbytes), shape, ndim, C.int32_t(t.DType), d.c())
		return int(r.n), fail(r, "DumpsInto")
	}
	var b builder
	defer b.release()
	v, err := b.build(o, t, "DumpsInto")
	if err != nil {
		return 0, err
	}
	r := C.tgo_value_dumps_into(out, cp, v, b.opts)
	return int(r.n), fail(r, "DumpsInto")
}

// DumpsBound is an upper bound of the packet size of t (exact without compression).
func (o EncodeOptions) DumpsBound(t *Tensor) (int, error) {
	if err := precheck(t, "DumpsBound"); err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(t)
	if d, ok := o.dense(t); ok {
		data, nbytes := cbytes(t.Data)
		shape, ndim := cshape(t.Shape)
		r := C.tgo_dumps_bound(data, C.uint64_t(nbytes), shape, ndim, C.int32_t(t.DType), d.c())
		return int(r.n), fail(r, "DumpsBound")
	}
	var b builder
	defer b.release()
	v, err := b.build(o, t, "DumpsBound")
	if err != nil {
		return 0, err
	}
	r := C.tgo_value_dumps_bound(v, b.opts)
	return int(r.n), fail(r, "DumpsBound")
}

// SaveFile writes the packet for t at path atomically: to a temporary file in the same
// directory, flushed, then renamed over path; on failure the old file is left intact.
func (o EncodeOptions) SaveFile(path string, t *Tensor) error {
	if err := precheck(t, "SaveFile"); err != nil {
		return err
	}
	defer runtime.KeepAlive(t)
	cp, keep, err := cpath(path, "SaveFile")
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(keep)
	if d, ok := o.dense(t); ok {
		data, nbytes := cbytes(t.Data)
		shape, ndim := cshape(t.Shape)
		return fail(C.tgo_save_file(cp, data, C.uint64_t(nbytes), shape, ndim, C.int32_t(t.DType), d.c()), "SaveFile")
	}
	var b builder
	defer b.release()
	v, err := b.build(o, t, "SaveFile")
	if err != nil {
		return err
	}
	return fail(C.tgo_value_save_file(cp, v, b.opts), "SaveFile")
}

func precheck(t *Tensor, op string) error {
	if versionErr != nil {
		return versionErr
	}
	if t == nil {
		return &Error{Status: ErrInvalidArgument, Op: op, Message: "nil tensor"}
	}
	return nil
}

// dense says whether t goes through the dense encoders (no tenso_value: every pointer is an
// argument of a single call, so nothing needs pinning), and with which options.
func (o EncodeOptions) dense(t *Tensor) (EncodeOptions, bool) {
	if t.kind() != KindDense {
		return o, false
	}
	if o.AsDecoded && t.decoded() {
		return t.writtenWith(o), true
	}
	return o, true
}

// builder turns a Tensor tree into a tenso_value. Values borrow the Go memory they describe,
// and C keeps those pointers between calls (until the value is encoded and freed), so every
// borrowed slice is pinned until release, which frees the value first.
type builder struct {
	pin   runtime.Pinner
	root  *C.tenso_value
	opts  C.tenso_encode_options
	plain EncodeOptions // the options C applies (AsDecoded resolved away)
	asDec bool
	op    string
}

func (b *builder) release() {
	if b.root != nil {
		C.tenso_value_free(b.root)
		b.root = nil
	}
	b.pin.Unpin()
}

func (b *builder) build(o EncodeOptions, t *Tensor, op string) (*C.tenso_value, error) {
	b.op = op
	b.asDec = o.AsDecoded
	b.plain = o
	b.plain.AsDecoded = false
	b.opts = b.plain.c()
	v, err := b.value(t, 0)
	if err != nil {
		return nil, err
	}
	b.root = v
	return v, nil
}

func (b *builder) keep(p unsafe.Pointer) {
	if p != nil {
		b.pin.Pin(p)
	}
}

func (b *builder) err(status Status, format string, args ...any) error {
	return &Error{Status: status, Op: b.op, Message: fmt.Sprintf(format, args...)}
}

func sameOptions(a, b EncodeOptions) bool {
	norm := func(x uint32) uint32 {
		if x == 0 {
			return DefaultAlignment
		}
		return x
	}
	return a.Integrity == b.Integrity && a.Compress == b.Compress && norm(a.Alignment) == norm(b.Alignment)
}

func (b *builder) value(t *Tensor, depth int) (*C.tenso_value, error) {
	if t == nil {
		return nil, b.err(ErrInvalidArgument, "nil tensor in the tree")
	}
	if depth > MaxDepth {
		return nil, b.err(ErrInvalidArgument, "tensors nest deeper than %d (a cycle?)", MaxDepth)
	}
	kind := t.kind()
	if b.asDec && t.decoded() && (kind == KindDense || kind == KindQuantized || kind == KindString) {
		if own := t.writtenWith(b.plain); !sameOptions(own, b.plain) {
			// Written with other options than the rest of the tree: encode it alone and
			// insert the packet verbatim (the bytes are those it would have inline).
			pkt, err := own.Dumps(t)
			if err != nil {
				return nil, err
			}
			p, n := cbytes(pkt)
			b.keep(p)
			r := C.tgo_value_packet(p, n)
			return r.v, fail(r.res, b.op)
		}
	}
	switch kind {
	case KindDense:
		data, nbytes := cbytes(t.Data)
		shape, ndim := cshape(t.Shape)
		b.keep(data)
		r := C.tgo_value_tensor(data, C.uint64_t(nbytes), shape, ndim, C.int32_t(t.DType))
		return r.v, fail(r.res, b.op)
	case KindBundle:
		r := C.tgo_value_bundle()
		if err := fail(r.res, b.op); err != nil {
			return nil, err
		}
		for i := range t.Entries {
			child, err := b.value(t.Entries[i].Value, depth+1)
			if err != nil {
				C.tenso_value_free(r.v)
				return nil, err
			}
			key := t.Entries[i].Key
			// The key is copied by tenso_bundle_insert, as is the child's description; the
			// child's borrowed memory stays pinned through b.
			ir := C.tgo_bundle_insert(r.v, (*C.char)(unsafe.Pointer(unsafe.StringData(key))), C.size_t(len(key)), child)
			C.tenso_value_free(child)
			if err := fail(ir, b.op); err != nil {
				C.tenso_value_free(r.v)
				return nil, err
			}
		}
		return r.v, nil
	case KindSparseCOO, KindSparseCSR, KindSparseCSC:
		if len(t.Components) != 3 || t.Components[0] == nil || t.Components[1] == nil || t.Components[2] == nil {
			return nil, b.err(ErrInvalidArgument, "a sparse tensor needs 3 components")
		}
		if len(t.Shape) != 2 {
			return nil, b.err(ErrInvalidArgument, "a sparse tensor is 2-D, not %d-D", len(t.Shape))
		}
		var d [3]unsafe.Pointer
		var n [3]C.size_t
		var s [3]*C.uint64_t
		var nd [3]C.uint32_t
		for i, c := range t.Components {
			d[i], n[i] = cbytes(c.Data)
			s[i], nd[i] = cshape(c.Shape)
			b.keep(d[i])
		}
		a, bb, cc := t.Components[0], t.Components[1], t.Components[2]
		r := C.tgo_value_sparse(C.int32_t(kind), C.uint64_t(t.Shape[0]), C.uint64_t(t.Shape[1]),
			d[0], C.uint64_t(n[0]), s[0], nd[0], C.int32_t(a.DType),
			d[1], C.uint64_t(n[1]), s[1], nd[1], C.int32_t(bb.DType),
			d[2], C.uint64_t(n[2]), s[2], nd[2], C.int32_t(cc.DType))
		return r.v, fail(r.res, b.op)
	case KindQuantized:
		if t.Quant == nil {
			return nil, b.err(ErrInvalidArgument, "a quantized tensor needs Quant")
		}
		q := t.Quant
		if len(q.Scales) != len(q.ZeroPoints) {
			return nil, b.err(ErrInvalidArgument, "%d scales but %d zero points", len(q.Scales), len(q.ZeroPoints))
		}
		data, nbytes := cbytes(t.Data)
		shape, ndim := cshape(t.Shape)
		sc, zp := floats(q.Scales), floats(q.ZeroPoints)
		b.keep(data)
		b.keep(unsafe.Pointer(sc))
		b.keep(unsafe.Pointer(zp))
		r := C.tgo_value_quantized(data, C.uint64_t(nbytes), shape, ndim, C.int32_t(t.DType), sc, zp,
			C.uint32_t(len(q.Scales)), C.int32_t(q.Scheme), C.int32_t(q.Axis), C.uint32_t(q.GroupSize))
		return r.v, fail(r.res, b.op)
	case KindString:
		if len(t.Offsets) == 0 {
			return nil, b.err(ErrInvalidArgument, "a string tensor needs count+1 offsets")
		}
		offs := (*C.uint64_t)(unsafe.Pointer(unsafe.SliceData(t.Offsets)))
		payload, plen := cbytes(t.Data)
		b.keep(unsafe.Pointer(offs))
		b.keep(payload)
		r := C.tgo_value_strings(C.uint64_t(len(t.Offsets)-1), offs, payload, C.uint64_t(plen))
		return r.v, fail(r.res, b.op)
	case KindGPUIPCRef:
		if t.IPC == nil {
			return nil, b.err(ErrInvalidArgument, "a GPU IPC reference needs IPC")
		}
		ref := t.IPC
		r := C.tgo_value_ipc(unsafe.Pointer(&ref.Handle[0]), C.uint64_t(ref.ByteOffset), C.uint64_t(ref.NBytes),
			unsafe.Pointer(&ref.DeviceUUID[0]))
		return r.v, fail(r.res, b.op)
	case KindRagged:
		return nil, b.err(ErrUnsupportedKind, "the direct ragged framing has no writer in libtenso; use NewRagged (a bundle)")
	}
	return nil, b.err(ErrUnsupportedKind, "unknown kind %d", int32(kind))
}

func floats(f []float32) *C.float {
	if len(f) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(unsafe.SliceData(f)))
}

// NewSparse describes a sparse matrix of shape rows x cols from three dense tensors:
// KindSparseCOO: data, row indices, column indices (all nnz long); KindSparseCSR: data,
// column indices, indptr (rows+1); KindSparseCSC: data, row indices, indptr (cols+1).
// Indices are int32 or int64. libtenso checks the structure now (lengths, indptr monotone
// from 0 to nnz, indices inside the shape). Nothing is copied.
func NewSparse(kind Kind, rows, cols uint64, data, indices, third *Tensor) (*Tensor, error) {
	t := &Tensor{Kind: kind, Shape: []uint64{rows, cols}, Components: []*Tensor{data, indices, third}}
	if err := validate(t, "NewSparse"); err != nil {
		return nil, err
	}
	return t, nil
}

// NewQuantized describes a quantized tensor from its parts (packed codes: one byte per
// element, or two 4-bit codes per byte, low nibble first); libtenso checks them now.
func NewQuantized(dtype DType, shape []uint64, packed []byte, q Quantization) (*Tensor, error) {
	qq := q
	t := &Tensor{Kind: KindQuantized, DType: dtype, Shape: shape, Data: packed, Quant: &qq}
	if err := validate(t, "NewQuantized"); err != nil {
		return nil, err
	}
	return t, nil
}

// NewStrings describes a string tensor (UTF-8 strings, checked by libtenso).
func NewStrings(ss []string) (*Tensor, error) {
	offsets := make([]uint64, len(ss)+1)
	total := 0
	for i, s := range ss {
		total += len(s)
		offsets[i+1] = uint64(total)
	}
	payload := make([]byte, 0, total)
	for _, s := range ss {
		payload = append(payload, s...)
	}
	t := &Tensor{Kind: KindString, DType: String, Shape: []uint64{uint64(len(ss))}, Data: payload, Offsets: offsets}
	if err := validate(t, "NewStrings"); err != nil {
		return nil, err
	}
	return t, nil
}

// validate builds (and frees) the tenso_value for t, so constructors report libtenso's checks
// at once rather than at encode time.
func validate(t *Tensor, op string) error {
	if versionErr != nil {
		return versionErr
	}
	var b builder
	defer b.release()
	_, err := b.build(EncodeOptions{}, t, op)
	runtime.KeepAlive(t)
	return err
}

// NewRagged builds a ragged array (upstream's RaggedArray): rows of a 1-D dense tensor flat,
// row i being elements rowOffsets[i] to rowOffsets[i+1] (rowOffsets starts at 0 and ends at
// len). libtenso builds the bundle ("__ragged_offsets__", "__ragged_flat__",
// "__ragged_count__"); the result is that bundle, decoded, in new Go memory.
func NewRagged(flat *Tensor, rowOffsets []uint64) (*Tensor, error) {
	if err := precheck(flat, "NewRagged"); err != nil {
		return nil, err
	}
	if len(rowOffsets) == 0 {
		return nil, &Error{Status: ErrInvalidArgument, Op: "NewRagged", Message: "rowOffsets needs count+1 entries"}
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	data, nbytes := cbytes(flat.Data)
	shape, ndim := cshape(flat.Shape)
	offs := (*C.uint64_t)(unsafe.Pointer(unsafe.SliceData(rowOffsets)))
	if data != nil {
		pin.Pin(data)
	}
	pin.Pin(offs)
	r := C.tgo_value_ragged(data, C.uint64_t(nbytes), shape, ndim, C.int32_t(flat.DType),
		C.uint64_t(len(rowOffsets)-1), offs)
	if err := fail(r.res, "NewRagged"); err != nil {
		return nil, err
	}
	defer C.tenso_value_free(r.v)
	opts := EncodeOptions{}.c()
	br := C.tgo_value_dumps_bound(r.v, opts)
	if err := fail(br, "NewRagged"); err != nil {
		return nil, err
	}
	buf := alignedBytes(int(br.n))
	dst, cp := cbytes(buf)
	if err := fail(C.tgo_value_dumps_into(dst, cp, r.v, opts), "NewRagged"); err != nil {
		return nil, err
	}
	runtime.KeepAlive(flat)
	return Loads(buf)
}

// Quantize quantizes a float32, float16 or bfloat16 tensor, bit-exact with upstream
// QuantizedTensor.quantize (min-max affine per block). qdtype is QInt8, QUInt8, QInt4 or
// QUInt4; axis (per channel; negative counts from the end) and groupSize (per group) are
// ignored by the other schemes. The result is in new Go memory. QuantizeOptions.Quantize
// names its parameters.
func Quantize(input *Tensor, qdtype DType, scheme QuantScheme, axis int, groupSize int) (*Tensor, error) {
	return QuantizeOptions{DType: qdtype, Scheme: scheme, Axis: axis, GroupSize: groupSize}.Quantize(input)
}

// Quantize quantizes a float32, float16 or bfloat16 tensor under these options, bit-exact
// with upstream QuantizedTensor.quantize. The result is in new Go memory.
func (o QuantizeOptions) Quantize(input *Tensor) (*Tensor, error) {
	if err := precheck(input, "Quantize"); err != nil {
		return nil, err
	}
	if o.GroupSize < 0 || uint64(o.GroupSize) > 1<<32-1 {
		return nil, &Error{Status: ErrInvalidArgument, Op: "Quantize", Message: "GroupSize out of range"}
	}
	if o.Axis < math.MinInt32 || o.Axis > math.MaxInt32 {
		return nil, &Error{Status: ErrInvalidArgument, Op: "Quantize", Message: "Axis out of range"}
	}
	qdtype := o.DType
	if qdtype == 0 {
		qdtype = QInt8
	}
	data, nbytes := cbytes(input.Data)
	shape, ndim := cshape(input.Shape)
	r := C.tgo_quantize(data, C.uint64_t(nbytes), shape, ndim, C.int32_t(input.DType), C.int32_t(qdtype),
		C.int32_t(o.Scheme), C.int32_t(o.Axis), C.uint32_t(o.GroupSize))
	runtime.KeepAlive(input)
	defer C.tenso_value_free(r.v)
	if err := fail(r.q.res, "Quantize"); err != nil {
		return nil, err
	}
	var w walker // no input, no owner: everything the value owns is copied
	t := &Tensor{Kind: KindQuantized, DType: DType(r.q.dtype), Shape: make([]uint64, int(r.q.ndim)),
		Data: w.bytes(r.q.data), Quant: quantFrom(&r.q)}
	for i := range t.Shape {
		t.Shape[i] = uint64(r.q.shape[i])
	}
	return t, nil
}

// Dequantize returns the float32 values of a quantized tensor, bit-exact with upstream
// QuantizedTensor.dequantize.
func (t *Tensor) Dequantize() ([]float32, error) {
	if err := precheck(t, "Dequantize"); err != nil {
		return nil, err
	}
	if t.Kind != KindQuantized || t.Quant == nil {
		return nil, &Error{Status: ErrUnsupportedKind, Op: "Dequantize", Message: "not a quantized tensor"}
	}
	n, ok := numel(t.Shape)
	if !ok {
		return nil, &Error{Status: ErrTooManyElements, Op: "Dequantize", Message: "more than 1e9 elements"}
	}
	out := make([]float32, n)
	q := t.Quant
	data, nbytes := cbytes(t.Data)
	shape, ndim := cshape(t.Shape)
	r := C.tgo_dequantize(floats(out), C.uint64_t(n), data, C.uint64_t(nbytes), shape, ndim, C.int32_t(t.DType),
		floats(q.Scales), floats(q.ZeroPoints), C.uint32_t(min(len(q.Scales), len(q.ZeroPoints))),
		C.int32_t(q.Scheme), C.int32_t(q.Axis), C.uint32_t(q.GroupSize))
	runtime.KeepAlive(t)
	if err := fail(r, "Dequantize"); err != nil {
		return nil, err
	}
	return out, nil
}
