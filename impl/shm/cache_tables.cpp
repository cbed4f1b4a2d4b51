// cache_tables.cpp - the pool's derived tables, changed only under the lock: the hash index,
// the LRU list, the free extents, entry release, expiry and eviction, allocation, the pin
// table, and the checks that keep an entry's space inside the data region. The operations are
// in cache.cpp; the other parts are listed in cache_impl.hpp.
#include "shm/cache_impl.hpp"

#include <algorithm>
#include <cstring>

namespace tenso {

using namespace cache_layout;
using namespace cache_detail;

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

void Cache::touch(uint32_t idx1) {
    if (s_->lru_head != idx1) {
        lru_unlink(idx1);
        lru_push_head(idx1);
    }
    ent(idx1).last_access = ++s_->tick;
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

// ------------------------------------------------------------------------------ space

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

// ------------------------------------------------------------------------------ pins

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

}  // namespace tenso
