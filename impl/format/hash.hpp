// hash.hpp - XXH3-64 with seed 0 (the integrity footer's hash), run with the widest vector
// kernel the CPU has. On x86-64: SSE2 always, AVX2 or AVX-512 when present (chosen once, at
// first use). On aarch64: NEON, which every aarch64 CPU has, so there is nothing to choose.
// No SVE kernel: Debian 12's xxHash (0.8.1) has none, and xxHash's own measurements found its
// SVE kernel slower than NEON on the server cores people run (Graviton 3, Neoverse V-class;
// since 2025 xxHash prefers NEON even where SVE is present); it only won on 512-bit A64FX.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tenso {

struct HashKernel {
    void (*reset)(void *state);
    void (*update)(void *state, const void *p, size_t n);
    uint64_t (*digest)(const void *state);
    uint64_t (*oneshot)(const void *p, size_t n);
    const char *name;
};

const HashKernel &hash_kernel();

inline uint64_t xxh3(const void *p, size_t n) { return hash_kernel().oneshot(p, n); }

// A streaming XXH3-64: the hash of everything given to update(), in order.
class Hasher {
public:
    Hasher() : k_(hash_kernel()) { k_.reset(state_); }
    void reset() { k_.reset(state_); }
    void update(const void *p, size_t n) { k_.update(state_, p, n); }
    uint64_t digest() const { return k_.digest(state_); }

private:
    static constexpr size_t kStateSize = 640;  // >= sizeof(XXH3_state_t), checked in C
    const HashKernel &k_;
    alignas(64) unsigned char state_[kStateSize];
};

}  // namespace tenso
