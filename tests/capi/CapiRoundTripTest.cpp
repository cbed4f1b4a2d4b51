// CapiRoundTripTest - seeded property tests over the whole dense/bundle surface of the C API:
// random dtypes, shapes (zeros included), alignments, integrity, compression and data, plus
// random nested bundles with pre-encoded packets. For every case the three encoders agree,
// encoding is deterministic, the layout is the one the wire document gives, and loads /
// packet_length / inspect give back exactly what went in. A failure names the seed and case.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <cppunit/extensions/HelperMacros.h>

#include "check.hpp"
#include "tenso/tenso.h"

namespace {

using Bytes = std::vector<uint8_t>;
using Rng = std::mt19937_64;

constexpr uint64_t kSeed = 0x7E5507E5C0FFEEull;
constexpr int kDenseCases = 1600;
constexpr int kBundleCases = 400;
constexpr size_t kMaxElements = 2048;

struct TCase {
    tenso_dtype dtype = TENSO_DTYPE_FLOAT32;
    std::vector<uint64_t> shape;
    Bytes data;
    tenso_tensor tensor() const {
        return tenso_tensor{data.data(), data.size(), shape.data(), uint32_t(shape.size()), dtype};
    }
};

struct Opts {
    uint32_t flags = 0, alignment = 0;
    tenso_encode_options get() const {
        tenso_encode_options o = TENSO_ENCODE_OPTIONS_INIT;
        o.flags = flags;
        o.alignment = alignment;
        return o;
    }
    uint32_t effective_alignment() const { return alignment ? alignment : 64; }
};

std::string describe(const TCase &t, const Opts &o) {
    std::string s = std::string(tenso_dtype_name(t.dtype)) + "[";
    for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? "," : "") + std::to_string(t.shape[i]);
    s += "] alignment=" + std::to_string(o.alignment) +
         " integrity=" + std::to_string(bool(o.flags & TENSO_ENCODE_INTEGRITY)) +
         " compress=" + std::to_string(bool(o.flags & TENSO_ENCODE_COMPRESS));
    return s;
}

TCase random_tensor(Rng &rng, size_t max_elements) {
    TCase t;
    t.dtype = tenso_dtype(1 + rng() % 15);
    for (;;) {
        t.shape.assign(rng() % 7, 0);
        uint64_t n = 1;
        for (auto &d : t.shape) {
            d = (rng() % 10 == 0) ? 0 : 1 + rng() % (rng() % 4 == 0 ? 40 : 5);
            n *= d;
        }
        if (n <= max_elements) break;
    }
    uint64_t n = 1;
    for (auto d : t.shape) n *= d;
    size_t item = tenso_dtype_itemsize(t.dtype);
    t.data.resize(n * item);
    switch (rng() % 3) {
    case 0:  // incompressible
        for (auto &b : t.data) b = uint8_t(rng());
        break;
    case 1: {  // a short repeating pattern
        uint8_t pat[7];
        for (auto &b : pat) b = uint8_t(rng());
        size_t period = 1 + rng() % 7;
        for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = pat[i % period];
        break;
    }
    default:  // mostly zeros
        for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = (rng() % 16 == 0) ? uint8_t(rng()) : 0;
    }
    if (t.dtype == TENSO_DTYPE_BOOL)
        for (auto &b : t.data) b &= 1;
    return t;
}

Opts random_opts(Rng &rng) {
    Opts o;
    o.alignment = (rng() % 8 == 0) ? 0 : (1u << (rng() % 13));  // default, or 1 .. 4096
    if (rng() % 2) o.flags |= TENSO_ENCODE_INTEGRITY;
    if (rng() % 3 == 0) o.flags |= TENSO_ENCODE_COMPRESS;
    return o;
}

uint32_t rd32(const uint8_t *p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
void put32(Bytes &b, uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i)));
}

