package tensogonum

import (
	"errors"
	"slices"
	"testing"

	tenso "github.com/tenso-project/tenso/sdk/go"
	"gonum.org/v1/gonum/mat"
)

func TestDenseRoundTrip(t *testing.T) {
	m := mat.NewDense(2, 3, []float64{1, 2, 3, 4, 5, 6})
	x, err := FromDense(m)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(must(x.Dims()), []int{2, 3}) || x.DType != tenso.Float64 {
		t.Fatalf("FromDense: %v %v", must(x.Dims()), x.DType)
	}
	if &x.Data[0] != &tenso.AsBytes(m.RawMatrix().Data)[0] {
		t.Error("a contiguous Dense must be encoded without a copy")
	}
	pkt, err := tenso.Dumps(x)
	if err != nil {
		t.Fatal(err)
	}
	back, err := tenso.Loads(pkt)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ToDense(back)
	if err != nil {
		t.Fatal(err)
	}
	if !mat.Equal(d, m) {
		t.Fatalf("round trip: %v", mat.Formatted(d))
	}

	// A strided view of a larger matrix is copied row by row.
	big := mat.NewDense(3, 4, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	sub := big.Slice(1, 3, 1, 3).(*mat.Dense)
	y, err := FromDense(sub)
	if err != nil {
		t.Fatal(err)
	}
	if v := must(tenso.Values[float64](y)); !slices.Equal(v, []float64{5, 6, 9, 10}) {
		t.Fatalf("strided: %v", v)
	}
}

func TestVecDenseRoundTrip(t *testing.T) {
	v := mat.NewVecDense(4, []float64{1, -2, 3, -4})
	x := must(FromVecDense(v))
	back := must(ToVecDense(must(tenso.Loads(must(tenso.Dumps(x))))))
	if !mat.Equal(back, v) {
		t.Fatalf("round trip: %v", mat.Formatted(back))
	}
	col := mat.NewDense(3, 2, []float64{1, 2, 3, 4, 5, 6}).ColView(1).(*mat.VecDense) // Inc 2
	if got := must(tenso.Values[float64](must(FromVecDense(col)))); !slices.Equal(got, []float64{2, 4, 6}) {
		t.Fatalf("strided vector: %v", got)
	}
}

func TestRefusals(t *testing.T) {
	if _, err := ToDense(tenso.Vector([]float32{1, 2})); !errors.Is(err, tenso.ErrBadDType) {
		t.Errorf("float32: %v", err)
	}
	if _, err := ToDense(tenso.Vector([]float64{1, 2})); !errors.Is(err, tenso.ErrInvalidArgument) {
		t.Errorf("1-D to Dense: %v", err)
	}
	if _, err := ToDense(must(tenso.FromSlice([]int{0, 3}, []float64{}))); !errors.Is(err, tenso.ErrInvalidArgument) {
		t.Errorf("empty: %v", err)
	}
	if _, err := ToVecDense(tenso.NewBundle()); !errors.Is(err, tenso.ErrUnsupportedKind) {
		t.Errorf("bundle: %v", err)
	}
	if _, err := FromDense(nil); !errors.Is(err, tenso.ErrInvalidArgument) {
		t.Errorf("nil: %v", err)
	}
	if x, err := FromDense(&mat.Dense{}); err != nil || !slices.Equal(must(x.Dims()), []int{0, 0}) {
		t.Errorf("empty Dense: %v %v", x, err)
	}
}

// Hand-built tensors whose Data does not match their shape, or whose shape overflows an int,
// are errors, not panics inside gonum.
func TestShapeMismatchIsAnError(t *testing.T) {
	cases := map[string]*tenso.Tensor{
		"2x2 over 1 element":   tenso.NewTensor(tenso.Float64, []uint64{2, 2}, make([]byte, 8)),
		"2x2 over 5 elements":  tenso.NewTensor(tenso.Float64, []uint64{2, 2}, make([]byte, 40)),
		"numel overflows int":  tenso.NewTensor(tenso.Float64, []uint64{1 << 32, 1 << 32}, make([]byte, 8)),
		"dimension beyond int": tenso.NewTensor(tenso.Float64, []uint64{1 << 63, 1}, make([]byte, 8)),
	}
	for name, x := range cases {
		if m, err := ToDense(x); m != nil || !errors.Is(err, tenso.ErrInvalidArgument) {
			t.Errorf("ToDense(%s) = %v, %v", name, m, err)
		}
	}
	vecs := map[string]*tenso.Tensor{
		"3 over 2 elements":    tenso.NewTensor(tenso.Float64, []uint64{3}, make([]byte, 16)),
		"dimension beyond int": tenso.NewTensor(tenso.Float64, []uint64{1<<63 + 1}, make([]byte, 8)),
	}
	for name, x := range vecs {
		if v, err := ToVecDense(x); v != nil || !errors.Is(err, tenso.ErrInvalidArgument) {
			t.Errorf("ToVecDense(%s) = %v, %v", name, v, err)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
