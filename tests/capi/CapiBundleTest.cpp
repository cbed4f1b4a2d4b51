// CapiBundleTest - bundles through the C API: building them with tenso_value_* (exact bytes
// against upstream's golden packets), the 255-entry and 64-level limits, key rules, pre-encoded
// packets, copy semantics of insert, options applied to every dense value, and reading bundle
// views (count/entry/find, children pointing into the parent's bytes).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <cppunit/extensions/HelperMacros.h>

#include "check.hpp"
#include "tenso/tenso.h"

namespace {

using Bytes = std::vector<uint8_t>;

Bytes golden(const std::string &name) {
    std::string path = std::string(TENSO_VECTORS_DIR) + "/" + name + ".tenso";
    std::ifstream f(path, std::ios::binary);
    if (!f) CPPUNIT_FAIL("cannot open golden vector " + path);
    return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

Bytes unhex(const std::string &h) {
    Bytes b;
    for (size_t i = 0; i + 1 < h.size(); i += 2) b.push_back(uint8_t(std::stoul(h.substr(i, 2), nullptr, 16)));
    return b;
}

std::string hex(const Bytes &b) {
    std::string s;
    char x[4];
    for (size_t i = 0; i < b.size(); ++i) {
        std::snprintf(x, sizeof x, "%02x", b[i]);
        s += x;
        s += (i % 16 == 15) ? '\n' : ' ';
    }
    return s;
}

void assert_bytes(const std::string &what, const Bytes &want, const Bytes &got) {
    if (want == got) return;
    size_t i = 0;
    while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
    CPPUNIT_FAIL(what + ": packets differ (want " + std::to_string(want.size()) + " B, got " +
                 std::to_string(got.size()) + " B, first difference at " + std::to_string(i) + ")\nwant:\n" +
                 hex(want) + "\ngot:\n" + hex(got));
}

tenso_encode_options eopts(uint32_t flags, uint32_t alignment) {
    tenso_encode_options o = TENSO_ENCODE_OPTIONS_INIT;
    o.flags = flags;
    o.alignment = alignment;
    return o;
}

// Encodes a value three ways (bound + into, allocating) and checks they agree.
Bytes encode(const tenso_value *v, const tenso_encode_options *o = nullptr) {
    size_t bound = 0, n = 0;
    TENSO_CHECK_OK(tenso_value_dumps_bound(&bound, v, o));
    Bytes out(bound);
    TENSO_CHECK_OK(tenso_value_dumps_into(out.data(), out.size(), &n, v, o));
    CPPUNIT_ASSERT(n <= bound);
    if (!o || !(o->flags & TENSO_ENCODE_COMPRESS)) CPPUNIT_ASSERT_EQUAL(bound, n);
    out.resize(n);
    tenso_buffer b = TENSO_BUFFER_INIT;
    TENSO_CHECK_OK(tenso_value_dumps(&b, v, o));
    CPPUNIT_ASSERT_EQUAL(uintptr_t(0), reinterpret_cast<uintptr_t>(b.data) % 64);
    assert_bytes("value_dumps vs value_dumps_into", out, Bytes(b.data, b.data + b.size));
    tenso_buffer_dispose(&b);
    return out;
}

Bytes encode_tensor(const tenso_tensor &t, const tenso_encode_options *o) {
    tenso_buffer b = TENSO_BUFFER_INIT;
    TENSO_CHECK_OK(tenso_dumps(&b, &t, o));
    Bytes out(b.data, b.data + b.size);
    tenso_buffer_dispose(&b);
    return out;
}

// Makes values and frees them at the end of a test; keeps tensor bytes alive meanwhile.
class Builder {
public:
    ~Builder() {
        for (tenso_value *v : values_) tenso_value_free(v);
    }
    tenso_value *tensor(tenso_dtype d, std::vector<uint64_t> shape, const std::string &body_hex) {
        store_.push_back(unhex(body_hex));
        return tensor_raw(d, shape, store_.back());
    }
    tenso_value *tensor_raw(tenso_dtype d, const std::vector<uint64_t> &shape, const Bytes &body) {
        tenso_tensor t = {body.data(), body.size(), shape.data(), uint32_t(shape.size()), d};
        tenso_value *v = nullptr;
        TENSO_CHECK_OK(tenso_value_new_tensor(&v, &t));
        return keep(v);
    }
    tenso_value *bundle(const std::vector<std::pair<std::string, tenso_value *>> &entries) {
        tenso_value *b = nullptr;
        TENSO_CHECK_OK(tenso_value_new_bundle(&b));
        keep(b);
        for (const auto &e : entries) TENSO_CHECK_OK(tenso_bundle_insert(b, e.first.data(), e.first.size(), e.second));
        CPPUNIT_ASSERT_EQUAL(uint32_t(entries.size()), tenso_bundle_count(b));
        return b;
    }
    tenso_value *packet(const Bytes &p) {
        tenso_value *v = nullptr;
        TENSO_CHECK_OK(tenso_value_new_packet(&v, p.data(), p.size()));
        return keep(v);
    }
    tenso_value *keep(tenso_value *v) {
        values_.push_back(v);
        return v;
    }
    const Bytes &store(Bytes b) {
        store_.push_back(std::move(b));
        return store_.back();
    }

private:
    std::vector<tenso_value *> values_;
    std::deque<Bytes> store_;
};

struct ViewPtr {
    tenso_view *v = nullptr;
    ~ViewPtr() { tenso_view_free(v); }
    tenso_view **out() {
        tenso_view_free(v);
        v = nullptr;
        return &v;
    }
};

std::string key_of(const tenso_view *v, uint32_t i, const tenso_view **child = nullptr) {
    const char *k = nullptr;
    size_t n = 0;
    const tenso_view *c = nullptr;
    TENSO_CHECK_OK(tenso_view_bundle_entry(&k, &n, &c, v, i));
    if (child) *child = c;
    return std::string(k, n);
}

const tenso_view *find(const tenso_view *v, const std::string &key) {
    const tenso_view *c = nullptr;
    TENSO_CHECK_OK(tenso_view_bundle_find(&c, v, key.data(), key.size()));
    CPPUNIT_ASSERT(c != nullptr);
    return c;
}

// Element i of a view's data. Bodies nested in bundles sit at arbitrary offsets, so they are
// read with memcpy, never through a typed pointer.
template <class T>
T elem(const tenso_view *v, size_t i) {
    CPPUNIT_ASSERT_MESSAGE("element index out of range", (i + 1) * sizeof(T) <= tenso_view_nbytes(v));
    T x;
    std::memcpy(&x, static_cast<const uint8_t *>(tenso_view_data(v)) + i * sizeof(T), sizeof x);
    return x;
}

Bytes view_bytes(const tenso_view *v) {
    const uint8_t *p = static_cast<const uint8_t *>(tenso_view_data(v));
    return Bytes(p, p + tenso_view_nbytes(v));
}

// A chain of `levels` bundles, each holding the next under key "n"; the innermost holds u8[1].
tenso_value *chain(Builder &b, int levels) {
    tenso_value *cur = b.tensor(TENSO_DTYPE_UINT8, {1}, "2a");
    for (int i = 0; i < levels; ++i) cur = b.bundle({{"n", cur}});
    return cur;
}

}  // namespace

class CapiBundleTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiBundleTest);
    CPPUNIT_TEST(testBundleMixedExactBytes);
    CPPUNIT_TEST(testEmptyBundle);
    CPPUNIT_TEST(testGoldenBundles);
    CPPUNIT_TEST(testUtf8AndEmptyKeys);
    CPPUNIT_TEST(testInvalidUtf8Keys);
    CPPUNIT_TEST(testDuplicateKeysKeptInOrder);
    CPPUNIT_TEST(test255EntriesAndNoMore);
    CPPUNIT_TEST(testInsertArgumentChecks);
    CPPUNIT_TEST(testInsertCopiesChild);
    CPPUNIT_TEST(testNestingDepth);
    CPPUNIT_TEST(testPrecodedPacketCountsTowardDepth);
    CPPUNIT_TEST(testNewPacket);
    CPPUNIT_TEST(testOptionsApplyToEveryDenseValue);
    CPPUNIT_TEST(testDecodeAccessors);
    CPPUNIT_TEST(testChildViewsPointIntoParent);
    CPPUNIT_TEST(testBufferTooSmallForValue);
    CPPUNIT_TEST_SUITE_END();

