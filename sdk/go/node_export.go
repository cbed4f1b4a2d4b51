//go:build cgo

package tenso

// A file with //export may only declare things in its preamble, so the C side of the access
// hook (the trampoline) lives in node.go.

/*
#include <stddef.h>
#include <stdint.h>
*/
import "C"

import "runtime/cgo"

// goTensoAccess runs a node's AccessFunc for libtenso (tenso_node_access_fn): 1 allows. A
// panic refuses (it must not unwind into C).
//
//export goTensoAccess
func goTensoAccess(h C.uintptr_t, op C.int, peer, name *C.char, nameLen C.size_t) (allow C.int) {
	defer func() {
		if recover() != nil {
			allow = 0
		}
	}()
	fn := cgo.Handle(h).Value().(AccessFunc)
	if fn(AccessOp(op), C.GoString(peer), C.GoStringN(name, C.int(nameLen))) {
		return 1
	}
	return 0
}