// Encodes a tensor through bound + into (with guard bytes), alloc, and into again; checks they
// agree and returns the packet.
Bytes encode_all_ways(const std::string &ctx, const tenso_tensor &t, const tenso_encode_options &o) {
    size_t bound = 0, n1 = 0, n2 = 0;
    TENSO_CHECK_OK(tenso_dumps_bound(&bound, &t, &o));
    Bytes a(bound + 64, 0xEE);
    TENSO_CHECK_OK(tenso_dumps_into(a.data(), bound, &n1, &t, &o));
    CPPUNIT_ASSERT_MESSAGE(ctx + ": written > bound", n1 <= bound);
    if (!(o.flags & TENSO_ENCODE_COMPRESS)) CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx + ": bound", bound, n1);
    for (size_t i = bound; i < a.size(); ++i) CPPUNIT_ASSERT_MESSAGE(ctx + ": wrote past the capacity", a[i] == 0xEE);
    a.resize(n1);
    tenso_buffer b = TENSO_BUFFER_INIT;
    TENSO_CHECK_OK(tenso_dumps(&b, &t, &o));
    CPPUNIT_ASSERT_MESSAGE(ctx + ": dumps buffer not 64-aligned", reinterpret_cast<uintptr_t>(b.data) % 64 == 0);
    CPPUNIT_ASSERT_MESSAGE(ctx + ": dumps differs from dumps_into", Bytes(b.data, b.data + b.size) == a);
    tenso_buffer_dispose(&b);
    Bytes again(n1);
    TENSO_CHECK_OK(tenso_dumps_into(again.data(), again.size(), &n2, &t, &o));
    CPPUNIT_ASSERT_MESSAGE(ctx + ": encoding is not deterministic", again == a);
    return a;
}

// Checks a dense view against the tensor it came from.
void check_dense_view(const std::string &ctx, const tenso_view *v, const TCase &t) {
    CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, TENSO_KIND_DENSE, tenso_view_kind(v));
    CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, t.dtype, tenso_view_dtype(v));
    CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, uint32_t(t.shape.size()), tenso_view_ndim(v));
    const uint64_t *shape = tenso_view_shape(v);
    if (t.shape.empty()) CPPUNIT_ASSERT_MESSAGE(ctx + ": shape of a scalar", shape == nullptr);
    for (size_t i = 0; i < t.shape.size(); ++i) CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, t.shape[i], shape[i]);
    CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, uint64_t(t.data.size()), tenso_view_nbytes(v));
    const void *d = tenso_view_data(v);
    if (t.data.empty()) CPPUNIT_ASSERT_MESSAGE(ctx + ": data of an empty tensor", d == nullptr);
    else CPPUNIT_ASSERT_MESSAGE(ctx + ": bytes differ", std::memcmp(d, t.data.data(), t.data.size()) == 0);
}

// ---- random bundles ----

struct Node {
    enum Type { kTensor, kPacket, kBundle } type = kTensor;
    TCase t;                                            // kTensor, kPacket
    Bytes packet;                                       // kPacket: t encoded with its own options
    std::vector<std::pair<std::string, Node>> entries;  // kBundle
};

std::string random_key(Rng &rng) {
    static const char *const pool[] = {"",
                                       "a",
                                       "b",
                                       "a",
                                       "x.y",
                                       "\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87",
                                       "\xe6\x97\xa5\xe6\x9c\xac",
                                       "\xf0\x9f\x98\x80",
                                       "__ragged_flat__"};
    if (rng() % 3) return pool[rng() % (sizeof pool / sizeof pool[0])];
    std::string k(rng() % 20, ' ');
    for (auto &c : k) c = char(0x20 + rng() % 95);
    return k;
}

Node random_node(Rng &rng, int depth) {
    Node n;
    n.type = Node::kBundle;
    size_t count = rng() % 6;
    for (size_t i = 0; i < count; ++i) {
        Node c;
        unsigned r = unsigned(rng() % 20);
        if (r < 5 && depth < 3) {
            c = random_node(rng, depth + 1);
        } else if (r < 8) {
            c.type = Node::kPacket;
            c.t = random_tensor(rng, 256);
            tenso_tensor tt = c.t.tensor();
            tenso_encode_options own = random_opts(rng).get();
            tenso_buffer b = TENSO_BUFFER_INIT;
            TENSO_CHECK_OK(tenso_dumps(&b, &tt, &own));
            c.packet.assign(b.data, b.data + b.size);
            tenso_buffer_dispose(&b);
        } else {
            c.type = Node::kTensor;
            c.t = random_tensor(rng, 256);
        }
        n.entries.emplace_back(random_key(rng), std::move(c));
    }
    return n;
}