public:
    void testBundleMixedExactBytes() {
        Builder b;
        tenso_value *bundle =
            b.bundle({{"a", b.tensor(TENSO_DTYPE_FLOAT32, {2}, "0000803f00000040")},
                      {"b", b.tensor(TENSO_DTYPE_INT64, {3}, "0a0000000000000014000000000000001e00000000000000")}});
        Bytes p = encode(bundle);
        CPPUNIT_ASSERT_EQUAL(size_t(188), p.size());
        const uint8_t head[] = {'T', 'N', 'S', 'O', 4,   0x10, 0, 0, 2, 0,  // bundle of 2
                                1,   0,   0,   0,   'a', 0x48, 0, 0, 0};    // "a", 72 bytes
        CPPUNIT_ASSERT(std::memcmp(p.data(), head, sizeof head) == 0);
        const uint8_t second[] = {1, 0, 0, 0, 'b', 0x58, 0, 0, 0};  // "b", 88 bytes
        CPPUNIT_ASSERT(std::memcmp(p.data() + 19 + 72, second, sizeof second) == 0);
        assert_bytes("bundle_mixed", golden("bundle_mixed"), p);
    }

    void testEmptyBundle() {
        Builder b;
        tenso_value *e = b.bundle({});
        Bytes p = encode(e);
        const Bytes want = {'T', 'N', 'S', 'O', 4, 0x10, 0, 0, 0, 0};
        assert_bytes("empty bundle", want, p);
        assert_bytes("bundle_empty", golden("bundle_empty"), p);
        // Options do not change a container: no footer, no padding.
        tenso_encode_options o = eopts(TENSO_ENCODE_INTEGRITY | TENSO_ENCODE_COMPRESS, 4096);
        assert_bytes("empty bundle with options", want, encode(e, &o));
        ViewPtr v;
        TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(TENSO_KIND_BUNDLE, tenso_view_kind(v.v));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_view_bundle_count(v.v));
        CPPUNIT_ASSERT_EQUAL(uint64_t(10), tenso_view_packet_size(v.v));
        CPPUNIT_ASSERT(tenso_view_data(v.v) == nullptr);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), tenso_view_nbytes(v.v));
        const tenso_view *c = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_bundle_find(&c, v.v, "", 0));
    }

    void testGoldenBundles() {
        Builder b;
        // bundle_nested3: four levels, every kind of dense dtype mix.
        tenso_value *l3 = b.bundle({{"z", b.tensor(TENSO_DTYPE_FLOAT16, {2}, "0038fffb")},
                                    {"w", b.tensor(TENSO_DTYPE_UINT32, {}, "00286bee")}});
        tenso_value *l2 = b.bundle({{"y", b.tensor(TENSO_DTYPE_INT16, {3}, "f9ff00002c01")}, {"l3", l3}});
        tenso_value *l1 =
            b.bundle({{"x", b.tensor(TENSO_DTYPE_COMPLEX64, {2}, "0000803f0000803f00000080000020c0")}, {"l2", l2}});
        tenso_value *top = b.bundle({{"top", b.tensor(TENSO_DTYPE_BOOL, {4}, "01000101")}, {"l1", l1}});
        assert_bytes("bundle_nested3", golden("bundle_nested3"), encode(top));

        // bundle_integrity / bundle_align128: the options reach every value.
        tenso_value *ab = b.bundle({{"a", b.tensor(TENSO_DTYPE_FLOAT32, {3}, "0000c03f00002040000060c0")},
                                    {"b", b.tensor(TENSO_DTYPE_UINT8, {2, 2}, "00010203")}});
        tenso_encode_options oi = eopts(TENSO_ENCODE_INTEGRITY, 0);
        assert_bytes("bundle_integrity", golden("bundle_integrity"), encode(ab, &oi));
        tenso_encode_options oa = eopts(0, 128);
        assert_bytes("bundle_align128", golden("bundle_align128"), encode(ab, &oa));
    }

    void testUtf8AndEmptyKeys() {
        Builder b;
        tenso_value *u =
            b.bundle({{"\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87", b.tensor(TENSO_DTYPE_FLOAT32, {2}, "0000803f00000040")},
                      {"\xc3\xb1", b.tensor(TENSO_DTYPE_INT8, {3}, "ff0001")},
                      {"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", b.tensor(TENSO_DTYPE_UINT16, {1}, "ffff")},
                      {"\xf0\x9f\x98\x80", b.tensor(TENSO_DTYPE_BOOL, {2}, "0100")}});
        Bytes p = encode(u);
        assert_bytes("bundle_utf8_keys", golden("bundle_utf8_keys"), p);
        ViewPtr v;
        TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(std::string("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"), key_of(v.v, 2));
        CPPUNIT_ASSERT_EQUAL(TENSO_DTYPE_BOOL, tenso_view_dtype(find(v.v, "\xf0\x9f\x98\x80")));

        tenso_value *e = b.bundle({{"", b.tensor(TENSO_DTYPE_FLOAT32, {1}, "00001041")}});
        Bytes pe = encode(e);
        assert_bytes("bundle_empty_key", golden("bundle_empty_key"), pe);
        TENSO_CHECK_OK(tenso_loads(v.out(), pe.data(), pe.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(std::string(), key_of(v.v, 0));
        CPPUNIT_ASSERT_EQUAL(9.0f, elem<float>(find(v.v, ""), 0));
        // An empty key may come with a NULL pointer.
        tenso_value *n = b.bundle({});
        TENSO_CHECK_OK(tenso_bundle_insert(n, nullptr, 0, b.tensor(TENSO_DTYPE_FLOAT32, {1}, "00001041")));
        assert_bytes("NULL empty key", pe, encode(n));
        // Keys need not be NUL-terminated and may contain NUL.
        tenso_value *z = b.bundle({});
        const char raw[] = {'a', '\0', 'b', 'X'};
        TENSO_CHECK_OK(tenso_bundle_insert(z, raw, 3, b.tensor(TENSO_DTYPE_UINT8, {1}, "07")));
        Bytes pz = encode(z);
        TENSO_CHECK_OK(tenso_loads(v.out(), pz.data(), pz.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(std::string(raw, 3), key_of(v.v, 0));
    }

    void testInvalidUtf8Keys() {
        Builder b;
        tenso_value *bundle = b.bundle({});
        tenso_value *leaf = b.tensor(TENSO_DTYPE_UINT8, {1}, "01");
        const std::string bad[] = {
            "\xff",              // never valid
            "\x80",              // lone continuation
            "\xc3",              // truncated 2-byte sequence
            "\xe2\x82",          // truncated 3-byte sequence
            "\xc0\xaf",          // overlong '/'
            "\xe0\x80\xaf",      // overlong 3-byte
            "\xed\xa0\x80",      // UTF-16 surrogate
            "\xf4\x90\x80\x80",  // above U+10FFFF
            "ok\xfe",            // valid prefix, bad tail
        };
        for (const auto &k : bad) {
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_bundle_insert(bundle, k.data(), k.size(), leaf));
            CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_bundle_count(bundle));
        }
        // The largest code point and a 3-byte maximum are fine.
        const std::string good[] = {"\xf4\x8f\xbf\xbf", "\xef\xbf\xbf", "\x7f"};
        for (const auto &k : good) TENSO_CHECK_OK(tenso_bundle_insert(bundle, k.data(), k.size(), leaf));
        CPPUNIT_ASSERT_EQUAL(uint32_t(3), tenso_bundle_count(bundle));
    }

    void testDuplicateKeysKeptInOrder() {
        Builder b;
        tenso_value *d = b.bundle({{"x", b.tensor(TENSO_DTYPE_UINT8, {1}, "01")},
                                   {"y", b.tensor(TENSO_DTYPE_UINT8, {1}, "02")},
                                   {"x", b.tensor(TENSO_DTYPE_UINT8, {1}, "03")}});
        Bytes p = encode(d);
        ViewPtr v;
        TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint32_t(3), tenso_view_bundle_count(v.v));
        const tenso_view *c0 = nullptr, *c2 = nullptr;
        CPPUNIT_ASSERT_EQUAL(std::string("x"), key_of(v.v, 0, &c0));
        CPPUNIT_ASSERT_EQUAL(std::string("y"), key_of(v.v, 1));
        CPPUNIT_ASSERT_EQUAL(std::string("x"), key_of(v.v, 2, &c2));
        CPPUNIT_ASSERT_EQUAL(uint8_t(1), *static_cast<const uint8_t *>(tenso_view_data(c0)));
        CPPUNIT_ASSERT_EQUAL(uint8_t(3), *static_cast<const uint8_t *>(tenso_view_data(c2)));
        // find returns the first match.
        CPPUNIT_ASSERT(find(v.v, "x") == c0);
    }

    void test255EntriesAndNoMore() {
        Builder b;
        tenso_value *big = b.bundle({});
        for (int i = 0; i < 255; ++i) {
            char key[8], body[4];
            std::snprintf(key, sizeof key, "k%03d", i);
            std::snprintf(body, sizeof body, "%02x", i);
            TENSO_CHECK_OK(tenso_bundle_insert(big, key, 4, b.tensor(TENSO_DTYPE_UINT8, {1}, body)));
        }
        CPPUNIT_ASSERT_EQUAL(uint32_t(255), tenso_bundle_count(big));
        tenso_value *extra = b.tensor(TENSO_DTYPE_UINT8, {1}, "ff");
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_bundle_insert(big, "k255", 4, extra));
        CPPUNIT_ASSERT_EQUAL(uint32_t(255), tenso_bundle_count(big));
        Bytes p = encode(big);
        assert_bytes("bundle_255", golden("bundle_255"), p);
        CPPUNIT_ASSERT_EQUAL(uint8_t(255), p[8]);
        ViewPtr v;
        TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint32_t(255), tenso_view_bundle_count(v.v));
        const tenso_view *last = nullptr;
        CPPUNIT_ASSERT_EQUAL(std::string("k254"), key_of(v.v, 254, &last));
        CPPUNIT_ASSERT_EQUAL(uint8_t(254), *static_cast<const uint8_t *>(tenso_view_data(last)));
    }

    void testInsertArgumentChecks() {
        Builder b;
        tenso_value *bundle = b.bundle({});
        tenso_value *leaf = b.tensor(TENSO_DTYPE_UINT8, {1}, "01");
        // Only bundles take entries.
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_bundle_insert(leaf, "k", 1, bundle));
        Bytes pkt = encode(leaf);
        tenso_value *pv = b.packet(pkt);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_bundle_insert(pv, "k", 1, leaf));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_bundle_count(leaf));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_bundle_count(pv));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_bundle_insert(nullptr, "k", 1, leaf));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_bundle_insert(bundle, "k", 1, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_bundle_insert(bundle, nullptr, 1, leaf));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_bundle_count(bundle));
        // Invalid tensors never become values.
        uint8_t x = 0;
        uint64_t s1[1] = {1};
        tenso_tensor bad = {&x, 2, s1, 1, TENSO_DTYPE_UINT8};
        tenso_value *v = reinterpret_cast<tenso_value *>(&x);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_value_new_tensor(&v, &bad));
        CPPUNIT_ASSERT(v == nullptr);
        bad = {&x, 1, s1, 1, TENSO_DTYPE_QINT8};
        TENSO_CHECK_STATUS(TENSO_E_BAD_DTYPE, tenso_value_new_tensor(&v, &bad));
        CPPUNIT_ASSERT(v == nullptr);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_value_new_tensor(&v, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_value_new_bundle(nullptr));
        size_t n = 0;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_value_dumps_bound(&n, nullptr, nullptr));
        // Bad options are refused for values as for tensors.
        tenso_encode_options o = eopts(0, 48);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_value_dumps_bound(&n, bundle, &o));
    }

    void testInsertCopiesChild() {
        Builder b;
        // A child bundle changed after it was inserted: the parent keeps the old description.
        tenso_value *child = nullptr;
        TENSO_CHECK_OK(tenso_value_new_bundle(&child));
        TENSO_CHECK_OK(tenso_bundle_insert(child, "x", 1, b.tensor(TENSO_DTYPE_UINT8, {1}, "01")));
        tenso_value *parent = b.bundle({{"c", child}});
        TENSO_CHECK_OK(tenso_bundle_insert(child, "y", 1, b.tensor(TENSO_DTYPE_UINT8, {1}, "02")));
        CPPUNIT_ASSERT_EQUAL(uint32_t(2), tenso_bundle_count(child));
        Bytes before = encode(parent);
        tenso_value_free(child);  // and freed
        Bytes after = encode(parent);
        assert_bytes("parent after the child was freed", before, after);
        ViewPtr v;
        TENSO_CHECK_OK(tenso_loads(v.out(), after.data(), after.size(), nullptr));
        const tenso_view *c = find(v.v, "c");
        CPPUNIT_ASSERT_EQUAL(uint32_t(1), tenso_view_bundle_count(c));
        CPPUNIT_ASSERT_EQUAL(std::string("x"), key_of(c, 0));

        // A tensor value's shape is copied at creation; its data stays borrowed.
        uint8_t data[6] = {1, 2, 3, 4, 5, 6};
        uint64_t shape[2] = {2, 3};
        tenso_tensor t = {data, 6, shape, 2, TENSO_DTYPE_UINT8};
        tenso_value *tv = nullptr;
        TENSO_CHECK_OK(tenso_value_new_tensor(&tv, &t));
        b.keep(tv);
        shape[0] = 3;
        shape[1] = 2;
        tenso_value *holder = b.bundle({{"t", tv}});
        data[0] = 42;  // borrowed: the change shows in the next encode
        Bytes p = encode(holder);
        TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), nullptr));
        const tenso_view *tc = find(v.v, "t");
        CPPUNIT_ASSERT_EQUAL(uint64_t(2), tenso_view_shape(tc)[0]);
        CPPUNIT_ASSERT_EQUAL(uint64_t(3), tenso_view_shape(tc)[1]);
        CPPUNIT_ASSERT_EQUAL(uint8_t(42), static_cast<const uint8_t *>(tenso_view_data(tc))[0]);

        // Inserting the same child twice, and a bundle into itself (a copy of its current state).
        tenso_value *self = b.bundle({{"a", b.tensor(TENSO_DTYPE_UINT8, {1}, "05")}});
        TENSO_CHECK_OK(tenso_bundle_insert(self, "me", 2, self));
        CPPUNIT_ASSERT_EQUAL(uint32_t(2), tenso_bundle_count(self));
        Bytes ps = encode(self);
        TENSO_CHECK_OK(tenso_loads(v.out(), ps.data(), ps.size(), nullptr));
        const tenso_view *me = find(v.v, "me");
        CPPUNIT_ASSERT_EQUAL(uint32_t(1), tenso_view_bundle_count(me));
    }

    void testNestingDepth() {
        Builder b;
        // 64 bundles around a tensor: the tensor sits at depth 64, the decoder's limit.
        tenso_value *c64 = chain(b, 64);
        Bytes p = encode(c64);
        ViewPtr v;
        TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), nullptr));
        const tenso_view *cur = v.v;
        for (int i = 0; i < 64; ++i) {
            CPPUNIT_ASSERT_EQUAL(TENSO_KIND_BUNDLE, tenso_view_kind(cur));
            cur = find(cur, "n");
        }
        CPPUNIT_ASSERT_EQUAL(TENSO_KIND_DENSE, tenso_view_kind(cur));
        CPPUNIT_ASSERT_EQUAL(uint8_t(42), *static_cast<const uint8_t *>(tenso_view_data(cur)));
        size_t len = 0;
        TENSO_CHECK_OK(tenso_packet_length(&len, p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(p.size(), len);

        // A 65th level is refused at insert time, and the bundle is left as it was.
        tenso_value *outer = b.bundle({});
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_bundle_insert(outer, "n", 1, c64));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_bundle_count(outer));
        // 64 levels of empty bundles are fine too (nothing below the innermost one).
        tenso_value *e = b.bundle({});
        for (int i = 0; i < 64; ++i) e = b.bundle({{"e", e}});
        Bytes pe = encode(e);
        TENSO_CHECK_OK(tenso_loads(v.out(), pe.data(), pe.size(), nullptr));
    }

    // The insert contract: "would nest more than 64 deep" must count what a pre-encoded packet
    // holds, or the encoder produces packets that every decoder rejects.
    void testPrecodedPacketCountsTowardDepth() {
        Builder b;
        Bytes p64 = encode(chain(b, 64));
        tenso_value *pv = b.packet(p64);  // a valid packet: depth 64 decodes
        tenso_value *outer = b.bundle({});
        tenso_status st = tenso_bundle_insert(outer, "n", 1, pv);
        if (st == TENSO_OK) {
            // Show what the accepted value leads to: a packet the decoder refuses.
            Bytes p = encode(outer);
            ViewPtr v;
            tenso_status dst = tenso_loads(v.out(), p.data(), p.size(), nullptr);
            CPPUNIT_FAIL(std::string("inserting a pre-encoded 64-deep bundle was accepted; the 65-deep "
                                     "packet then decodes with ") +
                         tenso_status_name(dst));
        }
        CPPUNIT_ASSERT_EQUAL(TENSO_E_INVALID_ARGUMENT, st);
    }

    void testNewPacket() {
        Builder b;
        float x[3] = {1, 2, 3};
        uint64_t s3[1] = {3};
        tenso_tensor t = {x, sizeof x, s3, 1, TENSO_DTYPE_FLOAT32};
        tenso_encode_options own = eopts(TENSO_ENCODE_INTEGRITY, 128);
        Bytes pkt = encode_tensor(t, &own);

        // Exact length only.
        tenso_value *v = reinterpret_cast<tenso_value *>(&t);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_value_new_packet(&v, pkt.data(), pkt.size() + 1));
        CPPUNIT_ASSERT(v == nullptr);
        Bytes longer = pkt;
        longer.resize(pkt.size() + 64, 0);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_value_new_packet(&v, longer.data(), longer.size()));
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_value_new_packet(&v, pkt.data(), pkt.size() - 1));
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_value_new_packet(&v, pkt.data(), 0));
        CPPUNIT_ASSERT(v == nullptr);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_value_new_packet(&v, nullptr, 0));
        const Bytes junk(100, 0x33);
        TENSO_CHECK_STATUS(TENSO_E_BAD_MAGIC, tenso_value_new_packet(&v, junk.data(), junk.size()));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_value_new_packet(nullptr, pkt.data(), pkt.size()));

        tenso_value *pv = b.packet(pkt);
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_bundle_count(pv));
        // Alone, a packet value encodes to itself whatever the options.
        assert_bytes("packet value alone", pkt, encode(pv));
        tenso_encode_options other = eopts(TENSO_ENCODE_COMPRESS, 8);
        assert_bytes("packet value alone, other options", pkt, encode(pv, &other));

        // In a bundle it is inserted verbatim (its own options apply), next to a tensor that
        // gets the bundle's options.
        tenso_value *bundle =
            b.bundle({{"pre", pv}, {"new", b.tensor(TENSO_DTYPE_FLOAT32, {3}, "0000803f0000004000004040")}});
        Bytes p = encode(bundle);
        const size_t pre_at = 10 + 4 + 3 + 4;
        CPPUNIT_ASSERT(std::memcmp(p.data() + pre_at, pkt.data(), pkt.size()) == 0);
        ViewPtr view;
        TENSO_CHECK_OK(tenso_loads(view.out(), p.data(), p.size(), nullptr));
        const tenso_view *pre = find(view.v, "pre");
        const tenso_view *fresh = find(view.v, "new");
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_FLAG_CUST_ALIGN | TENSO_FLAG_INTEGRITY), tenso_view_flags(pre));
        CPPUNIT_ASSERT_EQUAL(uint32_t(128), tenso_view_alignment(pre));
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_FLAG_ALIGNED), tenso_view_flags(fresh));
        assert_bytes("pre values", view_bytes(pre), view_bytes(fresh));

        // A pre-encoded bundle works as a nested bundle.
        tenso_value *inner = b.bundle({{"q", b.tensor(TENSO_DTYPE_INT16, {2}, "0100ffff")}});
        Bytes ib = encode(inner);
        tenso_value *wrap_pkt = b.bundle({{"i", b.packet(ib)}});
        tenso_value *wrap_val = b.bundle({{"i", inner}});
        assert_bytes("pre-encoded bundle vs nested value", encode(wrap_val), encode(wrap_pkt));
    }

    void testOptionsApplyToEveryDenseValue() {
        Builder b;
        std::vector<float> zeros(512, 0.0f);
        Bytes zb(reinterpret_cast<const uint8_t *>(zeros.data()),
                 reinterpret_cast<const uint8_t *>(zeros.data()) + 2048);
        const Bytes &z = b.store(zb);
        Bytes plain_pkt;
        {
            uint8_t one = 1;
            uint64_t s1[1] = {1};
            tenso_tensor t1 = {&one, 1, s1, 1, TENSO_DTYPE_UINT8};
            plain_pkt = encode_tensor(t1, nullptr);
        }
        tenso_value *deep = b.bundle({{"z", b.tensor_raw(TENSO_DTYPE_FLOAT32, {512}, z)}});
        tenso_value *mid = b.bundle({{"d", deep}, {"i", b.tensor(TENSO_DTYPE_INT32, {2}, "0100000002000000")}});
        tenso_value *top = b.bundle(
            {{"m", mid}, {"s", b.tensor(TENSO_DTYPE_FLOAT64, {}, "000000000000f03f")}, {"p", b.packet(plain_pkt)}});
        const uint32_t flags = TENSO_ENCODE_INTEGRITY | TENSO_ENCODE_COMPRESS;
        tenso_encode_options o = eopts(flags, 128);
        Bytes p = encode(top, &o);
        // Deterministic.
        assert_bytes("bundle encoded twice", p, encode(top, &o));

        ViewPtr v;
        TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_FLAG_BUNDLE), tenso_view_flags(v.v));  // no footer
        CPPUNIT_ASSERT_EQUAL(uint64_t(p.size()), tenso_view_packet_size(v.v));
        const uint32_t dense_flags = TENSO_FLAG_CUST_ALIGN | TENSO_FLAG_INTEGRITY | TENSO_FLAG_COMPRESSION;
        const tenso_view *m = find(v.v, "m");
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_FLAG_BUNDLE), tenso_view_flags(m));
        const tenso_view *dz = find(find(m, "d"), "z");
        const tenso_view *mi = find(m, "i");
        const tenso_view *s = find(v.v, "s");
        for (const tenso_view *c : {dz, mi, s}) {
            CPPUNIT_ASSERT_EQUAL(dense_flags, tenso_view_flags(c));
            CPPUNIT_ASSERT_EQUAL(uint32_t(128), tenso_view_alignment(c));
            CPPUNIT_ASSERT_EQUAL(1, tenso_view_owns_data(c));  // decompressed
        }
        assert_bytes("z", z, view_bytes(dz));
        CPPUNIT_ASSERT_EQUAL(2, elem<int32_t>(mi, 1));
        CPPUNIT_ASSERT_EQUAL(1.0, elem<double>(s, 0));
        const tenso_view *pp = find(v.v, "p");
        CPPUNIT_ASSERT_EQUAL(uint32_t(TENSO_FLAG_ALIGNED), tenso_view_flags(pp));  // its own options
        CPPUNIT_ASSERT_EQUAL(0, tenso_view_owns_data(pp));

        // Each dense value is byte-identical to the standalone packet with the same options.
        tenso_tensor tz = {z.data(), z.size(), nullptr, 1, TENSO_DTYPE_FLOAT32};
        uint64_t s512[1] = {512};
        tz.shape = s512;
        Bytes standalone = encode_tensor(tz, &o);
        CPPUNIT_ASSERT_EQUAL(uint64_t(standalone.size()), tenso_view_packet_size(dz));
        bool found = false;
        for (size_t i = 0; i + standalone.size() <= p.size() && !found; ++i)
            found = std::memcmp(p.data() + i, standalone.data(), standalone.size()) == 0;
        CPPUNIT_ASSERT_MESSAGE("the nested packet equals the standalone one", found);

        // Corrupting a nested body is caught by that value's footer.
        Bytes bad = p;
        size_t at = 0;
        for (size_t i = 0; i + standalone.size() <= p.size(); ++i)
            if (std::memcmp(p.data() + i, standalone.data(), standalone.size()) == 0) at = i;
        bad[at + standalone.size() - 8 - 4 - 1] ^= 1;  // last byte of its LZ4 block
        TENSO_CHECK_STATUS(TENSO_E_CHECKSUM, tenso_loads(v.out(), bad.data(), bad.size(), nullptr));
    }

    void testDecodeAccessors() {
        Bytes p = golden("bundle_mixed");
        ViewPtr v;
        TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(TENSO_KIND_BUNDLE, tenso_view_kind(v.v));
        CPPUNIT_ASSERT_EQUAL(tenso_dtype(0), tenso_view_dtype(v.v));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_view_ndim(v.v));
        CPPUNIT_ASSERT_EQUAL(uint32_t(2), tenso_view_bundle_count(v.v));
        CPPUNIT_ASSERT_EQUAL(uint64_t(188), tenso_view_packet_size(v.v));
        CPPUNIT_ASSERT_EQUAL(0, tenso_view_owns_data(v.v));

        const tenso_view *a = nullptr, *bb = nullptr;
        CPPUNIT_ASSERT_EQUAL(std::string("a"), key_of(v.v, 0, &a));
        CPPUNIT_ASSERT_EQUAL(std::string("b"), key_of(v.v, 1, &bb));
        CPPUNIT_ASSERT(find(v.v, "a") == a);
        CPPUNIT_ASSERT(find(v.v, "b") == bb);
        CPPUNIT_ASSERT_EQUAL(TENSO_DTYPE_FLOAT32, tenso_view_dtype(a));
        CPPUNIT_ASSERT_EQUAL(uint64_t(72), tenso_view_packet_size(a));
        CPPUNIT_ASSERT_EQUAL(TENSO_DTYPE_INT64, tenso_view_dtype(bb));
        CPPUNIT_ASSERT_EQUAL(uint64_t(3), tenso_view_shape(bb)[0]);
        CPPUNIT_ASSERT_EQUAL(int64_t(30), elem<int64_t>(bb, 2));

        // Errors: missing key, key prefix, index out of range, NULL arguments.
        const tenso_view *c = a;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_bundle_find(&c, v.v, "c", 1));
        CPPUNIT_ASSERT(c == nullptr);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_bundle_find(&c, v.v, "ab", 2));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_bundle_find(&c, v.v, "", 0));
        TENSO_CHECK_OK(tenso_view_bundle_find(&c, v.v, "bX", 1));  // key_len counts, not NUL
        CPPUNIT_ASSERT(c == bb);
        const char *k = nullptr;
        size_t kl = 0;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_bundle_entry(&k, &kl, &c, v.v, 2));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_bundle_entry(&k, &kl, &c, v.v, 0xFFFFFFFFu));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_bundle_entry(nullptr, &kl, &c, v.v, 0));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_bundle_entry(&k, &kl, &c, nullptr, 0));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_bundle_find(&c, nullptr, "a", 1));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_bundle_find(&c, v.v, nullptr, 1));

        // A dense view is not a bundle.
        TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_view_bundle_entry(&k, &kl, &c, a, 0));
        TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_view_bundle_find(&c, a, "a", 1));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_view_bundle_count(a));
    }

    void testChildViewsPointIntoParent() {
        Bytes p = golden("bundle_mixed");
        ViewPtr v;
        TENSO_CHECK_OK(tenso_loads(v.out(), p.data(), p.size(), nullptr));
        const tenso_view *a = find(v.v, "a");
        const tenso_view *bb = find(v.v, "b");
        // "a" starts at 19 (10 + 4 + 1 + 4), body 64 later; "b" at 19 + 72 + 9 = 100.
        CPPUNIT_ASSERT(tenso_view_data(a) == static_cast<const void *>(p.data() + 83));
        CPPUNIT_ASSERT(tenso_view_data(bb) == static_cast<const void *>(p.data() + 164));
        CPPUNIT_ASSERT_EQUAL(0, tenso_view_owns_data(a));
        const char *k = nullptr;
        size_t kl = 0;
        const tenso_view *c = nullptr;
        TENSO_CHECK_OK(tenso_view_bundle_entry(&k, &kl, &c, v.v, 1));
        CPPUNIT_ASSERT(k == reinterpret_cast<const char *>(p.data() + 95));  // the key, in place
        CPPUNIT_ASSERT_EQUAL(size_t(1), kl);

        // Nested children too: every body lies inside the parent's bytes.
        Bytes n3 = golden("bundle_nested3");
        TENSO_CHECK_OK(tenso_loads(v.out(), n3.data(), n3.size(), nullptr));
        const tenso_view *w = find(find(find(find(v.v, "l1"), "l2"), "l3"), "w");
        const uint8_t *wd = static_cast<const uint8_t *>(tenso_view_data(w));
        CPPUNIT_ASSERT(wd >= n3.data() && wd + 4 <= n3.data() + n3.size());
        CPPUNIT_ASSERT_EQUAL(uint32_t(0xee6b2800u), elem<uint32_t>(w, 0));
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), tenso_view_ndim(w));

        // A compressed bundle: compressed children own their (decompressed) data.
        Bytes bc = golden("bundle_compressed");
        TENSO_CHECK_OK(tenso_loads(v.out(), bc.data(), bc.size(), nullptr));
        const tenso_view *tile = find(v.v, "tile");
        CPPUNIT_ASSERT_EQUAL(1, tenso_view_owns_data(tile));
        CPPUNIT_ASSERT_EQUAL(uint64_t(2048), tenso_view_nbytes(tile));
        for (int i = 0; i < 256; ++i) CPPUNIT_ASSERT_EQUAL(double(i % 64), elem<double>(tile, size_t(i)));
        const tenso_view *nz = find(find(v.v, "nested"), "z");
        CPPUNIT_ASSERT_EQUAL(uint64_t(1024), tenso_view_nbytes(nz));
        CPPUNIT_ASSERT_EQUAL(0.0f, elem<float>(nz, 255));
    }

    void testBufferTooSmallForValue() {
        Builder b;
        tenso_value *bundle = b.bundle({{"a", b.tensor(TENSO_DTYPE_FLOAT32, {2}, "0000803f00000040")}});
        Bytes p = encode(bundle);
        Bytes buf(p.size() + 32, 0xEE);
        size_t written = 0;
        TENSO_CHECK_STATUS(TENSO_E_BUFFER_TOO_SMALL,
                           tenso_value_dumps_into(buf.data(), p.size() - 1, &written, bundle, nullptr));
        CPPUNIT_ASSERT_EQUAL(p.size(), written);
        for (size_t i = p.size() - 1; i < buf.size(); ++i) CPPUNIT_ASSERT_EQUAL(uint8_t(0xEE), buf[i]);
        TENSO_CHECK_STATUS(TENSO_E_BUFFER_TOO_SMALL, tenso_value_dumps_into(nullptr, 0, &written, bundle, nullptr));
        CPPUNIT_ASSERT_EQUAL(p.size(), written);
        TENSO_CHECK_OK(tenso_value_dumps_into(buf.data(), p.size(), &written, bundle, nullptr));
        for (size_t i = p.size(); i < buf.size(); ++i) CPPUNIT_ASSERT_EQUAL(uint8_t(0xEE), buf[i]);
        assert_bytes("into exact capacity", p, Bytes(buf.begin(), buf.begin() + long(p.size())));
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiBundleTest);
