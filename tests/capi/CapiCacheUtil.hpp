// CapiCacheUtil.hpp - what the cache suites share: unique pool names that are unlinked at scope
// exit, RAII handles, and self-verifying values (contents derived from key and version, so any
// process can check a value it gets without knowing who put it).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "check.hpp"
#include "hostile_util.hpp"
#include "tenso/tenso.h"

namespace cache_test {

inline std::string pool_name(const char *tag) { return "tenso-test-cache-" + std::to_string(::getpid()) + "-" + tag; }

struct Unlink {
    std::string name;
    ~Unlink() { tenso_cache_unlink(name.c_str()); }
};
struct CacheClose {
    void operator()(tenso_cache *c) const { tenso_cache_close(c); }
};
using CachePtr = std::unique_ptr<tenso_cache, CacheClose>;

inline tenso_cache_options options(uint64_t size, uint32_t max_entries = 0, uint32_t flags = 0) {
    tenso_cache_options o = TENSO_CACHE_OPTIONS_INIT;
    o.size = size;
    o.max_entries = max_entries;
    o.flags = flags;
    o.max_clients = 16;  // small pools: the default pin table alone would be 512 KiB
    o.max_pins = 256;
    return o;
}

inline CachePtr create(const std::string &name, const tenso_cache_options &o) {
    tenso_cache *c = nullptr;
    TENSO_CHECK_OK(tenso_cache_create(&c, name.c_str(), &o));
    return CachePtr(c);
}
inline CachePtr open(const std::string &name) {
    tenso_cache *c = nullptr;
    TENSO_CHECK_OK(tenso_cache_open(&c, name.c_str(), nullptr));
    return CachePtr(c);
}

inline uint32_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return uint32_t(x);
}

// A uint32 tensor: [version, key id, n, payload...]; payload[i] = mix(key, version, i).
struct Val {
    std::vector<uint32_t> data;
    std::vector<uint64_t> shape;
    tenso_tensor t{};
    hostile::ValuePtr value;
    Val(uint32_t key, uint32_t version, uint32_t n) : data(n + 3), shape{uint64_t(n) + 3} {
        data[0] = version;
        data[1] = key;
        data[2] = n;
        for (uint32_t i = 0; i < n; ++i) data[3 + i] = mix(uint64_t(key) << 40 ^ uint64_t(version) << 20 ^ i);
        t = hostile::tensor(data.data(), data.size() * 4, shape, TENSO_DTYPE_UINT32);
        tenso_value *raw = nullptr;
        TENSO_CHECK_OK(tenso_value_new_tensor(&raw, &t));
        value.reset(raw);
    }
    Val(const Val &) = delete;
    Val &operator=(const Val &) = delete;
};

// "" when the view holds a well-formed value for `key` (any version), else what is wrong.
inline std::string verify(const tenso_view *v, uint32_t key, uint32_t *version_out = nullptr) {
    if (tenso_view_dtype(v) != TENSO_DTYPE_UINT32 || tenso_view_ndim(v) != 1) return "wrong dtype or rank";
    const uint64_t n = tenso_view_shape(v)[0];
    if (n < 3 || tenso_view_nbytes(v) != n * 4) return "wrong size";
    const auto *d = static_cast<const uint32_t *>(tenso_view_data(v));
    if (d[1] != key) return "key " + std::to_string(d[1]) + " where " + std::to_string(key) + " was asked for";
    if (d[2] + 3 != n) return "length field " + std::to_string(d[2]) + " vs shape " + std::to_string(n);
    for (uint32_t i = 0; i < d[2]; ++i)
        if (d[3 + i] != mix(uint64_t(key) << 40 ^ uint64_t(d[0]) << 20 ^ i))
            return "payload word " + std::to_string(i) + " of key " + std::to_string(key) + " version " +
                   std::to_string(d[0]) + " is wrong";
    if (version_out) *version_out = d[0];
    return "";
}

inline std::string key_of(uint32_t k) { return "key/" + std::to_string(k); }

inline tenso_cache_stats stats(tenso_cache *c) {
    tenso_cache_stats s;
    TENSO_CHECK_OK(tenso_cache_stats_get(&s, c));
    return s;
}

// Pool header offsets (docs/cache-layout.md): golden, so a layout change fails here.
constexpr size_t kVersionOff = 8, kPoolSizeOff = 16, kEntriesOff = 80, kMaxEntriesOff = 88, kExtentsOff = 96,
                 kDataOff = 112, kDataSizeOff = 120, kChecksumOff = 136, kMutexOff = 256;
// Entry fields.
constexpr size_t kEntryDataOff = 16, kEntryPacketLen = 32;
// The client table's offset (header), and a client row's spare pin and quiet hits.
constexpr size_t kClientsOff = 24, kClientBytes = 64, kClientSpareOff = 24, kClientQuietHitsOff = 32;

// The pool's raw bytes, read and rewritten through shm_open as a foreign program would.
struct RawPool {
    int fd = -1;
    uint8_t *p = nullptr;
    size_t len = 0;
    explicit RawPool(const std::string &name) {
        fd = ::shm_open(("/" + name).c_str(), O_RDWR, 0);
        CPPUNIT_ASSERT(fd >= 0);
        struct stat st;
        ::fstat(fd, &st);
        len = size_t(st.st_size);
        p = static_cast<uint8_t *>(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        CPPUNIT_ASSERT(p != MAP_FAILED);
    }
    ~RawPool() {
        ::munmap(p, len);
        ::close(fd);
    }
    template <class T>
    T get(size_t off) const {
        T v;
        std::memcpy(&v, p + off, sizeof v);
        return v;
    }
    template <class T>
    void set(size_t off, T v) {
        std::memcpy(p + off, &v, sizeof v);
    }
    void reseal() { set<uint64_t>(kChecksumOff, XXH3_64bits(p, kChecksumOff)); }
};

}  // namespace cache_test
