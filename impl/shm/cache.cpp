// cache.cpp - the multi-process tensor cache (layout: docs/cache-layout.md).
//
// Sources of truth in the pool are the entry table, the client table and the pin table; the
// hash index, the LRU list, the free-slot chain, the free extents and every counter of
// occupancy are derived from them and rebuilt by recover() when a lock holder dies. Writes
// keep that possible: an entry is WRITING (with its space recorded) before its bytes are
// written and LIVE only once the packet and its index/LRU links are complete.
#include "shm/cache.hpp"

#include "format/decoder.hpp"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "error.hpp"
#include "format/hash.hpp"
#include "format/wire.hpp"

#if defined(__SANITIZE_THREAD__)
#define TENSO_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TENSO_TSAN 1
#endif
#endif
#ifdef TENSO_TSAN
#include <sanitizer/tsan_interface.h>
#endif

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

using namespace cache_layout;

namespace {

std::string num(uint64_t v) { return std::to_string(v); }
[[noreturn]] void corrupt(const std::string &what) { fail(TENSO_E_CORRUPT, "cache pool is corrupt: " + what); }

int64_t now_ns() {
    struct timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

// ThreadSanitizer (LLVM 14) intercepts trylock and unlock but not pthread_mutex_clocklock, so
// without these a contended lock reads to it as an unlock of an unlocked mutex.
void tsan_pre_lock([[maybe_unused]] pthread_mutex_t *m) {
#ifdef TENSO_TSAN
    __tsan_mutex_pre_lock(m, __tsan_mutex_try_lock);
#endif
}
void tsan_post_lock([[maybe_unused]] pthread_mutex_t *m, [[maybe_unused]] bool locked) {
#ifdef TENSO_TSAN
    __tsan_mutex_post_lock(m, locked ? __tsan_mutex_try_lock : __tsan_mutex_try_lock | __tsan_mutex_try_lock_failed, 0);
#endif
}

uint32_t pow2_at_least(uint64_t v) {
    uint64_t p = 1;
    while (p < v) p <<= 1;
    return uint32_t(p);
}

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

uint64_t spare_of(uint32_t idx1, uint64_t generation, bool quiet) {
    return idx1 | (quiet ? kSpareQuiet : 0) | generation << kSpareGenShift;
}
// True when `spare` was made from the entry's current generation.
bool spare_current(uint64_t spare, uint64_t generation) {
    return (spare >> kSpareGenShift) == (generation << kSpareGenShift) >> kSpareGenShift;
}

uint64_t geometry_hash(const Geometry &g) { return xxh3(&g, offsetof(Geometry, checksum)); }

// The magic as the 8-byte word create publishes it with (the mapping is page-aligned).
uint64_t magic_word() {
    uint64_t w;
    std::memcpy(&w, kPoolMagic, sizeof w);
    return w;
}

// Process identity for pin ownership: start time (field 22 of /proc/<pid>/stat) and whether
// the process is a zombie (dead, not yet reaped: its pins are garbage too).
bool proc_stat(int pid, uint64_t *start, bool *zombie) {
    char path[64], buf[1024];
    std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return false;
    buf[n] = 0;
    const char *p = std::strrchr(buf, ')');  // the command name may hold spaces and parens
    if (!p || p[1] != ' ') return false;
    p += 2;
    *zombie = *p == 'Z' || *p == 'X';
    for (int field = 3; field < 22; ++field) {  // p is at field 3 (state)
        p = std::strchr(p, ' ');
        if (!p) return false;
        ++p;
    }
    *start = std::strtoull(p, nullptr, 10);
    return true;
}

uint64_t pid_namespace() {
    struct stat st;
    return ::stat("/proc/self/ns/pid", &st) == 0 ? uint64_t(st.st_ino) : 0;
}

void check_key(const char *key, size_t len) {
    if (len == 0 || len > TENSO_CACHE_MAX_KEY_BYTES)
        fail(TENSO_E_INVALID_ARGUMENT,
             "cache keys are 1 to " + num(TENSO_CACHE_MAX_KEY_BYTES) + " bytes, got " + num(len));
    if (!valid_utf8(reinterpret_cast<const uint8_t *>(key), len))
        fail(TENSO_E_BAD_UTF8, "cache key is not valid UTF-8");
}

uint64_t key_hash(const char *key, size_t len) { return xxh3(key, len); }

// getpid() without a system call on every operation: refreshed in the child after fork.
std::atomic<int> g_pid{0};
void refresh_pid() { g_pid.store(int(::getpid()), std::memory_order_relaxed); }
int current_pid() {
    static const bool once = [] {
        refresh_pid();
        ::pthread_atfork(nullptr, nullptr, refresh_pid);
        return true;
    }();
    (void)once;
    return g_pid.load(std::memory_order_relaxed);
}

}  // namespace

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

void Cache::lock(bool check_size) {
    if (current_pid() != pid_)
        fail(TENSO_E_INVALID_ARGUMENT,
             "cache handle was opened by another process (inherited through fork): "
             "open the cache again in this process");
    // The mutex itself lies in the pages a truncation takes away. Guarded, the check is a load;
    // unguarded (no fault_guard slot left), releasing a view skips its system call.
    if (check_size || map_->guarded()) map_->check_size(given_);
    // Uncontended: no clock read. trylock reports EOWNERDEAD just as the timed lock does.
    int r = ::pthread_mutex_trylock(&s_->mutex);
    if (r == EBUSY) {
        int64_t deadline = now_ns() + timeout_ns_;
        struct timespec ts = {time_t(deadline / 1000000000), long(deadline % 1000000000)};
        tsan_pre_lock(&s_->mutex);
        r = ::pthread_mutex_clocklock(&s_->mutex, CLOCK_MONOTONIC, &ts);
        tsan_post_lock(&s_->mutex, r == 0 || r == EOWNERDEAD);
    }
    if (r == EOWNERDEAD) {
        // The holder died mid-operation: mark the mutex usable again, then rebuild. A crash
        // (or a failure) during the rebuild leaves `recovering` set, so the next holder reruns it.
        if (int e = ::pthread_mutex_consistent(&s_->mutex)) {
            unlock();
            fail(TENSO_E_CORRUPT, "cache '" + given_ + "': pthread_mutex_consistent: " + std::strerror(e));
        }
        s_->recovering = 1;
    } else if (r == ETIMEDOUT) {
        fail(TENSO_E_TIMEOUT,
             "cache '" + given_ + "': lock not obtained within " + num(uint64_t(timeout_ns_ / 1000000)) + " ms");
    } else if (r == ENOTRECOVERABLE) {
        fail(TENSO_E_CORRUPT, "cache '" + given_ + "': its lock is unrecoverable");
    } else if (r != 0) {
        fail(TENSO_E_IO, "pthread_mutex_clocklock: " + std::string(std::strerror(r)));
    }
    if (s_->recovering) {
        try {
            recover();
        } catch (...) {
            unlock();
            throw;
        }
    }
}

void Cache::unlock() noexcept { ::pthread_mutex_unlock(&s_->mutex); }

// ------------------------------------------------------------------------------ create / open

std::shared_ptr<Cache> Cache::create(const char *name, const CacheOptions &o) {
    const uint64_t size = o.size ? o.size : uint64_t(256) << 20;
    // Derived counts are sized from the pool, so a pool of any size upstream accepts (5 KiB and
    // up) holds its tables and some data; from 1 MiB up they are the fixed defaults. Entries: 1
    // per 16 KiB, but a small pool gets 1 per 4 KiB up to 64. Clients: 1 per 4 KiB, 2 to 256.
    // Pins: a pin record is one (entry, client) pair, so entries x clients is never short.
    const uint64_t entries =
        o.max_entries
            ? o.max_entries
            : std::min<uint64_t>(std::max<uint64_t>({size / 16384, std::min<uint64_t>(size / 4096, 64), 1}), 1u << 20);
    const uint64_t clients =
        o.max_clients ? o.max_clients : std::min<uint64_t>(std::max<uint64_t>(size / 4096, 2), 256);
    const uint64_t pins = o.max_pins ? o.max_pins : std::min<uint64_t>(entries * clients, 16384);
    if (entries > kMaxEntries || clients > kMaxClients || pins > kMaxPins)
        fail(TENSO_E_INVALID_ARGUMENT, "cache limits are at most " + num(kMaxEntries) + " entries, " +
                                           num(kMaxClients) + " clients and " + num(kMaxPins) + " pins");
    Geometry g;
    std::memset(&g, 0, sizeof g);
    std::memcpy(g.magic, kPoolMagic, sizeof kPoolMagic);
    g.layout_version = kLayoutVersion;
    g.header_bytes = uint32_t(kHeaderBytes);
    g.pool_size = size;
    uint64_t off = kHeaderBytes;
    g.clients_off = off;
    g.max_clients = uint32_t(clients);
    g.client_bytes = sizeof(Client);
    off = align_up(off + clients * sizeof(Client), kAlign);
    g.pins_off = off;
    g.max_pins = uint32_t(pins);
    g.pin_capacity = pow2_at_least(2 * pins);  // load factor <= 1/2 keeps probes short
    g.pin_bytes = sizeof(Pin);
    off = align_up(off + uint64_t(g.pin_capacity) * sizeof(Pin), kAlign);
    g.index_off = off;
    g.index_capacity = pow2_at_least(2 * entries);
    off = align_up(off + uint64_t(g.index_capacity) * 4, kAlign);
    g.entries_off = off;
    g.max_entries = uint32_t(entries);
    g.entry_bytes = sizeof(Entry);
    off = align_up(off + entries * sizeof(Entry), kAlign);
    g.extents_off = off;
    g.extent_capacity = uint32_t(entries + 1);  // n allocations leave at most n + 1 gaps
    g.extent_bytes = sizeof(Extent);
    off = off + (entries + 1) * sizeof(Extent);
    // The data region starts on a page from 1 MiB up (this host's page: 4 KiB, or 16 or 64 KiB
    // on some aarch64 kernels; readers follow data_off, never recompute it); below, a page of
    // padding would be most of the pool, and a cache line is all the packets need.
    const uint64_t page = std::max<uint64_t>(uint64_t(::sysconf(_SC_PAGESIZE)), kAlign);
    off = align_up(off, size >= (uint64_t(1) << 20) ? page : kAlign);
    g.data_off = off;
    if (size < off + kMinData)
        fail(TENSO_E_INVALID_ARGUMENT, "a cache of " + num(size) + " bytes cannot hold its header and tables (" +
                                           num(off) + " bytes for " + num(entries) + " entries, " + num(clients) +
                                           " clients, " + num(pins) + " pins) and a packet (at least " + num(kMinData) +
                                           " bytes); with derived tables the smallest pool is " + num(kMinPoolBytes) +
                                           " bytes");
    // From 1 MiB up the data region also stops short of the pool's last page (whole or
    // partial): a truncation can only take whole pages, so any cut that reaches a packet takes
    // the last page with it, and the one load of the last byte that every operation makes
    // faults. (A cut that leaves the end inside the last page raises no fault at all.) Older
    // libraries follow data_size and open such pools unchanged.
    const uint64_t last_page = (size - 1) / page * page;
    const uint64_t data_end = size >= (uint64_t(1) << 20) && last_page >= off + kMinData ? last_page : size;
    g.data_size = (data_end - off) & ~(kAlign - 1);
    g.key_max = TENSO_CACHE_MAX_KEY_BYTES;
    g.checksum = geometry_hash(g);

    std::shared_ptr<Cache> c(new Cache);
    c->given_ = name;
    c->timeout_ns_ = int64_t(o.lock_timeout_ms ? o.lock_timeout_ms : 10000) * 1000000;
    c->pid_ = current_pid();
    const std::string n = shm_name(name);
    // Pre-faulted, so a put copies into resident pages instead of taking a fault per page.
    c->map_ = shm_create(n, size, o.replace, true);
    try {
        uint8_t *base = c->map_->addr;
        c->bind(g);
        pthread_mutexattr_t a;
        ::pthread_mutexattr_init(&a);
        ::pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        ::pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        int r = ::pthread_mutex_init(&c->s_->mutex, &a);
        ::pthread_mutexattr_destroy(&a);
        if (r != 0) fail(TENSO_E_IO, "pthread_mutex_init: " + std::string(std::strerror(r)));
        c->rebuild();  // every table is zero (all FREE): chains the slots, one extent of everything
        // The magic goes last, with a release store: a pool is not a cache until it is
        // complete, and an opener that sees the magic sees all that was written before it.
        Geometry tmp = g;
        std::memset(tmp.magic, 0, sizeof tmp.magic);
        std::memcpy(base, &tmp, sizeof tmp);
        __atomic_store_n(reinterpret_cast<uint64_t *>(base), magic_word(), __ATOMIC_RELEASE);
        c->attach();
        c->map_->check_filled(name);  // tables that /dev/shm had no room for read as zeros
    } catch (...) {
        ::shm_unlink(n.c_str());
        throw;
    }
    return c;
}

std::shared_ptr<Cache> Cache::open(const char *name, uint32_t lock_timeout_ms, bool any_owner) {
    std::shared_ptr<Cache> c(new Cache);
    c->given_ = name;
    c->timeout_ns_ = int64_t(lock_timeout_ms ? lock_timeout_ms : 10000) * 1000000;
    c->pid_ = current_pid();
    const std::string n = shm_name(name);
    // A pool another process is creating is empty, then sized with a zero magic (written last):
    // wait for its creator, up to the lock timeout, before judging it.
    for (const int64_t deadline = now_ns() + c->timeout_ns_;
         shm_unfinished(n, sizeof kPoolMagic, any_owner) && now_ns() < deadline;)
        ::usleep(1000);
    c->map_ = shm_open_existing(n, true, false, kHeaderBytes, TENSO_E_CORRUPT, any_owner);
    // A truncation while the pool is read here shows as zeros (a bad magic, a bad geometry, a
    // zeroed mutex): TRUNCATED, not CORRUPT.
    try {
        // The magic first, with an acquire load (pairs with create's release store): on weakly
        // ordered CPUs (aarch64) a plain copy could read the geometry before the magic, and see a
        // half-written header under a complete magic.
        const uint64_t magic = __atomic_load_n(reinterpret_cast<const uint64_t *>(c->map_->addr), __ATOMIC_ACQUIRE);
        Geometry g;
        std::memcpy(&g, c->map_->addr, sizeof g);  // checked and used from this private copy only
        std::memcpy(g.magic, &magic, sizeof g.magic);
        const std::string who = "'" + n + "' ";
        if (std::memcmp(g.magic, kPoolMagic, sizeof kPoolMagic) != 0)
            fail(TENSO_E_CORRUPT, who + "is not a tenso cache (bad magic)");
        if (g.layout_version != kLayoutVersion)
            fail(TENSO_E_CORRUPT, who + "has cache layout version " + num(g.layout_version) + ", this library reads " +
                                      num(kLayoutVersion));
        if (g.checksum != geometry_hash(g))
            fail(TENSO_E_CORRUPT, who + "has a cache header whose checksum does not match");
        auto bad = [&](const std::string &what) {
            fail(TENSO_E_CORRUPT, who + "has an invalid cache geometry: " + what);
        };
        if (g.pool_size != c->map_->len)
            bad("header says " + num(g.pool_size) + " bytes, the segment has " + num(c->map_->len));
        if (g.header_bytes != kHeaderBytes || g.client_bytes != sizeof(Client) || g.pin_bytes != sizeof(Pin) ||
            g.entry_bytes != sizeof(Entry) || g.extent_bytes != sizeof(Extent) ||
            g.key_max != TENSO_CACHE_MAX_KEY_BYTES)
            bad("record sizes differ from this library's");
        if (!g.max_entries || g.max_entries > kMaxEntries || !g.max_clients || g.max_clients > kMaxClients ||
            !g.max_pins || g.max_pins > kMaxPins)
            bad("table counts out of range");
        if (!is_pow2(g.pin_capacity) || g.pin_capacity < 2ull * g.max_pins || !is_pow2(g.index_capacity) ||
            g.index_capacity < 2ull * g.max_entries || g.extent_capacity != g.max_entries + 1ull)
            bad("hash table capacities inconsistent with the counts");
        // Regions in order, aligned, disjoint, inside the pool (counts are bounded, so no overflow).
        struct Region {
            const char *name;
            uint64_t off, bytes;
        } regions[] = {{"client table", g.clients_off, uint64_t(g.max_clients) * sizeof(Client)},
                       {"pin table", g.pins_off, uint64_t(g.pin_capacity) * sizeof(Pin)},
                       {"hash index", g.index_off, uint64_t(g.index_capacity) * 4},
                       {"entry table", g.entries_off, uint64_t(g.max_entries) * sizeof(Entry)},
                       {"extent table", g.extents_off, uint64_t(g.extent_capacity) * sizeof(Extent)},
                       {"data region", g.data_off, g.data_size}};
        uint64_t end = kHeaderBytes;
        for (const Region &r : regions) {
            if (r.off % kAlign || r.off < end || r.off > g.pool_size || r.bytes > g.pool_size - r.off)
                bad(std::string(r.name) + " at " + num(r.off) + " (+" + num(r.bytes) + ") is misplaced");
            end = r.off + r.bytes;
        }
        if (g.data_size < kAlign || g.data_size % kAlign) bad("data region size " + num(g.data_size));
        c->bind(g);
        // Best effort (Linux 5.14+): fault the pool in now rather than page by page in puts.
#ifdef MADV_POPULATE_WRITE
        ::madvise(c->map_->addr, c->map_->len, MADV_POPULATE_WRITE);
#endif
        c->attach();
    } catch (...) {
        c->map_->check_intact(name);
        throw;
    }
    return c;
}

void Cache::bind(const Geometry &g) {
    g_.reset(new Geometry(g));
    uint8_t *base = map_->addr;
    s_ = reinterpret_cast<Shared *>(base + kSharedOff);
    clients_ = reinterpret_cast<Client *>(base + g.clients_off);
    pins_ = reinterpret_cast<Pin *>(base + g.pins_off);
    index_ = reinterpret_cast<uint32_t *>(base + g.index_off);
    entries_ = reinterpret_cast<Entry *>(base + g.entries_off);
    extents_ = reinterpret_cast<Extent *>(base + g.extents_off);
    data_ = base + g.data_off;
}

void Cache::attach() {
    Lock l(*this);
    auto free_row = [&]() -> uint32_t {
        for (uint32_t i = 0; i < g_->max_clients; ++i)
            if (!clients_[i].in_use) return i + 1;
        return 0;
    };
    uint32_t row = free_row();
    if (!row && reap_dead_clients()) row = free_row();
    if (!row) fail(TENSO_E_FULL, "cache '" + given_ + "' has all " + num(g_->max_clients) + " client rows attached");
    Client &c = clients_[row - 1];
    c = Client{};
    c.pid = ::getpid();
    bool zombie = false;
    proc_stat(c.pid, &c.start_time, &zombie);
    c.pid_ns = pid_namespace();
    order();
    c.in_use = 1;
    ++s_->clients;
    client_ = row;
}

Cache::~Cache() {
    if (!client_ || current_pid() != pid_) return;  // a forked copy does not own the row
    try {
        Lock l(*this);
        drop_client(client_);
    } catch (...) {
        // Lock timeout: the row stays until someone reaps it after this process exits.
    }
}

// ------------------------------------------------------------------------------ tables

Entry &Cache::ent(uint32_t idx1) const {
    if (idx1 == 0 || idx1 > g_->max_entries) corrupt("entry reference " + num(idx1) + " out of range");
    return entries_[idx1 - 1];
}

uint32_t Cache::lookup(const uint8_t *key, size_t len, uint64_t hash) const {
    const uint32_t mask = g_->index_capacity - 1;
    for (uint32_t i = uint32_t(hash) & mask, n = 0; n < g_->index_capacity; ++n, i = (i + 1) & mask) {
        uint32_t v = index_[i];
        if (!v) return 0;
        const Entry &e = ent(v);
        if (e.key_hash == hash && e.key_len == len && std::memcmp(e.key, key, len) == 0) return v;
    }
    return 0;
}

void Cache::index_insert(uint32_t idx1) {
    const uint32_t mask = g_->index_capacity - 1;
    for (uint32_t i = uint32_t(ent(idx1).key_hash) & mask, n = 0; n < g_->index_capacity; ++n, i = (i + 1) & mask) {
        if (!index_[i]) {
            index_[i] = idx1;
            return;
        }
    }
    corrupt("hash index is full");
}

// Backward-shift deletion: no tombstones, so probe lengths never degrade over time.
void Cache::index_erase(uint32_t idx1) {
    const uint32_t mask = g_->index_capacity - 1;
    uint32_t i = uint32_t(ent(idx1).key_hash) & mask, n = 0;
    while (index_[i] != idx1) {
        if (!index_[i] || ++n == g_->index_capacity) corrupt("entry " + num(idx1) + " missing from the hash index");
        i = (i + 1) & mask;
    }
    for (uint32_t j = i, steps = 0;;) {
        index_[i] = 0;
        for (;;) {
            j = (j + 1) & mask;
            if (!index_[j]) return;
            if (++steps > g_->index_capacity) corrupt("hash index has no empty slot");
            uint32_t home = uint32_t(ent(index_[j]).key_hash) & mask;
            // Move j back to the hole at i unless its home lies cyclically in (i, j].
            bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
            if (!stays) break;
        }
        index_[i] = index_[j];
        i = j;
    }
}

void Cache::lru_unlink(uint32_t idx1) {
    Entry &e = ent(idx1);
    if (e.lru_prev) ent(e.lru_prev).lru_next = e.lru_next;
    else s_->lru_head = e.lru_next;
    if (e.lru_next) ent(e.lru_next).lru_prev = e.lru_prev;
    else s_->lru_tail = e.lru_prev;
    e.lru_prev = e.lru_next = 0;
}

void Cache::lru_push_head(uint32_t idx1) {
    Entry &e = ent(idx1);
    e.lru_prev = 0;
    e.lru_next = s_->lru_head;
    if (s_->lru_head) ent(s_->lru_head).lru_prev = idx1;
    else s_->lru_tail = idx1;
    s_->lru_head = idx1;
}

// First fit over the free extents sorted by offset: O(extents), no allocation. Placement is
// address-ordered, which keeps the low end of the pool dense and the holes few.
uint64_t Cache::extent_alloc(uint64_t size) {
    uint32_t n = s_->extents;
    if (n > g_->extent_capacity) corrupt("free-extent count " + num(n));
    for (uint32_t i = 0; i < n; ++i) {
        Extent &x = extents_[i];
        if (!extent_ok(x.off, x.len))
            corrupt("free extent [" + num(x.off) + ", +" + num(x.len) + ") is outside the data region");
        if (x.len < size) continue;
        uint64_t off = x.off;
        x.off += size;
        x.len -= size;
        if (!x.len) {
            std::memmove(extents_ + i, extents_ + i + 1, (n - i - 1) * sizeof(Extent));
            --s_->extents;
        }
        return off;
    }
    return UINT64_MAX;
}

// Binary search for the place, then coalescing with both neighbours.
void Cache::extent_free(uint64_t off, uint64_t len) {
    uint32_t n = s_->extents;
    if (n > g_->extent_capacity) corrupt("free-extent count " + num(n));
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (extents_[mid].off < off) lo = mid + 1;
        else hi = mid;
    }
    bool prev = lo > 0 && extents_[lo - 1].off + extents_[lo - 1].len == off;
    bool next = lo < n && off + len == extents_[lo].off;
    if (prev && next) {
        extents_[lo - 1].len += len + extents_[lo].len;
        std::memmove(extents_ + lo, extents_ + lo + 1, (n - lo - 1) * sizeof(Extent));
        --s_->extents;
    } else if (prev) {
        extents_[lo - 1].len += len;
    } else if (next) {
        extents_[lo].off = off;
        extents_[lo].len += len;
    } else {
        if (n == g_->extent_capacity) corrupt("free-extent table overflow");
        std::memmove(extents_ + lo + 1, extents_ + lo, (n - lo) * sizeof(Extent));
        extents_[lo] = Extent{off, len};
        ++s_->extents;
    }
}

