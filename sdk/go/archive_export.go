//go:build cgo

package tenso

// A file with //export may only declare things in its preamble, so the C side of the
// progress callback (the trampoline) lives in archive.go.

/*
#include <stdint.h>
*/
import "C"

import "runtime/cgo"

// goTensoProgress runs Archive.Verify's progress function for libtenso. A Go panic must not
// unwind through C frames: it is recovered here, parked in the state, and raised again by
// Verify after tenso_archive_verify has returned (the non-zero return stops the walk).
//
//export goTensoProgress
func goTensoProgress(done, total C.uint64_t, handle C.uintptr_t) (ret C.int) {
	state := cgo.Handle(handle).Value().(*progressState)
	if state.panicked {
		return 1
	}
	defer func() {
		if v := recover(); v != nil {
			state.panicked, state.panicVal, ret = true, v, 1
		}
	}()
	if state.fn(uint64(done), uint64(total)) {
		return 0
	}
	return 1
}
