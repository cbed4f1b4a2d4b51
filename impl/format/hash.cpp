// hash.cpp - picks the XXH3 kernel for this CPU.
#include "format/hash.hpp"

#define TENSO_DECLARE_KERNEL(isa)                                 \
    void tenso_xxh3_##isa##_reset(void *);                        \
    void tenso_xxh3_##isa##_update(void *, const void *, size_t); \
    uint64_t tenso_xxh3_##isa##_digest(const void *);             \
    uint64_t tenso_xxh3_##isa##_oneshot(const void *, size_t);

#define TENSO_KERNEL(isa)                                                                                           \
    HashKernel {                                                                                                    \
        tenso_xxh3_##isa##_reset, tenso_xxh3_##isa##_update, tenso_xxh3_##isa##_digest, tenso_xxh3_##isa##_oneshot, \
            #isa                                                                                                    \
    }

// The kernels each architecture builds (CMakeLists.txt lists the same files per processor).
#if defined(__x86_64__)
extern "C" {
TENSO_DECLARE_KERNEL(sse2)
TENSO_DECLARE_KERNEL(avx2)
TENSO_DECLARE_KERNEL(avx512)
}
#elif defined(__aarch64__)
extern "C" {
TENSO_DECLARE_KERNEL(neon)
}
#else
extern "C" {
TENSO_DECLARE_KERNEL(generic)
}
#endif

namespace tenso {

const HashKernel &hash_kernel() {
#if defined(__x86_64__)
    static const HashKernel k = [] {
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f")) return TENSO_KERNEL(avx512);
        if (__builtin_cpu_supports("avx2")) return TENSO_KERNEL(avx2);
        return TENSO_KERNEL(sse2);
    }();
#elif defined(__aarch64__)
    static const HashKernel k = TENSO_KERNEL(neon);
#else
    static const HashKernel k = TENSO_KERNEL(generic);
#endif
    return k;
}

}  // namespace tenso
