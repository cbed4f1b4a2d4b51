//go:build cgo

package tenso

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"
)

type three struct {
	a []float32
	b []int64
	c []uint8
}

// writeThree writes three tensors and metadata (a key set twice keeps the last value).
func writeThree(t *testing.T, path string, o ArchiveWriteOptions) three {
	t.Helper()
	d := three{a: rampF32(300, 1), b: []int64{-5, 6, 7, 8}, c: slices.Repeat([]uint8{9}, 17)}
	w, err := o.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, e := range []Entry{
		{"layer.0.weight", must(FromSlice([]int{3, 100}, d.a))},
		{"layer.0.bias", must(FromSlice([]int{2, 2}, d.b))},
		{"ünïcode", Vector(d.c)},
	} {
		if err := w.Add(e.Key, e.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range [][2]string{{"format", "pt"}, {"note", "first"}, {"note", "last wins"}} {
		if err := w.SetMetadata(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return d
}

func checkThree(t *testing.T, a *Archive, d three) {
	t.Helper()
	entries, err := a.Entries()
	if err != nil || len(entries) != 3 || a.Len() != 3 {
		t.Fatalf("%d entries, %v", len(entries), err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	if a.Format() == FormatArchive && !slices.Equal(names, []string{"layer.0.weight", "layer.0.bias", "ünïcode"}) {
		t.Fatalf("archives keep the order of Add: %q", names)
	}
	sort.Strings(names)
	if !slices.Equal(names, []string{"layer.0.bias", "layer.0.weight", "ünïcode"}) {
		t.Fatalf("names %q", names)
	}
	bias, err := a.Find("layer.0.bias")
	if err != nil {
		t.Fatal(err)
	}
	e := entries[bias]
	if e.Kind != KindDense || e.DType != Int64 || !slices.Equal(e.Shape, []uint64{2, 2}) || e.NBytes != 32 {
		t.Fatalf("%+v", e)
	}
	wantStatus(t, "Find nope", func() error { _, err := a.Find("nope"); return err }(), ErrNotFound)
	wantStatus(t, "GetByName nope", func() error { _, err := a.GetByName("nope", DecodeOptions{}); return err }(), ErrNotFound)
	wantStatus(t, "Get(3) of 3 tensors", func() error { _, err := a.Get(3, DecodeOptions{}); return err }(), ErrInvalidArgument)
	w, err := a.GetByName("layer.0.weight", DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got, _ := Values[float32](w); !slices.Equal(got, d.a) {
		t.Fatal("weight")
	}
	b, err := a.Get(bias, DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, _ := Values[int64](b); !slices.Equal(got, d.b) {
		t.Fatal("bias")
	}
	c, err := a.GetByName("ünïcode", DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !slices.Equal(c.Data, d.c) {
		t.Fatal("ünïcode")
	}
	var mid [8]byte
	if err := a.ReadAt(bias, 8, mid[:]); err != nil || int64(binary.LittleEndian.Uint64(mid[:])) != 6 {
		t.Fatalf("ReadAt: %v %v", mid, err)
	}
	wantStatus(t, "ReadAt past the body", a.ReadAt(bias, 28, mid[:]), ErrInvalidArgument)
	if v, ok := a.MetadataValue("note"); !ok || v != "last wins" {
		t.Fatalf("note = %q, %v", v, ok)
	}
	if _, ok := a.MetadataValue("missing"); ok {
		t.Fatal("missing metadata")
	}
	meta, err := a.Metadata()
	if err != nil || len(meta) != 2 || !slices.Contains(meta, MetadataPair{"format", "pt"}) {
		t.Fatalf("%v %v", meta, err)
	}
}

func TestArchiveRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		file   string
		opts   ArchiveWriteOptions
		format Format
	}{
		{"m.tenso", ArchiveWriteOptions{}, FormatArchive},
		{"aligned.tenso", ArchiveWriteOptions{Alignment: 4096}, FormatArchive},
		{"m.safetensors", ArchiveWriteOptions{}, FormatSafetensors},
		{"m.bt", ArchiveWriteOptions{}, FormatBintensors},
		{"forced.bin", ArchiveWriteOptions{Format: FormatSafetensors}, FormatSafetensors},
	} {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join(dir, c.file)
			d := writeThree(t, path, c.opts)
			a, err := OpenArchive(path)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if a.Format() != c.format || a.Format().String() != cFormatName(c.format) {
				t.Fatalf("format %v (%q), want %v", a.Format(), a.Format().String(), c.format)
			}
			checkThree(t, a, d)
			entries, _ := a.Entries()
			align := uint64(64)
			if c.opts.Alignment != 0 {
				align = uint64(c.opts.Alignment)
			}
			if want := map[bool]uint32{true: uint32(align), false: 0}[c.format == FormatArchive]; a.Alignment() != want {
				t.Fatalf("Alignment %d, want %d", a.Alignment(), want)
			}
			for _, e := range entries {
				if c.format == FormatArchive && (e.Offset%align != 0 || e.DataOffset%align != 0 || !e.Hashed) {
					t.Fatalf("%s: offset %d, data %d, hashed %v (alignment %d)", e.Name, e.Offset, e.DataOffset, e.Hashed, align)
				}
			}
			if bad, err := a.Verify(nil); err != nil || bad != -1 {
				t.Fatalf("Verify: %d %v", bad, err)
			}
		})
	}
	// The safetensors bytes are the real format: u64 header length, then JSON.
	raw, err := os.ReadFile(filepath.Join(dir, "m.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(raw)
	var header map[string]json.RawMessage
	if err := json.Unmarshal(raw[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	var bias struct {
		DType string   `json:"dtype"`
		Shape []uint64 `json:"shape"`
	}
	if err := json.Unmarshal(header["layer.0.bias"], &bias); err != nil || bias.DType != "I64" {
		t.Fatalf("%s %v", header["layer.0.bias"], err)
	}
}

func TestArchiveWriterErrorsAndAtomicity(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keep.tenso")
	d := writeThree(t, path, ArchiveWriteOptions{})
	before, _ := os.ReadFile(path)
	w, err := CreateArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add("x", Vector([]uint8{1})); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "duplicate", w.Add("x", Vector([]uint8{2})), ErrDuplicateKey)
	wantStatus(t, "bad UTF-8 name", w.Add("\xff", Vector([]uint8{2})), ErrBadUTF8)
	w.Close() // unfinished: discarded
	wantStatus(t, "Add after Close", w.Add("y", Vector([]uint8{1})), ErrInvalidArgument)
	after, _ := os.ReadFile(path)
	if !slices.Equal(before, after) {
		t.Fatal("an abandoned write changed the target")
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Fatalf("temporary files left: %v", left)
	}
	a, err := OpenArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	checkThree(t, a, d)
	a.Close()

	st, _ := CreateArchive(filepath.Join(dir, "bad.safetensors"))
	defer st.Close()
	ss, _ := NewStrings([]string{"a"})
	wantStatus(t, "strings in safetensors", st.Add("s", ss), ErrUnsupportedKind)
	bt, _ := CreateArchive(filepath.Join(dir, "bad.bt"))
	defer bt.Close()
	wantStatus(t, "complex in bintensors", bt.Add("z", Vector([]complex64{1 + 2i})), ErrBadDType)
	wantStatus(t, "missing file", func() error { _, err := OpenArchive(filepath.Join(dir, "nope.tenso")); return err }(), ErrNotFound)
}

// safetensorsFile is a safetensors file from a JSON header (padded to 8) and data bytes.
func safetensorsFile(header string, data []byte) []byte {
	for len(header)%8 != 0 {
		header += " "
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(out, header...), data...)
}

func TestArchiveHostileHeaders(t *testing.T) {
	dir := t.TempDir()
	st := ArchiveOptions{Format: FormatSafetensors}
	open := func(name string, b []byte, o ArchiveOptions) error {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		a, err := o.Open(p)
		if err == nil {
			a.Close()
		}
		return err
	}
	if err := open("ok", safetensorsFile(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, []byte{1, 2}), st); err != nil {
		t.Fatal(err)
	}
	short := append(binary.LittleEndian.AppendUint64(nil, 1000), "{}      "...)
	wantStatus(t, "short", open("short", short, st), ErrTruncated)
	wantStatus(t, "garbage", open("garbage", safetensorsFile("{not json", nil), st), ErrCorrupt)
	wantStatus(t, "overlap", open("overlap", safetensorsFile(
		`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}`,
		[]byte{1, 2, 3}), st), ErrBadOffset)
	wantStatus(t, "duplicate", open("dup", safetensorsFile(
		`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`,
		[]byte{1, 2}), st), ErrDuplicateKey)
	wantStatus(t, "bad UTF-8", open("utf8", safetensorsFile(
		"{\"\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", []byte{1}), st), ErrBadUTF8)
	wantStatus(t, "F8", open("f8", safetensorsFile(
		`{"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}`, []byte{1}), st), ErrBadDType)
	wantStatus(t, "max tensors", open("two", safetensorsFile(
		`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`,
		[]byte{1, 2}), ArchiveOptions{Format: FormatSafetensors, MaxTensors: 1}), ErrLimit)
}

func TestArchiveVerifyProgressAndCorruption(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "v.tenso")
	writeThree(t, path, ArchiveWriteOptions{})
	a, err := OpenArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	var calls [][2]uint64
	if _, err := a.Verify(func(done, total uint64) bool { calls = append(calls, [2]uint64{done, total}); return true }); err != nil {
		t.Fatal(err)
	}
	if len(calls) == 0 || calls[len(calls)-1][0] != calls[len(calls)-1][1] {
		t.Fatalf("progress calls %v", calls)
	}
	_, err = a.Verify(func(done, total uint64) bool { return false })
	wantStatus(t, "aborted", err, ErrUser)
	func() {
		defer func() {
			if r := recover(); r != "from progress" {
				t.Fatalf("recovered %v", r)
			}
		}()
		a.Verify(func(done, total uint64) bool { panic("from progress") })
		t.Fatal("the panic was not raised again")
	}()
	if _, err := a.Verify(nil); err != nil {
		t.Fatal("the handle is fine after a panic:", err)
	}
	e, _ := a.Entry(1)
	a.Close()

	raw, _ := os.ReadFile(path)
	raw[e.DataOffset] ^= 0x40
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	a, err = OpenArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if x, err := a.Get(0, DecodeOptions{}); err != nil {
		t.Fatal(err)
	} else {
		x.Close()
	}
	wantStatus(t, "Get corrupted", func() error { _, err := a.Get(1, DecodeOptions{}); return err }(), ErrChecksum)
	bad, err := a.Verify(nil)
	wantStatus(t, "Verify corrupted", err, ErrChecksum)
	if bad != 1 {
		t.Fatalf("bad index %d, want 1", bad)
	}
	wantStatus(t, "VerifyAll", func() error { _, err := ArchiveOptions{VerifyAll: true}.Open(path); return err }(), ErrChecksum)
}

// A progress callback that calls the Archive while another goroutine closes it: the inner
// call fails with os.ErrClosed (Len reports 0) instead of queueing behind the Close, which
// waits for Verify. With a writer-preferring lock this hung.
func TestArchiveVerifyCallbackDuringClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.tenso")
	writeThree(t, path, ArchiveWriteOptions{})
	a, err := OpenArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	n := a.Len()
	closed := make(chan struct{})
	verified := make(chan error, 1)
	go func() {
		first := true
		_, err := a.Verify(func(done, total uint64) bool {
			if first {
				first = false
				go func() { a.Close(); close(closed) }()
				for a.Len() == n { // until the Close has begun
					runtime.Gosched()
				}
				if _, err := a.Entry(0); !errors.Is(err, os.ErrClosed) {
					t.Errorf("Entry during Close: %v", err)
				}
			}
			return true
		})
		verified <- err
	}()
	select {
	case err := <-verified:
		if err != nil {
			t.Fatal("Verify:", err)
		}
	case <-time.After(time.Minute): // a hang detector, not a speed check
		t.Fatal("deadlock: a call from the progress callback waited for Close")
	}
	<-closed
	if _, err := a.Verify(nil); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Verify after Close: %v", err)
	}
}

func TestArchiveConcurrentGets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.tenso")
	d := writeThree(t, path, ArchiveWriteOptions{})
	a, err := OpenArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				x, err := a.Get(0, DecodeOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				got, _ := Values[float32](x)
				if !slices.Equal(got, d.a) {
					t.Error("values")
				}
				x.Close()
			}
		}()
	}
	wg.Wait()
}
