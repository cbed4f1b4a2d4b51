//go:build cgo

package tenso

/*
#include "tgo.h"

// Defined in archive_export.go (a cgo.Handle's value arrives as `user`).
extern int goTensoProgress(uint64_t done, uint64_t total, uintptr_t handle);

static int tgo_progress_trampoline(uint64_t done, uint64_t total, void *user) {
	return goTensoProgress(done, total, (uintptr_t)user);
}

// n: the first failing tensor's index (UINT64_MAX when none was reported).
static inline tgo_res tgo_archive_verify(tenso_archive *a, uintptr_t handle) {
	uint64_t bad = UINT64_MAX;
	tenso_status st = tenso_archive_verify(&bad, a, handle ? tgo_progress_trampoline : NULL, (void *)handle);
	return tgo_res_of(st, bad);
}
*/
import "C"

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/cgo"
	"unsafe"
)

// Archive is a file of named tensors, mapped read-only: a tenso archive, a safetensors or
// bintensors file, or one packet. Opening reads only the index; Get returns a zero-copy
// Tensor into the mapping (Close it when done; it stays valid after the Archive is closed).
// Methods may be called from several goroutines at once; Close waits for calls in flight.
type Archive struct {
	h *handle
}

func freeArchive(p unsafe.Pointer) { C.tenso_archive_close((*C.tenso_archive)(p)) }

func (o ArchiveOptions) c() C.tenso_archive_options {
	var c C.tenso_archive_options
	c.version = C.TENSO_ARCHIVE_OPTIONS_VERSION
	if o.VerifyAll {
		c.flags |= C.TENSO_ARCHIVE_VERIFY_ALL
	}
	if o.NoVerify {
		c.flags |= C.TENSO_ARCHIVE_NO_VERIFY
	}
	c.format = C.tenso_format(o.Format)
	c.max_index_bytes = C.uint64_t(o.MaxIndexBytes)
	c.max_tensors = C.uint64_t(o.MaxTensors)
	return c
}

// OpenArchive opens the file at path with the default options; see ArchiveOptions.Open.
func OpenArchive(path string) (*Archive, error) { return ArchiveOptions{}.Open(path) }

// Open opens the file at path and reads its index (the data is not touched). Errors wrap
// ErrNotFound or ErrIO from the system; ErrCorrupt, ErrLimit, ErrBadOffset, ErrDuplicateKey,
// ErrBadUTF8, ErrTruncated or ErrBadDType for a file that is not valid for its format.
func (o ArchiveOptions) Open(path string) (*Archive, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	cp, keep, err := cpath(path, "OpenArchive")
	if err != nil {
		return nil, err
	}
	r := C.tgo_archive_open(cp, o.c())
	runtime.KeepAlive(keep)
	if err := fail(r.res, "OpenArchive"); err != nil {
		return nil, err
	}
	return &Archive{h: newHandle(unsafe.Pointer(r.a), freeArchive)}, nil
}

func (a *Archive) ptr(op string) (*C.tenso_archive, error) {
	if a == nil {
		return nil, errClosed(op, "the archive")
	}
	// Held until the caller's deferred release: Close waits for it.
	p := a.h.acquire()
	if p == nil {
		return nil, errClosed(op, "the archive")
	}
	return (*C.tenso_archive)(p), nil
}

// Format is the format that was opened (FormatAuto once closed).
func (a *Archive) Format() Format {
	p, err := a.ptr("Archive.Format")
	if err != nil {
		return FormatAuto
	}
	defer a.h.release()
	defer runtime.KeepAlive(a)
	return Format(C.tenso_archive_format(p))
}

// Alignment is a tenso archive's alignment (64, or 4096 for O_DIRECT / GPUDirect Storage):
// every packet starts at a multiple of it in the file. 0 for safetensors, bintensors and
// packet files, which promise none (and once closed).
func (a *Archive) Alignment() uint32 {
	p, err := a.ptr("Archive.Alignment")
	if err != nil {
		return 0
	}
	defer a.h.release()
	defer runtime.KeepAlive(a)
	return uint32(C.tenso_archive_alignment(p))
}