// Builds the tenso_value for a node; children are freed right after insertion (insert copies).
tenso_value *build(const Node &n) {
    tenso_value *v = nullptr;
    switch (n.type) {
    case Node::kTensor: {
        tenso_tensor tt = n.t.tensor();
        TENSO_CHECK_OK(tenso_value_new_tensor(&v, &tt));
        return v;
    }
    case Node::kPacket: TENSO_CHECK_OK(tenso_value_new_packet(&v, n.packet.data(), n.packet.size())); return v;
    case Node::kBundle: break;
    }
    TENSO_CHECK_OK(tenso_value_new_bundle(&v));
    for (const auto &e : n.entries) {
        tenso_value *c = build(e.second);
        tenso_status st = tenso_bundle_insert(v, e.first.data(), e.first.size(), c);
        tenso_value_free(c);
        TENSO_CHECK_OK(st);
    }
    return v;
}

// The bytes a node must encode to, assembled independently from standalone packets.
Bytes expected_bytes(const Node &n, const tenso_encode_options &o) {
    if (n.type == Node::kPacket) return n.packet;
    if (n.type == Node::kTensor) {
        tenso_tensor tt = n.t.tensor();
        tenso_buffer b = TENSO_BUFFER_INIT;
        TENSO_CHECK_OK(tenso_dumps(&b, &tt, &o));
        Bytes out(b.data, b.data + b.size);
        tenso_buffer_dispose(&b);
        return out;
    }
    Bytes out = {'T', 'N', 'S', 'O', 4, 0x10, 0x00, 0, uint8_t(n.entries.size()), 0};
    for (const auto &e : n.entries) {
        put32(out, uint32_t(e.first.size()));
        out.insert(out.end(), e.first.begin(), e.first.end());
        Bytes child = expected_bytes(e.second, o);
        put32(out, uint32_t(child.size()));
        out.insert(out.end(), child.begin(), child.end());
    }
    return out;
}

void check_node_view(const std::string &ctx, const tenso_view *v, const Node &n) {
    if (n.type != Node::kBundle) {
        check_dense_view(ctx, v, n.t);
        return;
    }
    CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, TENSO_KIND_BUNDLE, tenso_view_kind(v));
    CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, uint32_t(n.entries.size()), tenso_view_bundle_count(v));
    for (uint32_t i = 0; i < n.entries.size(); ++i) {
        const char *k = nullptr;
        size_t kl = 0;
        const tenso_view *c = nullptr;
        TENSO_CHECK_OK(tenso_view_bundle_entry(&k, &kl, &c, v, i));
        const std::string sub = ctx + "/" + std::to_string(i);
        CPPUNIT_ASSERT_EQUAL_MESSAGE(sub + " key", n.entries[i].first, std::string(k, kl));
        check_node_view(sub, c, n.entries[i].second);
    }
}

}  // namespace

class CapiRoundTripTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiRoundTripTest);
    CPPUNIT_TEST(testDenseRoundTrip);
    CPPUNIT_TEST(testBundleRoundTrip);
    CPPUNIT_TEST_SUITE_END();

