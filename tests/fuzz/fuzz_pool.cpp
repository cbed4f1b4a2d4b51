// fuzz_pool - a cache pool whose header and tables another client scribbled on. A real pool
// (3 entries, one pinned then released, small tables) is created, its handles closed, and the
// input applied to the shared-memory object as patches (layout: docs/cache-layout.md); then a
// fresh handle opens it and runs get/put/info/contains/keys/stats/delete/check/clear.
//
// Input: records of [u8 op][u16 offset][u8 len][len bytes] until the input ends.
//   op % 8 picks the region the offset is taken modulo: 0 the whole pool, 1 the geometry
//   (bytes 0..143), 2 the mutable header after the mutex, 3 the client table, 4 the pin
//   table, 5 the hash index, 6 the entry table, 7 the extent table and the data region.
//   op & 0x80: recompute the geometry checksum afterwards (so geometry edits reach the
//   checks behind it). len is taken modulo 17.
// The pthread mutex (header bytes 256..256+sizeof(pthread_mutex_t)) is never patched: garbage
// there can abort glibc, which the library cannot prevent (docs/threat-model.md).
//
// What must hold: no crash, hang or over-read (the sanitizers and the lock timeout watch);
// every call answers OK or one of the statuses a corrupt pool may give; a value put is read
// back byte for byte when the get succeeds.
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <string>
#include <vector>

#include "fuzz_common.hpp"

namespace {

constexpr size_t kPoolBytes = 128 << 10;
constexpr size_t kMutexOff = 256, kMutexEnd = kMutexOff + sizeof(pthread_mutex_t), kSharedEnd = 400;

uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

bool allowed(tenso_status st) {
    return st == TENSO_OK || st == TENSO_E_NOT_FOUND || st == TENSO_E_CORRUPT || st == TENSO_E_FULL;
}
// Reading a stored packet may also fail with the decoder's statuses; never a timeout (a hang),
// an internal error or an I/O error.
bool allowed_read(tenso_status st) {
    return st <= 0 && st != TENSO_E_TIMEOUT && st != TENSO_E_INTERNAL && st != TENSO_E_IO &&
           st != TENSO_E_INVALID_ARGUMENT;
}

// A value whose bytes depend on `seed`.
struct Val {
    std::vector<uint32_t> data;
    uint64_t shape[1];
    tenso_value *v = nullptr;
    Val(uint32_t seed, uint32_t n) : data(n) {
        for (uint32_t i = 0; i < n; ++i) data[i] = seed * 2654435761u + i;
        shape[0] = n;
        tenso_tensor t{};
        t.data = data.data();
        t.nbytes = n * 4;
        t.dtype = TENSO_DTYPE_UINT32;
        t.ndim = 1;
        t.shape = shape;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_new_tensor(&v, &t));
    }
    ~Val() { tenso_value_free(v); }
};

tenso_cache_options opts(uint32_t flags) {
    tenso_cache_options o = TENSO_CACHE_OPTIONS_INIT;
    o.flags = flags;
    o.size = kPoolBytes;
    o.max_entries = 8;
    o.max_clients = 4;
    o.max_pins = 8;
    o.lock_timeout_ms = 2000;  // nothing holds the lock: a timeout is a bug (a hang)
    return o;
}

void make_pool(const std::string &name) {
    tenso_cache_options o = opts(TENSO_SHM_REPLACE);
    tenso_cache *c = nullptr;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_cache_create(&c, name.c_str(), &o));
    const char *keys[] = {"a", "bb", "ccc"};
    for (uint32_t i = 0; i < 3; ++i) {
        Val v(i, 100 + 300 * i);
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_cache_put(nullptr, c, keys[i], i + 1, v.v, nullptr, i == 2 ? 3600.0 : 0.0));
    }
    tenso_view *pinned = nullptr;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_cache_get(&pinned, c, "a", 1, nullptr));
    tenso_view_free(pinned);
    tenso_cache_close(c);
}

