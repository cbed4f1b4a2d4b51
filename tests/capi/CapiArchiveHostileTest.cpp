// CapiArchiveHostileTest - hostile multi-tensor files, each refused at open with its exact
// status: forged tenso archive indexes (the layout is edited field by field, then the hash
// table and checksums are rebuilt so the one check under test is reached), hand-written
// safetensors JSON and bintensors bincode headers; then truncation and mutation sweeps over
// all three formats, which must never crash, and a packet that disagrees with its index.
#include <cppunit/extensions/HelperMacros.h>

#include <random>
#include <string>
#include <vector>

#include "CapiArchiveUtil.hpp"

using namespace arch;
using hostile::Bytes;
using hostile::set32;
using hostile::set64;

namespace {

Bytes safetensors(const std::string &json, const Bytes &data) {
    Bytes b(8);
    set64(b, 0, json.size());
    b.insert(b.end(), json.begin(), json.end());
    b.insert(b.end(), data.begin(), data.end());
    return b;
}

}  // namespace

class CapiArchiveHostileTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiArchiveHostileTest);
    CPPUNIT_TEST(testArchiveIndex);
    CPPUNIT_TEST(testHashTableRuns);
    CPPUNIT_TEST(testPacketDisagreesWithIndex);
    CPPUNIT_TEST(testSafetensorsHeaders);
    CPPUNIT_TEST(testBintensorsHeaders);
    CPPUNIT_TEST(testTruncationSweeps);
    CPPUNIT_TEST(testMutationSweeps);
    CPPUNIT_TEST_SUITE_END();

    std::string dir_;
    Bytes good_;  // a valid archive: three tensors, one metadata pair

    std::string put(const Bytes &b, const std::string &name = "h.tenso") {
        std::string p = dir_ + "/" + name;
        hostile::spit(p, b.data(), b.size());
        return p;
    }
    tenso_status status(const Bytes &b, tenso_format f = 0, const tenso_archive_options *o = nullptr) {
        tenso_archive_options d = open_opts(0, f);
        return open_status(put(b), o ? o : &d);
    }
    void expect(tenso_status want, const Bytes &b, const char *what, tenso_format f = 0) {
        tenso_status st = status(b, f);
        CPPUNIT_ASSERT_MESSAGE(
            std::string(what) + ": got " + tenso_describe(st) + ", wanted " + tenso_status_name(want), st == want);
    }

