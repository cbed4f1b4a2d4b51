//go:build cgo

package tenso

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"
)

func roundTrip[T Element](t *testing.T, s []T, shape []int) {
	t.Helper()
	pkt, err := Dumps(must(FromSlice(shape, s)))
	if err != nil {
		t.Fatalf("%v: %v", DTypeOf[T](), err)
	}
	got, err := Loads(pkt)
	if err != nil {
		t.Fatalf("%v: %v", DTypeOf[T](), err)
	}
	vals, err := Values[T](got)
	if err != nil {
		t.Fatalf("%v: Values: %v", DTypeOf[T](), err)
	}
	if !slices.Equal(vals, s) || !slices.Equal(must(got.Dims()), shape) || got.DType != DTypeOf[T]() {
		t.Errorf("%v: got %v %v, want %v %v", DTypeOf[T](), got.Shape, vals, shape, s)
	}
	// Values aliases the packet (Dumps output is 64-byte aligned, so bodies are too).
	if len(s) > 0 && unsafe.Pointer(&vals[0]) != unsafe.Pointer(&got.Data[0]) {
		t.Errorf("%v: Values copied an aligned body", DTypeOf[T]())
	}
}

func TestElementTypes(t *testing.T) {
	roundTrip(t, []bool{true, false, true}, []int{3})
	roundTrip(t, []int8{-128, 0, 127, 5}, []int{2, 2})
	roundTrip(t, []uint8{0, 255}, []int{2})
	roundTrip(t, []int16{-32768, 32767}, []int{2})
	roundTrip(t, []uint16{65535, 1}, []int{2, 1})
	roundTrip(t, []int32{math.MinInt32, math.MaxInt32}, []int{2})
	roundTrip(t, []uint32{math.MaxUint32}, []int{1})
	roundTrip(t, []int64{math.MinInt64, 1, math.MaxInt64}, []int{3})
	roundTrip(t, []uint64{math.MaxUint64}, []int{1, 1, 1})
	roundTrip(t, []float32{float32(math.Inf(-1)), 1.5, -0}, []int{3})
	roundTrip(t, []float64{math.Pi}, []int{})
	roundTrip(t, []complex64{1 + 2i, -3i}, []int{2})
	roundTrip(t, []complex128{complex(math.MaxFloat64, 1)}, []int{1})
	roundTrip(t, []float32{}, []int{0, 7})
}

func TestValues(t *testing.T) {
	// Bodies nested in bundles sit wherever their sub-packet lands: Values copies when the
	// body is misaligned for T, and aliases otherwise.
	b := NewBundle(Entry{Key: "k", Value: Vector([]uint8{1, 2, 3})}, Entry{Key: "f", Value: Vector([]float64{1, 2, 3})})
	pkt, err := Dumps(b)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < 8; off++ {
		buf := make([]byte, off+len(pkt))
		copy(buf[off:], pkt)
		got, err := Loads(buf[off:])
		if err != nil {
			t.Fatal(err)
		}
		f, err := Values[float64](got.Get("f"))
		if err != nil || !slices.Equal(f, []float64{1, 2, 3}) {
			t.Fatalf("offset %d: %v, %v", off, f, err)
		}
	}
	if _, err := Values[float32](Vector([]int32{1})); !errors.Is(err, ErrBadDType) {
		t.Errorf("Values[float32] of int32: %v", err)
	}
	if _, err := Values[uint16](NewTensor(BFloat16, []uint64{1}, []byte{0x80, 0x3f})); err != nil {
		t.Errorf("Values[uint16] of bfloat16: %v", err)
	}
	if _, err := Values[bool](NewTensor(Bool, []uint64{2}, []byte{1, 2})); !errors.Is(err, ErrMalformed) {
		t.Errorf("bool byte 2: %v", err)
	}
	if _, err := Values[int16](NewTensor(Int16, []uint64{1}, []byte{1, 2, 3})); !errors.Is(err, ErrMalformed) {
		t.Errorf("odd bytes: %v", err)
	}
	if _, err := Values[int16](nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil: %v", err)
	}
}

