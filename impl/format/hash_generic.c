/* XXH3 kernels for any other little-endian target (see hash_kernel.inc): xxHash picks the
 * vector kernel the compiler's baseline flags allow (VSX on ppc64le, scalar elsewhere). */
#define TENSO_HASH_ISA generic
#include "hash_kernel.inc"
