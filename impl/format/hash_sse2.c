/* XXH3 kernels built for sse2 (see hash_kernel.inc). */
#define TENSO_HASH_ISA sse2
#include "hash_kernel.inc"