void Cache::release(uint32_t idx1) {
    Entry &e = ent(idx1);
    const Space sp = check_space(e);
    const uint64_t off = sp.off, len = sp.alloc;
    set_state(e, kFree);
    order();
    e.pins = 0;
    e.lru_prev = 0;
    e.lru_next = s_->free_slots;
    s_->free_slots = idx1;
    s_->used_bytes -= len;
    extent_free(off, len);
}

void Cache::unpublish(uint32_t idx1) {
    Entry &e = ent(idx1);
    check_space(e);  // before anything changes: a refused entry leaves the tables as they were
    index_erase(idx1);
    lru_unlink(idx1);
    --s_->live;
    if (e.ttl_ns > 0) --s_->ttl_live;
    if (e.pins) set_state(e, kOrphan);
    else release(idx1);
}

bool Cache::expired(const Entry &e, int64_t now) const { return e.ttl_ns > 0 && now - e.created_ns >= e.ttl_ns; }
bool Cache::expired_now(const Entry &e) const { return e.ttl_ns > 0 && expired(e, now_ns()); }

size_t Cache::drop_expired(uint32_t keep, int64_t now, uint32_t *pinned_left) {
    size_t n = 0;
    if (!s_->ttl_live) return 0;  // the common pool without TTLs: no scan of the entry table
    for (uint32_t i = 1; i <= g_->max_entries; ++i) {
        Entry &e = entries_[i - 1];
        if (e.state != kLive || i == keep || !expired(e, now)) continue;
        if (e.pins) {
            if (pinned_left) ++*pinned_left;
            continue;
        }
        unpublish(i);
        ++s_->expirations;
        ++n;
    }
    return n;
}

