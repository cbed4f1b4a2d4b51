// A program that uses the Go SDK as a user's would, built outside the tree by run-tests.sh
// (testdata/ keeps it out of ./... here): a packet through a pipe and back.
package main

import (
	"fmt"
	"os"

	tenso "github.com/tenso-project/tenso/sdk/go"
)

func main() {
	r, w, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	go func() {
		defer w.Close()
		m, err := tenso.FromSlice([]int{2, 2}, []float32{1, 2, 3, 4})
		if err == nil {
			_, err = tenso.DumpTo(w, m)
		}
		if err != nil {
			panic(err)
		}
	}()
	t, err := tenso.ReadFrom(r)
	if err != nil {
		panic(err)
	}
	v, err := tenso.Values[float32](t)
	if err != nil {
		panic(err)
	}
	dims, err := t.Dims()
	if err != nil {
		panic(err)
	}
	fmt.Println(dims, v, tenso.LibraryVersion())
}
