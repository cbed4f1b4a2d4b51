// cache.cpp - the multi-process tensor cache (layout: docs/cache-layout.md).
//
// Sources of truth in the pool are the entry table, the client table and the pin table; the
// hash index, the LRU list, the free-slot chain, the free extents and every counter of
// occupancy are derived from them and rebuilt by recover() when a lock holder dies. Writes
// keep that possible: an entry is WRITING (with its space recorded) before its bytes are
// written and LIVE only once the packet and its index/LRU links are complete.
//
// This file holds the operations; the rest of the cache: cache_impl.hpp (its private header,
// listing the parts), cache_pool.cpp, cache_tables.cpp, cache_spare.cpp and cache_check.cpp.
#include "shm/cache_impl.hpp"

#include "format/decoder.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "format/wire.hpp"

namespace tenso {

using namespace cache_layout;
using namespace cache_detail;

namespace {

void check_key(const char *key, size_t len) {
    if (len == 0 || len > TENSO_CACHE_MAX_KEY_BYTES)
        fail(TENSO_E_INVALID_ARGUMENT,
             "cache keys are 1 to " + num(TENSO_CACHE_MAX_KEY_BYTES) + " bytes, got " + num(len));
    if (!valid_utf8(reinterpret_cast<const uint8_t *>(key), len))
        fail(TENSO_E_BAD_UTF8, "cache key is not valid UTF-8");
}

}  // namespace

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

}  // namespace tenso
