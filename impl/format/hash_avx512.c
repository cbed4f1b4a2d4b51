/* XXH3 kernels built for avx512 (see hash_kernel.inc). */
#define TENSO_HASH_ISA avx512
#include "hash_kernel.inc"
