//go:build cgo

package tenso

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// forceGC runs the collector (and the cleanups it queues) a few times.
func forceGC() {
	for i := 0; i < 3; i++ {
		runtime.GC()
		runtime.Gosched()
	}
}

// valuesOf is the helper the issue describes: it returns the values and drops the Tensor.
func valuesOf(t *testing.T, load func() (*Tensor, error)) []float32 {
	t.Helper()
	x, err := load()
	if err != nil {
		t.Fatal(err)
	}
	v, err := Values[float32](x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Values from files, archives, segments and streams stay valid after the Tensor is dropped
// and collected, and after it is closed: they are Go memory.
func TestValuesOutliveTensorAndClose(t *testing.T) {
	dir := t.TempDir()
	want := rampF32(4096, 3)
	w := must(FromSlice([]int{64, 64}, want))
	file := filepath.Join(dir, "w.tenso")
	if err := SaveFile(file, w); err != nil {
		t.Fatal(err)
	}
	arch := filepath.Join(dir, "w.archive")
	aw, err := CreateArchive(arch)
	if err != nil {
		t.Fatal(err)
	}
	if err := aw.Add("w", w); err != nil {
		t.Fatal(err)
	}
	if err := aw.Finish(); err != nil {
		t.Fatal(err)
	}
	a, err := OpenArchive(arch)
	if err != nil {
		t.Fatal(err)
	}
	name := shmName(t, false)
	s, _, err := CreateShmFor(name, w, true)
	if err != nil {
		t.Fatal(err)
	}
	defer UnlinkShm(name)
	pkt := must(Dumps(w))

	loaders := map[string]func() (*Tensor, error){
		"LoadFile read": func() (*Tensor, error) { return LoadFile(file, LoadRead) },
		"LoadFile mmap": func() (*Tensor, error) { return LoadFile(file, LoadMmap) },
		"Archive.Get":   func() (*Tensor, error) { return a.Get(0) },
		"Archive.GetByName with options": func() (*Tensor, error) {
			return a.GetByName("w", DecodeOptions{MaxElements: 4096})
		},
		"Shm.Get": func() (*Tensor, error) { return s.Get(DecodeOptions{}) },
		"ReadFrom pipe": func() (*Tensor, error) {
			r, pw, err := os.Pipe()
			if err != nil {
				return nil, err
			}
			defer r.Close()
			go func() { pw.Write(pkt); pw.Close() }()
			return ReadFrom(r)
		},
	}
	base := cLiveViewsForTest()
	for name, load := range loaders {
		got := valuesOf(t, load)
		forceGC()
		if !slices.Equal(got, want) {
			t.Errorf("%s: values changed after GC", name)
		}
		// Closed explicitly: the values and Data stay readable.
		x, err := load()
		if err != nil {
			t.Fatal(err)
		}
		v := must(Values[float32](x))
		data := x.Data
		x.Close()
		forceGC()
		if !slices.Equal(v, want) || len(data) != 4*len(want) || x.OwnsCMemory() {
			t.Errorf("%s: values after Close differ (or the Tensor holds C memory)", name)
		}
	}
	// Closing the sources does not touch what was read from them.
	v := valuesOf(t, func() (*Tensor, error) { return a.Get(0) })
	a.Close()
	s.Close()
	forceGC()
	if !slices.Equal(v, want) {
		t.Error("values after closing the archive and segment differ")
	}
	if n := cLiveViewsForTest(); n != base {
		t.Errorf("%d views left behind by the copying loads", n-base)
	}
}

// The aliasing calls hand out C memory; after Close the Tensor reads as empty and Values
// answers os.ErrClosed instead of touching freed memory.
func TestAliasedAfterClose(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "b.tenso")
	if err := SaveFile(file, NewBundle(Entry{Key: "x", Value: Vector([]float64{1, 2})},
		Entry{Key: "y", Value: Vector([]int32{3})})); err != nil {
		t.Fatal(err)
	}
	x, err := LoadFileAliased(file)
	if err != nil {
		t.Fatal(err)
	}
	if !x.OwnsCMemory() || !x.Get("x").OwnsCMemory() {
		t.Fatal("LoadFileAliased must alias the mapping")
	}
	v, err := ValuesAliased[float64](x.Get("x"))
	if err != nil || !slices.Equal(v, []float64{1, 2}) {
		t.Fatalf("ValuesAliased = %v, %v", v, err)
	}
	c, err := Values[float64](x.Get("x")) // a copy, even of aliased memory
	if err != nil || &c[0] == &v[0] {
		t.Fatalf("Values of an aliased tensor must copy (%v)", err)
	}
	x.Get("y").Close() // any tensor of the packet closes it all
	forceGC()
	for _, e := range x.Entries {
		if e.Value.Data != nil {
			t.Errorf("%s: Data after Close = %v", e.Key, e.Value.Data)
		}
		if _, err := Values[float64](e.Value); !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s: Values after Close: %v", e.Key, err)
		}
	}
	if !slices.Equal(c, []float64{1, 2}) {
		t.Error("the copy changed after Close")
	}

	// The archive's aliased Get outlives the archive itself.
	arch, _ := archiveOfX(t, dir)
	a := must(OpenArchive(arch))
	g, err := a.GetByNameAliased("x")
	if err != nil || !g.OwnsCMemory() {
		t.Fatalf("GetByNameAliased: %v", err)
	}
	a.Close()
	forceGC()
	if v, err := ValuesAliased[float64](g); err != nil || !slices.Equal(v, []float64{5, 6}) {
		t.Fatalf("after the archive closed: %v, %v", v, err)
	}
	runtime.KeepAlive(g)
	g.Close()
}

