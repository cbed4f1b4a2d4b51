// cache_impl.hpp - private to the cache's sources (impl/shm/cache*.cpp): the pool's record
// layouts (docs/cache-layout.md), the small helpers every part uses, and the lock. The parts:
//   cache.cpp         the operations (put, get, remove, info, contains, keys, clear, stats)
//   cache_pool.cpp    the pool: create/open and its geometry, the lock, client rows, recovery
//   cache_tables.cpp  the tables under the lock: hash index, LRU, free extents, eviction, pins
//   cache_spare.cpp   spare pins: the repeated hit that takes no lock
//   cache_check.cpp   check(): every invariant of the pool, verified
#pragma once

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "error.hpp"
#include "format/hash.hpp"
#include "shm/cache.hpp"

namespace tenso {

namespace cache_layout {

constexpr char kPoolMagic[8] = {'T', 'N', 'S', 'O', 'C', 'A', 'C', 'H'};
constexpr uint32_t kLayoutVersion = 1;
constexpr uint64_t kHeaderBytes = 4096;
constexpr uint64_t kSharedOff = 256;  // the mutable part of the header
constexpr uint64_t kAlign = 64;       // every packet, and every table, starts on a cache line
// The smallest data region: one packet of a header line and a body line (e.g. 16 float32).
constexpr uint64_t kMinData = 2 * kAlign;
// The smallest pool with derived tables (1 entry, 2 clients, 2 pins): header, tables and
// kMinData. tenso_cache_create names it; CapiCacheTest::testTinyPools pins it.
constexpr uint64_t kMinPoolBytes = 4096 + 128 + 64 + 64 + 256 + 64 + kMinData;
constexpr uint32_t kMaxEntries = 1u << 24, kMaxClients = 1u << 16, kMaxPins = 1u << 24;

enum : uint32_t { kFree = 0, kWriting = 1, kLive = 2, kOrphan = 3 };

// Immutable after create, covered by `checksum`; checked before anything in it is followed.
struct Geometry {
    char magic[8];
    uint32_t layout_version, header_bytes;
    uint64_t pool_size;
    uint64_t clients_off;
    uint32_t max_clients, client_bytes;
    uint64_t pins_off;
    uint32_t pin_capacity, pin_bytes, max_pins, reserved0;
    uint64_t index_off;
    uint32_t index_capacity, reserved1;
    uint64_t entries_off;
    uint32_t max_entries, entry_bytes;
    uint64_t extents_off;
    uint32_t extent_capacity, extent_bytes;
    uint64_t data_off, data_size;
    uint32_t key_max, reserved2;
    uint64_t checksum;  // XXH3-64 of every byte above
};
static_assert(sizeof(Geometry) <= kSharedOff && sizeof(Geometry) % 8 == 0, "pool header layout");

// Mutable; read and written only under `mutex`.
struct Shared {
    pthread_mutex_t mutex;
    uint32_t recovering;          // 1 while recover() runs: a crash or failure in it reruns it
    uint32_t lru_head, lru_tail;  // entry index + 1; 0 = none
    uint32_t free_slots;          // FREE entries chained through lru_next
    uint32_t live;                // LIVE entries (keys in the index)
    uint32_t pinned;              // entries with pins > 0
    uint32_t clients;             // client rows in use
    uint32_t pin_records;         // pin table rows in use
    uint32_t extents;             // free extents in the sorted table
    uint32_t ttl_live;            // LIVE entries with a TTL: none, and a full pool skips the expiry scan
    uint64_t used_bytes;          // data bytes held by LIVE and ORPHAN entries
    uint64_t tick;                // access clock ordering the LRU list (survives recovery)
    uint64_t generation;          // bumped by every put
    uint64_t hits, misses, evictions, expirations, recoveries;
};
static_assert(sizeof(Shared) + kSharedOff <= kHeaderBytes, "mutable header fits");

struct Entry {
    uint32_t state, key_len;
    uint64_t key_hash;
    uint64_t data_off, alloc_size, packet_len;  // data_off relative to the data region
    int64_t created_ns, ttl_ns;                 // CLOCK_MONOTONIC; ttl 0 = never expires
    uint64_t last_access;                       // Shared::tick at the last put/get
    uint64_t generation;
    uint32_t lru_prev, lru_next;
    uint32_t pins, reserved0;
    uint8_t key[TENSO_CACHE_MAX_KEY_BYTES];
    uint8_t reserved[40];
};
static_assert(sizeof(Entry) == 256, "entry layout");

struct Client {
    uint32_t in_use;
    int32_t pid;
    uint64_t start_time;  // /proc/<pid>/stat field 22: tells a reused pid apart
    uint64_t pid_ns;      // inode of /proc/self/ns/pid: liveness is only judged in our namespace
    // Added after 1.5.0 in what was reserved (older libraries zero both and never read them):
    uint64_t spare_pin;   // a pin of this client that no view holds (kSpare*); 0 = none
    uint64_t quiet_hits;  // hits served without the lock, not yet added to Shared::hits
    uint64_t reserved[3];
};
static_assert(sizeof(Client) == 64 && offsetof(Client, spare_pin) == 24, "client layout");

// A spare pin: the entry index + 1 (25 bits: up to kMaxEntries), a flag saying it was read
// without the lock since its last LRU move, and the low 38 bits of the entry's generation, so
// a pin that recovery dropped is never taken for one whose slot a later put reused.
constexpr uint64_t kSpareEntryMask = (uint64_t(1) << 25) - 1, kSpareQuiet = uint64_t(1) << 25;
constexpr unsigned kSpareGenShift = 26;
static_assert(kMaxEntries <= kSpareEntryMask, "spare pins name every entry");

struct Pin {
    uint32_t entry, client, count, reserved;  // entry/client index + 1; entry 0 = empty
};
static_assert(sizeof(Pin) == 16, "pin layout");

struct Extent {
    uint64_t off, len;
};

}  // namespace cache_layout

// Helpers shared by the cache's sources.
namespace cache_detail {

using namespace cache_layout;

inline std::string num(uint64_t v) { return std::to_string(v); }
[[noreturn]] inline void corrupt(const std::string &what) { fail(TENSO_E_CORRUPT, "cache pool is corrupt: " + what); }

inline int64_t now_ns() {
    struct timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

// Stops the compiler from moving the stores of a state transition across each other: a
// process can die between any two instructions, and recovery reads what it left. A compiler
// barrier is enough on weakly ordered CPUs (aarch64) too: the pool's tables are only touched
// under the robust mutex, whose unlock releases and lock acquires, and a dead holder's lock is
// handed on by the kernel (robust futex list, under its own barriers) once the dead thread's
// every executed store is visible.
inline void order() { std::atomic_signal_fence(std::memory_order_seq_cst); }

// An entry's state is also read without the lock (Cache::serve_quietly, on an entry this
// client pins), so every change is one atomic store.
inline void set_state(Entry &e, uint32_t state) { __atomic_store_n(&e.state, state, __ATOMIC_RELEASE); }

inline uint64_t key_hash(const char *key, size_t len) { return xxh3(key, len); }

// getpid() without a system call on every operation (cache_pool.cpp).
int current_pid();

inline uint32_t pin_home(uint32_t entry, uint32_t client, uint32_t mask) {
    return uint32_t(((uint64_t(entry) << 32 | client) * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

}  // namespace cache_detail

// ------------------------------------------------------------------------------ the lock

class Cache::Lock {
public:
    explicit Lock(Cache &c, bool check_size = true) : c_(c) { c_.lock(check_size); }
    ~Lock() { c_.unlock(); }
    Lock(const Lock &) = delete;
    Lock &operator=(const Lock &) = delete;

private:
    Cache &c_;
};

template <class Op>
auto Cache::locked(Op &&op) -> decltype(op()) {
    try {
        Lock l(*this);
        if constexpr (std::is_void_v<decltype(op())>) {
            op();
            map_->check_intact(given_);
        } else {
            auto r = op();
            map_->check_intact(given_);
            return r;
        }
    } catch (...) {
        map_->check_intact(given_);  // whatever zeros made op fail with, the pool was truncated
        throw;
    }
}

}  // namespace tenso
