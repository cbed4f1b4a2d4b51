// A program that uses the Go SDK as a user's would, built outside the tree by run-tests.sh
// (testdata/ keeps it out of ./... here).
package main

import (
	"fmt"

	tenso "github.com/tenso-project/tenso/sdk/go"
)

func main() {
	m, err := tenso.FromSlice([]int{2, 2}, []float32{1, 2, 3, 4})
	if err != nil {
		panic(err)
	}
	pkt, err := tenso.Dumps(m)
	if err != nil {
		panic(err)
	}
	t, err := tenso.Loads(pkt)
	if err != nil {
		panic(err)
	}
	v, err := tenso.Values[float32](t)
	if err != nil {
		panic(err)
	}
	fmt.Println(t.Dims(), v, tenso.LibraryVersion())
}
