/* XXH3 kernels built for avx2 (see hash_kernel.inc). */
#define TENSO_HASH_ISA avx2
#include "hash_kernel.inc"