public:
    void testDenseRoundTrip() {
        int compressed = 0, with_footer = 0, empty = 0, scalars = 0;
        for (int i = 0; i < kDenseCases; ++i) {
            Rng rng(kSeed + uint64_t(i));  // every case reproducible on its own
            TCase t = random_tensor(rng, kMaxElements);
            Opts opts = random_opts(rng);
            const std::string ctx =
                "seed " + std::to_string(kSeed) + " case " + std::to_string(i) + " (" + describe(t, opts) + ")";
            compressed += (opts.flags & TENSO_ENCODE_COMPRESS) != 0;
            with_footer += (opts.flags & TENSO_ENCODE_INTEGRITY) != 0;
            empty += t.data.empty();
            scalars += t.shape.empty();
            run_dense_case(ctx, t, opts, i % 10 == 0);
        }
        // The generator really covers what it claims.
        CPPUNIT_ASSERT(compressed > kDenseCases / 5 && with_footer > kDenseCases / 3);
        CPPUNIT_ASSERT(empty > 20 && scalars > 20);
    }

    void testBundleRoundTrip() {
        for (int i = 0; i < kBundleCases; ++i) {
            Rng rng(~kSeed + uint64_t(i));
            Node root = random_node(rng, 0);
            Opts opts = random_opts(rng);
            tenso_encode_options o = opts.get();
            const std::string ctx = "bundle seed " + std::to_string(~kSeed) + " case " + std::to_string(i) +
                                    " (alignment=" + std::to_string(opts.alignment) +
                                    " flags=" + std::to_string(opts.flags) + ")";
            tenso_value *v = build(root);
            size_t bound = 0, n = 0;
            tenso_status st = tenso_value_dumps_bound(&bound, v, &o);
            Bytes got(st == TENSO_OK ? bound : 0);
            if (st == TENSO_OK) st = tenso_value_dumps_into(got.data(), got.size(), &n, v, &o);
            tenso_buffer b = TENSO_BUFFER_INIT;
            tenso_status st2 = tenso_value_dumps(&b, v, &o);
            Bytes again(n);
            size_t n2 = 0;
            tenso_status st3 = st == TENSO_OK ? tenso_value_dumps_into(again.data(), again.size(), &n2, v, &o) : st;
            tenso_value_free(v);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx + " " + tenso_last_error(), TENSO_OK, st);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, TENSO_OK, st2);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, TENSO_OK, st3);
            got.resize(n);
            Bytes alloc(b.data, b.data + b.size);
            tenso_buffer_dispose(&b);
            CPPUNIT_ASSERT_MESSAGE(ctx + ": value_dumps differs", alloc == got);
            CPPUNIT_ASSERT_MESSAGE(ctx + ": not deterministic", again == got);
            if (!(opts.flags & TENSO_ENCODE_COMPRESS)) CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx + ": bound", bound, n);
            CPPUNIT_ASSERT_MESSAGE(ctx + ": bytes differ from the standalone packets assembled",
                                   got == expected_bytes(root, o));

            size_t len = 0;
            Bytes slack = got;
            slack.resize(got.size() + 17, 0xAB);
            TENSO_CHECK_OK(tenso_packet_length(&len, slack.data(), slack.size(), nullptr));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, got.size(), len);
            tenso_packet_info info;
            TENSO_CHECK_OK(tenso_inspect(&info, got.data(), got.size()));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, TENSO_KIND_BUNDLE, info.kind);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, uint32_t(root.entries.size()), info.entry_count);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, uint64_t(got.size()), info.packet_size);
            tenso_view *view = nullptr;
            TENSO_CHECK_OK(tenso_loads(&view, slack.data(), slack.size(), nullptr));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, uint64_t(got.size()), tenso_view_packet_size(view));
            check_node_view(ctx, view, root);
            tenso_view_free(view);
        }
    }