bool Cache::evict_one(uint32_t keep) {
    uint32_t steps = 0;
    for (uint32_t i = s_->lru_tail; i; i = ent(i).lru_prev) {
        if (++steps > g_->max_entries) corrupt("LRU list has a cycle");
        if (i == keep || ent(i).pins) continue;
        unpublish(i);
        ++s_->evictions;
        return true;
    }
    return false;
}

// Room for `size` bytes: free space, then expired entries, then LRU eviction, then the pins of
// dead processes, then (last) the old value of the key being replaced. *old is cleared when it
// goes.
uint64_t Cache::allocate(uint64_t size, uint32_t *old, int64_t now) {
    uint64_t off = extent_alloc(size);
    if (off != UINT64_MAX) return off;
    if (s_->pinned) reclaim_spares();  // before pins decide what may go
    if (drop_expired(*old, now) && (off = extent_alloc(size)) != UINT64_MAX) return off;
    for (int round = 0; round < 2; ++round) {
        while (evict_one(*old))
            if ((off = extent_alloc(size)) != UINT64_MAX) return off;
        if (round == 0 && !reap_dead_clients()) break;             // dead pins gone: evict again
        if ((off = extent_alloc(size)) != UINT64_MAX) return off;  // their orphans freed room
    }
    if (*old && !ent(*old).pins) {
        unpublish(*old);
        *old = 0;
        if ((off = extent_alloc(size)) != UINT64_MAX) return off;
        while (evict_one(0))
            if ((off = extent_alloc(size)) != UINT64_MAX) return off;
    }
    fail(TENSO_E_FULL, "cache '" + given_ + "' has no room for a packet of " + num(size) +
                           " bytes: " + num(g_->data_size - s_->used_bytes) + " of " + num(g_->data_size) +
                           " data bytes free, " + num(s_->pinned) + " entries pinned");
}