// Loads aliases its input: no copy of an uncompressed body, and no C memory afterwards.
func TestLoadsAliasesInput(t *testing.T) {
	src := make([]float32, 1024)
	for i := range src {
		src[i] = float32(i % 8) // compressible
	}
	pkt, err := Dumps(Vector(src))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Loads(pkt)
	if err != nil {
		t.Fatal(err)
	}
	if &got.Data[0] != &pkt[64] || len(got.Data) != 4096 || cap(got.Data) != 4096 {
		t.Fatalf("Data is not pkt[64:4160:4160]")
	}
	// Compressed bodies are decompressed by libtenso and copied into (aligned) Go memory.
	zpkt, err := EncodeOptions{Compress: true}.Dumps(Vector(src))
	if err != nil {
		t.Fatal(err)
	}
	z, err := Loads(zpkt)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(z.Data, got.Data) || z.OwnsCMemory() || uintptr(unsafe.Pointer(&z.Data[0]))%64 != 0 {
		t.Fatal("decompressed body wrong, not Go memory, or not aligned")
	}
	if z.Flags&FlagCompression == 0 || len(zpkt) >= len(pkt) {
		t.Errorf("flags %#x, %d compressed bytes for %d", z.Flags, len(zpkt), len(pkt))
	}
}

func TestBundles(t *testing.T) {
	inner := NewBundle(Entry{Key: "x", Value: Vector([]int16{1, 2})})
	b := NewBundle(
		Entry{Key: "b", Value: Vector([]float32{1})},
		Entry{Key: "a", Value: inner},
		Entry{Key: "b", Value: Vector([]uint8{9})}, // duplicate keys are kept, in order
		Entry{Key: "", Value: Vector([]int64{})},
		Entry{Key: "ключ ✓", Value: must(FromSlice(nil, []float64{2.5}))},
	)
	pkt, err := Dumps(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Loads(pkt)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range got.Entries {
		keys = append(keys, e.Key)
	}
	if !slices.Equal(keys, []string{"b", "a", "b", "", "ключ ✓"}) {
		t.Errorf("keys %q", keys)
	}
	if v, _ := Values[float32](got.Get("b")); !slices.Equal(v, []float32{1}) {
		t.Errorf("Get(b) = %v", v)
	}
	if v, _ := Values[int16](got.Get("a").Get("x")); !slices.Equal(v, []int16{1, 2}) {
		t.Errorf("a/x = %v", v)
	}
	if got.Get("missing") != nil || got.IsRagged() {
		t.Error("Get(missing) or IsRagged")
	}
	again, err := Dumps(got)
	if err != nil || !bytes.Equal(again, pkt) {
		t.Errorf("re-encoding the decoded bundle changed its bytes (%v)", err)
	}
	empty, err := Dumps(NewBundle())
	if err != nil || len(empty) != 10 {
		t.Errorf("empty bundle: %d bytes, %v", len(empty), err)
	}
}

// AsDecoded keeps each entry's own options: integrity on one, alignment 128 on another.
func TestAsDecodedMixedOptions(t *testing.T) {
	a, _ := EncodeOptions{Integrity: true}.Dumps(Vector([]float32{1, 2}))
	b, _ := EncodeOptions{Alignment: 128}.Dumps(Vector([]int32{3}))
	c, _ := EncodeOptions{Compress: true}.Dumps(Vector(make([]float64, 300)))
	var entries []Entry
	for i, p := range [][]byte{a, b, c} {
		d, err := Loads(p)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, Entry{Key: string(rune('a' + i)), Value: d})
	}
	entries = append(entries, Entry{Key: "new", Value: Vector([]uint8{1})})
	out, err := EncodeOptions{AsDecoded: true, Alignment: 16}.Dumps(NewBundle(entries...))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Loads(out)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		flags uint32
		align uint32
	}{{FlagAligned | FlagIntegrity, 64}, {FlagCustAlign, 128}, {FlagAligned | FlagCompression, 64}, {FlagCustAlign, 16}} {
		e := got.Entries[i].Value
		if e.Flags != want.flags || e.Alignment != want.align {
			t.Errorf("entry %d: flags %#x alignment %d, want %#x %d", i, e.Flags, e.Alignment, want.flags, want.align)
		}
	}
	// Without AsDecoded the options of the call apply to every entry.
	out, _ = EncodeOptions{Integrity: true}.Dumps(NewBundle(entries...))
	got, _ = Loads(out)
	for i, e := range got.Entries {
		if e.Value.Flags&FlagIntegrity == 0 || e.Value.Flags&FlagCompression != 0 {
			t.Errorf("entry %d: flags %#x", i, e.Value.Flags)
		}
	}
}

