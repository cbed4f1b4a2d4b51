// fuzz_mutate.cpp - decode bytes that another writer rewrites meanwhile.
//
// A reader of shared memory may see a later put's bytes at any moment (shm.h), so the decoder
// must read every field once and use what it checked. Input: byte 0 gives the number of
// mutations (1 to 8), each 3 bytes (u16 LE offset into the packet, u8 XOR mask); the rest is
// the packet. The packet sits in a memfd mapped twice: the decoder reads one mapping (a
// PROT_NONE page right after the packet), a writer thread toggles the mutations through the
// other for a bounded number of rounds while this thread decodes the same bytes a bounded
// number of times. Whatever the interleaving:
//   - tenso_loads returns OK or an error status with a message, never crashes or over-reads;
//   - every OK view is consistent with itself: borrowed data, keys and string payloads lie
//     inside the packet, dense nbytes is numel x itemsize, string offsets start at 0, never
//     decrease and end at nbytes, quantized parts match their scheme (tenso_dequantize agrees);
//   - once the writer has stopped (the bytes are the input again), the decode gives the status
//     tenso_loads gives for the input in ordinary memory.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "fuzz_common.hpp"

namespace {

constexpr int kMaxRounds = 1 << 16;  // writer: toggles of every mutation, on and off, until
                                     // the reader is done (bounded all the same)
constexpr int kDecodes = 64;         // reader: decodes while the writer runs

struct Mapped {
    const uint8_t *begin, *end;
    bool inside(const void *p, uint64_t n) const {
        const uint8_t *b = static_cast<const uint8_t *>(p);
        return b >= begin && b <= end && n <= uint64_t(end - b);
    }
};

void walk(const tenso_view *v, const Mapped &m, int depth) {
    FUZZ_CHECK(depth <= TENSO_MAX_DEPTH + 1, "views nest %d deep", depth);
    const tenso_kind kind = tenso_view_kind(v);
    const void *data = tenso_view_data(v);
    const uint64_t nbytes = tenso_view_nbytes(v);
    if (data && !tenso_view_owns_data(v))
        FUZZ_CHECK(m.inside(data, nbytes), "view data [%p, +%llu) outside the packet", data,
                   (unsigned long long)nbytes);
    if (data) fuzz::touch(data, nbytes);
    switch (kind) {
    case TENSO_KIND_DENSE:
        FUZZ_CHECK(nbytes == fuzz::numel(v) * tenso_dtype_itemsize(tenso_view_dtype(v)), "dense nbytes %llu",
                   (unsigned long long)nbytes);
        return;
    case TENSO_KIND_BUNDLE:
        for (uint32_t i = 0; i < tenso_view_bundle_count(v); ++i) {
            const char *key;
            size_t key_len;
            const tenso_view *child;
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_bundle_entry(&key, &key_len, &child, v, i));
            FUZZ_CHECK(key_len == 0 || m.inside(key, key_len), "bundle key outside the packet");
            walk(child, m, depth + 1);
        }
        return;
    case TENSO_KIND_SPARSE_COO:
    case TENSO_KIND_SPARSE_CSR:
    case TENSO_KIND_SPARSE_CSC:
        for (uint32_t i = 0; i < 3; ++i) {
            const tenso_view *child;
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_component(&child, v, i));
            walk(child, m, depth + 1);
        }
        return;
    case TENSO_KIND_QUANTIZED: {
        tenso_quantized q;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_quantized(&q, v));
        std::vector<float> out(fuzz::numel(v));
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_dequantize(out.data(), out.size(), &q));
        return;
    }
    case TENSO_KIND_STRING:
    case TENSO_KIND_RAGGED: {
        const uint64_t *offs;
        const char *payload;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_string_offsets(&offs, &payload, v));
        const uint64_t count = tenso_view_shape(v)[0];
        FUZZ_CHECK(offs[0] == 0 && offs[count] == nbytes, "string offsets %llu..%llu, payload %llu",
                   (unsigned long long)offs[0], (unsigned long long)offs[count], (unsigned long long)nbytes);
        for (uint64_t i = 1; i <= count; ++i) FUZZ_CHECK(offs[i] >= offs[i - 1], "string offsets decrease");
        return;
    }
    default: return;
    }
}

tenso_status decode_and_walk(const uint8_t *p, size_t len, const Mapped &m) {
    tenso_view *v = nullptr;
    tenso_status st = tenso_loads(&v, p, len, nullptr);
    FUZZ_CHECK((st == TENSO_OK) == (v != nullptr), "status %s with view %p", tenso_status_name(st),
               static_cast<void *>(v));
    if (st != TENSO_OK) FUZZ_CHECK(tenso_last_error()[0] != '\0', "%s without a message", tenso_status_name(st));
    else walk(v, m, 0);
    tenso_view_free(v);
    return st;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Reader r(data, size);
    struct Mutation {
        size_t off;
        uint8_t mask;
    };
    std::vector<Mutation> muts(r.range(1, 8));
    for (auto &mu : muts) {
        mu.off = r.u8() | size_t(r.u8()) << 8;
        mu.mask = r.u8();
    }
    const size_t hdr = 1 + 3 * muts.size();
    if (size <= hdr) return 0;
    const uint8_t *packet = data + hdr;
    const size_t len = size - hdr;
    for (auto &mu : muts) mu.off %= len;

    const size_t page = size_t(::sysconf(_SC_PAGESIZE));
    const size_t map_len = (len + page - 1) / page * page;
    int fd = ::memfd_create("fuzz-mutate", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0 && ::ftruncate(fd, off_t(map_len)) == 0, "memfd");
    auto *w = static_cast<uint8_t *>(::mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    auto *res = static_cast<uint8_t *>(::mmap(nullptr, map_len + page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    FUZZ_CHECK(w != MAP_FAILED && res != MAP_FAILED, "mmap");
    FUZZ_CHECK(::mmap(res, map_len, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED, "mmap fixed");
    const size_t off = map_len - len;  // the packet ends right before the PROT_NONE page
    std::memcpy(w + off, packet, len);
    const uint8_t *rp = res + off;
    const Mapped m{rp, rp + len};

    std::atomic<bool> stop{false}, started{false};
    std::thread writer([&] {
        started = true;
        for (int round = 0; round < kMaxRounds && !stop.load(std::memory_order_relaxed); ++round)
            for (int pass = 0; pass < 2; ++pass)  // on, then off: the input again after each round
                for (const auto &mu : muts) {
                    uint8_t *b = w + off + mu.off;
                    __atomic_store_n(b, uint8_t(__atomic_load_n(b, __ATOMIC_RELAXED) ^ mu.mask), __ATOMIC_RELAXED);
                }
    });
    while (!started) std::this_thread::yield();  // decodes take less than a thread's start
    for (int i = 0; i < kDecodes; ++i) decode_and_walk(rp, len, m);
    stop = true;
    writer.join();

    // The writer undid what it did: the shared bytes are the input, and decode as it does.
    FUZZ_CHECK(std::memcmp(rp, packet, len) == 0, "the writer left the bytes changed");
    tenso_view *ref = nullptr;
    tenso_status want = tenso_loads(&ref, packet, len, nullptr);
    tenso_view_free(ref);
    tenso_status got = decode_and_walk(rp, len, m);
    FUZZ_CHECK(got == want, "after the writer stopped: %s, in plain memory: %s", tenso_status_name(got),
               tenso_status_name(want));

    ::munmap(w, map_len);
    ::munmap(res, map_len + page);
    ::close(fd);
    return 0;
}
