// CapiCacheTest - tenso_cache_*: semantics of put/get/delete/info/keys/contains/clear/stats,
// TTL expiry, LRU order and eviction, in-place rewrites, pinned views (survive eviction,
// delete and replace; space released when freed), TENSO_E_FULL when everything is pinned,
// hostile pool headers and entries, and the pins of a dead process. The multi-process stress
// and crash-recovery runs are in CapiCacheStressTest.
#include <cppunit/extensions/HelperMacros.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "CapiCacheUtil.hpp"
#include "isolated.hpp"

using namespace cache_test;
using hostile::ViewPtr;

namespace {

ViewPtr get(tenso_cache *c, const std::string &k) {
    tenso_view *v = nullptr;
    TENSO_CHECK_OK(tenso_cache_get(&v, c, k.data(), k.size(), nullptr));
    return ViewPtr(v);
}
tenso_status get_status(tenso_cache *c, const std::string &k) {
    tenso_view *v = nullptr;
    tenso_status st = tenso_cache_get(&v, c, k.data(), k.size(), nullptr);
    tenso_view_free(v);
    return st;
}
tenso_status put_status(tenso_cache *c, const std::string &k, const Val &v) {
    return tenso_cache_put(nullptr, c, k.data(), k.size(), v.value.get(), nullptr, 0);
}
void put(tenso_cache *c, const std::string &k, const Val &v, double ttl = 0) {
    TENSO_CHECK_OK(tenso_cache_put(nullptr, c, k.data(), k.size(), v.value.get(), nullptr, ttl));
}
bool contains(tenso_cache *c, const std::string &k) {
    int found = -1;
    TENSO_CHECK_OK(tenso_cache_contains(&found, c, k.data(), k.size()));
    return found == 1;
}
// A forced clock step for one live entry: its creation time moves `seconds` into the past
// (docs/cache-layout.md: entry state at 0, key length at 4, created at 40, key at 88), so it
// is past its TTL however fast or slow the machine ran up to here.
void age(const std::string &pool, const std::string &key, double seconds) {
    RawPool raw(pool);
    const uint64_t table = raw.get<uint64_t>(kEntriesOff);
    for (uint32_t i = 0; i < raw.get<uint32_t>(kMaxEntriesOff); ++i) {
        const size_t e = size_t(table) + size_t(i) * 256;
        if (raw.get<uint32_t>(e) == 2 && raw.get<uint32_t>(e + 4) == key.size() &&
            std::memcmp(raw.p + e + 88, key.data(), key.size()) == 0) {
            raw.set<int64_t>(e + 40, raw.get<int64_t>(e + 40) - int64_t(seconds * 1e9));
            return;
        }
    }
    CPPUNIT_FAIL("no live entry " + key + " in " + pool);
}
// The index + 1 of the live entry under `key`, and its generation (entry offsets 0, 4, 64, 88).
uint32_t live_entry(const RawPool &raw, const std::string &key, uint64_t *generation) {
    const uint64_t table = raw.get<uint64_t>(kEntriesOff);
    for (uint32_t i = 0; i < raw.get<uint32_t>(kMaxEntriesOff); ++i) {
        const size_t e = size_t(table) + size_t(i) * 256;
        if (raw.get<uint32_t>(e) == 2 && raw.get<uint32_t>(e + 4) == key.size() &&
            std::memcmp(raw.p + e + 88, key.data(), key.size()) == 0) {
            *generation = raw.get<uint64_t>(e + 64);
            return i + 1;
        }
    }
    CPPUNIT_FAIL("no live entry " + key);
    return 0;
}
// Client row `row`'s field at `field` (kClientSpareOff, kClientQuietHitsOff).
size_t client_field(const RawPool &raw, uint32_t row, size_t field) {
    return size_t(raw.get<uint64_t>(kClientsOff)) + row * kClientBytes + field;
}

std::vector<std::string> keys(tenso_cache *c) {
    std::vector<std::string> out;
    TENSO_CHECK_OK(tenso_cache_keys(
        c,
        [](const char *k, size_t n, void *u) {
            static_cast<std::vector<std::string> *>(u)->emplace_back(k, n);
            return 0;
        },
        &out));
    return out;
}

}  // namespace

class CapiCacheTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiCacheTest);
    CPPUNIT_TEST(testBasics);
    CPPUNIT_TEST(testBadArguments);
    CPPUNIT_TEST(testCreateOpenUnlink);
    CPPUNIT_TEST(testTtl);
    CPPUNIT_TEST(testLruEviction);
    CPPUNIT_TEST(testInPlace);
    CPPUNIT_TEST(testPinnedSurvives);
    CPPUNIT_TEST(testSparePins);
    CPPUNIT_TEST(testHostileSparePins);
    CPPUNIT_TEST(testFullWhenPinned);
    CPPUNIT_TEST(testHostileHeaders);
    CPPUNIT_TEST(testOpenWhileCreating);
    CPPUNIT_TEST(testCorruptEntry);
    CPPUNIT_TEST(testDeadProcessPins);
    CPPUNIT_TEST(testCompressedAndBundle);
    CPPUNIT_TEST(testTinyPools);
    CPPUNIT_TEST(testDerivedTablesFromOneMiB);
    CPPUNIT_TEST_SUITE_END();