func TestQuantize(t *testing.T) {
	in := make([]float32, 4*6)
	for i := range in {
		in[i] = float32(math.Sin(float64(i))) * 3
	}
	x := must(FromSlice([]int{4, 6}, in))
	for _, qd := range []DType{QInt8, QUInt8, QInt4, QUInt4} {
		for _, sc := range []struct {
			scheme      QuantScheme
			axis, group int
		}{{PerTensor, 0, 0}, {PerChannel, 1, 0}, {PerChannel, -2, 0}, {PerGroup, 0, 5}} {
			q, err := Quantize(x, qd, sc.scheme, sc.axis, sc.group)
			if err != nil {
				t.Fatalf("%v %+v: %v", qd, sc, err)
			}
			if q.Kind != KindQuantized || q.DType != qd || !slices.Equal(q.Shape, x.Shape) || q.Quant.Scheme != sc.scheme {
				t.Fatalf("%v %+v: %+v", qd, sc, q)
			}
			deq, err := q.Dequantize()
			if err != nil {
				t.Fatal(err)
			}
			maxScale := float32(0)
			for _, s := range q.Quant.Scales {
				maxScale = max(maxScale, s)
			}
			for i := range in {
				if d := math.Abs(float64(deq[i] - in[i])); d > float64(maxScale)*0.51+1e-6 {
					t.Fatalf("%v %+v: element %d: %v vs %v (scale %v)", qd, sc, i, deq[i], in[i], maxScale)
				}
			}
			pkt, err := Dumps(q)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Loads(pkt)
			if err != nil {
				t.Fatal(err)
			}
			deq2, err := back.Dequantize()
			if err != nil || !slices.Equal(deq, deq2) {
				t.Fatalf("%v %+v: dequantized values change through a packet (%v)", qd, sc, err)
			}
		}
	}
	if _, err := Vector([]float32{1}).Dequantize(); !errors.Is(err, ErrUnsupportedKind) {
		t.Errorf("Dequantize(dense): %v", err)
	}
}

func TestStringsRaggedIPC(t *testing.T) {
	want := []string{"", "héllo", "世界 🌍", "x"}
	s, err := NewStrings(want)
	if err != nil {
		t.Fatal(err)
	}
	pkt, err := Dumps(NewBundle(Entry{Key: "s", Value: s})) // unlike upstream, strings nest in bundles
	if err != nil {
		t.Fatal(err)
	}
	got, err := Loads(pkt)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := got.Get("s").Strings()
	if err != nil || !slices.Equal(ss, want) {
		t.Errorf("Strings() = %q, %v", ss, err)
	}
	if _, err := Vector([]int8{1}).Strings(); !errors.Is(err, ErrUnsupportedKind) {
		t.Errorf("Strings(dense): %v", err)
	}

	r, err := NewRagged(Vector([]int32{1, 2, 3, 4, 5, 6}), []uint64{0, 2, 2, 6})
	if err != nil {
		t.Fatal(err)
	}
	flat, offs, err := r.Ragged()
	if err != nil || !slices.Equal(offs, []uint64{0, 2, 2, 6}) {
		t.Fatalf("Ragged() = %v, %v", offs, err)
	}
	if v, _ := Values[int32](flat); !slices.Equal(v, []int32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("flat = %v", v)
	}
	// A hand-built bundle is not a ragged array until libtenso has seen it.
	if _, _, err := NewBundle().Ragged(); !errors.Is(err, ErrUnsupportedKind) {
		t.Errorf("Ragged(empty bundle): %v", err)
	}
	rp, _ := Dumps(r)
	if back, err := Loads(rp); err != nil || !back.IsRagged() {
		t.Errorf("ragged bundle not recognised after a round trip: %v", err)
	}

	ref := IPCRef{ByteOffset: 7, NBytes: 1 << 40}
	for i := range ref.Handle {
		ref.Handle[i] = byte(255 - i)
	}
	ref.DeviceUUID[15] = 0xEE
	pkt, err = Dumps(NewIPCRef(ref))
	if err != nil || len(pkt) != 106 {
		t.Fatalf("IPC ref: %d bytes, %v", len(pkt), err)
	}
	back, err := Loads(pkt)
	if err != nil || back.Kind != KindGPUIPCRef || *back.IPC != ref {
		t.Errorf("IPC ref round trip: %+v, %v", back, err)
	}
}