uint32_t Cache::take_slot(uint32_t *old) {
    if (!s_->free_slots && s_->pinned) reclaim_spares();
    if (!s_->free_slots && !evict_one(*old) && *old && !ent(*old).pins) {
        unpublish(*old);
        *old = 0;
    }
    uint32_t i = s_->free_slots;
    if (!i)
        fail(TENSO_E_FULL, "cache '" + given_ + "' has no free entry slot (" + num(g_->max_entries) + ", all pinned)");
    Entry &e = ent(i);
    if (e.state != kFree) corrupt("free-slot chain reaches a used entry");
    s_->free_slots = e.lru_next;
    e.lru_next = 0;
    return i;
}

// ------------------------------------------------------------------------------ pins

namespace {
uint32_t pin_home(uint32_t entry, uint32_t client, uint32_t mask) {
    return uint32_t(((uint64_t(entry) << 32 | client) * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}
}  // namespace

uint32_t Cache::pin_find(uint32_t entry, uint32_t client) const {
    const uint32_t mask = g_->pin_capacity - 1;
    for (uint32_t i = pin_home(entry, client, mask), n = 0; n < g_->pin_capacity; ++n, i = (i + 1) & mask) {
        const Pin &p = pins_[i];
        if (!p.entry) return 0;
        if (p.entry == entry && p.client == client) return i + 1;
    }
    return 0;
}

void Cache::pin_erase_at(uint32_t pos) {
    const uint32_t mask = g_->pin_capacity - 1;
    uint32_t i = pos - 1;
    for (uint32_t j = i, steps = 0;;) {
        pins_[i] = Pin{};
        for (;;) {
            j = (j + 1) & mask;
            if (!pins_[j].entry) {
                --s_->pin_records;
                return;
            }
            if (++steps > g_->pin_capacity) corrupt("pin table has no empty slot");
            uint32_t home = pin_home(pins_[j].entry, pins_[j].client, mask);
            bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
            if (!stays) break;
        }
        pins_[i] = pins_[j];
        i = j;
    }
}

void Cache::pin(uint32_t entry) {
    Entry &e = ent(entry);
    if (uint32_t pos = pin_find(entry, client_)) {
        ++pins_[pos - 1].count;
    } else {
        if (s_->pin_records >= g_->max_pins) reap_dead_clients();
        if (s_->pin_records >= g_->max_pins)
            fail(TENSO_E_FULL, "cache '" + given_ + "' has all " + num(g_->max_pins) + " pin records in use");
        const uint32_t mask = g_->pin_capacity - 1;
        uint32_t i = pin_home(entry, client_, mask), n = 0;
        while (pins_[i].entry) {
            if (++n == g_->pin_capacity) corrupt("pin table is full");
            i = (i + 1) & mask;
        }
        pins_[i] = Pin{entry, client_, 1, 0};
        ++s_->pin_records;
    }
    if (e.pins++ == 0) ++s_->pinned;
}

void Cache::unpin(uint32_t entry, uint32_t client, uint32_t count) {
    Entry &e = ent(entry);
    if (uint32_t pos = pin_find(entry, client)) {
        Pin &p = pins_[pos - 1];
        count = std::min(count, p.count);
        p.count -= count;
        if (!p.count) pin_erase_at(pos);
    } else {
        return;  // already reclaimed (recovery dropped it): nothing to undo
    }
    e.pins = e.pins > count ? e.pins - count : 0;
    if (e.pins) return;
    --s_->pinned;
    if (e.state == kOrphan) release(entry);
}

void Cache::unpin_quietly(uint32_t entry) noexcept {
    try {
        Lock l(*this, false);
        unpin(entry, client_, 1);
    } catch (...) {
        // Lock timeout or a corrupt pool: the pin stays with this client and goes when the
        // handle detaches or this process is reaped.
    }
}

// ------------------------------------------------------------------------------ spare pins
//
// A view's pin is not given back when the view goes: it is parked in this client's row
// (`spare_pin`, one atomic compare-and-swap), and the next get of the same key in this client
// takes it back (one atomic exchange), checks without the lock that the entry is still the
// key's live value, and serves the hit without locking at all. The pin never lapses in
// between, so no writer can reuse the bytes: a pinned entry is never rewritten in place,
// evicted, expired or freed, and its key, space and generation stay as they are; it can only
// be unpublished (ORPHAN), which the state check sees. Whoever needs a pin out of the way
// (a put, an eviction, delete, stats) takes the spares back under the lock first.

void Cache::touch(uint32_t idx1) {
    if (s_->lru_head != idx1) {
        lru_unlink(idx1);
        lru_push_head(idx1);
    }
    ent(idx1).last_access = ++s_->tick;
}

void Cache::release_pin(uint32_t entry, uint64_t generation, bool quiet) noexcept {
    // A forked child does not own the row; an unguarded or truncated mapping cannot be
    // touched without the checks the lock path makes.
    if (current_pid() == pid_ && map_->guarded() && !map_->tripped->load(std::memory_order_acquire)) {
        uint64_t none = 0;
        if (__atomic_compare_exchange_n(&clients_[client_ - 1].spare_pin, &none, spare_of(entry, generation, quiet),
                                        false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
            return;
    }
    unpin_quietly(entry);  // the slot holds another pin already
}

uint64_t Cache::take_spare() noexcept {
    uint64_t *slot = &clients_[client_ - 1].spare_pin;
    // A plain load first: an empty slot costs no locked instruction.
    return __atomic_load_n(slot, __ATOMIC_RELAXED) ? __atomic_exchange_n(slot, 0, __ATOMIC_ACQUIRE) : 0;
}

bool Cache::serve_quietly(uint64_t spare, const uint8_t *key, size_t len, uint64_t hash, Space *out) const {
    const uint32_t idx1 = uint32_t(spare & kSpareEntryMask);
    if (!idx1 || idx1 > g_->max_entries) return false;
    const Entry &e = entries_[idx1 - 1];
    // Expiry needs the clock and may drop the entry: the locked path does both.
    if (__atomic_load_n(&e.state, __ATOMIC_ACQUIRE) != kLive ||
        !spare_current(spare, __atomic_load_n(&e.generation, __ATOMIC_RELAXED)) ||
        __atomic_load_n(&e.ttl_ns, __ATOMIC_RELAXED) != 0 || __atomic_load_n(&e.key_len, __ATOMIC_RELAXED) != len ||
        __atomic_load_n(&e.key_hash, __ATOMIC_RELAXED) != hash || std::memcmp(e.key, key, len) != 0)
        return false;
    const Space sp = space(e);
    if (!extent_ok(sp.off, sp.alloc) || sp.len > sp.alloc) return false;  // the locked path says CORRUPT
    *out = sp;
    return true;
}

void Cache::settle_spare(uint32_t client, uint64_t spare) {
    const uint32_t idx1 = uint32_t(spare & kSpareEntryMask);
    if (!idx1 || idx1 > g_->max_entries) return;  // not a pin this library parked: nothing held
    Entry &e = entries_[idx1 - 1];
    if ((e.state != kLive && e.state != kOrphan) || !spare_current(spare, e.generation)) return;  // lapsed
    if ((spare & kSpareQuiet) && e.state == kLive) touch(idx1);  // the LRU move its quiet hits owed
    unpin(idx1, client, 1);
}

void Cache::reclaim_spares() {
    for (uint32_t i = 0; i < g_->max_clients; ++i) {
        Client &c = clients_[i];
        if (!c.in_use) continue;
        if (__atomic_load_n(&c.quiet_hits, __ATOMIC_RELAXED))
            s_->hits += __atomic_exchange_n(&c.quiet_hits, 0, __ATOMIC_RELAXED);
        if (!__atomic_load_n(&c.spare_pin, __ATOMIC_RELAXED)) continue;
        if (uint64_t spare = __atomic_exchange_n(&c.spare_pin, 0, __ATOMIC_ACQUIRE)) settle_spare(i + 1, spare);
    }
}

void Cache::drop_client(uint32_t client) {
    Client &row = clients_[client - 1];
    s_->hits += __atomic_exchange_n(&row.quiet_hits, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&row.spare_pin, 0, __ATOMIC_RELAXED);  // its pin goes with the others below
    std::vector<Pin> mine;
    for (uint32_t i = 0; i < g_->pin_capacity; ++i)
        if (pins_[i].entry && pins_[i].client == client) mine.push_back(pins_[i]);
    for (const Pin &p : mine) unpin(p.entry, client, p.count);
    if (row.in_use) {
        row.in_use = 0;
        --s_->clients;
    }
}

size_t Cache::reap_dead_clients() {
    const uint64_t ns = pid_namespace();
    size_t n = 0;
    for (uint32_t i = 1; i <= g_->max_clients; ++i) {
        Client &c = clients_[i - 1];
        if (!c.in_use || i == client_ || c.pid_ns != ns) continue;
        uint64_t start = 0;
        bool zombie = false;
        bool dead = (::kill(c.pid, 0) != 0 && errno == ESRCH) || !proc_stat(c.pid, &start, &zombie) || zombie ||
                    start != c.start_time;
        if (!dead) continue;
        drop_client(i);
        ++n;
    }
    return n;
}

// ------------------------------------------------------------------------------ recovery

bool Cache::extent_ok(uint64_t off, uint64_t len) const {
    return off % kAlign == 0 && len % kAlign == 0 && len && off <= g_->data_size && len <= g_->data_size - off;
}

// Pool bytes are never trusted: a corrupt entry must not steer a write (or a free) outside the
// data region.
Cache::Space Cache::space(const Entry &e) {
    // Relaxed atomic loads: one read each, which the compiler may not repeat.
    return Space{__atomic_load_n(&e.data_off, __ATOMIC_RELAXED), __atomic_load_n(&e.alloc_size, __ATOMIC_RELAXED),
                 __atomic_load_n(&e.packet_len, __ATOMIC_RELAXED)};
}

Cache::Space Cache::check_space(const Entry &e) const {
    const Space sp = space(e);
    if (!extent_ok(sp.off, sp.alloc) || sp.len > sp.alloc)
        corrupt("an entry's space [" + num(sp.off) + ", +" + num(sp.alloc) + ") is outside the data region of " +
                num(g_->data_size) + " bytes");
    return sp;
}

bool Cache::packet_ok(const Entry &e) const {
    if (e.key_len == 0 || e.key_len > TENSO_CACHE_MAX_KEY_BYTES) return false;
    const Space sp = space(e);
    if (!extent_ok(sp.off, sp.alloc) || !sp.len || sp.len > sp.alloc) return false;
    try {
        return frame_length(data_ + sp.off, sp.len, Limits()) == sp.len;
    } catch (...) {
        return false;
    }
}

// Everything derived, from the sources of truth. Entries must already be valid (recover()
// checks them first); create() runs it on all-FREE tables.
void Cache::rebuild() {
    std::memset(index_, 0, uint64_t(g_->index_capacity) * 4);
    std::vector<uint32_t> used;  // LIVE and ORPHAN, by offset
    std::vector<uint32_t> live;
    s_->free_slots = 0;
    s_->used_bytes = 0;
    s_->live = s_->pinned = s_->ttl_live = 0;
    for (uint32_t i = g_->max_entries; i >= 1; --i) {  // so the chain hands out low slots first
        Entry &e = entries_[i - 1];
        e.lru_prev = e.lru_next = 0;
        if (e.state == kFree) {
            e.pins = 0;
            e.lru_next = s_->free_slots;
            s_->free_slots = i;
            continue;
        }
        used.push_back(i);
        s_->used_bytes += e.alloc_size;
        if (e.pins) ++s_->pinned;
        if (e.state == kLive) {
            live.push_back(i);
            index_insert(i);
            ++s_->live;
            if (e.ttl_ns > 0) ++s_->ttl_live;
        }
    }
    // LRU from the access clock: most recent at the head.
    std::sort(live.begin(), live.end(),
              [&](uint32_t a, uint32_t b) { return entries_[a - 1].last_access < entries_[b - 1].last_access; });
    s_->lru_head = s_->lru_tail = 0;
    for (uint32_t i : live) lru_push_head(i);
    std::sort(used.begin(), used.end(),
              [&](uint32_t a, uint32_t b) { return entries_[a - 1].data_off < entries_[b - 1].data_off; });
    s_->extents = 0;
    uint64_t at = 0;
    auto gap = [&](uint64_t end) {
        if (end > at) extents_[s_->extents++] = Extent{at, end - at};
    };
    for (uint32_t i : used) {
        gap(entries_[i - 1].data_off);
        at = entries_[i - 1].data_off + entries_[i - 1].alloc_size;
    }
    gap(g_->data_size);
}

void Cache::recover() {
    // 1. Entries: drop half-written ones and any whose bytes or offsets do not hold up.
    std::vector<uint32_t> used;
    for (uint32_t i = 1; i <= g_->max_entries; ++i) {
        Entry &e = entries_[i - 1];
        if (e.state == kLive || e.state == kOrphan) {
            if (packet_ok(e)) {
                used.push_back(i);
                continue;
            }
        }
        set_state(e, kFree);
    }
    // 2. Overlaps: keep the first by offset, drop the later.
    std::sort(used.begin(), used.end(),
              [&](uint32_t a, uint32_t b) { return entries_[a - 1].data_off < entries_[b - 1].data_off; });
    uint64_t end = 0;
    for (uint32_t i : used) {
        Entry &e = entries_[i - 1];
        if (e.data_off < end) {
            set_state(e, kFree);
            continue;
        }
        end = e.data_off + e.alloc_size;
    }
    // 3. Duplicate live keys (a put that died between publishing the new entry and retiring the
    //    old one): the newer generation wins, the other is hidden.
    std::memset(index_, 0, uint64_t(g_->index_capacity) * 4);
    for (uint32_t i = 1; i <= g_->max_entries; ++i) {
        Entry &e = entries_[i - 1];
        if (e.state != kLive) continue;
        // Written only when wrong: a pinned entry is read without the lock (serve_quietly).
        const uint64_t h = key_hash(reinterpret_cast<const char *>(e.key), e.key_len);
        if (e.key_hash != h) e.key_hash = h;
        if (uint32_t other = lookup(e.key, e.key_len, e.key_hash)) {
            Entry &o = entries_[other - 1];
            Entry &loser = o.generation < e.generation ? o : e;
            set_state(loser, kOrphan);
            if (&loser == &e) continue;
            index_erase(other);
        }
        index_insert(i);
    }
    // 4. Clients: malformed rows go; dead processes are judged below with their pins.
    for (uint32_t i = 0; i < g_->max_clients; ++i)
        if (clients_[i].in_use > 1) clients_[i].in_use = 0;
    // 5. Pins: keep the records that name a live client and a held entry; recount.
    std::vector<Pin> keep;
    for (uint32_t i = 0; i < g_->pin_capacity; ++i) {
        const Pin p = pins_[i];
        if (!p.entry || p.entry > g_->max_entries || !p.client || p.client > g_->max_clients || !p.count) continue;
        const uint32_t st = entries_[p.entry - 1].state;
        if ((st == kLive || st == kOrphan) && clients_[p.client - 1].in_use) keep.push_back(p);
    }
    std::memset(pins_, 0, uint64_t(g_->pin_capacity) * sizeof(Pin));
    s_->pin_records = 0;
    for (uint32_t i = 0; i < g_->max_entries; ++i) entries_[i].pins = 0;
    const uint32_t mask = g_->pin_capacity - 1;
    for (const Pin &p : keep) {
        if (s_->pin_records >= g_->max_pins) break;
        uint32_t i = pin_home(p.entry, p.client, mask);
        while (pins_[i].entry && !(pins_[i].entry == p.entry && pins_[i].client == p.client)) i = (i + 1) & mask;
        if (!pins_[i].entry) ++s_->pin_records;
        pins_[i].entry = p.entry;
        pins_[i].client = p.client;
        pins_[i].count += p.count;
        entries_[p.entry - 1].pins += p.count;
    }
    // 6. Orphans nobody pins are released (rebuild() then sees them FREE).
    for (uint32_t i = 0; i < g_->max_entries; ++i)
        if (entries_[i].state == kOrphan && !entries_[i].pins) set_state(entries_[i], kFree);
    uint32_t clients = 0;
    for (uint32_t i = 0; i < g_->max_clients; ++i) clients += clients_[i].in_use;
    s_->clients = clients;
    rebuild();
    // 7. Dead processes' pins (needs the rebuilt tables: it releases orphans through them).
    reap_dead_clients();
    uint64_t tick = 0;
    for (uint32_t i = 0; i < g_->max_entries; ++i)
        if (entries_[i].state != kFree) tick = std::max(tick, entries_[i].last_access);
    s_->tick = std::max(s_->tick, tick);
    ++s_->recoveries;
    order();
    s_->recovering = 0;
}

// ------------------------------------------------------------------------------ operations

void Cache::put(const char *key, size_t key_len, const Value &v, const EncodeOptions &opts, double ttl_seconds,
                uint64_t *written) {
    check_key(key, key_len);
    if (!(ttl_seconds >= 0) || !std::isfinite(ttl_seconds))
        fail(TENSO_E_INVALID_ARGUMENT, "ttl_seconds must be finite and >= 0");
    const int64_t ttl_ns = ttl_seconds > 0 ? int64_t(std::min(ttl_seconds * 1e9, 4e18)) : 0;
    // Planned (and compressed, if asked) before the lock: only the copy happens under it.
    Plan plan(opts, false);
    plan.add(v);
    const uint64_t need = plan.size();
    const uint64_t alloc = align_up(need, kAlign);
    if (alloc > g_->data_size)
        fail(TENSO_E_FULL,
             "a packet of " + num(need) + " bytes is larger than the cache's data region (" + num(g_->data_size) + ")");
    const uint64_t hash = key_hash(key, key_len);
    const auto *k = reinterpret_cast<const uint8_t *>(key);

    return locked([&] {
        const int64_t now = now_ns();
        uint32_t old = lookup(k, key_len, hash);
        if (old) {
            Entry &e = ent(old);
            if (e.pins) reclaim_spares();  // a spare pin must not keep it from being rewritten
            const Space sp = check_space(e);
            if (!e.pins && sp.alloc >= alloc) {
                // In place. WRITING first: a crash mid-copy drops the entry instead of serving a
                // torn packet.
                set_state(e, kWriting);
                order();
                try {
                    plan.write_to(data_ + sp.off);
                    map_->check_intact(given_);  // zeros where the packet went: never LIVE again
                } catch (...) {
                    unpublish(old);
                    throw;
                }
                e.packet_len = need;
                e.created_ns = now;
                s_->ttl_live += uint32_t(ttl_ns > 0) - uint32_t(e.ttl_ns > 0);
                e.ttl_ns = ttl_ns;
                e.generation = ++s_->generation;
                e.last_access = ++s_->tick;
                order();
                set_state(e, kLive);
                lru_unlink(old);
                lru_push_head(old);
                *written = need;
                return;
            }
        }
        const uint64_t off = allocate(alloc, &old, now);
        uint32_t slot;
        try {
            slot = take_slot(&old);
        } catch (...) {
            extent_free(off, alloc);
            throw;
        }
        Entry &e = ent(slot);
        e.data_off = off;
        e.alloc_size = alloc;
        e.packet_len = need;
        e.key_len = uint32_t(key_len);
        std::memcpy(e.key, key, key_len);
        e.key_hash = hash;
        e.pins = 0;
        e.lru_prev = e.lru_next = 0;
        e.created_ns = now;
        e.ttl_ns = ttl_ns;
        e.generation = ++s_->generation;
        e.last_access = ++s_->tick;
        order();
        set_state(e, kWriting);  // from here its space is accounted for, also by recovery
        s_->used_bytes += alloc;
        order();
        try {
            plan.write_to(data_ + off);
            map_->check_intact(given_);  // zeros where the packet went: not published
        } catch (...) {
            release(slot);
            throw;
        }
        if (old) unpublish(old);
        index_insert(slot);
        lru_push_head(slot);
        ++s_->live;
        if (ttl_ns > 0) ++s_->ttl_live;
        order();
        set_state(e, kLive);
        *written = need;
    });
}

namespace {
// Keeps an entry pinned for as long as a view points into it.
struct PinToken {
    std::shared_ptr<Cache> cache;
    uint32_t entry = 0;
    uint64_t generation = 0;  // the entry's, when it was pinned
    bool quiet = false;       // served without the lock
    ~PinToken() {
        if (entry) cache->release_pin(entry, generation, quiet);
    }
};
}  // namespace

std::unique_ptr<View> Cache::get(const char *key, size_t key_len, const Limits &limits) {
    check_key(key, key_len);
    const uint64_t hash = key_hash(key, key_len);
    const auto *k = reinterpret_cast<const uint8_t *>(key);
    auto token = std::make_shared<PinToken>();  // allocated first: pinning cannot then leak
    token->cache = shared_from_this();
    Space sp{};
    // The hit without the lock: this client's spare pin, when it is on this key's entry. The
    // lock path checks the process and the pool's size first; so does this one.
    uint64_t spare = 0;
    if (current_pid() == pid_ && map_->guarded()) {
        map_->check_size(given_);
        spare = take_spare();
    }
    if (spare && serve_quietly(spare, k, key_len, hash, &sp)) {
        token->entry = uint32_t(spare & kSpareEntryMask);
        token->generation = spare >> kSpareGenShift;
        token->quiet = true;
        __atomic_fetch_add(&clients_[client_ - 1].quiet_hits, 1, __ATOMIC_RELAXED);
    } else {
        try {
            locked([&] {
                if (spare) {  // another entry's, or one that lapsed: given back first
                    const uint64_t s = spare;
                    spare = 0;
                    settle_spare(client_, s);
                }
                uint32_t i = lookup(k, key_len, hash);
                if (!i) {
                    ++s_->misses;
                    fail(TENSO_E_NOT_FOUND, "no key '" + std::string(key, key_len) + "' in cache '" + given_ + "'");
                }
                Entry &e = ent(i);
                if (expired_now(e)) {
                    ++s_->misses;
                    if (e.pins) reclaim_spares();
                    if (!e.pins) {
                        unpublish(i);
                        ++s_->expirations;
                    }
                    fail(TENSO_E_NOT_FOUND, "key '" + std::string(key, key_len) + "' has expired");
                }
                sp = check_space(e);
                pin(i);
                token->entry = i;
                token->generation = e.generation;
                touch(i);
                ++s_->hits;
            });
        } catch (...) {
            // The lock was not had (timeout, truncation): the spare goes back to its slot, or,
            // if another took that, stays held until this handle detaches.
            if (spare) {
                uint64_t none = 0;
                __atomic_compare_exchange_n(&clients_[client_ - 1].spare_pin, &none, spare, false, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED);
            }
            throw;
        }
    }
    // A truncation from here on shows as zeros in the packet: TRUNCATED, not a decode status.
    std::unique_ptr<View> view;
    try {
        view = decode(data_ + sp.off, sp.len, limits, std::move(token));
    } catch (...) {
        map_->check_intact(given_);
        throw;
    }
    map_->check_intact(given_);
    return view;
}

void Cache::remove(const char *key, size_t key_len) {
    check_key(key, key_len);
    const uint64_t hash = key_hash(key, key_len);
    return locked([&] {
        uint32_t i = lookup(reinterpret_cast<const uint8_t *>(key), key_len, hash);
        bool was_expired = i && expired_now(ent(i));
        if (i && ent(i).pins) reclaim_spares();  // freed now unless a view holds it
        if (i) unpublish(i);
        if (was_expired) ++s_->expirations;
        if (!i || was_expired)
            fail(TENSO_E_NOT_FOUND, "no key '" + std::string(key, key_len) + "' in cache '" + given_ + "'");
    });
}

CacheEntryInfo Cache::info(const char *key, size_t key_len) {
    check_key(key, key_len);
    const uint64_t hash = key_hash(key, key_len);
    return locked([&] {
        const int64_t now = now_ns();
        uint32_t i = lookup(reinterpret_cast<const uint8_t *>(key), key_len, hash);
        if (!i || expired(ent(i), now))
            fail(TENSO_E_NOT_FOUND, "no key '" + std::string(key, key_len) + "' in cache '" + given_ + "'");
        const Entry &e = ent(i);
        if (e.pins) reclaim_spares();  // pins counts views
        const Space sp = check_space(e);
        CacheEntryInfo out;
        out.packet = inspect(data_ + sp.off, sp.len);
        out.alloc_bytes = sp.alloc;
        out.ttl_seconds = double(e.ttl_ns) / 1e9;
        out.age_seconds = double(now - e.created_ns) / 1e9;
        out.pins = e.pins;
        return out;
    });
}

bool Cache::contains(const char *key, size_t key_len) {
    check_key(key, key_len);
    const uint64_t hash = key_hash(key, key_len);
    return locked([&] {
        uint32_t i = lookup(reinterpret_cast<const uint8_t *>(key), key_len, hash);
        return i && !expired_now(ent(i));
    });
}

std::vector<std::string> Cache::keys() {
    return locked([&] {
        reclaim_spares();  // the LRU moves that quiet hits owe
        std::vector<std::string> out;
        const int64_t now = now_ns();
        out.reserve(std::min(s_->live, g_->max_entries));  // `live` is shared: bounded by our copy
        uint32_t steps = 0;
        for (uint32_t i = s_->lru_head; i; i = ent(i).lru_next) {
            if (++steps > g_->max_entries) corrupt("LRU list has a cycle");
            const Entry &e = ent(i);
            if (!expired(e, now))
                out.emplace_back(reinterpret_cast<const char *>(e.key),
                                 std::min<size_t>(e.key_len, TENSO_CACHE_MAX_KEY_BYTES));
        }
        return out;
    });
}

void Cache::clear() {
    return locked([&] {
        if (s_->pinned) reclaim_spares();
        uint32_t steps = 0;
        while (uint32_t i = s_->lru_head) {
            if (++steps > g_->max_entries) corrupt("LRU list has a cycle");
            unpublish(i);
        }
    });
}

CacheStats Cache::stats() {
    return locked([&] {
        // Expired entries are dropped first, so `entries` counts what keys() lists; both cost
        // nothing in a pool without TTL entries. Pinned ones stay until released but are not counted.
        reclaim_spares();  // quiet hits counted, spare pins not
        uint32_t expired_pinned = 0;
        drop_expired(0, now_ns(), &expired_pinned);
        CacheStats st;
        CacheStats *out = &st;
        out->entries = s_->live - std::min(expired_pinned, s_->live);
        out->max_entries = g_->max_entries;
        out->pool_bytes = g_->pool_size;
        out->data_bytes = g_->data_size;
        out->used_bytes = s_->used_bytes;
        out->free_bytes = g_->data_size - std::min(s_->used_bytes, g_->data_size);
        out->hits = s_->hits;
        out->misses = s_->misses;
        out->evictions = s_->evictions;
        out->expirations = s_->expirations;
        out->pinned_entries = s_->pinned;
        out->recoveries = s_->recoveries;
        out->clients = s_->clients;
        return st;
    });
}

void Cache::check() {
    return locked([&] {
        // Entries: states, ranges, packets; disjoint; accounting.
        std::vector<uint32_t> used;
        uint64_t bytes = 0, free_slots = 0;
        uint32_t live = 0, pinned = 0, ttl_live = 0;
        for (uint32_t i = 1; i <= g_->max_entries; ++i) {
            const Entry &e = entries_[i - 1];
            const std::string who = "entry " + num(i) + " ";
            switch (e.state) {
            case kFree: ++free_slots; continue;
            case kLive:
                ++live;
                ttl_live += e.ttl_ns > 0;
                break;
            case kOrphan:
                if (!e.pins) corrupt(who + "is an orphan without pins");
                break;
            default: corrupt(who + "has state " + num(e.state) + " outside an operation");
            }
            if (!packet_ok(e)) corrupt(who + "has an invalid range or packet header");
            if (e.key_hash != key_hash(reinterpret_cast<const char *>(e.key), e.key_len))
                corrupt(who + "has a stale key hash");
            used.push_back(i);
            bytes += e.alloc_size;
            if (e.pins) ++pinned;
        }
        if (live != s_->live) corrupt("live count " + num(s_->live) + ", entries say " + num(live));
        if (ttl_live != s_->ttl_live)
            corrupt("TTL entry count " + num(s_->ttl_live) + ", entries say " + num(ttl_live));
        if (pinned != s_->pinned) corrupt("pinned count " + num(s_->pinned) + ", entries say " + num(pinned));
        if (bytes != s_->used_bytes) corrupt("used bytes " + num(s_->used_bytes) + ", entries hold " + num(bytes));
        // Free extents: sorted, coalesced, disjoint from entries, and together the rest of the region.
        std::sort(used.begin(), used.end(),
                  [&](uint32_t a, uint32_t b) { return entries_[a - 1].data_off < entries_[b - 1].data_off; });
        if (s_->extents > g_->extent_capacity) corrupt("free-extent count " + num(s_->extents));
        std::vector<Extent> all;
        for (uint32_t i : used) all.push_back(Extent{entries_[i - 1].data_off, entries_[i - 1].alloc_size});
        uint64_t free_bytes = 0;
        for (uint32_t k = 0; k < s_->extents; ++k) {
            const Extent &x = extents_[k];
            if (!x.len || x.off % kAlign || x.len % kAlign)
                corrupt("free extent " + num(k) + " is empty or misaligned");
            if (k && extents_[k - 1].off + extents_[k - 1].len >= x.off)
                corrupt("free extents " + num(k) + " unsorted or not coalesced");
            free_bytes += x.len;
            all.push_back(x);
        }
        std::sort(all.begin(), all.end(), [](const Extent &a, const Extent &b) { return a.off < b.off; });
        uint64_t at = 0;
        for (const Extent &x : all) {
            if (x.off != at)
                corrupt(x.off < at ? "data ranges overlap at " + num(x.off)
                                   : "data bytes at " + num(at) + " are neither used nor free");
            at = x.off + x.len;
        }
        if (at != g_->data_size) corrupt("data region accounted up to " + num(at) + " of " + num(g_->data_size));
        if (free_bytes + bytes != g_->data_size) corrupt("free plus used bytes differ from the data region");
        // Index: exactly the live entries, each reachable from its home slot.
        uint32_t indexed = 0;
        for (uint32_t k = 0; k < g_->index_capacity; ++k) {
            uint32_t v = index_[k];
            if (!v) continue;
            if (v > g_->max_entries || entries_[v - 1].state != kLive)
                corrupt("index slot " + num(k) + " names a non-live entry");
            const Entry &e = entries_[v - 1];
            if (lookup(e.key, e.key_len, e.key_hash) != v)
                corrupt("index: entry " + num(v) + " not reachable or key duplicated");
            ++indexed;
        }
        if (indexed != live) corrupt("index holds " + num(indexed) + " keys, " + num(live) + " entries are live");
        // LRU: a well-linked list of exactly the live entries.
        uint32_t n = 0, prev = 0;
        for (uint32_t i = s_->lru_head; i; i = ent(i).lru_next) {
            if (++n > live) corrupt("LRU list longer than the live entries");
            if (ent(i).state != kLive || ent(i).lru_prev != prev) corrupt("LRU link at entry " + num(i));
            prev = i;
        }
        if (n != live || s_->lru_tail != prev) corrupt("LRU list does not match the live entries");
        // Free slots.
        n = 0;
        for (uint32_t i = s_->free_slots; i; i = ent(i).lru_next) {
            if (++n > free_slots || ent(i).state != kFree) corrupt("free-slot chain");
        }
        if (n != free_slots) corrupt("free-slot chain holds " + num(n) + " of " + num(free_slots) + " free slots");
        // Pins: records name attached clients and held entries, and add up to each entry's count.
        std::vector<uint64_t> sums(g_->max_entries, 0);
        uint32_t records = 0;
        for (uint32_t k = 0; k < g_->pin_capacity; ++k) {
            const Pin p = pins_[k];  // one copy of the shared record, checked and used
            if (!p.entry) continue;
            ++records;
            if (p.entry > g_->max_entries || !p.client || p.client > g_->max_clients ||
                !clients_[p.client - 1].in_use || !p.count)
                corrupt("pin record " + num(k) + " is invalid");
            const uint32_t st = entries_[p.entry - 1].state;
            if (st != kLive && st != kOrphan) corrupt("pin record " + num(k) + " names a free entry");
            if (pin_find(p.entry, p.client) != k + 1) corrupt("pin record " + num(k) + " unreachable or duplicated");
            sums[p.entry - 1] += p.count;
        }
        if (records != s_->pin_records)
            corrupt("pin record count " + num(s_->pin_records) + ", table holds " + num(records));
        for (uint32_t i = 0; i < g_->max_entries; ++i)
            if (entries_[i].state != kFree && sums[i] != entries_[i].pins)
                corrupt("entry " + num(i + 1) + " counts " + num(entries_[i].pins) + " pins, records hold " +
                        num(sums[i]));
        uint32_t clients = 0;
        for (uint32_t i = 0; i < g_->max_clients; ++i) {
            if (clients_[i].in_use > 1) corrupt("client row " + num(i) + " is malformed");
            clients += clients_[i].in_use;
        }
        if (clients != s_->clients) corrupt("client count " + num(s_->clients) + ", rows say " + num(clients));
    });
}

}  // namespace tenso
