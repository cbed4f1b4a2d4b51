//go:build cgo

package tenso

// A file with //export may only declare things in its preamble, so the C side of the
// allocator callbacks (the trampolines) lives in decoder.go.

/*
#include <stddef.h>
#include <stdint.h>
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// goTensoAlloc gives libtenso's stream decoder a packet buffer in Go memory, pinned (so C may
// hold it) until goTensoRelease. NULL refuses (the decoder fails with TENSO_E_NO_MEMORY).
//
//export goTensoAlloc
func goTensoAlloc(handle C.uintptr_t, size, alignment C.size_t) unsafe.Pointer {
	return cgo.Handle(handle).Value().(*goAllocator).alloc(uintptr(size), uintptr(alignment))
}

// goTensoRelease unpins a buffer from goTensoAlloc: libtenso no longer refers to it.
//
//export goTensoRelease
func goTensoRelease(handle C.uintptr_t, ptr unsafe.Pointer, size C.size_t) {
	cgo.Handle(handle).Value().(*goAllocator).release(ptr)
}
