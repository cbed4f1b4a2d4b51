package tensogonum_test

import (
	"fmt"

	tenso "github.com/tenso-project/tenso/sdk/go"
	"github.com/tenso-project/tenso/sdk/go/tensogonum"
	"gonum.org/v1/gonum/mat"
)

func ExampleFromDense() {
	m := mat.NewDense(2, 2, []float64{1, 2, 3, 4})
	t, err := tensogonum.FromDense(m) // no copy: the tensor borrows m's elements
	if err != nil {
		panic(err)
	}
	pkt, err := tenso.Dumps(t)
	if err != nil {
		panic(err)
	}
	dims, _ := t.Dims()
	fmt.Println(dims, len(pkt))
	// Output: [2 2] 96
}

func ExampleToDense() {
	pkt, _ := tenso.Dumps(tenso.Vector([]float64{1, 2, 3, 4, 5, 6}))
	t, _ := tenso.Loads(pkt)
	t.Shape = []uint64{3, 2} // the same elements seen as a 3x2 matrix
	m, err := tensogonum.ToDense(t)
	if err != nil {
		panic(err)
	}
	fmt.Println(mat.Sum(m), m.At(2, 1))
	// Output: 21 6
}
