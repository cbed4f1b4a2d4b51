//go:build cgo

package tenso

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

func goldenNamed(t testing.TB, name string) *goldenCase {
	t.Helper()
	for _, c := range loadGolden(t) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no golden case %q", name)
	return nil
}

// wantStatus checks that err is an *Error of the given status, with libtenso's message.
func wantStatus(t *testing.T, what string, err error, want Status) *Error {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %s", what, err, want.Name())
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: %T is not a *tenso.Error", what, err)
	}
	if e.Status != want || e.Message == "" || e.Op == "" {
		t.Fatalf("%s: %#v: want status %s with an op and a message", what, e, want.Name())
	}
	for _, other := range []Status{ErrTruncated, ErrBadMagic, ErrChecksum, ErrInvalidArgument, ErrLimit} {
		if other != want && errors.Is(err, other) {
			t.Fatalf("%s: %v also matches %s", what, err, other.Name())
		}
	}
	return e
}

func TestTablesMatchLibrary(t *testing.T) {
	// The dtype facts come from libtenso; these are the wire's (tenso-wire-v4.md), so a
	// library that changed one would fail here.
	facts := map[DType]struct {
		name string
		size int
	}{
		Float32: {"float32", 4}, Int32: {"int32", 4}, Float64: {"float64", 8}, Int64: {"int64", 8},
		Uint8: {"uint8", 1}, Uint16: {"uint16", 2}, Bool: {"bool", 1}, Float16: {"float16", 2},
		Int8: {"int8", 1}, Int16: {"int16", 2}, Uint32: {"uint32", 4}, Uint64: {"uint64", 8},
		Complex64: {"complex64", 8}, Complex128: {"complex128", 16}, BFloat16: {"bfloat16", 2},
		QInt8: {"qint8", 0}, QUInt8: {"quint8", 0}, QInt4: {"qint4", 0}, QUInt4: {"quint4", 0},
		String: {"string", 0}, Bytes: {"bytes", 0},
	}
	for d := DType(-1); d <= 23; d++ {
		f, known := facts[d]
		if !known {
			f.name = "unknown"
		}
		if d.String() != f.name || d.ItemSize() != f.size {
			t.Errorf("DType(%d) = %q, %d bytes; want %q, %d", d, d.String(), d.ItemSize(), f.name, f.size)
		}
		if known {
			if back, err := ParseDType(f.name); err != nil || back != d {
				t.Errorf("ParseDType(%q) = %v, %v", f.name, back, err)
			}
		}
	}
	if _, err := ParseDType("float32\x00"); !errors.Is(err, ErrBadDType) {
		t.Errorf("ParseDType with a NUL = %v", err)
	}
	for s := Status(-32); s <= 1; s++ {
		if got, want := s.Name(), cStatusName(s); got != want {
			t.Errorf("Status(%d).Name() = %q, libtenso says %q", s, got, want)
		}
	}
	if _, err := ParseDType("float33"); !errors.Is(err, ErrBadDType) {
		t.Errorf("ParseDType(float33) = %v", err)
	}
	if cProtocolVersion() != ProtocolVersion {
		t.Errorf("protocol %d", cProtocolVersion())
	}
}

