// cache_spare.cpp - spare pins: the repeated hit that takes no lock (docs/cache-layout.md,
// "Spare pins"). Cache::get (cache.cpp) serves from here when it can; the pin and LRU tables
// it relies on are in cache_tables.cpp; the other parts are listed in cache_impl.hpp.
#include "shm/cache_impl.hpp"

#include <cstring>

namespace tenso {

using namespace cache_layout;
using namespace cache_detail;

namespace {

uint64_t spare_of(uint32_t idx1, uint64_t generation, bool quiet) {
    return idx1 | (quiet ? kSpareQuiet : 0) | generation << kSpareGenShift;
}
// True when `spare` was made from the entry's current generation.
bool spare_current(uint64_t spare, uint64_t generation) {
    return (spare >> kSpareGenShift) == (generation << kSpareGenShift) >> kSpareGenShift;
}

}  // namespace

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

}  // namespace tenso