private:
    void run_dense_case(const std::string &ctx, const TCase &t, const Opts &opts, bool probe_small) {
        const tenso_tensor tt = t.tensor();
        const tenso_encode_options o = opts.get();
        Bytes p = encode_all_ways(ctx, tt, o);
        const bool comp = opts.flags & TENSO_ENCODE_COMPRESS, integ = opts.flags & TENSO_ENCODE_INTEGRITY;
        const uint32_t a = opts.effective_alignment();
        const size_t ndim = t.shape.size();

        // Layout, as the wire document gives it.
        const size_t header = 10 + 4 * ndim + (a != 64 ? 1 : 0);
        const size_t body_off = (header + a - 1) / a * a;
        const uint16_t flags = uint16_t((a == 64 ? TENSO_FLAG_ALIGNED : TENSO_FLAG_CUST_ALIGN) |
                                        (integ ? TENSO_FLAG_INTEGRITY : 0) | (comp ? TENSO_FLAG_COMPRESSION : 0));
        CPPUNIT_ASSERT_MESSAGE(ctx + ": packet shorter than its header", p.size() >= body_off);
        const uint8_t base[10] = {
            'T', 'N', 'S', 'O', 4, uint8_t(flags), uint8_t(flags >> 8), uint8_t(t.dtype), uint8_t(ndim), 0};
        CPPUNIT_ASSERT_MESSAGE(ctx + ": base header", std::memcmp(p.data(), base, 10) == 0);
        for (size_t i = 0; i < ndim; ++i)
            CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx + ": shape", uint32_t(t.shape[i]), rd32(p.data() + 10 + 4 * i));
        if (a != 64) {
            unsigned e = 0;
            while ((1u << e) < a) ++e;
            CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx + ": exponent byte", uint8_t(e), p[10 + 4 * ndim]);
        }
        for (size_t i = header; i < body_off; ++i) CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx + ": padding", uint8_t(0), p[i]);
        if (!comp) {
            CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx + ": size", body_off + t.data.size() + (integ ? 8 : 0), p.size());
            CPPUNIT_ASSERT_MESSAGE(
                ctx + ": body", t.data.empty() || std::memcmp(p.data() + body_off, t.data.data(), t.data.size()) == 0);
        } else {
            const uint8_t magic[4] = {0x04, 0x22, 0x4d, 0x18};
            CPPUNIT_ASSERT_MESSAGE(ctx + ": LZ4 frame magic", std::memcmp(p.data() + body_off, magic, 4) == 0);
        }

        // packet_length, with slack after the packet.
        Bytes slack = p;
        slack.resize(p.size() + 1 + p.size() % 61, 0xC3);
        size_t len = 0;
        TENSO_CHECK_OK(tenso_packet_length(&len, slack.data(), slack.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx + ": packet_length", p.size(), len);
        tenso_status st = tenso_packet_length(&len, p.data(), p.size() - 1, nullptr);
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx + ": one byte short", TENSO_E_TRUNCATED, st);
        CPPUNIT_ASSERT_MESSAGE(ctx + ": one byte short asks for", len == p.size());

        // inspect.
        tenso_packet_info info;
        TENSO_CHECK_OK(tenso_inspect(&info, p.data(), p.size()));
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, uint32_t(4), info.version);
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, uint32_t(flags), info.flags);
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, TENSO_KIND_DENSE, info.kind);
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, t.dtype, info.dtype);
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, uint32_t(ndim), info.ndim);
        for (size_t i = 0; i < ndim; ++i) CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, t.shape[i], info.shape[i]);
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, a, info.alignment);
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, uint64_t(body_off), info.body_offset);
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, uint64_t(p.size() - body_off - (integ ? 8 : 0)), info.body_size);
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, uint64_t(p.size()), info.packet_size);

        // loads from a 64-aligned copy, with slack after it.
        tenso_buffer b = TENSO_BUFFER_INIT;
        TENSO_CHECK_OK(tenso_dumps(&b, &tt, &o));
        tenso_view *v = nullptr;
        st = tenso_loads(&v, b.data, b.size, nullptr);
        if (st != TENSO_OK) tenso_buffer_dispose(&b);
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx + ": loads -> " + tenso_describe(st), TENSO_OK, st);
        check_dense_view(ctx, v, t);
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, uint64_t(p.size()), tenso_view_packet_size(v));
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, a, tenso_view_alignment(v));
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, uint32_t(flags), tenso_view_flags(v));
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx, uint32_t(4), tenso_view_version(v));
        CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx + ": owns_data", comp ? 1 : 0, tenso_view_owns_data(v));
        if (!comp && !t.data.empty()) {
            CPPUNIT_ASSERT_MESSAGE(ctx + ": not zero copy", tenso_view_data(v) == b.data + body_off);
            const uintptr_t want = a < 64 ? a : 64;
            CPPUNIT_ASSERT_MESSAGE(ctx + ": body not aligned in memory",
                                   reinterpret_cast<uintptr_t>(tenso_view_data(v)) % want == 0);
        }
        tenso_view_free(v);
        TENSO_CHECK_OK(tenso_loads(&v, slack.data(), slack.size(), nullptr));
        check_dense_view(ctx + " (slack)", v, t);
        tenso_view_free(v);
        tenso_buffer_dispose(&b);

        if (probe_small) {
            Bytes g(p.size() + 8, 0xEE);
            size_t need = 0;
            st = tenso_dumps_into(g.data(), p.size() - 1, &need, &tt, &o);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(ctx + ": one byte too small", TENSO_E_BUFFER_TOO_SMALL, st);
            CPPUNIT_ASSERT_MESSAGE(ctx + ": needed size", comp ? need >= p.size() : need == p.size());
            for (size_t i = p.size() - 1; i < g.size(); ++i)
                CPPUNIT_ASSERT_MESSAGE(ctx + ": wrote past the capacity", g[i] == 0xEE);
        }
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiRoundTripTest);