public:
    void testBasics() {
        Unlink u{pool_name("basics")};
        CachePtr c = create(u.name, options(1 << 20, 64));
        CPPUNIT_ASSERT_EQUAL(u.name, std::string(tenso_cache_name(c.get())));
        tenso_cache_stats s = stats(c.get());
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), s.entries);
        CPPUNIT_ASSERT_EQUAL(uint64_t(64), s.max_entries);
        CPPUNIT_ASSERT_EQUAL(uint64_t(1 << 20), s.pool_bytes);
        CPPUNIT_ASSERT_EQUAL(s.data_bytes, s.free_bytes);
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s.clients);

        Val a(1, 1, 100), b(2, 1, 200);
        uint64_t written = 0;
        TENSO_CHECK_OK(tenso_cache_put(&written, c.get(), "a", 1, a.value.get(), nullptr, 0));
        tenso_buffer buf = TENSO_BUFFER_INIT;
        TENSO_CHECK_OK(tenso_value_dumps(&buf, a.value.get(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint64_t(buf.size), written);
        tenso_buffer_dispose(&buf);
        put(c.get(), "b", b);
        CPPUNIT_ASSERT(contains(c.get(), "a") && contains(c.get(), "b") && !contains(c.get(), "c"));
        ViewPtr va = get(c.get(), "a");
        CPPUNIT_ASSERT_EQUAL(std::string(), verify(va.get(), 1));
        CPPUNIT_ASSERT_EQUAL(0, std::memcmp(tenso_view_data(va.get()), a.data.data(), a.data.size() * 4));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), reinterpret_cast<uintptr_t>(tenso_view_data(va.get())) % 64);
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, get_status(c.get(), "c"));

        tenso_cache_entry_info info;
        TENSO_CHECK_OK(tenso_cache_info(&info, c.get(), "a", 1));
        CPPUNIT_ASSERT_EQUAL(uint32_t(1), info.pins);  // va
        CPPUNIT_ASSERT_EQUAL(uint64_t(written), info.packet.packet_size);
        CPPUNIT_ASSERT_EQUAL(uint64_t(103), info.packet.shape[0]);
        CPPUNIT_ASSERT_EQUAL(uint64_t((written + 63) / 64 * 64), info.alloc_bytes);
        CPPUNIT_ASSERT(info.ttl_seconds == 0 && info.age_seconds >= 0 && info.age_seconds < 10);
        va.reset();
        TENSO_CHECK_OK(tenso_cache_info(&info, c.get(), "a", 1));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), info.pins);
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, tenso_cache_info(&info, c.get(), "zz", 2));

        // keys: MRU first (a was read after b was put).
        std::vector<std::string> want{"a", "b"};
        CPPUNIT_ASSERT(keys(c.get()) == want);
        TENSO_CHECK_STATUS(TENSO_E_USER, tenso_cache_keys(
                                             c.get(), [](const char *, size_t, void *) { return 1; }, nullptr));

        s = stats(c.get());
        CPPUNIT_ASSERT_EQUAL(uint64_t(2), s.entries);
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s.hits);
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s.misses);
        CPPUNIT_ASSERT_EQUAL(s.data_bytes, s.used_bytes + s.free_bytes);

        TENSO_CHECK_OK(tenso_cache_delete(c.get(), "a", 1));
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, tenso_cache_delete(c.get(), "a", 1));
        CPPUNIT_ASSERT(!contains(c.get(), "a"));
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
        TENSO_CHECK_OK(tenso_cache_clear(c.get()));
        s = stats(c.get());
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), s.entries);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), s.used_bytes);
        CPPUNIT_ASSERT(keys(c.get()).empty());
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
    }

    void testBadArguments() {
        Unlink u{pool_name("args")};
        CachePtr c = create(u.name, options(1 << 20));
        Val a(1, 1, 4);
        std::string long_key(129, 'k'), max_key(128, 'k');
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT,
                           tenso_cache_put(nullptr, c.get(), "", 0, a.value.get(), nullptr, 0));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_cache_put(nullptr, c.get(), long_key.data(), long_key.size(),
                                                                     a.value.get(), nullptr, 0));
        put(c.get(), max_key, a);
        CPPUNIT_ASSERT(contains(c.get(), max_key));
        TENSO_CHECK_STATUS(TENSO_E_BAD_UTF8,
                           tenso_cache_put(nullptr, c.get(), "\xff\xfe", 2, a.value.get(), nullptr, 0));
        TENSO_CHECK_STATUS(TENSO_E_BAD_UTF8, get_status(c.get(), "\xc0\x80"));
        put(c.get(), "\xce\xbb", a);  // "λ"
        CPPUNIT_ASSERT(contains(c.get(), "\xce\xbb"));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT,
                           tenso_cache_put(nullptr, c.get(), "k", 1, a.value.get(), nullptr, -1));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT,
                           tenso_cache_put(nullptr, c.get(), "k", 1, a.value.get(), nullptr, 0.0 / 0.0));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_cache_put(nullptr, c.get(), "k", 1, nullptr, nullptr, 0));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_cache_stats_get(nullptr, c.get()));
        tenso_cache_options o = options(1 << 20);
        o.version = 99;
        tenso_cache *raw = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_cache_create(&raw, (u.name + "x").c_str(), &o));
        // Too small for the tables and one packet.
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT,
                           tenso_cache_create(&raw, (u.name + "y").c_str(), &(o = options(8192))));
        // A packet larger than the whole data region.
        Val huge(2, 1, 300000);
        TENSO_CHECK_STATUS(TENSO_E_FULL, tenso_cache_put(nullptr, c.get(), "h", 1, huge.value.get(), nullptr, 0));
        tenso_cache_close(nullptr);
        TENSO_CHECK_OK(tenso_cache_options_init(&o, TENSO_CACHE_OPTIONS_VERSION));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), o.size);
    }

    void testCreateOpenUnlink() {
        Unlink u{pool_name("open")};
        tenso_cache *raw = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, tenso_cache_open(&raw, u.name.c_str(), nullptr));
        CachePtr c = create(u.name, options(1 << 20));
        TENSO_CHECK_STATUS(TENSO_E_EXISTS, tenso_cache_create(&raw, u.name.c_str(), nullptr));
        Val a(1, 1, 10);
        put(c.get(), "a", a);
        CachePtr d = open(u.name);  // a second handle sees the same entries
        CPPUNIT_ASSERT(contains(d.get(), "a"));
        CPPUNIT_ASSERT_EQUAL(uint64_t(2), stats(d.get()).clients);
        d.reset();
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), stats(c.get()).clients);
        // REPLACE: a fresh, empty pool under the same name; the old handle keeps the old pool.
        tenso_cache_options o = options(1 << 20, 0, TENSO_SHM_REPLACE);
        CachePtr e = create(u.name, o);
        CPPUNIT_ASSERT(!contains(e.get(), "a"));
        CPPUNIT_ASSERT(contains(c.get(), "a"));
        TENSO_CHECK_OK(tenso_cache_unlink(u.name.c_str()));
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, tenso_cache_unlink(u.name.c_str()));
        put(e.get(), "b", a);  // handles keep working after unlink
        CPPUNIT_ASSERT(contains(e.get(), "b"));
    }

    // No assertion races the clock: "present" is asserted of entries whose TTL (an hour) no
    // run outlasts, "expired" after sleeping four times a short TTL, or after age() stepped an
    // entry's clock past its TTL (the only way to expire an entry that was pinned first).
    void testTtl() {
        Unlink u{pool_name("ttl")};
        CachePtr c = create(u.name, options(1 << 20));
        Val a(1, 1, 10);
        put(c.get(), "short", a, 0.05);
        put(c.get(), "long", a, 3600.5);
        put(c.get(), "never", a);
        tenso_cache_entry_info info;
        TENSO_CHECK_OK(tenso_cache_info(&info, c.get(), "long", 4));
        CPPUNIT_ASSERT_EQUAL(3600.5, info.ttl_seconds);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        CPPUNIT_ASSERT(!contains(c.get(), "short"));
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, get_status(c.get(), "short"));
        CPPUNIT_ASSERT(contains(c.get(), "long") && contains(c.get(), "never"));
        tenso_cache_stats s = stats(c.get());
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s.expirations);  // "short" was there, and expired
        CPPUNIT_ASSERT_EQUAL(uint64_t(2), s.entries);
        // The clock step alone expires an entry: an hour-long TTL, aged two hours.
        put(c.get(), "aged", a, 3600);
        CPPUNIT_ASSERT(contains(c.get(), "aged"));
        age(u.name, "aged", 7200);
        CPPUNIT_ASSERT(!contains(c.get(), "aged"));
        CPPUNIT_ASSERT_EQUAL(uint64_t(2), stats(c.get()).expirations);
        // A pinned entry is not expired under its view.
        put(c.get(), "pinned", a, 3600);
        ViewPtr v = get(c.get(), "pinned");
        age(u.name, "pinned", 7200);
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, get_status(c.get(), "pinned"));
        CPPUNIT_ASSERT_EQUAL(std::string(), verify(v.get(), 1));
        v.reset();
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, get_status(c.get(), "pinned"));
        CPPUNIT_ASSERT_EQUAL(uint64_t(3), stats(c.get()).expirations);
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
        // stats counts what keys lists: expired entries are gone from both without any get,
        // a pinned one included (it stays, uncounted, until its view goes).
        const uint64_t before = stats(c.get()).entries;
        put(c.get(), "soon", a, 3600);
        put(c.get(), "soon-pinned", a, 3600);
        ViewPtr held = get(c.get(), "soon-pinned");
        CPPUNIT_ASSERT_EQUAL(before + 2, stats(c.get()).entries);
        age(u.name, "soon", 7200);
        age(u.name, "soon-pinned", 7200);
        CPPUNIT_ASSERT_EQUAL(before, stats(c.get()).entries);
        CPPUNIT_ASSERT_EQUAL(size_t(before), keys(c.get()).size());
        held.reset();
        CPPUNIT_ASSERT_EQUAL(before, stats(c.get()).entries);
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
    }

    void testLruEviction() {
        Unlink u{pool_name("lru")};
        // Data region: 256 KiB - tables; each value ~64 KiB, so 3 fit.
        CachePtr c = create(u.name, options(256 << 10, 16));
        const uint64_t data = stats(c.get()).data_bytes;
        const uint32_t words = uint32_t(data / 3 / 4 - 64);
        std::vector<std::unique_ptr<Val>> vals;
        for (uint32_t k = 0; k < 6; ++k) vals.emplace_back(new Val(k, 1, words));
        put(c.get(), key_of(0), *vals[0]);
        put(c.get(), key_of(1), *vals[1]);
        put(c.get(), key_of(2), *vals[2]);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), stats(c.get()).evictions);
        get(c.get(), key_of(0));            // 0 becomes most recent: 1 is now the LRU
        put(c.get(), key_of(3), *vals[3]);  // evicts 1
        CPPUNIT_ASSERT(!contains(c.get(), key_of(1)));
        std::vector<std::string> want{key_of(3), key_of(0), key_of(2)};
        CPPUNIT_ASSERT(keys(c.get()) == want);
        put(c.get(), key_of(4), *vals[4]);  // evicts 2
        want = {key_of(4), key_of(3), key_of(0)};
        CPPUNIT_ASSERT(keys(c.get()) == want);
        CPPUNIT_ASSERT_EQUAL(uint64_t(2), stats(c.get()).evictions);
        for (uint32_t k : {0u, 3u, 4u}) CPPUNIT_ASSERT_EQUAL(std::string(), verify(get(c.get(), key_of(k)).get(), k));
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
        // Entry slots run out before bytes do: small values into 16 slots evict by LRU too.
        Val small(9, 1, 4);
        for (uint32_t k = 100; k < 140; ++k) put(c.get(), key_of(k), small);
        CPPUNIT_ASSERT_EQUAL(uint64_t(16), stats(c.get()).entries);
        CPPUNIT_ASSERT(contains(c.get(), key_of(139)) && !contains(c.get(), key_of(100)));
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
    }

    // docs/cache-layout.md, "Spare pins": a freed view's pin is parked in its client's row and
    // the next get of the key takes it back without the lock. Other handles still rewrite,
    // replace, delete and evict the key as if no pin were left; views served that way keep
    // their bytes; hits and LRU order count the quiet hits.
    void testSparePins() {
        Unlink u{pool_name("spare")};
        CachePtr c = create(u.name, options(1 << 20, 2));  // 2 slots: a third key evicts
        CachePtr d = open(u.name);
        RawPool raw(u.name);
        const size_t spare = client_field(raw, 0, kClientSpareOff), quiet = client_field(raw, 0, kClientQuietHitsOff);
        Val a1(1, 1, 100), a2(1, 2, 100), a3(1, 3, 100), b(2, 1, 100), x(3, 1, 100);
        put(c.get(), "a", a1);
        put(c.get(), "b", b);
        const uint64_t hits = stats(d.get()).hits;
        for (int i = 0; i < 5; ++i) CPPUNIT_ASSERT_EQUAL(std::string(), verify(get(c.get(), "a").get(), 1));
        CPPUNIT_ASSERT(raw.get<uint64_t>(spare) != 0);
        CPPUNIT_ASSERT_EQUAL_MESSAGE("gets after the first are quiet", uint64_t(4), raw.get<uint64_t>(quiet));
        tenso_cache_entry_info info;
        TENSO_CHECK_OK(tenso_cache_info(&info, d.get(), "a", 1));
        CPPUNIT_ASSERT_EQUAL_MESSAGE("info counts views, not spares", uint32_t(0), info.pins);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), raw.get<uint64_t>(spare));
        tenso_cache_stats s = stats(d.get());
        CPPUNIT_ASSERT_EQUAL(hits + 5, s.hits);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), s.pinned_entries);

        // Parked, then replaced by another handle: rewritten in place, and read back new.
        get(c.get(), "a");
        get(c.get(), "a");
        TENSO_CHECK_OK(tenso_cache_info(&info, c.get(), "a", 1));
        const uint64_t alloc = info.alloc_bytes, used = stats(d.get()).used_bytes;
        get(c.get(), "a");  // parked again (stats took it)
        put(d.get(), "a", a2);
        CPPUNIT_ASSERT_EQUAL_MESSAGE("in place", used, stats(d.get()).used_bytes);
        uint32_t version = 0;
        CPPUNIT_ASSERT_EQUAL(std::string(), verify(get(c.get(), "a").get(), 1, &version));
        CPPUNIT_ASSERT_EQUAL(uint32_t(2), version);

        // Deleted by another handle while parked: its space is free at once.
        get(c.get(), "b");
        TENSO_CHECK_OK(tenso_cache_delete(d.get(), "b", 1));
        CPPUNIT_ASSERT_EQUAL(used - alloc, stats(d.get()).used_bytes);
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, get_status(c.get(), "b"));

        // A view served quietly, held while another handle replaces its key: it keeps its
        // bytes; freed, its pin parks on the orphan, which the next get releases.
        get(c.get(), "a");
        ViewPtr held = get(c.get(), "a");
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), raw.get<uint64_t>(spare));  // taken by `held`
        put(d.get(), "a", a3);
        s = stats(d.get());
        CPPUNIT_ASSERT_EQUAL_MESSAGE("a new copy beside the held one", used, s.used_bytes);
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s.pinned_entries);
        CPPUNIT_ASSERT_EQUAL(std::string(), verify(held.get(), 1, &version));
        CPPUNIT_ASSERT_EQUAL(uint32_t(2), version);
        CPPUNIT_ASSERT_EQUAL(0, std::memcmp(tenso_view_data(held.get()), a2.data.data(), a2.data.size() * 4));
        held.reset();
        CPPUNIT_ASSERT(raw.get<uint64_t>(spare) != 0);
        CPPUNIT_ASSERT_EQUAL(std::string(), verify(get(c.get(), "a").get(), 1, &version));
        CPPUNIT_ASSERT_EQUAL(uint32_t(3), version);
        s = stats(d.get());
        CPPUNIT_ASSERT_EQUAL_MESSAGE("the orphan went with the spare", used - alloc, s.used_bytes);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), s.pinned_entries);
        TENSO_CHECK_OK(tenso_cache_check(d.get()));

        // LRU: a key read only quietly since another was read is still the more recent one.
        put(c.get(), "b", b);  // b, a
        get(c.get(), "a");     // a, b; c's spare on a
        get(c.get(), "a");     // quiet
        get(d.get(), "b");     // b, a; d's spare on b
        get(c.get(), "a");     // quiet: a is the most recent in fact
        put(d.get(), "x", x);  // no free slot: the spares settle, b goes
        std::vector<std::string> want{"x", "a"};
        CPPUNIT_ASSERT(keys(d.get()) == want);
        TENSO_CHECK_OK(tenso_cache_check(d.get()));

        // Detaching adds the quiet hits and drops the spare.
        get(c.get(), "a");
        get(c.get(), "a");
        get(c.get(), "a");
        const uint64_t before = raw.get<uint64_t>(quiet), counted = stats(d.get()).hits;
        get(c.get(), "a");  // stats took the spare: this one locks, and parks again
        get(c.get(), "a");
        CPPUNIT_ASSERT(before >= 2);
        c.reset();
        s = stats(d.get());
        CPPUNIT_ASSERT_EQUAL(counted + 2, s.hits);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), s.pinned_entries);
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s.clients);
        TENSO_CHECK_OK(tenso_cache_check(d.get()));
    }

    // Garbage in the spare fields (any process can write them) costs no crash, no over-read
    // and no pin of anyone else: a slot out of range, one with a stale generation, one naming
    // another entry, one naming an entry another handle pins, and garbage in another row.
    void testHostileSparePins() {
        Unlink u{pool_name("spare-hostile")};
        CachePtr c = create(u.name, options(1 << 20, 8));
        CachePtr d = open(u.name);
        RawPool raw(u.name);
        const size_t mine = client_field(raw, 0, kClientSpareOff), other = client_field(raw, 1, kClientSpareOff);
        Val a(1, 1, 100), b(2, 1, 100);
        put(c.get(), "a", a);
        put(c.get(), "b", b);
        uint64_t gen_a = 0, gen_b = 0;
        const uint32_t ea = live_entry(raw, "a", &gen_a), eb = live_entry(raw, "b", &gen_b);
        ViewPtr held_b = get(d.get(), "b");  // d pins b
        const uint64_t forged[] = {
            ~uint64_t(0),                          // entry index out of range
            ea | (gen_a + 1) << 26,                // a, a generation it does not have
            eb | uint64_t(1) << 25 | gen_b << 26,  // b, which c does not pin (d does)
            uint64_t(9) | uint64_t(1) << 25,       // past max entries (8)
        };
        for (uint64_t g : forged) {
            raw.set<uint64_t>(mine, g);
            CPPUNIT_ASSERT_EQUAL(std::string(), verify(get(c.get(), "a").get(), 1));
            tenso_cache_entry_info info;
            TENSO_CHECK_OK(tenso_cache_info(&info, c.get(), "b", 1));
            CPPUNIT_ASSERT_EQUAL_MESSAGE("d's pin on b is d's", uint32_t(1), info.pins);
            TENSO_CHECK_OK(tenso_cache_info(&info, c.get(), "a", 1));
            CPPUNIT_ASSERT_EQUAL(uint32_t(0), info.pins);
            TENSO_CHECK_OK(tenso_cache_check(c.get()));
        }
        // In another client's row: settled by whoever takes spares back, harmlessly.
        for (uint64_t g : forged) {
            raw.set<uint64_t>(other, g);
            raw.set<uint64_t>(client_field(raw, 1, kClientQuietHitsOff), 12345);
            stats(c.get());
            TENSO_CHECK_OK(tenso_cache_check(c.get()));
        }
        held_b.reset();
        tenso_cache_stats s = stats(c.get());
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), s.pinned_entries);
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
    }

    void testInPlace() {
        Unlink u{pool_name("inplace")};
        CachePtr c = create(u.name, options(1 << 20));
        Val v1(1, 1, 1000), v2(1, 2, 900), v3(1, 3, 5000);
        put(c.get(), "k", v1);
        const void *p1 = tenso_view_data(get(c.get(), "k").get());
        put(c.get(), "k", v2);  // smaller, unpinned: same place
        ViewPtr g2 = get(c.get(), "k");
        uint32_t version = 0;
        CPPUNIT_ASSERT_EQUAL(std::string(), verify(g2.get(), 1, &version));
        CPPUNIT_ASSERT_EQUAL(uint32_t(2), version);
        CPPUNIT_ASSERT(p1 == tenso_view_data(g2.get()));
        g2.reset();
        put(c.get(), "k", v3);  // larger: moves
        ViewPtr g3 = get(c.get(), "k");
        CPPUNIT_ASSERT_EQUAL(std::string(), verify(g3.get(), 1, &version));
        CPPUNIT_ASSERT_EQUAL(uint32_t(3), version);
        CPPUNIT_ASSERT(p1 != tenso_view_data(g3.get()));
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), stats(c.get()).entries);
        tenso_cache_entry_info info;
        TENSO_CHECK_OK(tenso_cache_info(&info, c.get(), "k", 1));
        CPPUNIT_ASSERT_EQUAL(info.alloc_bytes, stats(c.get()).used_bytes);  // the old space went back
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
    }

    void testPinnedSurvives() {
        Unlink u{pool_name("pins")};
        CachePtr c = create(u.name, options(512 << 10, 32));
        Val v1(7, 1, 30000), v2(7, 2, 30000);
        put(c.get(), "k", v1);
        ViewPtr held = get(c.get(), "k");
        const uint64_t sum = XXH3_64bits(tenso_view_data(held.get()), tenso_view_nbytes(held.get()));
        auto unchanged = [&] {
            CPPUNIT_ASSERT_EQUAL(sum, XXH3_64bits(tenso_view_data(held.get()), tenso_view_nbytes(held.get())));
            CPPUNIT_ASSERT_EQUAL(std::string(), verify(held.get(), 7));
        };
        // Eviction pressure: many puts that need all the space; the pinned entry stays.
        std::vector<std::unique_ptr<Val>> filler;
        for (uint32_t k = 0; k < 4; ++k) filler.emplace_back(new Val(100 + k, 1, 30000));
        for (int round = 0; round < 5; ++round)
            for (uint32_t k = 0; k < 4; ++k) put(c.get(), key_of(100 + k), *filler[k]);
        CPPUNIT_ASSERT(stats(c.get()).evictions > 0);
        CPPUNIT_ASSERT(contains(c.get(), "k"));
        unchanged();
        // Replace under the pin: the new value is visible, the old bytes stay for the view.
        put(c.get(), "k", v2);
        uint32_t version = 0;
        CPPUNIT_ASSERT_EQUAL(std::string(), verify(get(c.get(), "k").get(), 7, &version));
        CPPUNIT_ASSERT_EQUAL(uint32_t(2), version);
        unchanged();
        // Delete: hidden at once, bytes kept; more pressure does not reuse them.
        ViewPtr held2 = get(c.get(), "k");
        TENSO_CHECK_OK(tenso_cache_delete(c.get(), "k", 1));
        CPPUNIT_ASSERT(!contains(c.get(), "k"));
        for (int round = 0; round < 3; ++round)
            for (uint32_t k = 0; k < 4; ++k) put(c.get(), key_of(100 + k), *filler[k]);
        unchanged();
        CPPUNIT_ASSERT_EQUAL(std::string(), verify(held2.get(), 7, &version));
        CPPUNIT_ASSERT_EQUAL(uint32_t(2), version);
        tenso_cache_stats s = stats(c.get());
        CPPUNIT_ASSERT_EQUAL(uint64_t(2), s.pinned_entries);  // two orphans
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
        const uint64_t used = s.used_bytes;
        held.reset();
        held2.reset();
        s = stats(c.get());
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), s.pinned_entries);
        CPPUNIT_ASSERT(s.used_bytes < used);  // the orphans' space came back
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
        // Views outlive the handle too.
        ViewPtr late = get(c.get(), key_of(103));
        c.reset();
        CPPUNIT_ASSERT_EQUAL(std::string(), verify(late.get(), 103));
    }

    // Derived tables are sized from the pool: every size upstream accepts (5120 bytes up) and
    // down to 4800 works, and holds what shm.h says.
    void testTinyPools() {
        struct Case {
            uint64_t size, entries, clients, data;
        } cases[] = {
            // data = size - (4096 header + tables), the tables laid out as docs/cache-layout.md says.
            {4800, 1, 2, 128},
            {5120, 1, 2, 448},
            {16384, 4, 4, 16384 - 6080},
            {65536, 16, 16, 0},  // data checked against the header below
        };
        for (const Case &k : cases) {
            Unlink u{pool_name(("tiny" + std::to_string(k.size)).c_str())};
            tenso_cache_options o = TENSO_CACHE_OPTIONS_INIT;  // every count derived
            o.size = k.size;
            CachePtr c = create(u.name, o);
            tenso_cache_stats s = stats(c.get());
            CPPUNIT_ASSERT_EQUAL(k.size, s.pool_bytes);
            CPPUNIT_ASSERT_EQUAL(k.entries, s.max_entries);
            if (k.data) CPPUNIT_ASSERT_EQUAL(k.data, s.data_bytes);
            {
                RawPool raw(u.name);
                CPPUNIT_ASSERT_EQUAL(uint64_t(0), raw.get<uint64_t>(kDataOff) % 64);
                CPPUNIT_ASSERT_EQUAL(k.size, raw.get<uint64_t>(kDataOff) + raw.get<uint64_t>(kDataSizeOff));
                CPPUNIT_ASSERT_EQUAL(uint32_t(k.clients), raw.get<uint32_t>(32));  // max clients
            }
            // A 16-uint32 tensor (a 128-byte packet) fits the smallest pool; it comes back intact.
            Val a(1, 1, 13), b(2, 1, 13);
            put(c.get(), "a", a);
            CPPUNIT_ASSERT_EQUAL(std::string(), verify(get(c.get(), "a").get(), 1));
            // Every client row can attach (another process would take one); then the pool is full.
            std::vector<CachePtr> others;
            for (uint64_t i = 1; i < k.clients; ++i) others.push_back(open(u.name));
            CPPUNIT_ASSERT_EQUAL(std::string(), verify(get(others.back().get(), "a").get(), 1));
            tenso_cache *extra = nullptr;
            TENSO_CHECK_STATUS(TENSO_E_FULL, tenso_cache_open(&extra, u.name.c_str(), nullptr));
            // With one entry slot, a second key evicts the first (LRU), as upstream's one slot does.
            put(c.get(), "b", b);
            CPPUNIT_ASSERT_EQUAL(k.entries > 1, contains(c.get(), "a"));
            CPPUNIT_ASSERT_EQUAL(std::string(), verify(get(c.get(), "b").get(), 2));
            TENSO_CHECK_OK(tenso_cache_check(c.get()));
        }
        // One byte less than the smallest: refused, and the message names the smallest size.
        Unlink u{pool_name("tiny-refused")};
        tenso_cache_options o = TENSO_CACHE_OPTIONS_INIT;
        o.size = 4799;
        tenso_cache *c = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_cache_create(&c, u.name.c_str(), &o));
        CPPUNIT_ASSERT(std::string(tenso_last_error()).find("the smallest pool is 4800 bytes") != std::string::npos);
        // A packet larger than a tiny pool's data region: FULL, nothing stored.
        o.size = 5120;
        CachePtr small = create(u.name, o);
        Val big(3, 1, 200);
        TENSO_CHECK_STATUS(TENSO_E_FULL, put_status(small.get(), "big", big));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), stats(small.get()).entries);
    }

    // From 1 MiB up the derived counts are the fixed defaults of 1.1 to 1.3 and the data region
    // starts on a page.
    void testDerivedTablesFromOneMiB() {
        for (uint64_t size : {uint64_t(1) << 20, uint64_t(64) << 20}) {
            Unlink u{pool_name(("derived" + std::to_string(size)).c_str())};
            tenso_cache_options o = TENSO_CACHE_OPTIONS_INIT;
            o.size = size;
            CachePtr c = create(u.name, o);
            CPPUNIT_ASSERT_EQUAL(std::max<uint64_t>(size / 16384, 64), stats(c.get()).max_entries);
            RawPool raw(u.name);
            CPPUNIT_ASSERT_EQUAL(uint32_t(256), raw.get<uint32_t>(32));    // max clients
            CPPUNIT_ASSERT_EQUAL(uint32_t(16384), raw.get<uint32_t>(56));  // max pins
            CPPUNIT_ASSERT_EQUAL(uint64_t(0), raw.get<uint64_t>(kDataOff) % 4096);
        }
    }

    void testFullWhenPinned() {
        Unlink u{pool_name("full")};
        CachePtr c = create(u.name, options(256 << 10, 8));
        const uint32_t words = uint32_t(stats(c.get()).data_bytes / 4 / 4 - 64);
        std::vector<std::unique_ptr<Val>> vals;
        std::vector<ViewPtr> views;
        for (uint32_t k = 0; k < 4; ++k) {
            vals.emplace_back(new Val(k, 1, words));
            put(c.get(), key_of(k), *vals[k]);
            views.push_back(get(c.get(), key_of(k)));
        }
        Val more(9, 1, words);
        tenso_status st = tenso_cache_put(nullptr, c.get(), "more", 4, more.value.get(), nullptr, 0);
        TENSO_CHECK_STATUS(TENSO_E_FULL, st);
        CPPUNIT_ASSERT(std::string(tenso_last_error()).find("pinned") != std::string::npos);
        for (uint32_t k = 0; k < 4; ++k) CPPUNIT_ASSERT(contains(c.get(), key_of(k)));  // nothing lost
        views.pop_back();
        put(c.get(), "more", more);  // key 3 is unpinned now and evicted
        CPPUNIT_ASSERT(!contains(c.get(), key_of(3)));
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
        // Slots: 8 slots all pinned -> FULL for a 9th key.
        views.clear();
        TENSO_CHECK_OK(tenso_cache_clear(c.get()));
        Val tiny(1, 1, 1);
        for (uint32_t k = 0; k < 8; ++k) {
            put(c.get(), key_of(k), tiny);
            views.push_back(get(c.get(), key_of(k)));
        }
        TENSO_CHECK_STATUS(TENSO_E_FULL, tenso_cache_put(nullptr, c.get(), "x", 1, tiny.value.get(), nullptr, 0));
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
    }

    // The bytes of a new, empty 256 KiB pool (its segment unlinked again), checked against the
    // documented header fields.
    static std::vector<uint8_t> fresh_pool_image() {
        Unlink src{pool_name("image")};
        CachePtr c = create(src.name, options(256 << 10, 16));
        RawPool r(src.name);
        CPPUNIT_ASSERT_EQUAL(0, std::memcmp(r.p, "TNSOCACH", 8));
        CPPUNIT_ASSERT_EQUAL(uint64_t(r.len), r.get<uint64_t>(kPoolSizeOff));
        CPPUNIT_ASSERT_EQUAL(uint64_t(XXH3_64bits(r.p, kChecksumOff)), r.get<uint64_t>(kChecksumOff));
        return std::vector<uint8_t>(r.p, r.p + r.len);
    }

    void testHostileHeaders() {
        const std::vector<uint8_t> bytes = fresh_pool_image();
        Unlink u{pool_name("hostile")};
        struct Case {
            const char *what;
            void (*mutate)(RawPool &);
            size_t truncate_to;  // 0: keep the size
        } cases[] = {
            {"bad magic", [](RawPool &r) { r.p[0] = 'X'; }, 0},
            {"layout version",
             [](RawPool &r) {
                 r.set<uint32_t>(kVersionOff, 2);
                 r.reseal();
             },
             0},
            {"checksum", [](RawPool &r) { r.set<uint32_t>(kMaxEntriesOff, 17); }, 0},
            {"data region outside the pool",
             [](RawPool &r) {
                 r.set<uint64_t>(kDataSizeOff, r.len);
                 r.reseal();
             },
             0},
            {"data offset misaligned",
             [](RawPool &r) {
                 r.set<uint64_t>(kDataOff, r.get<uint64_t>(kDataOff) + 8);
                 r.reseal();
             },
             0},
            {"entry table overlapping",
             [](RawPool &r) {
                 r.set<uint64_t>(kEntriesOff, 4096);
                 r.reseal();
             },
             0},
            {"entry count past its table",
             [](RawPool &r) {
                 r.set<uint32_t>(kMaxEntriesOff, 1u << 20);
                 r.reseal();
             },
             0},
            {"pool size differs",
             [](RawPool &r) {
                 r.set<uint64_t>(kPoolSizeOff, r.len * 2);
                 r.reseal();
             },
             0},
            {"truncated segment", [](RawPool &) {}, 128 << 10},
            {"header cut short", [](RawPool &) {}, 100},
        };
        for (const Case &k : cases) {
            int fd = ::shm_open(("/" + u.name).c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
            CPPUNIT_ASSERT(fd >= 0);
            CPPUNIT_ASSERT(::write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size()));
            ::close(fd);
            {
                RawPool r(u.name);
                k.mutate(r);
            }
            if (k.truncate_to) {
                fd = ::shm_open(("/" + u.name).c_str(), O_RDWR, 0);
                CPPUNIT_ASSERT(::ftruncate(fd, off_t(k.truncate_to)) == 0);
                ::close(fd);
            }
            tenso_cache *raw = nullptr;
            tenso_status st = tenso_cache_open(&raw, u.name.c_str(), nullptr);
            CPPUNIT_ASSERT_MESSAGE(std::string(k.what) + ": " + tenso_describe(st), st == TENSO_E_CORRUPT && !raw);
            tenso_cache_close(raw);
        }
        // The unmodified copy opens (the test's mutations are what is refused).
        int fd = ::shm_open(("/" + u.name).c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
        CPPUNIT_ASSERT(::write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size()));
        ::close(fd);
        CachePtr copy = open(u.name);
        TENSO_CHECK_OK(tenso_cache_check(copy.get()));
    }

    // An open that lands while another process is still creating the pool (the segment empty,
    // then sized with its magic not yet written) waits for it instead of calling it corrupt;
    // a pool whose creator never finishes is refused once the lock timeout has passed.
    void testOpenWhileCreating() {
        const std::vector<uint8_t> bytes = fresh_pool_image();
        Unlink u{pool_name("creating")};
        const std::string path = "/" + u.name;
        int fd = ::shm_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);  // empty, as just created
        CPPUNIT_ASSERT(fd >= 0);
        bool wrote = false;  // (no assertion inside the thread: it would throw there)
        std::thread creator([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
            wrote = ::ftruncate(fd, off_t(bytes.size())) == 0;  // sized: zero magic
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
            wrote = wrote && ::pwrite(fd, bytes.data() + 8, bytes.size() - 8, 8) == ssize_t(bytes.size() - 8);
            wrote = wrote && ::pwrite(fd, bytes.data(), 8, 0) == 8;  // the magic last
        });
        tenso_cache *raw = nullptr;
        const tenso_status st = tenso_cache_open(&raw, u.name.c_str(), nullptr);
        creator.join();
        CachePtr opened(raw);
        CPPUNIT_ASSERT(wrote);
        TENSO_CHECK_OK(st);
        TENSO_CHECK_OK(tenso_cache_check(opened.get()));
        // Never finished: the magic stays zero, refused after the (short) timeout.
        CPPUNIT_ASSERT(::pwrite(fd, "\0\0\0\0\0\0\0\0", 8, 0) == 8);
        ::close(fd);
        tenso_cache_options o = TENSO_CACHE_OPTIONS_INIT;
        o.lock_timeout_ms = 50;
        raw = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_CORRUPT, tenso_cache_open(&raw, u.name.c_str(), &o));
        CPPUNIT_ASSERT(!raw);
    }

    void testCorruptEntry() {
        Unlink u{pool_name("corrupt")};
        CachePtr c = create(u.name, options(256 << 10, 16));
        Val a(1, 1, 100);
        put(c.get(), "a", a);
        RawPool r(u.name);
        const size_t entries = size_t(r.get<uint64_t>(kEntriesOff));
        // Slot 0 holds "a". Point it outside the data region: get and check refuse it.
        const uint64_t off = r.get<uint64_t>(entries + kEntryDataOff);
        r.set<uint64_t>(entries + kEntryDataOff, uint64_t(1) << 40);
        TENSO_CHECK_STATUS(TENSO_E_CORRUPT, get_status(c.get(), "a"));
        TENSO_CHECK_STATUS(TENSO_E_CORRUPT, tenso_cache_check(c.get()));
        // Nor is it written through (an in-place put), inspected or freed (a delete).
        TENSO_CHECK_STATUS(TENSO_E_CORRUPT, put_status(c.get(), "a", a));
        tenso_cache_entry_info info{};
        TENSO_CHECK_STATUS(TENSO_E_CORRUPT, tenso_cache_info(&info, c.get(), "a", 1));
        TENSO_CHECK_STATUS(TENSO_E_CORRUPT, tenso_cache_delete(c.get(), "a", 1));
        r.set<uint64_t>(entries + kEntryDataOff, off);
        TENSO_CHECK_OK(tenso_cache_check(c.get()));  // the refusals changed nothing
        // An allocation too: a free extent pointing outside the region is refused, not used.
        const size_t extents = size_t(r.get<uint64_t>(kExtentsOff));
        const uint64_t xoff = r.get<uint64_t>(extents);
        r.set<uint64_t>(extents, uint64_t(1) << 40);
        TENSO_CHECK_STATUS(TENSO_E_CORRUPT, put_status(c.get(), "b", a));
        r.set<uint64_t>(extents, xoff);
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
        // Back in range but with a packet length past the packet: decode says TRUNCATED or the
        // check names the entry; scribbled packet bytes give a decode error, not a crash.
        r.set<uint64_t>(entries + kEntryDataOff, off);
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
        r.set<uint64_t>(entries + kEntryPacketLen, r.get<uint64_t>(entries + kEntryPacketLen) - 8);
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, get_status(c.get(), "a"));
        TENSO_CHECK_STATUS(TENSO_E_CORRUPT, tenso_cache_check(c.get()));
        r.set<uint64_t>(entries + kEntryPacketLen, r.get<uint64_t>(entries + kEntryPacketLen) + 8);
        const size_t data = size_t(r.get<uint64_t>(kDataOff));
        r.p[data + off] = 'X';  // the packet's magic
        TENSO_CHECK_STATUS(TENSO_E_BAD_MAGIC, get_status(c.get(), "a"));
        TENSO_CHECK_STATUS(TENSO_E_CORRUPT, tenso_cache_check(c.get()));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), stats(c.get()).pinned_entries);  // failed gets left no pin
    }

    void testDeadProcessPins() {
        Unlink u{pool_name("dead")};
        tenso_cache_options o = options(256 << 10, 16);
        o.max_clients = 2;
        CachePtr c = create(u.name, o);
        Val a(1, 1, 1000);
        put(c.get(), "a", a);
        // A child pins "a" and dies without freeing its view.
        pid_t pid = ::fork();
        if (pid == 0) {
            tenso_cache *cc = nullptr;
            tenso_view *v = nullptr;
            if (tenso_cache_open(&cc, u.name.c_str(), nullptr) != TENSO_OK) ::_exit(2);
            if (tenso_cache_get(&v, cc, "a", 1, nullptr) != TENSO_OK) ::_exit(3);
            ::raise(SIGKILL);
        }
        int status = 0;
        ::waitpid(pid, &status, 0);
        CPPUNIT_ASSERT(WIFSIGNALED(status));
        tenso_cache_stats s = stats(c.get());
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s.pinned_entries);
        CPPUNIT_ASSERT_EQUAL(uint64_t(2), s.clients);
        TENSO_CHECK_OK(tenso_cache_delete(c.get(), "a", 1));  // an orphan, pinned by the dead
        CPPUNIT_ASSERT(stats(c.get()).used_bytes > 0);
        // Attaching with the client table full reaps the dead client: its pin and the orphan go.
        CachePtr d = open(u.name);
        s = stats(d.get());
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), s.pinned_entries);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), s.used_bytes);
        CPPUNIT_ASSERT_EQUAL(uint64_t(2), s.clients);
        TENSO_CHECK_OK(tenso_cache_check(d.get()));
        // With both rows held by live handles a third is refused.
        tenso_cache *raw = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_FULL, tenso_cache_open(&raw, u.name.c_str(), nullptr));
        // A handle inherited through fork is refused in the child (it does not own the row).
        std::string msg = run_isolated([&] { TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, get_status(c.get(), "a")); });
        CPPUNIT_ASSERT_EQUAL(std::string(), msg);
    }

    void testCompressedAndBundle() {
        Unlink u{pool_name("kinds")};
        CachePtr c = create(u.name, options(1 << 20));
        Val a(1, 1, 5000), b(2, 1, 10);
        tenso_encode_options o = hostile::enc(TENSO_ENCODE_COMPRESS | TENSO_ENCODE_INTEGRITY);
        TENSO_CHECK_OK(tenso_cache_put(nullptr, c.get(), "z", 1, a.value.get(), &o, 0));
        ViewPtr v = get(c.get(), "z");
        CPPUNIT_ASSERT_EQUAL(std::string(), verify(v.get(), 1));
        tenso_value *raw = nullptr;
        TENSO_CHECK_OK(tenso_value_new_bundle(&raw));
        hostile::ValuePtr bundle(raw);
        TENSO_CHECK_OK(tenso_bundle_insert(bundle.get(), "a", 1, a.value.get()));
        TENSO_CHECK_OK(tenso_bundle_insert(bundle.get(), "b", 1, b.value.get()));
        TENSO_CHECK_OK(tenso_cache_put(nullptr, c.get(), "bundle", 6, bundle.get(), nullptr, 0));
        ViewPtr w = get(c.get(), "bundle");
        CPPUNIT_ASSERT_EQUAL(uint32_t(2), tenso_view_bundle_count(w.get()));
        const tenso_view *child = nullptr;
        TENSO_CHECK_OK(tenso_view_bundle_find(&child, w.get(), "b", 1));
        CPPUNIT_ASSERT_EQUAL(std::string(), verify(child, 2));
        TENSO_CHECK_OK(tenso_cache_check(c.get()));
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiCacheTest);
