//go:build !cgo

package tenso

import (
	"errors"
	"slices"
	"testing"
)

// Without cgo every libtenso call fails clearly, and the pure-Go parts still work.
func TestNoCgo(t *testing.T) {
	if _, err := Loads([]byte("TNSO")); !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("Loads: %v", err)
	}
	if _, err := Dumps(Vector([]float32{1})); !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("Dumps: %v", err)
	}
	if _, err := ReadFrom(nil); !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("ReadFrom: %v", err)
	}
	if err := CheckVersion(); err == nil || LibraryVersion() != "" {
		t.Fatal("CheckVersion / LibraryVersion")
	}
	v, err := Values[int16](must(FromSlice([]int{2}, []int16{3, -4})))
	if err != nil || !slices.Equal(v, []int16{3, -4}) {
		t.Fatalf("pure-Go helpers: %v %v", v, err)
	}
	// Dtype facts are libtenso's: without it there are none.
	if _, err := ParseDType("float32"); Float32.String() != "unknown" || Float32.ItemSize() != 0 || !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("dtype facts without libtenso: %q %d %v", Float32.String(), Float32.ItemSize(), err)
	}
}
