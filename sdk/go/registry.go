//go:build cgo

package tenso

/*
#include "tgo.h"
*/
import "C"

// The dtype and kind registry, asked of libtenso: a dtype or kind the library adds is listed,
// named and classified here with no change to this package.

// DTypes lists every dtype code the loaded libtenso knows, ascending (tenso_dtype_count and
// tenso_dtype_at).
func DTypes() []DType {
	n := uint32(C.tenso_dtype_count())
	out := make([]DType, 0, n)
	for i := uint32(0); i < n; i++ {
		out = append(out, DType(C.tenso_dtype_at(C.uint32_t(i))))
	}
	return out
}

// Kinds lists every packet kind the loaded libtenso knows, ascending (tenso_kind_count and
// tenso_kind_at).
func Kinds() []Kind {
	n := uint32(C.tenso_kind_count())
	out := make([]Kind, 0, n)
	for i := uint32(0); i < n; i++ {
		out = append(out, Kind(C.tenso_kind_at(C.uint32_t(i))))
	}
	return out
}

// ParseKind returns the kind with the given name (the inverse of Kind.String;
// tenso_kind_from_name). Unknown names give an error wrapping ErrInvalidArgument.
func ParseKind(name string) (Kind, error) {
	code, err := codeFromName(name, "ParseKind", "kind", ErrInvalidArgument, func(cn *C.char) (int32, C.tenso_status) {
		var k C.tenso_kind
		st := C.tenso_kind_from_name(&k, cn)
		return int32(k), st
	})
	return Kind(code), err
}

func dtypeKind(d DType) Kind { return Kind(C.tenso_dtype_kind(C.tenso_dtype(d))) }
func dtypeBits(d DType) int  { return int(C.tenso_dtype_bits(C.tenso_dtype(d))) }
func backendName(b GPUBackend) string {
	return C.GoString(C.tenso_gpu_backend_name(C.uint32_t(b)))
}
