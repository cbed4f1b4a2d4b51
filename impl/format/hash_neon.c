/* XXH3 kernels for aarch64 (see hash_kernel.inc): NEON is part of the base ISA, so xxHash
 * picks its NEON kernel with no extra flag. */
#define TENSO_HASH_ISA neon
#include "hash_kernel.inc"