// archiveOfX writes an archive holding x = [5 6] and returns its path and finished writer.
func archiveOfX(t *testing.T, dir string) (string, *ArchiveWriter) {
	t.Helper()
	path := filepath.Join(dir, "x.archive")
	w := must(CreateArchive(path))
	if err := w.Add("x", Vector([]float64{5, 6})); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return path, w
}

// Every call on a closed handle matches os.ErrClosed (and still ErrInvalidArgument).
func TestClosedHandlesMatchErrClosed(t *testing.T) {
	arch, aw := archiveOfX(t, t.TempDir())
	if err := aw.Add("y", Vector([]float64{1})); !errors.Is(err, os.ErrClosed) || !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Add on a finished writer: %v", err)
	}
	a := must(OpenArchive(arch))
	r, err := a.TensorReader(0)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if _, err := a.Get(0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Archive.Get: %v", err)
	}
	if _, err := a.Find("x"); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Archive.Find: %v", err)
	}
	if _, err := r.ReadAt(make([]byte, 8), 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("TensorReader after Close: %v", err)
	}
	name := shmName(t, false)
	s := must(CreateShm(name, 4096, true))
	defer UnlinkShm(name)
	s.Close()
	if _, err := s.Get(DecodeOptions{}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Shm.Get: %v", err)
	}
	cname := shmName(t, true)
	c := must(CreateCache(cname, CacheOptions{}))
	defer UnlinkCache(cname)
	c.Close()
	if _, err := c.Get("k", DecodeOptions{}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Cache.Get: %v", err)
	}
	var nilArchive *Archive
	if _, err := nilArchive.Get(0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("nil Archive: %v", err)
	}
}