func TestSparse(t *testing.T) {
	coo, err := NewSparse(KindSparseCOO, 3, 4, Vector([]float32{1, 2}), Vector([]int64{0, 2}), Vector([]int64{3, 1}))
	if err != nil {
		t.Fatal(err)
	}
	csr, err := NewSparse(KindSparseCSR, 2, 3, Vector([]float64{5, 6, 7}), Vector([]int32{0, 2, 1}), Vector([]int32{0, 2, 3}))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Tensor{coo, csr} {
		pkt, err := Dumps(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Loads(pkt)
		if err != nil {
			t.Fatal(err)
		}
		if got.Kind != s.Kind || !slices.Equal(got.Shape, s.Shape) || len(got.Components) != 3 {
			t.Fatalf("%v: %+v", s.Kind, got)
		}
		for i, c := range got.Components {
			if !bytes.Equal(c.Data, s.Components[i].Data) || c.DType != s.Components[i].DType {
				t.Errorf("%v component %d differs", s.Kind, i)
			}
		}
	}
}

// Tensors from files own C memory: Close frees it, and the cleanup frees what is dropped
// without Close.
func TestLifetimes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.tenso")
	src := []float32{1, 2, 3, 4}
	if err := SaveFile(path, NewBundle(Entry{Key: "v", Value: Vector(src)})); err != nil {
		t.Fatal(err)
	}
	base := cLiveViewsForTest()

	// Loads never keeps a view.
	pkt, _ := os.ReadFile(path)
	for i := 0; i < 10; i++ {
		if _, err := Loads(pkt); err != nil {
			t.Fatal(err)
		}
	}
	if cLiveViewsForTest() != base {
		t.Fatal("Loads left a view behind")
	}

	m, err := LoadFileAliased(path)
	if err != nil {
		t.Fatal(err)
	}
	child := m.Get("v")
	if !child.OwnsCMemory() || cLiveViewsForTest() != base+1 {
		t.Fatal("a mapped file's entries must share the owner")
	}
	child.Close() // closing any tensor of the packet releases the packet
	if cLiveViewsForTest() != base {
		t.Fatal("Close did not free the view")
	}
	m.Close()
	var nilT *Tensor
	nilT.Close()

	// Dropped without Close: the cleanup frees the view.
	func() {
		for i := 0; i < 20; i++ {
			if _, err := LoadFileAliased(path); err != nil {
				t.Fatal(err)
			}
		}
	}()
	if cLiveViewsForTest() != base+20 {
		t.Fatalf("%d live views, want %d", cLiveViewsForTest(), base+20)
	}
	deadline := time.Now().Add(10 * time.Second)
	for cLiveViewsForTest() != base && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := cLiveViewsForTest(); n != base {
		t.Fatalf("%d views not collected", n-base)
	}

	// Writing a file-backed tensor keeps it alive for the whole call.
	f, err := LoadFileAliased(path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Dumps(f)
	f.Close()
	if err != nil || !bytes.Equal(out, pkt) {
		t.Fatalf("re-encoding a mapped packet: %v", err)
	}

	if _, err := LoadFile(filepath.Join(dir, "missing"), LoadRead); !errors.Is(err, ErrIO) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := LoadFile("a\x00b", LoadRead); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("NUL in path: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644)
	if _, err := LoadFile(filepath.Join(dir, "empty"), LoadMmap); !errors.Is(err, ErrEndOfStream) {
		t.Errorf("empty file: %v", err)
	}
	if err := SaveFile(filepath.Join(dir, "no", "such", "dir"), Vector(src)); !errors.Is(err, ErrIO) {
		t.Errorf("SaveFile into a missing directory: %v", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	cs := loadGolden(t)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				for _, c := range cs {
					d, err := Loads(c.bytes)
					if err != nil {
						t.Error(err)
						return
					}
					out, err := EncodeOptions{AsDecoded: true}.Dumps(d)
					if err != nil {
						t.Error(err)
						return
					}
					if c.byteExact() && !bytes.Equal(out, c.bytes) {
						t.Errorf("%s differs", c.Name)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// Dims never turns a dimension above math.MaxInt into a negative int.
func TestDimsBeyondInt(t *testing.T) {
	huge := NewTensor(Uint8, []uint64{3, 1 << 63, 0}, nil)
	if d, err := huge.Dims(); d != nil || !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Dims = %v, %v", d, err)
	}
	if d, err := (PacketInfo{Shape: []uint64{math.MaxUint64}}).Dims(); d != nil || !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("PacketInfo.Dims = %v, %v", d, err)
	}
	if d, err := (ArchiveEntry{Shape: []uint64{math.MaxInt, 0}}).Dims(); err != nil || !slices.Equal(d, []int{math.MaxInt, 0}) {
		t.Fatalf("ArchiveEntry.Dims = %v, %v", d, err)
	}
}

// Documented on Values and Loads: Values of a Loads result aliases the caller's input.
func TestValuesOfLoadsAliasInput(t *testing.T) {
	pkt := must(Dumps(Vector([]int32{1, 2, 3})))
	m := must(Loads(pkt))
	v := must(Values[int32](m))
	off := int(uintptr(unsafe.Pointer(&m.Data[0])) - uintptr(unsafe.Pointer(&pkt[0])))
	if off < 0 || off+12 > len(pkt) || unsafe.Pointer(&v[0]) != unsafe.Pointer(&pkt[off]) {
		t.Fatal("Values of a Loads result does not alias the input")
	}
	binary.LittleEndian.PutUint32(pkt[off+4:], 20)
	if !slices.Equal(v, []int32{1, 20, 3}) {
		t.Fatalf("a write to the input is not seen: %v", v)
	}
}

func TestKindNamesFromTheABI(t *testing.T) {
	want := map[Kind]string{KindDense: "dense", KindBundle: "bundle", KindSparseCOO: "sparse_coo",
		KindQuantized: "quantized", KindGPUIPCRef: "gpu_ipc_ref", Kind(99): "Kind(99)"}
	for k, name := range want {
		if got := k.String(); got != name {
			t.Errorf("Kind(%d).String() = %q, want %q", int32(k), got, name)
		}
	}
}

// Threads 1 and 0 (every core) write the same LZ4 frames, in a tensor and in a bundle with
// footers (three 4 MiB blocks, the middle one pseudo-random and stored raw), and both decode.
func TestThreadsSameBytes(t *testing.T) {
	data := make([]uint8, 9<<20+4)
	x := uint64(11)
	for i := range data {
		if i>>22 == 1 {
			x = x*6364136223846793005 + 1442695040888963407
			data[i] = uint8(x >> 56)
		} else {
			data[i] = uint8(i*7%251) ^ uint8(i>>12)
		}
	}
	b := NewBundle(Entry{"a", Vector(data)}, Entry{"b", Vector([]float32{1, 2, 3})})
	for _, v := range []*Tensor{Vector(data), b} {
		one, err := EncodeOptions{Compress: true, Integrity: true, Threads: 1}.Dumps(v)
		if err != nil {
			t.Fatal(err)
		}
		all, err := EncodeOptions{Compress: true, Integrity: true, Threads: 0}.Dumps(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(one, all) {
			t.Fatalf("threads 1 and 0 wrote different packets (%d and %d bytes)", len(one), len(all))
		}
		for _, threads := range []uint32{1, 0} {
			got, err := DecodeOptions{Threads: threads}.Loads(all)
			if err != nil {
				t.Fatal(err)
			}
			if got.Kind == KindBundle {
				got = got.Get("a")
			}
			if !bytes.Equal(got.Data, data) {
				t.Fatalf("threads %d: decoded bytes differ", threads)
			}
		}
	}
}