void patch(const std::string &name, const uint8_t *data, size_t size) {
    int fd = ::shm_open(("/" + name).c_str(), O_RDWR, 0);
    FUZZ_CHECK(fd >= 0, "shm_open %s", name.c_str());
    void *m = ::mmap(nullptr, kPoolBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    FUZZ_CHECK(m != MAP_FAILED, "mmap");
    auto *p = static_cast<uint8_t *>(m);
    // Region bounds from the pool's own geometry, read before any patch.
    const uint64_t clients = rd64(p + 24), pins = rd64(p + 40), index = rd64(p + 64), entries = rd64(p + 80),
                   extents = rd64(p + 96);
    const struct {
        uint64_t begin, end;
    } regions[8] = {{0, kPoolBytes}, {0, 144},         {kMutexEnd, kSharedEnd}, {clients, pins},
                    {pins, index},   {index, entries}, {entries, extents},      {extents, kPoolBytes}};
    fuzz::Reader r(data, size);
    bool reseal = false;
    while (r.left()) {
        const uint8_t op = r.u8();
        const uint32_t off = r.u8() | uint32_t(r.u8()) << 8;
        const size_t len = r.u8() % 17;
        const auto &reg = regions[op % 8];
        reseal |= (op & 0x80) != 0;
        for (size_t i = 0; i < len; ++i) {
            const uint64_t at = reg.begin + (off + i) % (reg.end - reg.begin);
            const uint8_t b = r.u8();
            if (at < kMutexOff || at >= kMutexEnd) p[at] = b;
        }
    }
    if (reseal) {
        const uint64_t h = XXH3_64bits(p, 136);
        std::memcpy(p + 136, &h, 8);
    }
    ::munmap(m, kPoolBytes);
}

// Every byte of a view (so a view past the pool would be caught by ASan or fault).
uint64_t touch(const tenso_view *v) {
    const auto *b = static_cast<const uint8_t *>(tenso_view_data(v));
    uint64_t s = 0;
    for (uint64_t i = 0; i < tenso_view_nbytes(v); ++i) s += b[i];
    return s;
}

void exercise(tenso_cache *c) {
    std::vector<tenso_view *> views;
    const char *keys[] = {"a", "bb", "ccc", "dddd"};
    for (const char *k : keys) {
        tenso_view *v = nullptr;
        tenso_status st = tenso_cache_get(&v, c, k, std::strlen(k), nullptr);
        // A corrupt stored packet fails to decode with the decoder's own status.
        FUZZ_CHECK(allowed_read(st) && (st != TENSO_OK || v), "get %s: %s", k, tenso_status_name(st));
        if (v) {
            touch(v);
            views.push_back(v);
        }
        tenso_cache_entry_info info;
        st = tenso_cache_info(&info, c, k, std::strlen(k));
        FUZZ_CHECK(allowed_read(st), "info %s: %s", k, tenso_status_name(st));
        int found = 0;
        FUZZ_CHECK(allowed(tenso_cache_contains(&found, c, k, std::strlen(k))), "contains");
    }
    // A put that succeeds reads back exactly (the get may still find no pin record free:
    // garbage ones fill the table until a recovery or reap drops them).
    Val d(7, 500);
    tenso_status st = tenso_cache_put(nullptr, c, "e", 1, d.v, nullptr, 0);
    FUZZ_CHECK(allowed(st), "put: %s", tenso_status_name(st));
    if (st == TENSO_OK) {
        tenso_view *v = nullptr;
        st = tenso_cache_get(&v, c, "e", 1, nullptr);
        FUZZ_CHECK(st == TENSO_OK || st == TENSO_E_FULL || st == TENSO_E_CORRUPT, "get after a successful put: %s",
                   tenso_status_name(st));
        if (v) {
            FUZZ_CHECK(tenso_view_nbytes(v) == d.data.size() * 4 &&
                           std::memcmp(tenso_view_data(v), d.data.data(), d.data.size() * 4) == 0,
                       "the value read back differs from the one put");
            views.push_back(v);
        }
    }
    Val a(9, 50);
    FUZZ_CHECK(allowed(tenso_cache_put(nullptr, c, "a", 1, a.v, nullptr, 0.5)), "re-put");
    FUZZ_CHECK(allowed(tenso_cache_keys(
                   c, [](const char *, size_t, void *) { return 0; }, nullptr)),
               "keys");
    tenso_cache_stats stats;
    FUZZ_CHECK(allowed(tenso_cache_stats_get(&stats, c)), "stats");
    FUZZ_CHECK(allowed(tenso_cache_delete(c, "bb", 2)), "delete");
    FUZZ_CHECK(allowed(tenso_cache_check(c)), "check");
    for (tenso_view *v : views) tenso_view_free(v);
    FUZZ_CHECK(allowed(tenso_cache_clear(c)), "clear");
    FUZZ_CHECK(allowed(tenso_cache_check(c)), "check after clear");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string name = "tenso-fuzz-pool-" + std::to_string(::getpid());
    make_pool(name);
    patch(name, data, size);
    tenso_cache_options o = opts(0);
    tenso_cache *c = nullptr;
    tenso_status st = tenso_cache_open(&c, name.c_str(), &o);
    FUZZ_CHECK(st == TENSO_OK || st == TENSO_E_CORRUPT || st == TENSO_E_FULL, "open: %s", tenso_status_name(st));
    if (c) exercise(c);
    tenso_cache_close(c);
    tenso_cache_unlink(name.c_str());
    return 0;
}