// Len is the number of tensors (0 once closed).
func (a *Archive) Len() int {
	p, err := a.ptr("Archive.Len")
	if err != nil {
		return 0
	}
	defer a.h.release()
	defer runtime.KeepAlive(a)
	return int(C.tenso_archive_count(p))
}

// Entry describes tensor i (0 <= i < Len()), in file order.
func (a *Archive) Entry(i int) (ArchiveEntry, error) {
	p, err := a.ptr("Archive.Entry")
	if err != nil {
		return ArchiveEntry{}, err
	}
	defer a.h.release()
	if i < 0 {
		return ArchiveEntry{}, &Error{Status: ErrInvalidArgument, Op: "Archive.Entry", Message: "negative index"}
	}
	defer runtime.KeepAlive(a)
	r := C.tgo_archive_entry_at(p, C.uint64_t(i))
	if err := fail(r.res, "Archive.Entry"); err != nil {
		return ArchiveEntry{}, err
	}
	e := &r.e
	out := ArchiveEntry{
		Name:   C.GoStringN(e.name, C.int(e.name_len)),
		Kind:   Kind(e.kind),
		DType:  DType(e.dtype),
		Shape:  make([]uint64, int(min(e.ndim, MaxNDim))),
		Offset: uint64(e.offset), StoredBytes: uint64(e.stored_bytes), NBytes: uint64(e.nbytes),
		DataOffset: uint64(e.data_offset), XXH3: uint64(e.xxh3),
		Hashed: e.flags&C.TENSO_ENTRY_HASHED != 0,
	}
	for d := range out.Shape {
		out.Shape[d] = uint64(e.shape[d])
	}
	return out, nil
}

