// cache_pool.cpp - the cache's pool as a whole (layout: docs/cache-layout.md): creating it and
// laying out its tables, opening and checking one another process made, the robust lock,
// this process's client row and the reaping of dead ones, and recovery after a lock holder
// died. The operations are in cache.cpp; the other parts are listed in cache_impl.hpp.
#include "shm/cache_impl.hpp"

#include "format/decoder.hpp"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

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

using namespace cache_layout;
using namespace cache_detail;

namespace {

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

// getpid() without a system call on every operation: refreshed in the child after fork.
std::atomic<int> g_pid{0};
void refresh_pid() { g_pid.store(int(::getpid()), std::memory_order_relaxed); }

}  // namespace

namespace cache_detail {
int current_pid() {
    static const bool once = [] {
        refresh_pid();
        ::pthread_atfork(nullptr, nullptr, refresh_pid);
        return true;
    }();
    (void)once;
    return g_pid.load(std::memory_order_relaxed);
}
}  // namespace cache_detail

// ------------------------------------------------------------------------------ the lock

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

// ------------------------------------------------------------------------------ clients

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

}  // namespace tenso
