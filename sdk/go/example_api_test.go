//go:build cgo

package tenso_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"time"

	tenso "github.com/tenso-project/tenso/sdk/go"
)

// openExampleArchive saves one 4x3 float32 tensor "w" (the values 0 to 11) in a temporary
// archive and opens it; cleanup closes and removes it.
func openExampleArchive() (*tenso.Archive, func()) {
	dir, _ := os.MkdirTemp("", "tenso-example")
	path := filepath.Join(dir, "model.tenso")
	w, err := tenso.CreateArchive(path)
	if err != nil {
		panic(err)
	}
	defer w.Close()
	vals := make([]float32, 12)
	for i := range vals {
		vals[i] = float32(i)
	}
	if err := w.Add("w", must(tenso.FromSlice([]int{4, 3}, vals))); err != nil {
		panic(err)
	}
	if err := w.Finish(); err != nil {
		panic(err)
	}
	a, err := tenso.OpenArchive(path)
	if err != nil {
		panic(err)
	}
	return a, func() { a.Close(); os.RemoveAll(dir) }
}

func ExampleFromSlice() {
	m, err := tenso.FromSlice([]int{2, 3}, []int32{1, 2, 3, 4, 5, 6})
	dims, _ := m.Dims()
	fmt.Println(dims, err)
	_, err = tenso.FromSlice([]int{2, 2}, []int32{1, 2, 3}) // refused here, not at Dumps
	fmt.Println(errors.Is(err, tenso.ErrInvalidArgument))
	// Output:
	// [2 3] <nil>
	// true
}

func ExampleArchive_Get() {
	a, cleanup := openExampleArchive()
	defer cleanup()
	w, err := a.GetByName("w") // options are optional; Go memory
	if err != nil {
		panic(err)
	}
	cleanup()                        // closes the archive (idempotent)
	v, _ := tenso.Values[float32](w) // still valid: w does not depend on the archive
	dims, _ := w.Dims()
	fmt.Println(dims, v[11], w.OwnsCMemory())
	// Output: [4 3] 11 false
}

func ExampleArchive_GetAliased() {
	a, cleanup := openExampleArchive()
	defer cleanup()
	w, err := a.GetAliased(0, tenso.DecodeOptions{MaxElements: 1 << 20})
	if err != nil {
		panic(err)
	}
	defer w.Close() // releases the mapping; v must not be used after it
	v, _ := tenso.ValuesAliased[float32](w)
	fmt.Println(v[3:6], w.OwnsCMemory())
	runtime.KeepAlive(w) // w (and so the mapping) lives until here
	// Output: [3 4 5] true
}

func ExampleArchive_TensorReader() {
	a, cleanup := openExampleArchive()
	defer cleanup()
	r, err := a.TensorReader(0) // an io.ReaderAt over the body: reads only what is asked
	if err != nil {
		panic(err)
	}
	row := make([]float32, 3)
	if _, err := r.ReadAt(tenso.AsBytes(row), 2*3*4); err != nil { // row 2
		panic(err)
	}
	var ra io.ReaderAt = r
	_, err = ra.ReadAt(make([]byte, 8), r.Size()-4) // past the end: a short read
	fmt.Println(row, r.Size(), err == io.EOF)
	// Output: [6 7 8] 48 true
}

func ExampleReadFromContext() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		tenso.DumpTo(c, tenso.Vector([]float64{1.5}))
		time.Sleep(time.Second) // then goes quiet
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	t, err := tenso.ReadFromContext(ctx, conn)
	if err != nil {
		panic(err)
	}
	v, _ := tenso.Values[float64](t)
	_, err = tenso.ReadFromContext(ctx, conn) // nothing more comes before the deadline
	fmt.Println(v, errors.Is(err, context.DeadlineExceeded))
	// Output: [1.5] true
}

func ExampleQuantizeOptions_Quantize() {
	w := tenso.Vector([]float32{-1, -0.5, 0, 0.5, 1, 2, 3, 4})
	q, err := tenso.QuantizeOptions{DType: tenso.QInt8, Scheme: tenso.PerGroup, GroupSize: 4}.Quantize(w)
	if err != nil {
		panic(err)
	}
	back, _ := q.Dequantize()
	fmt.Println(q.DType, q.Quant.Scheme == tenso.PerGroup, len(q.Quant.Scales), len(back))
	// Output: qint8 true 2 8
}

func ExampleValues() {
	path, cleanup := exampleFile(tenso.Vector([]int16{1, 2, 3}))
	defer cleanup()
	// A helper may return the values and drop the tensor: they are Go memory.
	load := func() []int16 {
		t, err := tenso.LoadFile(path, tenso.LoadMmap)
		if err != nil {
			panic(err)
		}
		v, _ := tenso.Values[int16](t)
		return v
	}
	v := load()
	runtime.GC()
	fmt.Println(v)
	// Output: [1 2 3]
}
