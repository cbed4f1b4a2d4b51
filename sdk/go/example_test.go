//go:build cgo

package tenso_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	tenso "github.com/tenso-project/tenso/sdk/go"
)

func Example() {
	// Encode a 2x3 float32 matrix (the slice is not copied until Dumps writes the packet).
	m, err := tenso.FromSlice([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	if err != nil {
		panic(err) // a shape that does not match the slice is refused here
	}
	pkt, err := tenso.Dumps(m)
	if err != nil {
		panic(err)
	}

	// Decode it: Data is a sub-slice of pkt, nothing is copied.
	t, err := tenso.Loads(pkt)
	if err != nil {
		panic(err)
	}
	vals, _ := tenso.Values[float32](t)
	fmt.Println(len(pkt), t.Kind, t.DType, t.Shape, vals)
	// Output: 88 dense float32 [2 3] [1 2 3 4 5 6]
}

func ExampleNewBundle() {
	b := tenso.NewBundle(
		tenso.Entry{Key: "weights", Value: tenso.Vector([]float64{0.5, -1})},
		tenso.Entry{Key: "step", Value: tenso.Scalar(int64(42))},
	)
	pkt, err := tenso.Dumps(b)
	if err != nil {
		panic(err)
	}
	t, err := tenso.Loads(pkt)
	if err != nil {
		panic(err)
	}
	for _, e := range t.Entries {
		fmt.Println(e.Key, e.Value.DType, e.Value.Shape)
	}
	step, _ := tenso.Values[int64](t.Get("step"))
	fmt.Println("step =", step[0])
	// Output:
	// weights float64 [2]
	// step int64 []
	// step = 42
}

func ExampleReadFrom() {
	// A stream of packets; ReadFrom reads exactly one at a time.
	var stream bytes.Buffer
	for i := 0; i < 3; i++ {
		if _, err := tenso.DumpTo(&stream, tenso.Vector([]int32{int32(i), int32(i * i)})); err != nil {
			panic(err)
		}
	}
	for {
		t, err := tenso.ReadFrom(&stream)
		if errors.Is(err, tenso.ErrEndOfStream) {
			break
		}
		if err != nil {
			panic(err)
		}
		v, _ := tenso.Values[int32](t)
		fmt.Println(v)
		t.Close()
	}
	// Output:
	// [0 0]
	// [1 1]
	// [2 4]
}

func ExampleEncodeOptions() {
	data := make([]float32, 1000) // zeros compress well
	plain, _ := tenso.Dumps(tenso.Vector(data))
	small, _ := tenso.EncodeOptions{Compress: true, Integrity: true}.Dumps(tenso.Vector(data))
	t, _ := tenso.Loads(small)
	fmt.Println(len(plain), len(small) < len(plain)/10, t.Flags&tenso.FlagCompression != 0, len(t.Data))
	// Output: 4064 true true 4000
}

func ExampleEncodeOptions_threads() {
	// 9 MiB: three LZ4 blocks, compressed on one thread and on every core, the same bytes.
	data := make([]uint8, 9<<20)
	for i := range data {
		data[i] = uint8(i % 251)
	}
	one, _ := tenso.EncodeOptions{Compress: true, Threads: 1}.Dumps(tenso.Vector(data))
	all, _ := tenso.EncodeOptions{Compress: true, Threads: 0}.Dumps(tenso.Vector(data))
	t, _ := tenso.DecodeOptions{Threads: 0}.Loads(all)
	fmt.Println(bytes.Equal(one, all), bytes.Equal(t.Data, data))
	// Output: true true
}

func ExampleError() {
	pkt, _ := tenso.EncodeOptions{Integrity: true}.Dumps(tenso.Vector([]int32{1, 2, 3}))
	pkt[64] ^= 0xff // corrupt the body
	_, err := tenso.Loads(pkt)
	fmt.Println(errors.Is(err, tenso.ErrChecksum), errors.Is(err, tenso.ErrTruncated))
	var e *tenso.Error
	if errors.As(err, &e) {
		fmt.Println(e.Op, e.Status.Name())
	}
	// Output:
	// true false
	// Loads TENSO_E_CHECKSUM
}

func ExampleQuantize() {
	x := tenso.Vector([]float32{-1, -0.5, 0.5, 1})
	q, err := tenso.Quantize(x, tenso.QInt8, tenso.PerTensor, 0, 0)
	if err != nil {
		panic(err)
	}
	back, _ := q.Dequantize()
	fmt.Println(q.DType, len(q.Data), len(q.Quant.Scales))
	fmt.Printf("%.2f\n", back)
	// Output:
	// qint8 4 1
	// [-1.00 -0.50 0.50 1.00]
}

func ExampleNewStrings() {
	s, _ := tenso.NewStrings([]string{"tenso", "", "wörld"})
	pkt, _ := tenso.Dumps(s)
	t, _ := tenso.Loads(pkt)
	ss, _ := t.Strings()
	fmt.Printf("%q\n", ss)
	// Output: ["tenso" "" "wörld"]
}

func ExampleNewRagged() {
	// Rows [1 2 3], [], [4 5] as one flat tensor plus row offsets.
	r, _ := tenso.NewRagged(tenso.Vector([]float32{1, 2, 3, 4, 5}), []uint64{0, 3, 3, 5})
	flat, offsets, _ := r.Ragged()
	v, _ := tenso.Values[float32](flat)
	for i := 0; i+1 < len(offsets); i++ {
		fmt.Println(v[offsets[i]:offsets[i+1]])
	}
	// Output:
	// [1 2 3]
	// []
	// [4 5]
}

func ExampleNewSparse() {
	// The 2x3 CSR matrix [[5 0 6] [0 7 0]].
	m, err := tenso.NewSparse(tenso.KindSparseCSR, 2, 3,
		tenso.Vector([]float64{5, 6, 7}), tenso.Vector([]int32{0, 2, 1}), tenso.Vector([]int32{0, 2, 3}))
	if err != nil {
		panic(err)
	}
	pkt, _ := tenso.Dumps(m)
	t, _ := tenso.Loads(pkt)
	indptr, _ := tenso.Values[int32](t.Components[2])
	fmt.Println(t.Kind, t.Shape, indptr)
	// Output: sparse_csr [2 3] [0 2 3]
}

func ExampleLoadFile() {
	path, cleanup := exampleFile(tenso.Vector([]uint16{7, 8, 9}))
	defer cleanup()
	// The tensor is Go memory: keep it (or slices of it) as long as you like.
	t, err := tenso.LoadFile(path, tenso.LoadMmap)
	if err != nil {
		panic(err)
	}
	v, _ := tenso.Values[uint16](t)
	fmt.Println(v, t.OwnsCMemory())
	// Output: [7 8 9] false
}

func ExampleLoadFileAliased() {
	path, cleanup := exampleFile(tenso.Vector([]uint16{7, 8, 9}))
	defer cleanup()
	// Zero copy: the tensor points into the mapping, which Close releases. Slices taken
	// from it must not outlive it: no use after Close, and t kept reachable meanwhile.
	t, err := tenso.LoadFileAliased(path)
	if err != nil {
		panic(err)
	}
	v, _ := tenso.ValuesAliased[uint16](t)
	fmt.Println(v, t.OwnsCMemory())
	t.Close()
	_, err = tenso.Values[uint16](t)
	fmt.Println(errors.Is(err, os.ErrClosed))
	// Output:
	// [7 8 9] true
	// true
}

// must is the examples' shorthand for a call that cannot fail with these arguments.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// exampleFile saves t in a temporary file; cleanup removes it.
func exampleFile(t *tenso.Tensor) (string, func()) {
	dir, _ := os.MkdirTemp("", "tenso-example")
	path := filepath.Join(dir, "m.tenso")
	if err := tenso.SaveFile(path, t); err != nil {
		panic(err)
	}
	return path, func() { os.RemoveAll(dir) }
}