public:
    void setUp() override {
        dir_ = hostile::make_scratch("CapiArchiveHostileTest");
        Tens a(TENSO_DTYPE_FLOAT32, {4, 4}, 1), b(TENSO_DTYPE_INT32, {16}, 2), c(TENSO_DTYPE_UINT8, {3}, 3);
        const std::string p = dir_ + "/good.tenso";
        WriterPtr w = writer(p, write_opts());
        add_tensor(w.get(), "alpha", a.t);
        add_tensor(w.get(), "beta", b.t);
        add_tensor(w.get(), "gamma", c.t);
        TENSO_CHECK_OK(tenso_archive_writer_set_metadata(w.get(), "k", 1, "v", 1));
        TENSO_CHECK_OK(tenso_archive_writer_finish(w.get()));
        good_ = hostile::slurp(p);
    }
    void tearDown() override { hostile::remove_dir(dir_); }

    void testArchiveIndex() {
        const Layout L(good_);
        CPPUNIT_ASSERT_EQUAL(TENSO_OK, status(good_));
        Bytes reforged = good_;
        reforge(reforged);
        CPPUNIT_ASSERT_MESSAGE("the test's own layout reading agrees with the writer", reforged == good_);
        auto forged = [&](auto edit, bool table = true) {
            Bytes b = good_;
            edit(b);
            reforge(b, table);
            return b;
        };
        const size_t r0 = L.record(0), r1 = L.record(1), r2 = L.record(2);
        // caps
        tenso_archive_options small = open_opts();
        small.max_index_bytes = L.isz - 1;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_LIMIT, status(good_, 0, &small));
        small = open_opts();
        small.max_tensors = 2;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_LIMIT, status(good_, 0, &small));
        // file-level damage
        expect(TENSO_E_TRUNCATED, Bytes(good_.begin(), good_.end() - 1), "one byte short");
        expect(TENSO_E_TRUNCATED, Bytes(good_.begin(), good_.begin() + 20), "cut inside the header");
        expect(TENSO_E_TRUNCATED, Bytes(), "an empty file");
        Bytes longer = good_;
        longer.push_back(0);
        expect(TENSO_E_CORRUPT, longer, "trailing byte");
        Bytes flip = good_;
        flip[30] ^= 1;
        expect(TENSO_E_CORRUPT, flip, "header checksum");
        flip = good_;
        flip[size_t(L.ioff + 60)] ^= 1;
        expect(TENSO_E_CORRUPT, flip, "index checksum");
        expect(TENSO_E_UNSUPPORTED_VERSION, forged([](Bytes &b) { b[8] = 2; }), "version 2");
        expect(TENSO_E_CORRUPT, forged([](Bytes &b) { set32(b, 16, 48); }), "alignment 48");
        expect(TENSO_E_CORRUPT, forged([](Bytes &b) { set64(b, 24, 0); }), "unfinished");
        expect(TENSO_E_CORRUPT, forged([&](Bytes &b) { set64(b, 40, L.count + 1); }, false), "count vs index size");
        expect(TENSO_E_CORRUPT, forged([&](Bytes &b) { set64(b, size_t(L.ioff + 8), L.cap * 2); }, false),
               "table size");
        Bytes garbage(4096);
        std::mt19937 rng(7);
        for (auto &x : garbage) x = uint8_t(rng());
        expect(TENSO_E_CORRUPT, garbage, "garbage");
        // ranges
        expect(TENSO_E_BAD_OFFSET, forged([&](Bytes &b) { set64(b, r1 + 24, rd(b, r1 + 24, 8) + 8); }), "misaligned");
        expect(TENSO_E_BAD_OFFSET, forged([&](Bytes &b) { set64(b, r1 + 24, rd(b, r0 + 24, 8)); }), "overlap");
        expect(TENSO_E_BAD_OFFSET, forged([&](Bytes &b) { set64(b, r1 + 24, rd(b, r1 + 24, 8) + 64); }), "hole");
        expect(TENSO_E_BAD_OFFSET, forged([&](Bytes &b) { set64(b, r2 + 32, L.ioff); }), "past the data area");
        expect(TENSO_E_BAD_OFFSET, forged([&](Bytes &b) { set64(b, r0 + 24, 0); }), "over the header");
        expect(TENSO_E_BAD_OFFSET, forged([&](Bytes &b) { set64(b, r0 + 48, rd(b, r0 + 24, 8) + rd(b, r0 + 32, 8)); }),
               "body past its packet");
        expect(TENSO_E_BAD_OFFSET, forged([&](Bytes &b) {
                   set64(b, r2 + 24, rd(b, r2 + 24, 8) + 64);
                   set64(b, r2 + 48, 0);
               }),
               "hole before the index");
        // names and metadata
        expect(TENSO_E_DUPLICATE_KEY, forged([&](Bytes &b) {  // "gamma" -> "alpha" (same length)
                   std::memcpy(&b[size_t(L.names_at + rd(b, r2, 8))], "alpha", 5);
               }),
               "duplicate name");
        expect(TENSO_E_BAD_UTF8, forged([&](Bytes &b) { b[size_t(L.names_at + rd(b, r1, 8))] = 0xC0; }),
               "bad UTF-8 name");
        expect(TENSO_E_BAD_UTF8, forged([&](Bytes &b) { b[size_t(L.blob_at)] = 0xFF; }), "bad UTF-8 metadata");
        expect(TENSO_E_CORRUPT, forged([&](Bytes &b) { set64(b, r1, L.names_size); }), "name out of the blob");
        expect(TENSO_E_CORRUPT, forged([&](Bytes &b) { set32(b, size_t(L.meta_at + 8), 1000); }),
               "metadata out of the blob");
        expect(TENSO_E_CORRUPT, forged([&](Bytes &b) { b[r1 + 12] = 42; }), "unknown kind");
        expect(TENSO_E_CORRUPT, forged([&](Bytes &b) { b[r1 + 15] = 0x80; }), "unknown entry flag");
        expect(TENSO_E_CORRUPT, forged([&](Bytes &b) { b[r1 + 14] = 33; }), "ndim 33");
        expect(TENSO_E_CORRUPT, forged([&](Bytes &b) { set64(b, r1 + 40, 63); }), "nbytes vs shape");
        // hash table
        expect(TENSO_E_CORRUPT,
               forged(
                   [&](Bytes &b) {
                       for (uint64_t s = 0; s < L.cap; ++s)
                           if (rd(b, size_t(L.table_at + 4 * s), 4) == 2) set32(b, size_t(L.table_at + 4 * s), 0);
                   },
                   false),
               "entry missing from the table");
        expect(TENSO_E_CORRUPT, forged([&](Bytes &b) { set32(b, size_t(L.table_at), 9); }, false), "slot out of range");
    }

    // A table whose probe chains are all short (every name in its home slot) but whose slots
    // form one long run: looking up an absent name would walk the run, so open refuses it.
    void testHashTableRuns() {
        constexpr int kCount = 256;
        const std::string p = dir_ + "/runs.tenso";
        Tens t(TENSO_DTYPE_UINT8, {1}, 1);
        WriterPtr w = writer(p, write_opts());
        char name[16];
        for (int i = 0; i < kCount; ++i) {
            std::snprintf(name, sizeof name, "n%07d", i);
            add_tensor(w.get(), name, t.t);
        }
        TENSO_CHECK_OK(tenso_archive_writer_finish(w.get()));
        Bytes b = hostile::slurp(p);
        const Layout L(b);
        CPPUNIT_ASSERT_EQUAL(uint64_t(2 * kCount), L.cap);  // the writer's table: 512 slots
        // Rename every entry (same length) so the homes are exactly slots 0..255.
        std::vector<std::string> by_home(kCount);
        for (int k = 0, found = 0; found < kCount; ++k) {
            std::snprintf(name, sizeof name, "x%07d", k);
            const uint64_t home = XXH3_64bits(name, 8) & (L.cap - 1);
            if (home < uint64_t(kCount) && by_home[home].empty()) {
                by_home[home] = name;
                ++found;
            }
        }
        for (int i = 0; i < kCount; ++i) {
            const size_t r = L.record(size_t(i));
            std::memcpy(&b[size_t(L.names_at + rd(b, r, 8))], by_home[size_t(i)].data(), 8);
        }
        reforge(b);
        expect(TENSO_E_CORRUPT, b, "one run of 256 occupied slots in 512");
        CPPUNIT_ASSERT(std::string(tenso_last_error()).find("run of occupied slots") != std::string::npos);
    }

    void testPacketDisagreesWithIndex() {
        const Layout L(good_);
        Bytes b = good_;
        b[L.record(1) + 13] = TENSO_DTYPE_FLOAT32;  // int32 packet, float32 entry (same size)
        reforge(b);
        ArchivePtr a = open_ok(put(b));
        tenso_view *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_CORRUPT, tenso_archive_get(&v, a.get(), 1, nullptr));
        uint64_t bad = 0;
        TENSO_CHECK_STATUS(TENSO_E_CORRUPT, tenso_archive_verify(&bad, a.get(), nullptr, nullptr));
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), bad);
        get(a.get(), 0);
    }

    void testSafetensorsHeaders() {
        const Bytes d8(8, 1);
        auto st = [&](const std::string &tensors, const Bytes &data = Bytes(8, 1)) {
            return safetensors(tensors, data);
        };
        const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
        expect(TENSO_OK, st(ok), "valid", TENSO_FORMAT_SAFETENSORS);
        expect(TENSO_OK, st("  " + ok + "    "), "whitespace padding");
        expect(TENSO_E_TRUNCATED, Bytes(5, 0), "shorter than the length", TENSO_FORMAT_SAFETENSORS);
        Bytes huge = st(ok);
        set64(huge, 0, 200000000);
        expect(TENSO_E_LIMIT, huge, "header over 100 MB", TENSO_FORMAT_SAFETENSORS);
        Bytes past = st(ok);
        set64(past, 0, past.size());
        expect(TENSO_E_TRUNCATED, past, "header past the file", TENSO_FORMAT_SAFETENSORS);
        expect(TENSO_E_CORRUPT, st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})"), "unclosed JSON");
        expect(TENSO_E_CORRUPT, st(R"( ["a"])"), "not an object", TENSO_FORMAT_SAFETENSORS);
        expect(TENSO_E_CORRUPT, st(R"({"a":{"dtype":"F32","shape":[2]}})"), "missing data_offsets");
        expect(TENSO_E_CORRUPT, st(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})"), "negative dim");
        expect(TENSO_E_CORRUPT, st(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})"), "float dim");
        expect(TENSO_E_CORRUPT, st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})"), "unknown field");
        expect(TENSO_E_CORRUPT, st(R"({"a":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}})"), "nested array");
        expect(TENSO_E_CORRUPT, st(R"({"__metadata__":{"k":1},)" + ok.substr(1)), "metadata value not a string");
        expect(TENSO_E_CORRUPT, st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}})"), "3 offsets");
        expect(TENSO_E_CORRUPT, st(std::string(100000, '[') + std::string(100000, ']')), "deep nesting",
               TENSO_FORMAT_SAFETENSORS);
        expect(
            TENSO_E_DUPLICATE_KEY,
            st(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})"),
            "duplicate tensor");
        expect(TENSO_E_DUPLICATE_KEY, st(R"({"__metadata__":{"k":"1","k":"2"},)" + ok.substr(1)),
               "duplicate metadata key");
        expect(TENSO_E_DUPLICATE_KEY, st(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})"),
               "duplicate field");
        expect(TENSO_E_BAD_UTF8, st("{\"\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}"),
               "bad UTF-8");
        expect(TENSO_E_BAD_DTYPE, st(R"({"a":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})"), "F8");
        expect(TENSO_E_BAD_DTYPE, st(R"({"a":{"dtype":"Q4","shape":[8],"data_offsets":[0,8]}})"), "unknown dtype");
        expect(TENSO_E_TOO_MANY_ELEMENTS,
               st(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})"), "shape overflows");
        expect(TENSO_E_BAD_OFFSET, st(ok, Bytes(9, 1)), "trailing data byte");
        expect(TENSO_E_BAD_OFFSET, st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,9]}})"), "size mismatch");
        expect(TENSO_E_BAD_OFFSET, st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})"), "out of the file");
        expect(TENSO_E_BAD_OFFSET, st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})"), "reversed");
        expect(
            TENSO_E_BAD_OFFSET,
            st(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})"),
            "overlap");
        expect(TENSO_E_BAD_OFFSET, st(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})"), "hole");
        tenso_archive_options lim = open_opts(0, TENSO_FORMAT_SAFETENSORS);
        lim.max_tensors = 1;
        CPPUNIT_ASSERT_EQUAL(
            TENSO_E_LIMIT,
            status(
                st(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})"),
                0, &lim));
        (void)d8;
    }

    void testBintensorsHeaders() {
        // (None metadata, one tensor "w": U8 [4], (0, 4)) padded to 8, then 4 data bytes
        auto bt = [](Bytes header, size_t data = 4, bool pad = true) {
            if (pad)
                while (header.size() % 8) header.push_back(' ');
            Bytes b(8);
            set64(b, 0, header.size());
            b.insert(b.end(), header.begin(), header.end());
            b.insert(b.end(), data, 7);
            return b;
        };
        const Bytes one = {0, 1, 1, 'w', 1, 1, 4, 0, 4};
        expect(TENSO_OK, bt(one), "valid", TENSO_FORMAT_BINTENSORS);
        expect(TENSO_OK, bt({1, 1, 1, 'k', 1, 'v', 1, 1, 'w', 1, 1, 4, 0, 4}), "with metadata");
        expect(TENSO_OK, bt({0, 1, 1, 'w', 1, 1, 251, 4, 0, 0, 4}), "wide varint");
        expect(TENSO_E_CORRUPT, bt({0, 1, 1, 'w', 1, 1, 4, 0}, 4, false), "header ends early", TENSO_FORMAT_BINTENSORS);
        expect(TENSO_E_CORRUPT, bt({2, 1, 1, 'w', 1, 1, 4, 0, 4}), "option tag 2", TENSO_FORMAT_BINTENSORS);
        expect(TENSO_E_CORRUPT, bt({0, 253, 255, 255, 255, 255, 255, 255, 255, 255}), "tensor count 2^64-1",
               TENSO_FORMAT_BINTENSORS);
        expect(TENSO_E_CORRUPT, bt({0, 1, 200, 'w', 1, 1, 4, 0, 4}), "name past the header");
        expect(TENSO_E_CORRUPT, bt({0, 1, 1, 'w', 1, 1, 254, 0, 4}), "u128 varint");
        expect(TENSO_E_CORRUPT, bt({0, 1, 1, 'w', 1, 1, 4, 0, 4, 'x'}), "bytes after the header");
        expect(TENSO_E_BAD_UTF8, bt({0, 1, 1, 0xFF, 1, 1, 4, 0, 4}), "bad UTF-8 name");
        expect(TENSO_E_BAD_DTYPE, bt({0, 1, 1, 'w', 4, 1, 4, 0, 4}), "F8_E4M3");
        expect(TENSO_E_BAD_DTYPE, bt({0, 1, 1, 'w', 15, 1, 4, 0, 4}), "dtype 15");
        expect(TENSO_E_TOO_MANY_DIMS, bt({0, 1, 1, 'w', 1, 33, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                          1, 1, 1, 1,   1, 1,  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 0, 4}),
               "33 dims");
        expect(TENSO_E_DUPLICATE_KEY, bt({0, 2, 1, 'w', 1, 1, 2, 0, 2, 1, 'w', 1, 1, 2, 2, 4}), "duplicate name");
        expect(TENSO_E_DUPLICATE_KEY, bt({1, 2, 1, 'k', 0, 1, 'k', 0, 1, 1, 'w', 1, 1, 4, 0, 4}), "duplicate metadata");
        expect(TENSO_E_BAD_OFFSET, bt({0, 2, 1, 'w', 1, 1, 2, 0, 2, 1, 'v', 1, 1, 2, 1, 3}), "overlap");
        expect(TENSO_E_BAD_OFFSET, bt(one, 5), "trailing data");
        expect(TENSO_E_BAD_OFFSET, bt(one, 3), "data short");
        Bytes huge = bt(one);
        set64(huge, 0, uint64_t(1) << 40);
        expect(TENSO_E_LIMIT, huge, "header over the cap", TENSO_FORMAT_BINTENSORS);
    }

    // Every prefix of a valid file of each format is refused with a specific status (and no
    // crash: this suite runs under ASan in `make asan`).
    void testTruncationSweeps() {
        const std::string st = dir_ + "/s.safetensors", bt = dir_ + "/s.bt";
        Tens a(TENSO_DTYPE_FLOAT32, {4}, 1), b(TENSO_DTYPE_INT16, {3}, 2);
        for (const std::string &p : {st, bt}) {
            WriterPtr w = writer(p, write_opts());
            add_tensor(w.get(), "a", a.t);
            add_tensor(w.get(), "b", b.t);
            TENSO_CHECK_OK(tenso_archive_writer_set_metadata(w.get(), "k", 1, "v", 1));
            TENSO_CHECK_OK(tenso_archive_writer_finish(w.get()));
        }
        const std::pair<Bytes, tenso_format> files[] = {{good_, TENSO_FORMAT_ARCHIVE},
                                                        {hostile::slurp(st), TENSO_FORMAT_SAFETENSORS},
                                                        {hostile::slurp(bt), TENSO_FORMAT_BINTENSORS}};
        for (const auto &f : files) {
            for (size_t n = 0; n < f.first.size(); ++n) {
                tenso_status s = status(Bytes(f.first.begin(), f.first.begin() + long(n)), f.second);
                bool specific = s == TENSO_E_TRUNCATED || s == TENSO_E_CORRUPT || s == TENSO_E_BAD_OFFSET;
                CPPUNIT_ASSERT_MESSAGE(std::string(tenso_format_name(f.second)) + " cut at " + std::to_string(n) +
                                           ": " + tenso_status_name(s),
                                       specific);
            }
        }
    }

    // Random byte changes: whatever opens must get and verify without crashing; whatever fails
    // fails with one of the documented statuses.
    void testMutationSweeps() {
        const std::string st = dir_ + "/m.safetensors", bt = dir_ + "/m.bt";
        Tens a(TENSO_DTYPE_FLOAT32, {4}, 1), b(TENSO_DTYPE_INT16, {3}, 2);
        for (const std::string &p : {st, bt}) {
            WriterPtr w = writer(p, write_opts());
            add_tensor(w.get(), "a", a.t);
            add_tensor(w.get(), "b", b.t);
            TENSO_CHECK_OK(tenso_archive_writer_finish(w.get()));
        }
        const Bytes files[] = {good_, hostile::slurp(st), hostile::slurp(bt)};
        std::mt19937 rng(12345);
        int opened = 0;
        for (const Bytes &f : files) {
            for (int round = 0; round < 600; ++round) {
                Bytes m = f;
                int edits = 1 + int(rng() % 3);
                for (int e = 0; e < edits; ++e) m[rng() % m.size()] = uint8_t(rng());
                if (round % 2 && &f == &files[0]) reforge(m, false);  // reach past the checksums
                tenso_archive *h = nullptr;
                tenso_status s = tenso_archive_open(&h, put(m).c_str(), nullptr);
                ArchivePtr ap(h);
                if (s != TENSO_OK) {
                    CPPUNIT_ASSERT_MESSAGE(tenso_describe(s), s < 0 && s >= TENSO_E_BAD_UTF8 && s != TENSO_E_INTERNAL);
                    continue;
                }
                ++opened;
                for (uint64_t i = 0; i < tenso_archive_count(h); ++i) {
                    tenso_view *v = nullptr;
                    if (tenso_archive_get(&v, h, i, nullptr) == TENSO_OK) {
                        const uint8_t *p = static_cast<const uint8_t *>(tenso_view_data(v));
                        volatile uint8_t sink = 0;
                        for (uint64_t k = 0; p && k < tenso_view_nbytes(v); ++k) sink = uint8_t(sink + p[k]);
                    }
                    tenso_view_free(v);
                }
                tenso_archive_verify(nullptr, h, nullptr, nullptr);
            }
        }
        CPPUNIT_ASSERT(opened > 0);  // some mutations land in data and still open
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiArchiveHostileTest);