func TestVersion(t *testing.T) {
	if err := CheckVersion(); err != nil {
		t.Fatal(err)
	}
	if v := LibraryVersion(); v != "1.0.0" && !strings.HasPrefix(v, "1.") {
		t.Errorf("LibraryVersion() = %q", v)
	}
	if !strings.Contains(LibraryPath(), "libtenso") {
		t.Errorf("LibraryPath() = %q", LibraryPath())
	}
	h := cHeaderVersionForTest()
	if err := checkVersion(h, "/x/libtenso.so.1"); err != nil {
		t.Errorf("same version refused: %v", err)
	}
	if err := checkVersion(h+1, "/x/libtenso.so.1"); err != nil {
		t.Errorf("newer patch refused: %v", err)
	}
	for _, bad := range []uint32{h + 10000, 9999} {
		err := checkVersion(bad, "/x/libtenso.so.1")
		if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "/x/libtenso.so.1") {
			t.Errorf("checkVersion(%d) = %v, want ErrNotAvailable naming the path", bad, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	good := goldenNamed(t, "dense_float32_2x3").bytes

	wantStatus(t, "Loads(nil)", func() error { _, err := Loads(nil); return err }(), ErrTruncated)
	wantStatus(t, "Loads(header only)", func() error { _, err := Loads(good[:9]); return err }(), ErrTruncated)

	bad := slices.Clone(good)
	bad[0] = 'X'
	e := wantStatus(t, "bad magic", func() error { _, err := Loads(bad); return err }(), ErrBadMagic)
	if e.Op != "Loads" || !strings.Contains(e.Error(), "TENSO_E_BAD_MAGIC") {
		t.Errorf("error text %q", e.Error())
	}

	bad = slices.Clone(good)
	bad[4] = 9 // the version byte
	wantStatus(t, "version 9", func() error { _, err := Loads(bad); return err }(), ErrUnsupportedVersion)

	// Integrity: one flipped body bit fails the footer, unless checks are skipped.
	integ := goldenNamed(t, "dense_i32_integrity").bytes
	bad = slices.Clone(integ)
	bad[64] ^= 1
	wantStatus(t, "flipped body bit", func() error { _, err := Loads(bad); return err }(), ErrChecksum)
	if _, err := (DecodeOptions{SkipChecksum: true}).Loads(bad); err != nil {
		t.Errorf("SkipChecksum: %v", err)
	}
	// The same through the pinned path (a bundle with an integrity footer).
	bi := goldenNamed(t, "bundle_integrity").bytes
	bad = slices.Clone(bi)
	bad[len(bad)-9] ^= 0x80 // last body byte before the last footer
	wantStatus(t, "bundle with a flipped bit", func() error { _, err := Loads(bad); return err }(), ErrChecksum)

	// Limits can be tightened.
	mat := goldenNamed(t, "dense_f64_mat").bytes
	wantStatus(t, "MaxNDim 1", func() error { _, err := (DecodeOptions{MaxNDim: 1}).Loads(mat); return err }(), ErrTooManyDims)
	wantStatus(t, "MaxElements 5", func() error { _, err := (DecodeOptions{MaxElements: 5}).Loads(good); return err }(), ErrTooManyElements)
	wantStatus(t, "MaxPacketBytes 16", func() error { _, err := (DecodeOptions{MaxPacketBytes: 16}).Loads(good); return err }(), ErrLimit)
	nested := goldenNamed(t, "bundle_nested3").bytes
	wantStatus(t, "MaxDepth 2", func() error { _, err := (DecodeOptions{MaxDepth: 2}).Loads(nested); return err }(), ErrLimit)
	wantStatus(t, "MaxEntries 1", func() error { _, err := (DecodeOptions{MaxEntries: 1}).Loads(nested); return err }(), ErrLimit)
	if _, err := (DecodeOptions{MaxEntries: 1000}).Loads(nested); err != nil {
		t.Errorf("MaxEntries 1000: %v", err)
	}
	// 4 KiB of zeros, compressed: MaxPacketBytes bounds what it inflates to, unless
	// MaxDecodedBytes takes over.
	zeros := goldenNamed(t, "compressed_f32_zeros1024").bytes
	size := uint64(len(zeros))
	wantStatus(t, "inflating past MaxPacketBytes", func() error { _, err := (DecodeOptions{MaxPacketBytes: size}).Loads(zeros); return err }(), ErrLimit)
	if _, err := (DecodeOptions{MaxPacketBytes: size, MaxDecodedBytes: 1 << 20}).Loads(zeros); err != nil {
		t.Errorf("MaxDecodedBytes 1 MiB: %v", err)
	}
	wantStatus(t, "MaxDecodedBytes 4096", func() error { _, err := (DecodeOptions{MaxDecodedBytes: 4096}).Loads(zeros); return err }(), ErrLimit)
	// MaxInflation: 64 MiB of zeros compress to well under 4 MiB, which counts as 4 MiB.
	bomb, err := EncodeOptions{Compress: true}.Dumps(Vector(make([]byte, 64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "MaxInflation 2", func() error { _, err := (DecodeOptions{MaxInflation: 2}).Loads(bomb); return err }(), ErrLimit)
	if _, err := (DecodeOptions{MaxInflation: 16}).Loads(bomb); err != nil {
		t.Errorf("MaxInflation 16: %v", err)
	}

	// Strings: UTF-8 is only checked on request.
	s, err := NewStrings([]string{"ok", "fine"})
	if err != nil {
		t.Fatal(err)
	}
	pkt, err := Dumps(s)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(pkt), "fine")
	pkt[i] = 0xff
	if _, err := Loads(pkt); err != nil {
		t.Errorf("invalid UTF-8 without ValidateUTF8: %v", err)
	}
	_, err = (DecodeOptions{ValidateUTF8: true}).Loads(pkt)
	wantStatus(t, "ValidateUTF8 of invalid UTF-8", err, ErrMalformed)
}

func TestEncodeErrors(t *testing.T) {
	f := []float32{1, 2, 3, 4, 5, 6}
	cases := []struct {
		name string
		t    *Tensor
		want Status
	}{
		{"non-dense dtype", NewTensor(QInt8, []uint64{6}, AsBytes(f)), ErrBadDType},
		{"unknown dtype", NewTensor(99, []uint64{6}, AsBytes(f)), ErrBadDType},
		{"nbytes mismatch", NewTensor(Float32, []uint64{5}, AsBytes(f)), ErrInvalidArgument},
		{"33 dims", NewTensor(Float32, make([]uint64, 33), nil), ErrTooManyDims},
		{"too many elements", NewTensor(Uint8, []uint64{1 << 20, 1 << 20}, nil), ErrTooManyElements},
		{"nil bundle entry", NewBundle(Entry{Key: "a"}), ErrInvalidArgument},
		{"bad UTF-8 key", NewBundle(Entry{Key: "\xff", Value: Vector(f)}), ErrInvalidArgument},
		{"direct ragged", &Tensor{Kind: KindRagged, DType: Float32}, ErrUnsupportedKind},
		{"unknown kind", &Tensor{Kind: 42}, ErrUnsupportedKind},
		{"nil tensor", nil, ErrInvalidArgument},
	}
	many := NewBundle()
	for i := 0; i < 256; i++ {
		many.Entries = append(many.Entries, Entry{Key: fmt.Sprint(i), Value: Vector(f)})
	}
	cases = append(cases, struct {
		name string
		t    *Tensor
		want Status
	}{"256 entries", many, ErrInvalidArgument})
	cyc := NewBundle()
	cyc.Entries = []Entry{{Key: "self", Value: cyc}}
	cases = append(cases, struct {
		name string
		t    *Tensor
		want Status
	}{"a cycle", cyc, ErrInvalidArgument})

	for _, c := range cases {
		_, err := Dumps(c.t)
		wantStatus(t, c.name+" (Dumps)", err, c.want)
		_, err = DumpsInto(make([]byte, 1<<12), c.t)
		wantStatus(t, c.name+" (DumpsInto)", err, c.want)
		_, err = DumpTo(io.Discard, c.t)
		wantStatus(t, c.name+" (DumpTo)", err, c.want)
	}

	_, err := EncodeOptions{Alignment: 3}.Dumps(Vector(f))
	wantStatus(t, "alignment 3", err, ErrInvalidArgument)
	_, err = NewStrings([]string{"a", "\xc3"})
	wantStatus(t, "NewStrings(bad UTF-8)", err, ErrInvalidArgument)
	_, err = NewSparse(KindSparseCSR, 2, 2, Vector([]float32{1}), Vector([]int32{5}), Vector([]int32{0, 1, 1}))
	wantStatus(t, "CSR index outside the shape", err, ErrInvalidArgument)
	_, err = NewSparse(KindSparseCSR, 2, 2, Vector([]float32{1}), Vector([]int32{0}), Vector([]int32{0, 1}))
	wantStatus(t, "CSR indptr too short", err, ErrInvalidArgument)
	_, err = NewQuantized(QInt8, []uint64{4}, []byte{1, 2, 3}, Quantization{Scales: []float32{1}, ZeroPoints: []float32{0}})
	wantStatus(t, "quantized with 3 codes for 4 elements", err, ErrInvalidArgument)
	_, err = NewRagged(Vector([]float32{1, 2}), []uint64{0, 3})
	wantStatus(t, "ragged offsets past the end", err, ErrInvalidArgument)
	_, err = Quantize(Vector([]int32{1, 2}), QInt8, PerTensor, 0, 0)
	wantStatus(t, "Quantize(int32)", err, ErrBadDType)
}

// The message is thread-local in libtenso; every goroutine must get the message of its own
// failure even when goroutines hop between OS threads and fail concurrently.
func TestErrorMessagesAreNotMixedUp(t *testing.T) {
	good := goldenNamed(t, "dense_float32_2x3").bytes
	badMagic := slices.Clone(good)
	badMagic[0] = 'X'
	integ := slices.Clone(goldenNamed(t, "dense_i32_integrity").bytes)
	integ[64] ^= 1
	inputs := []struct {
		data []byte
		want Status
	}{{badMagic, ErrBadMagic}, {integ, ErrChecksum}, {good[:20], ErrTruncated}}
	msgs := map[Status]string{}
	for _, in := range inputs {
		_, err := Loads(in.data)
		msgs[in.want] = err.(*Error).Message
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				in := inputs[(g+i)%len(inputs)]
				_, err := Loads(in.data)
				var e *Error
				if !errors.As(err, &e) || e.Status != in.want || e.Message != msgs[in.want] {
					errs <- fmt.Sprintf("goroutine %d: %v, want %s: %q", g, err, in.want.Name(), msgs[in.want])
					return
				}
				if _, err := Loads(good); err != nil {
					errs <- err.Error()
					return
				}
				runtime.Gosched()
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestErrorShape(t *testing.T) {
	e := &Error{Status: ErrEndOfStream, Op: "ReadFrom", Message: "end of stream", Err: io.EOF}
	if !errors.Is(e, ErrEndOfStream) || !errors.Is(e, io.EOF) || errors.Is(e, ErrTruncated) {
		t.Error("errors.Is does not see both the status and the cause")
	}
	if got := e.Error(); got != "tenso: ReadFrom: end of stream (TENSO_E_END_OF_STREAM)" {
		t.Errorf("Error() = %q", got)
	}
	if got := ErrChecksum.Error(); got != "tenso: checksum" {
		t.Errorf("ErrChecksum.Error() = %q", got)
	}
	if Status(-99).Name() != "TENSO_E_UNKNOWN" {
		t.Error("unknown status name")
	}
}
