// hash.cpp - picks the XXH3 kernel for this CPU.
#include "format/hash.hpp"

extern "C" {
#define TENSO_DECLARE_KERNEL(isa)                                                              \
    void tenso_xxh3_##isa##_reset(void *);                                                     \
    void tenso_xxh3_##isa##_update(void *, const void *, size_t);                              \
    uint64_t tenso_xxh3_##isa##_digest(const void *);                                          \
    uint64_t tenso_xxh3_##isa##_oneshot(const void *, size_t);
TENSO_DECLARE_KERNEL(sse2)
TENSO_DECLARE_KERNEL(avx2)
TENSO_DECLARE_KERNEL(avx512)
}

namespace tenso {

#define TENSO_KERNEL(isa)                                                                      \
    HashKernel {                                                                               \
        tenso_xxh3_##isa##_reset, tenso_xxh3_##isa##_update, tenso_xxh3_##isa##_digest,        \
            tenso_xxh3_##isa##_oneshot, #isa                                                   \
    }

const HashKernel &hash_kernel() {
    static const HashKernel k = [] {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f")) return TENSO_KERNEL(avx512);
        if (__builtin_cpu_supports("avx2")) return TENSO_KERNEL(avx2);
#endif
        // The baseline kernel: SSE2 on x86; elsewhere (wasm32, sdk/js) what the target's flags give.
        return TENSO_KERNEL(sse2);
    }();
    return k;
}

}  // namespace tenso