// Entries describes every tensor, in file order.
func (a *Archive) Entries() ([]ArchiveEntry, error) {
	n := a.Len()
	out := make([]ArchiveEntry, n)
	for i := range out {
		e, err := a.Entry(i)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// Find returns the index of the tensor named name (O(1) in tenso archives). The error wraps
// ErrNotFound when there is none.
func (a *Archive) Find(name string) (int, error) {
	p, err := a.ptr("Archive.Find")
	if err != nil {
		return 0, err
	}
	defer a.h.release()
	defer runtime.KeepAlive(a)
	k, kn := ckey(name)
	r := C.tgo_archive_find(p, k, kn)
	runtime.KeepAlive(name)
	if err := fail(r, "Archive.Find"); err != nil {
		return 0, err
	}
	return int(r.n), nil
}

// Get returns tensor i in Go memory (its bodies copied out of the mapping, or decompressed):
// safe to keep after the Archive is closed, and Close does nothing. Options: none (the
// default limits) or one DecodeOptions. A stored hash is verified on each tensor's first Get
// unless the archive was opened with NoVerify: the error then wraps ErrChecksum. GetAliased
// is the zero-copy form; TensorReader reads a part of a tensor.
func (a *Archive) Get(i int, opts ...DecodeOptions) (*Tensor, error) {
	return a.get(i, opts, false, "Archive.Get")
}

// GetAliased is Get without the copy: the Tensor aliases the mapping (LZ4 bodies are
// decompressed into C memory it owns) and stays valid after the Archive is closed, until the
// Tensor is closed or unreachable - slices of it do not keep it alive (see LoadFileAliased).
func (a *Archive) GetAliased(i int, opts ...DecodeOptions) (*Tensor, error) {
	return a.get(i, opts, true, "Archive.GetAliased")
}

// oneOption is the optional trailing options argument: none (the zero value) or one.
func oneOption[O any](opts []O, op string) (O, error) {
	var o O
	switch len(opts) {
	case 0:
		return o, nil
	case 1:
		return opts[0], nil
	}
	return o, &Error{Status: ErrInvalidArgument, Op: op, Message: "at most one options argument"}
}

func (a *Archive) get(i int, opts []DecodeOptions, alias bool, op string) (*Tensor, error) {
	o, err := oneOption(opts, op)
	if err != nil {
		return nil, err
	}
	p, err := a.ptr(op)
	if err != nil {
		return nil, err
	}
	defer a.h.release()
	if i < 0 {
		return nil, &Error{Status: ErrInvalidArgument, Op: op, Message: "negative index"}
	}
	defer runtime.KeepAlive(a)
	info := C.tgo_archive_get(p, C.uint64_t(i), o.c())
	if err := fail(info.res, op); err != nil {
		return nil, err
	}
	return viewTree(&info, alias)
}

// GetByName is Get of the tensor named name (ErrNotFound when there is none).
func (a *Archive) GetByName(name string, opts ...DecodeOptions) (*Tensor, error) {
	i, err := a.Find(name)
	if err != nil {
		return nil, err
	}
	return a.Get(i, opts...)
}

// GetByNameAliased is GetAliased of the tensor named name.
func (a *Archive) GetByNameAliased(name string, opts ...DecodeOptions) (*Tensor, error) {
	i, err := a.Find(name)
	if err != nil {
		return nil, err
	}
	return a.GetAliased(i, opts...)
}

// TensorReader returns an io.ReaderAt (and io.Reader, io.Seeker) over the body of tensor i,
// NBytes long, reading with pread(2) on demand: slices of tensors larger than memory. Only
// for tensors stored raw (DataOffset != 0), else ErrUnsupportedKind. It holds no resources
// of its own; its reads fail with an error matching os.ErrClosed once the Archive is closed.
func (a *Archive) TensorReader(i int) (*io.SectionReader, error) {
	e, err := a.Entry(i)
	if err != nil {
		return nil, err
	}
	if e.DataOffset == 0 && e.NBytes != 0 {
		return nil, &Error{Status: ErrUnsupportedKind, Op: "Archive.TensorReader",
			Message: fmt.Sprintf("tensor %d (%q) is not stored raw", i, e.Name)}
	}
	if e.NBytes > math.MaxInt64 {
		return nil, &Error{Status: ErrLimit, Op: "Archive.TensorReader", Message: "tensor larger than an int64"}
	}
	return io.NewSectionReader(tensorReaderAt{a: a, i: i, size: int64(e.NBytes)}, 0, int64(e.NBytes)), nil
}

// tensorReaderAt adapts Archive.ReadAt to io.ReaderAt (short reads at the end give io.EOF).
type tensorReaderAt struct {
	a    *Archive
	i    int
	size int64
}

func (r tensorReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &Error{Status: ErrInvalidArgument, Op: "Archive.TensorReader", Message: "negative offset"}
	}
	if off >= r.size {
		return 0, io.EOF
	}
	n := len(p)
	if int64(n) > r.size-off {
		n = int(r.size - off)
	}
	if err := r.a.ReadAt(r.i, uint64(off), p[:n]); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// ReadAt copies len(dst) body bytes of tensor i, starting off bytes into its body, with
// pread(2): only those bytes are read (slices of tensors larger than memory). Only for tensors
// stored raw (DataOffset != 0), else ErrUnsupportedKind; a range outside the body is
// ErrInvalidArgument.
func (a *Archive) ReadAt(i int, off uint64, dst []byte) error {
	p, err := a.ptr("Archive.ReadAt")
	if err != nil {
		return err
	}
	defer a.h.release()
	if i < 0 {
		return &Error{Status: ErrInvalidArgument, Op: "Archive.ReadAt", Message: "negative index"}
	}
	defer runtime.KeepAlive(a)
	d, n := cbytes(dst)
	// dst is Go memory passed for this call only; C writes into it and keeps no pointer.
	r := C.tgo_archive_read(d, p, C.uint64_t(i), C.uint64_t(off), C.uint64_t(n))
	runtime.KeepAlive(dst)
	return fail(r, "Archive.ReadAt")
}

// Metadata returns the string metadata pairs, in the order stored.
func (a *Archive) Metadata() ([]MetadataPair, error) {
	p, err := a.ptr("Archive.Metadata")
	if err != nil {
		return nil, err
	}
	defer a.h.release()
	defer runtime.KeepAlive(a)
	n := int(C.tenso_archive_metadata_count(p))
	out := make([]MetadataPair, n)
	for i := range out {
		r := C.tgo_archive_metadata_at(p, C.uint64_t(i))
		if err := fail(r.res, "Archive.Metadata"); err != nil {
			return nil, err
		}
		out[i] = MetadataPair{Key: C.GoStringN(r.key, C.int(r.key_len)), Value: C.GoStringN(r.value, C.int(r.value_len))}
	}
	return out, nil
}

// MetadataValue returns the metadata value for key; ok is false when there is none.
func (a *Archive) MetadataValue(key string) (value string, ok bool) {
	p, err := a.ptr("Archive.MetadataValue")
	if err != nil {
		return "", false
	}
	defer a.h.release()
	defer runtime.KeepAlive(a)
	k, kn := ckey(key)
	r := C.tgo_archive_metadata_find(p, k, kn)
	runtime.KeepAlive(key)
	if fail(r.res, "Archive.MetadataValue") != nil {
		return "", false
	}
	return C.GoStringN(r.value, C.int(r.value_len)), true
}

// progressState is what a cgo.Handle carries to goTensoProgress during one Verify.
type progressState struct {
	fn       func(done, total uint64) bool
	panicked bool
	panicVal any
}

// Verify checks every stored hash (and, for archives, that every packet decodes). progress,
// when not nil, is called with the bytes done and in total as it goes; returning false stops
// the walk with an error wrapping ErrUser. A panic in progress stops the walk and is raised
// again once libtenso has returned. On failure bad is the first failing tensor's index (-1
// when none is reported) and the error wraps ErrChecksum or the decode status.
//
// progress may call the Archive's other methods. Close, from any goroutine, waits for Verify
// to return; once it has begun, calls from progress fail with an error matching os.ErrClosed
// (Len reports 0) rather than wait for it. So progress must not call Close itself: that
// Close would wait for the Verify it is running in.
func (a *Archive) Verify(progress func(done, total uint64) bool) (bad int, err error) {
	p, err := a.ptr("Archive.Verify")
	if err != nil {
		return -1, err
	}
	defer a.h.release()
	defer runtime.KeepAlive(a)
	var h cgo.Handle
	var state *progressState
	if progress != nil {
		state = &progressState{fn: progress}
		h = cgo.NewHandle(state)
		defer h.Delete()
	}
	r := C.tgo_archive_verify(p, C.uintptr_t(h))
	if state != nil && state.panicked {
		if r.msg != nil {
			C.free(unsafe.Pointer(r.msg))
		}
		panic(state.panicVal)
	}
	if err := fail(r, "Archive.Verify"); err != nil {
		if uint64(r.n) == math.MaxUint64 || Status(r.status) == ErrUser {
			return -1, err
		}
		return int(r.n), err
	}
	return -1, nil
}

// Close releases the handle (Tensors from Get keep the mapping until closed). Idempotent;
// returns nil.
func (a *Archive) Close() error {
	if a != nil {
		a.h.close()
	}
	return nil
}

// ArchiveWriter writes a tenso archive, safetensors or bintensors file as a stream: each Add
// writes that tensor's bytes before it returns (memory stays bounded by the index), and
// Finish writes the index, flushes and renames the temporary file over the target. Closing an
// unfinished writer discards the file: the target is never left half-written. One goroutine
// at a time.
type ArchiveWriter struct {
	h *handle
}

func freeWriter(p unsafe.Pointer) { C.tenso_archive_writer_free((*C.tenso_archive_writer)(p)) }

// CreateArchive starts writing path with the default options; see ArchiveWriteOptions.Create.
func CreateArchive(path string) (*ArchiveWriter, error) { return ArchiveWriteOptions{}.Create(path) }

// Create starts writing path: a temporary file next to it is created now and renamed over
// path by Finish.
func (o ArchiveWriteOptions) Create(path string) (*ArchiveWriter, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	cp, keep, err := cpath(path, "CreateArchive")
	if err != nil {
		return nil, err
	}
	var c C.tenso_archive_write_options
	c.version = C.TENSO_ARCHIVE_WRITE_OPTIONS_VERSION
	if o.NoHash {
		c.flags = C.TENSO_ARCHIVE_NO_HASH
	}
	c.format = C.tenso_format(o.Format)
	c.alignment = C.uint32_t(o.Alignment)
	enc := o.Encode
	enc.AsDecoded = false // one set of packet options for the whole file
	c.encode = enc.c()
	r := C.tgo_writer_open(cp, c)
	runtime.KeepAlive(keep)
	if err := fail(r.res, "CreateArchive"); err != nil {
		return nil, err
	}
	return &ArchiveWriter{h: newHandle(unsafe.Pointer(r.w), freeWriter)}, nil
}

func (w *ArchiveWriter) ptr(op string) (*C.tenso_archive_writer, error) {
	if w == nil {
		return nil, errClosed(op, "the writer")
	}
	// Held until the caller's deferred release: Close waits for it.
	p := w.h.acquire()
	if p == nil {
		return nil, errClosed(op, "the writer")
	}
	return (*C.tenso_archive_writer)(p), nil
}

// Add appends t under name (its bytes are written before Add returns). The error wraps
// ErrDuplicateKey for a name already added, ErrBadUTF8 for a name that is not UTF-8; for
// safetensors and bintensors ErrUnsupportedKind (not dense) or ErrBadDType (no equivalent).
func (w *ArchiveWriter) Add(name string, t *Tensor) error {
	if err := precheck(t, "ArchiveWriter.Add"); err != nil {
		return err
	}
	p, err := w.ptr("ArchiveWriter.Add")
	if err != nil {
		return err
	}
	defer w.h.release()
	defer runtime.KeepAlive(w)
	var b builder
	defer b.release()
	v, err := b.build(EncodeOptions{}, t, "ArchiveWriter.Add")
	if err != nil {
		return err
	}
	k, kn := ckey(name)
	r := C.tgo_writer_add(p, k, kn, v)
	runtime.KeepAlive(name)
	return fail(r, "ArchiveWriter.Add")
}

// SetMetadata adds a metadata pair (UTF-8; a key set twice keeps the last value).
func (w *ArchiveWriter) SetMetadata(key, value string) error {
	p, err := w.ptr("ArchiveWriter.SetMetadata")
	if err != nil {
		return err
	}
	defer w.h.release()
	defer runtime.KeepAlive(w)
	k, kn := ckey(key)
	v, vn := ckey(value)
	r := C.tgo_writer_set_metadata(p, k, kn, v, vn)
	runtime.KeepAlive(key)
	runtime.KeepAlive(value)
	return fail(r, "ArchiveWriter.SetMetadata")
}

// Finish writes the index, flushes the file to disk and renames it over the target, then
// releases the writer. After a failure the target is untouched.
func (w *ArchiveWriter) Finish() error {
	p, err := w.ptr("ArchiveWriter.Finish")
	if err != nil {
		return err
	}
	r := C.tgo_writer_finish(p)
	w.h.release()
	w.h.close()
	return fail(r, "ArchiveWriter.Finish")
}

// Close releases the writer; an unfinished file is discarded (the target is untouched).
// Idempotent; returns nil.
func (w *ArchiveWriter) Close() error {
	if w != nil {
		w.h.close()
	}
	return nil
}