// TensorReader is an io.ReaderAt over one tensor's body; too many options are refused.
func TestArchiveTensorReaderAndOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.archive")
	d := writeThree(t, path, ArchiveWriteOptions{})
	a := must(OpenArchive(path))
	defer a.Close()
	r, err := a.TensorReader(must(a.Find("layer.0.weight")))
	if err != nil {
		t.Fatal(err)
	}
	var ra io.ReaderAt = r
	if e := must(a.Entry(must(a.Find("layer.0.weight")))); !slices.Equal(must(e.Dims()), []int{3, 100}) {
		t.Fatalf("ArchiveEntry.Dims = %v", must(e.Dims()))
	}
	if pi := must(Inspect(must(Dumps(must(FromSlice([]int{2, 0, 5}, []uint8{})))))); !slices.Equal(must(pi.Dims()), []int{2, 0, 5}) {
		t.Fatalf("PacketInfo.Dims = %v", must(pi.Dims()))
	}
	if r.Size() != int64(4*len(d.a)) {
		t.Fatalf("Size = %d", r.Size())
	}
	buf := make([]byte, 8)
	if n, err := ra.ReadAt(buf, 4*10); n != 8 || err != nil || !slices.Equal(AsBytes(d.a[10:12]), buf) {
		t.Fatalf("ReadAt = %d, %v, %v", n, err, buf)
	}
	// At the end: a short read with io.EOF, as io.ReaderAt requires.
	if n, err := ra.ReadAt(buf, r.Size()-4); n != 4 || err != io.EOF || !slices.Equal(AsBytes(d.a[len(d.a)-1:]), buf[:4]) {
		t.Fatalf("ReadAt at the end = %d, %v", n, err)
	}
	if n, err := ra.ReadAt(buf, r.Size()); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt past the end = %d, %v", n, err)
	}
	all, err := io.ReadAll(r) // io.Reader too
	if err != nil || !slices.Equal(all, AsBytes(d.a)) {
		t.Fatalf("ReadAll: %d bytes, %v", len(all), err)
	}
	if _, err := a.TensorReader(99); !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, ErrNotFound) {
		t.Errorf("TensorReader(99): %v", err)
	}
	if _, err := a.Get(0, DecodeOptions{}, DecodeOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("two options: %v", err)
	}
	// Options are applied: a limit below the tensor's size refuses it.
	if _, err := a.GetByName("layer.0.weight", DecodeOptions{MaxElements: 10}); !errors.Is(err, ErrLimit) && !errors.Is(err, ErrTooManyElements) {
		t.Errorf("MaxElements: %v", err)
	}
}

// FromSlice checks the shape at once; QuantizeOptions names Quantize's parameters.
func TestFromSliceShapeAndQuantizeOptions(t *testing.T) {
	for _, c := range []struct {
		shape []int
		want  Status
	}{
		{[]int{2, 2}, ErrInvalidArgument},
		{[]int{-1, -3}, ErrInvalidArgument},
		{nil, ErrInvalidArgument},
		{make([]int, MaxNDim+1), ErrTooManyDims},
	} {
		if _, err := FromSlice(c.shape, []float32{1, 2, 3}); !errors.Is(err, c.want) {
			t.Errorf("FromSlice(%v): %v, want %v", c.shape, err, c.want)
		}
	}
	x, err := FromSlice([]int{3, 1}, []float32{1, 2, 3})
	if err != nil || !slices.Equal(must(x.Dims()), []int{3, 1}) {
		t.Fatalf("FromSlice: %v %v", x, err)
	}
	s := Scalar(2.5)
	if s.DType != Float64 || len(s.Shape) != 0 || must(Values[float64](s))[0] != 2.5 {
		t.Fatalf("Scalar: %+v", s)
	}
	in := must(FromSlice([]int{4, 6}, rampF32(24, 1)))
	q, err := QuantizeOptions{DType: QUInt8, Scheme: PerChannel, Axis: -1}.Quantize(in)
	if err != nil {
		t.Fatal(err)
	}
	old, err := Quantize(in, QUInt8, PerChannel, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if q.DType != QUInt8 || q.Quant.Axis != 1 || len(q.Quant.Scales) != 6 || !slices.Equal(must(Dumps(q)), must(Dumps(old))) {
		t.Errorf("QuantizeOptions.Quantize differs from Quantize: %+v", q.Quant)
	}
	if z, err := (QuantizeOptions{}).Quantize(in); err != nil || z.DType != QInt8 || z.Quant.Scheme != PerTensor {
		t.Errorf("zero QuantizeOptions: %v", err)
	}
	if _, err := (QuantizeOptions{Scheme: PerGroup, GroupSize: -1}).Quantize(in); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative GroupSize: %v", err)
	}
}
