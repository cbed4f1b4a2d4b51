// Package tensogonum converts between gonum matrices and tenso tensors: a *mat.Dense is a
// 2-D float64 tensor, a *mat.VecDense a 1-D one. It lives in its own module so that the
// tenso package itself needs no gonum.
//
// The conversions copy only when the layouts differ: a Dense whose rows are contiguous
// (Stride == Cols, as mat.NewDense makes them) is encoded straight from its backing slice,
// and a decoded float64 tensor in Go memory becomes a Dense over its own elements (Values
// copies only misaligned or aliased data). The results share memory with their source:
// modifying one modifies the other.
package tensogonum

import (
	"fmt"
	"math"

	tenso "github.com/tenso-project/tenso/sdk/go"
	"gonum.org/v1/gonum/mat"
)

// FromDense describes m as a 2-D float64 tensor of shape [rows, cols]. Without a copy when
// m's rows are contiguous; a strided view (m.Slice of a larger matrix) is copied row by row.
func FromDense(m *mat.Dense) (*tenso.Tensor, error) {
	if m == nil {
		return nil, &tenso.Error{Status: tenso.ErrInvalidArgument, Op: "tensogonum.FromDense", Message: "nil matrix"}
	}
	if m.IsEmpty() {
		return tenso.FromSlice([]int{0, 0}, []float64{})
	}
	raw := m.RawMatrix()
	if raw.Stride == raw.Cols {
		return tenso.FromSlice([]int{raw.Rows, raw.Cols}, raw.Data[:raw.Rows*raw.Cols])
	}
	data := make([]float64, raw.Rows*raw.Cols)
	for i := 0; i < raw.Rows; i++ {
		copy(data[i*raw.Cols:(i+1)*raw.Cols], raw.Data[i*raw.Stride:i*raw.Stride+raw.Cols])
	}
	return tenso.FromSlice([]int{raw.Rows, raw.Cols}, data)
}

// ToDense returns a 2-D float64 tensor as a *mat.Dense over its elements (see Values for
// when they are copied). Other dtypes, other ranks and empty tensors (which gonum cannot
// represent) are errors wrapping ErrBadDType or ErrInvalidArgument, and so is a Data whose
// length is not the shape's.
func ToDense(t *tenso.Tensor) (*mat.Dense, error) {
	v, dims, err := float64s(t, 2, "tensogonum.ToDense")
	if err != nil {
		return nil, err
	}
	return mat.NewDense(dims[0], dims[1], v), nil
}

// FromVecDense describes v as a 1-D float64 tensor, without a copy when its increment is 1.
func FromVecDense(v *mat.VecDense) (*tenso.Tensor, error) {
	if v == nil {
		return nil, &tenso.Error{Status: tenso.ErrInvalidArgument, Op: "tensogonum.FromVecDense", Message: "nil vector"}
	}
	if v.IsEmpty() {
		return tenso.FromSlice([]int{0}, []float64{})
	}
	raw := v.RawVector()
	if raw.Inc == 1 {
		return tenso.FromSlice([]int{raw.N}, raw.Data[:raw.N])
	}
	data := make([]float64, raw.N)
	for i := range data {
		data[i] = raw.Data[i*raw.Inc]
	}
	return tenso.FromSlice([]int{raw.N}, data)
}

// ToVecDense returns a 1-D float64 tensor as a *mat.VecDense over its elements.
func ToVecDense(t *tenso.Tensor) (*mat.VecDense, error) {
	v, dims, err := float64s(t, 1, "tensogonum.ToVecDense")
	if err != nil {
		return nil, err
	}
	return mat.NewVecDense(dims[0], v), nil
}

// float64s checks that t is a non-empty dense float64 tensor of rank ndim and returns its
// elements and shape.
func float64s(t *tenso.Tensor, ndim int, op string) ([]float64, []int, error) {
	if t == nil || (t.Kind != tenso.KindDense && t.Kind != 0) {
		return nil, nil, &tenso.Error{Status: tenso.ErrUnsupportedKind, Op: op, Message: "not a dense tensor"}
	}
	if t.DType != tenso.Float64 {
		return nil, nil, &tenso.Error{Status: tenso.ErrBadDType, Op: op, Message: fmt.Sprintf("%v tensor, want float64", t.DType)}
	}
	dims, err := t.Dims()
	if err != nil {
		return nil, nil, err
	}
	if len(dims) != ndim {
		return nil, nil, &tenso.Error{Status: tenso.ErrInvalidArgument, Op: op,
			Message: fmt.Sprintf("shape %v, want %d dimensions", dims, ndim)}
	}
	numel := 1
	for _, d := range dims {
		if d == 0 {
			return nil, nil, &tenso.Error{Status: tenso.ErrInvalidArgument, Op: op,
				Message: fmt.Sprintf("shape %v: gonum has no empty matrices", dims)}
		}
		if numel > math.MaxInt/d {
			return nil, nil, &tenso.Error{Status: tenso.ErrInvalidArgument, Op: op,
				Message: fmt.Sprintf("shape %v: more elements than an int holds", dims)}
		}
		numel *= d
	}
	v, err := tenso.Values[float64](t)
	if err != nil {
		return nil, nil, err
	}
	// NewTensor does not check Data against Shape; mat.NewDense panics on a mismatch.
	if len(v) != numel {
		return nil, nil, &tenso.Error{Status: tenso.ErrInvalidArgument, Op: op,
			Message: fmt.Sprintf("shape %v is %d elements, data holds %d", dims, numel, len(v))}
	}
	return v, dims, nil
}
