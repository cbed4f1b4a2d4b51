// cache.hpp - the multi-process tensor cache: one shared-memory pool (header, client table, pin
// table, hash index, entry table, free-extent table, data region) guarded by one robust
// process-shared mutex. The layout and its invariants are documented in docs/cache-layout.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/codec.hpp"
#include "shm/shm.hpp"

namespace tenso {

struct CacheOptions {
    uint64_t size = 0;             // 0 = 256 MiB
    uint32_t max_entries = 0;      // 0 = size / 16 KiB, clamped to [64, 1 << 20]
    uint32_t max_clients = 0;      // 0 = 256
    uint32_t max_pins = 0;         // 0 = 16384
    uint32_t lock_timeout_ms = 0;  // 0 = 10 s
    bool replace = false;
    bool any_owner = false;  // open: attach to a pool another uid owns
};

struct CacheEntryInfo {
    PacketInfo packet;  // the stored packet's header
    uint64_t alloc_bytes = 0;
    double ttl_seconds = 0, age_seconds = 0;
    uint32_t pins = 0;
};

struct CacheStats {
    uint64_t entries = 0, max_entries = 0;
    uint64_t pool_bytes = 0, data_bytes = 0, used_bytes = 0, free_bytes = 0;
    uint64_t hits = 0, misses = 0, evictions = 0, expirations = 0;
    uint64_t pinned_entries = 0, recoveries = 0, clients = 0;
};

namespace cache_layout {
struct Geometry;
struct Shared;
struct Entry;
struct Client;
struct Pin;
struct Extent;
}  // namespace cache_layout

// One attached handle ("client"). Shared by the C handle and by every pinned view, so the
// client row (which owns the pins) stays registered until the last view is freed.
class Cache : public std::enable_shared_from_this<Cache> {
public:
    static std::shared_ptr<Cache> create(const char *name, const CacheOptions &opts);
    static std::shared_ptr<Cache> open(const char *name, uint32_t lock_timeout_ms, bool any_owner);
    ~Cache();  // detaches: drops this client's row (and any pins left, which none should be)
    Cache(const Cache &) = delete;
    Cache &operator=(const Cache &) = delete;

    const std::string &name() const { return given_; }

    // *written: the packet length.
    void put(const char *key, size_t key_len, const Value &v, const EncodeOptions &opts, double ttl_seconds,
             uint64_t *written);
    std::unique_ptr<View> get(const char *key, size_t key_len, const Limits &limits);
    void remove(const char *key, size_t key_len);
    CacheEntryInfo info(const char *key, size_t key_len);
    bool contains(const char *key, size_t key_len);
    std::vector<std::string> keys();  // MRU first
    void clear();
    CacheStats stats();
    void check();  // throws CORRUPT naming the first broken invariant

    // For the pin token of a view (never throws): parks the pin in this client's spare slot,
    // where the next get of the same entry takes it back without the lock, or else unpins it
    // under the lock. `generation` is the entry's when it was pinned; `quiet`: the view was
    // served without the lock (its LRU move is still owed).
    void release_pin(uint32_t entry, uint64_t generation, bool quiet) noexcept;

private:
    class Lock;
    Cache() = default;

    std::string given_;
    std::shared_ptr<ShmMapping> map_;
    int64_t timeout_ns_ = 0;
    int pid_ = 0;
    uint32_t client_ = 0;  // our client row + 1
    // A verified private copy: geometry is never re-read from shared memory after open.
    std::unique_ptr<cache_layout::Geometry> g_;
    cache_layout::Shared *s_ = nullptr;
    cache_layout::Entry *entries_ = nullptr;
    cache_layout::Client *clients_ = nullptr;
    cache_layout::Pin *pins_ = nullptr;
    uint32_t *index_ = nullptr;
    cache_layout::Extent *extents_ = nullptr;
    uint8_t *data_ = nullptr;

    void bind(const cache_layout::Geometry &g);
    void attach();
    void lock(bool check_size);  // check_size: TRUNCATED when the pool shrank under us
    // Runs `op` under the lock; TRUNCATED, whatever op returned or threw, when the pool lost
    // pages meanwhile (the fault guard put zeros in their place, and op may have read them).
    template <class Op>
    auto locked(Op &&op) -> decltype(op());
    void unlock() noexcept;

    // Everything below runs under the lock.
    cache_layout::Entry &ent(uint32_t idx1) const;
    uint32_t lookup(const uint8_t *key, size_t len, uint64_t hash) const;
    void index_insert(uint32_t idx1);
    void index_erase(uint32_t idx1);
    void lru_unlink(uint32_t idx1);
    void lru_push_head(uint32_t idx1);
    uint64_t extent_alloc(uint64_t size);
    void extent_free(uint64_t off, uint64_t len);
    void release(uint32_t idx1);    // entry -> FREE, space and slot back
    void unpublish(uint32_t idx1);  // out of index and LRU; ORPHAN when pinned, else released
    bool expired(const cache_layout::Entry &e, int64_t now) const;
    bool expired_now(const cache_layout::Entry &e) const;  // reads the clock only for a ttl
    // Unpublishes expired, unpinned LIVE entries (not `keep`); *pinned_left counts the expired
    // ones a pin holds back.
    size_t drop_expired(uint32_t keep, int64_t now, uint32_t *pinned_left = nullptr);
    bool evict_one(uint32_t keep);
    uint64_t allocate(uint64_t size, uint32_t *old, int64_t now);
    uint32_t take_slot(uint32_t *old);
    uint32_t pin_find(uint32_t entry, uint32_t client) const;  // table position + 1, 0 = none
    void pin_erase_at(uint32_t pos);
    void pin(uint32_t entry);
    void unpin(uint32_t entry, uint32_t client, uint32_t count);
    void unpin_quietly(uint32_t entry) noexcept;  // takes the lock
    void touch(uint32_t idx1);                    // LRU head, new access tick
    void drop_client(uint32_t client);
    size_t reap_dead_clients();
    void rebuild();  // derived state from the entry, client and pin tables
    void recover();  // after a lock holder died
    bool packet_ok(const cache_layout::Entry &e) const;
    // True when [off, off + len) is a non-empty, aligned range inside the data region.
    bool extent_ok(uint64_t off, uint64_t len) const;
    // An entry's space, each field read once from the pool: another process may rewrite it
    // after the check, so callers use this copy, never the entry's fields.
    struct Space {
        uint64_t off, alloc, len;  // data_off, alloc_size, packet_len
    };
    static Space space(const cache_layout::Entry &e);
    // The entry's space, checked before any write, read or free goes through it.
    Space check_space(const cache_layout::Entry &e) const;
    // Spare pins (docs/cache-layout.md, "Spare pins"). take_spare empties this client's slot
    // without the lock; serve_quietly checks, also without it, that the spare's entry is the
    // live, unexpiring value of `key` (each field read once), and gives its checked space.
    uint64_t take_spare() noexcept;
    bool serve_quietly(uint64_t spare, const uint8_t *key, size_t len, uint64_t hash, Space *out) const;
    void settle_spare(uint32_t client, uint64_t spare);  // under the lock: unpins it if still held
    // Under the lock: unpins every client's spare and adds up its quiet hits, before pins or
    // hits are counted or an entry's pins stand in the way.
    void reclaim_spares();
};

}  // namespace tenso
