// fault_guard.hpp - truncation of a shared-memory object seen without a system call.
//
// A process that can write a segment or pool can ftruncate it; every mapping of the lost pages
// then raises SIGBUS on its next touch. A hit on the cache costs ~90 ns, and asking the kernel
// for the object's size (lseek) on each one more than doubled that; a thread watching the
// object breaks fork(). So tenso maps the objects it shares under a SIGBUS handler instead: a
// fault inside a guarded mapping replaces the lost pages, from the faulting one to the
// mapping's end, with private zero pages (the touch is then retried and reads zeros) and marks
// the mapping truncated, which every later operation on it answers with TENSO_E_TRUNCATED. A
// truncation becomes what any writer of the object can do anyway, zeroing bytes, plus a flag.
// Faults outside guarded mappings go to the handler that was installed before (chained).
// Installed once, at the first guarded mapping; it survives fork() (no thread involved).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tenso::fault_guard {

// Guards [addr, addr + len): a slot number, or -1 when no slot is free (the caller then asks
// the kernel for the size instead), the handler could not be installed, or another SIGBUS
// handler has replaced it since.
int watch(uint8_t *addr, size_t len, bool writable) noexcept;
// Stops guarding the slot's mapping; call before unmapping it.
void unwatch(int slot) noexcept;
// The slot's flag, nonzero once a fault in its mapping was absorbed (its tail now reads
// zeros); valid for the life of the process. NULL for -1.
const std::atomic<uint32_t> *tripped_flag(int slot) noexcept;

}  // namespace tenso::fault_guard
