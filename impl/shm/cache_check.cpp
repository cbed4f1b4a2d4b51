// cache_check.cpp - Cache::check(): every invariant of the pool (docs/cache-layout.md) verified
// under the lock, the first broken one reported as CORRUPT. The operations are in cache.cpp;
// the other parts are listed in cache_impl.hpp.
#include "shm/cache_impl.hpp"

#include <algorithm>
#include <vector>

namespace tenso {

using namespace cache_layout;
using namespace cache_detail;

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
