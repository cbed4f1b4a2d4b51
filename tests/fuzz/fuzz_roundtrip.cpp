// fuzz_roundtrip.cpp - encode what the input describes, decode it, compare.
//
// The input chooses the encode options (integrity, compression and its level, alignment 1 to
// 4096 or the default), then a value: one leaf, or a bundle tree up to 4 deep with fuzz-chosen
// keys (invalid UTF-8 included, which must be refused). A leaf is a dense tensor (dtype 1..15,
// ndim 0..5, dims 0..4, body bytes from the input), a packet pre-encoded with its own options,
// a sparse COO/CSR/CSC matrix (valid structure, or raw indices the constructor may refuse),
// a tenso_quantize of raw float bits (any scheme, 8 or 4 bits), a string tensor, a GPU IPC
// reference or a ragged array. Two special shapes probe the limits: a chain of 60..65 nested
// bundles (64 is the most that encodes and decodes) and a bundle given 256 entries (255 fit).
// Invariants:
//   - every encoder (tenso_dumps, _into, _write_fd and their tenso_value_* forms) gives the
//     same bytes, and the same bytes again on a second run;
//   - the bound is >= the size, and exact without compression; _into with one byte too
//     little says BUFFER_TOO_SMALL and reports the size;
//   - packet_length and inspect give the size; every strict prefix is TRUNCATED;
//   - tenso_loads gives back the tree: dtype, shape, body bytes, keys, flags and alignment;
//     sparse components (always written with default options), quantization parameters and
//     codes (and their dequantized floats, bit for bit), string offsets, IPC references, and
//     ragged arrays through tenso_view_ragged;
//   - a bundle entry's bytes are exactly the standalone packet of that entry;
//   - a flipped integrity footer fails with CHECKSUM, and decodes with SKIP_CHECKSUM.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_common.hpp"

namespace {

// RAII for the library's handles.
struct Buffer {
    tenso_buffer b = TENSO_BUFFER_INIT;
    ~Buffer() { tenso_buffer_dispose(&b); }
};
struct ValueDel {
    void operator()(tenso_value *v) const { tenso_value_free(v); }
};
using ValuePtr = std::unique_ptr<tenso_value, ValueDel>;
struct ViewDel {
    void operator()(tenso_view *v) const { tenso_view_free(v); }
};
using ViewPtr = std::unique_ptr<tenso_view, ViewDel>;

// What was encoded, kept to compare the decoded packet with.
struct Node {
    enum Type { kTensor, kPacket, kBundle, kSparse, kQuantized, kStrings, kIpc, kRagged } type = kTensor;
    // kTensor and kPacket; kRagged: the flat values
    tenso_dtype dtype = 0;
    std::vector<uint64_t> shape;
    std::vector<uint8_t> body;
    tenso_encode_options packet_opts = TENSO_ENCODE_OPTIONS_INIT;  // kPacket: how it was encoded
    Buffer packet;
    // kBundle; kSparse: the three components (keys unused)
    std::vector<std::pair<std::string, std::unique_ptr<Node>>> entries;
    tenso_kind sparse_kind = 0;
    // kStrings (count + 1 offsets into body); kRagged (row offsets into the flat values)
    std::vector<uint64_t> offsets;
    tenso_ipc_ref ref;
    ValuePtr value;

    tenso_tensor tensor() const {
        tenso_tensor t;
        t.data = body.empty() ? nullptr : body.data();
        t.nbytes = body.size();
        t.shape = shape.empty() ? nullptr : shape.data();
        t.ndim = uint32_t(shape.size());
        t.dtype = dtype;
        return t;
    }
};

tenso_encode_options read_opts(fuzz::Reader &r) {
    tenso_encode_options o;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_encode_options_init(&o, TENSO_ENCODE_OPTIONS_VERSION));
    uint8_t f = r.u8();
    o.flags = (f & 1 ? TENSO_ENCODE_INTEGRITY : 0) | (f & 2 ? TENSO_ENCODE_COMPRESS : 0);
    unsigned e = (f >> 2) % 14;  // 1 .. 4096, or 0 = the default 64
    o.alignment = e == 13 ? 0 : 1u << e;
    o.compression_level = int32_t(r.u8() % 16) - 2;  // negative = LZ4 acceleration
    return o;
}

uint32_t effective_alignment(const tenso_encode_options &o) { return o.alignment ? o.alignment : 64; }

void read_tensor(fuzz::Reader &r, Node *n) {
    n->dtype = tenso_dtype(r.range(1, 15));
    uint32_t ndim = r.range(0, 5);
    uint64_t count = 1;
    for (uint32_t i = 0; i < ndim; ++i) {
        n->shape.push_back(r.range(0, 4));
        count *= n->shape.back();
    }
    n->body.resize(count * tenso_dtype_itemsize(n->dtype));
    r.bytes(n->body.data(), n->body.size());
}

std::unique_ptr<Node> make_dense(fuzz::Reader &r) {
    auto n = std::make_unique<Node>();
    read_tensor(r, n.get());
    tenso_tensor t = n->tensor();
    tenso_value *v = nullptr;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_new_tensor(&v, &t));
    n->value.reset(v);
    return n;
}

std::unique_ptr<Node> make_packet(fuzz::Reader &r) {
    auto n = std::make_unique<Node>();
    n->type = Node::kPacket;
    n->packet_opts = read_opts(r);
    read_tensor(r, n.get());
    tenso_tensor t = n->tensor();
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_dumps(&n->packet.b, &t, &n->packet_opts));
    tenso_value *v = nullptr;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_new_packet(&v, n->packet.b.data, n->packet.b.size));
    n->value.reset(v);
    // A value packet must be exactly one packet.
    tenso_value *bad = reinterpret_cast<tenso_value *>(1);
    FUZZ_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_value_new_packet(&bad, n->packet.b.data, n->packet.b.size - 1));
    FUZZ_CHECK(bad == nullptr, "failed new_packet left a value");
    return n;
}

// A 1-D dense component holding `vals` in an integer dtype.
std::unique_ptr<Node> index_array(tenso_dtype dtype, const std::vector<uint64_t> &vals) {
    auto n = std::make_unique<Node>();
    n->dtype = dtype;
    n->shape = {vals.size()};
    size_t item = tenso_dtype_itemsize(dtype);
    n->body.resize(vals.size() * item);
    for (size_t i = 0; i < vals.size(); ++i)
        for (size_t b = 0; b < item; ++b) n->body[i * item + b] = uint8_t(b < 8 ? vals[i] >> (8 * b) : 0);
    return n;
}

const tenso_dtype kIndexDtypes[8] = {TENSO_DTYPE_INT8,  TENSO_DTYPE_UINT8,  TENSO_DTYPE_INT16, TENSO_DTYPE_UINT16,
                                     TENSO_DTYPE_INT32, TENSO_DTYPE_UINT32, TENSO_DTYPE_INT64, TENSO_DTYPE_UINT64};

// A sparse matrix; nullptr when raw indices made the constructor refuse it (as it must).
std::unique_ptr<Node> make_sparse(fuzz::Reader &r) {
    auto n = std::make_unique<Node>();
    n->type = Node::kSparse;
    const tenso_kind kinds[3] = {TENSO_KIND_SPARSE_COO, TENSO_KIND_SPARSE_CSR, TENSO_KIND_SPARSE_CSC};
    n->sparse_kind = kinds[r.u8() % 3];
    n->shape = {r.range(0, 4), r.range(0, 4)};
    const tenso_dtype ib = kIndexDtypes[r.u8() % 8], ic = kIndexDtypes[r.u8() % 8];
    const bool raw = r.u8() % 8 == 0;  // indices straight from the input: maybe out of range
    std::vector<uint64_t> b, c;
    if (n->sparse_kind == TENSO_KIND_SPARSE_COO) {
        uint32_t nnz = (n->shape[0] && n->shape[1]) || raw ? r.range(0, 6) : 0;
        for (uint32_t i = 0; i < nnz; ++i) {
            b.push_back(raw ? r.u8() : r.u8() % n->shape[0]);
            c.push_back(raw ? r.u8() : r.u8() % n->shape[1]);
        }
    } else {
        bool csr = n->sparse_kind == TENSO_KIND_SPARSE_CSR;
        uint64_t major = csr ? n->shape[0] : n->shape[1], minor = csr ? n->shape[1] : n->shape[0];
        c.push_back(0);
        for (uint64_t i = 0; i < major; ++i) c.push_back(c.back() + (minor || raw ? r.range(0, 2) : 0));
        uint64_t nnz = c.back();
        if (raw) nnz = nnz + r.u8() % 3 - std::min<uint64_t>(nnz, 1);  // maybe not indptr's end
        for (uint64_t i = 0; i < nnz; ++i) b.push_back(raw ? r.u8() : r.u8() % minor);
    }
    auto data = std::make_unique<Node>();
    data->dtype = tenso_dtype(r.range(1, 15));
    data->shape = {b.size()};
    data->body.resize(b.size() * tenso_dtype_itemsize(data->dtype));
    r.bytes(data->body.data(), data->body.size());
    n->entries.emplace_back("", std::move(data));
    n->entries.emplace_back("", index_array(ib, b));
    n->entries.emplace_back("", index_array(ic, c));
    tenso_tensor t[3] = {n->entries[0].second->tensor(), n->entries[1].second->tensor(),
                         n->entries[2].second->tensor()};
    tenso_value *v = nullptr;
    tenso_status st = tenso_value_new_sparse(&v, n->sparse_kind, 2, n->shape.data(), &t[0], &t[1], &t[2]);
    if (!raw) FUZZ_CHECK(st == TENSO_OK, "a valid sparse structure was refused: %s", tenso_status_name(st));
    if (st != TENSO_OK) {
        FUZZ_CHECK(st == TENSO_E_INVALID_ARGUMENT && v == nullptr, "new_sparse: %s", tenso_status_name(st));
        return nullptr;
    }
    n->value.reset(v);
    return n;
}

// tenso_quantize of raw float bits: whatever the floats, it must not misbehave.
std::unique_ptr<Node> make_quantized(fuzz::Reader &r) {
    auto n = std::make_unique<Node>();
    n->type = Node::kQuantized;
    const tenso_dtype src[3] = {TENSO_DTYPE_FLOAT32, TENSO_DTYPE_FLOAT16, TENSO_DTYPE_BFLOAT16};
    n->dtype = src[r.u8() % 3];
    const tenso_dtype qdtype = tenso_dtype(TENSO_DTYPE_QINT8 + r.u8() % 4);
    const int32_t scheme = int32_t(r.u8() % 4);  // 3 is no scheme: refused
    const int32_t axis = int32_t(int8_t(r.u8())) % 6;
    const uint32_t group = r.range(0, 5);
    uint32_t ndim = r.range(0, 4);
    uint64_t count = 1;
    for (uint32_t i = 0; i < ndim; ++i) {
        n->shape.push_back(r.range(0, 5));
        count *= n->shape.back();
    }
    n->body.resize(count * tenso_dtype_itemsize(n->dtype));
    r.bytes(n->body.data(), n->body.size());
    tenso_tensor t = n->tensor();
    tenso_value *v = nullptr;
    tenso_status st = tenso_quantize(&v, &t, qdtype, scheme, axis, group);
    const int32_t norm = axis < 0 ? axis + int32_t(ndim) : axis;
    const bool valid = scheme == TENSO_QUANT_PER_TENSOR ||
                       (scheme == TENSO_QUANT_PER_CHANNEL && norm >= 0 && norm < int32_t(ndim)) ||
                       (scheme == TENSO_QUANT_PER_GROUP && group > 0);
    FUZZ_CHECK(st == (valid ? TENSO_OK : TENSO_E_INVALID_ARGUMENT),
               "tenso_quantize(scheme %d, axis %d, group %u, ndim %u): %s", scheme, axis, group, ndim,
               tenso_status_name(st));
    if (!valid) return nullptr;
    n->value.reset(v);
    tenso_quantized q;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_quantized(&q, v));
    FUZZ_CHECK(q.dtype == qdtype && q.scheme == scheme && q.ndim == ndim, "tenso_value_quantized parts");
    return n;
}

// Strings from raw bytes; nullptr when they are not UTF-8 (and were refused, as they must be).
std::unique_ptr<Node> make_strings(fuzz::Reader &r) {
    auto n = std::make_unique<Node>();
    n->type = Node::kStrings;
    uint32_t count = r.range(0, 5);
    n->offsets.push_back(0);
    for (uint32_t i = 0; i < count; ++i) n->offsets.push_back(n->offsets.back() + r.range(0, 4));
    n->body.resize(n->offsets.back());
    for (auto &c : n->body) c = r.flag() ? uint8_t('a' + r.u8() % 26) : r.u8();
    tenso_value *v = nullptr;
    tenso_status st = tenso_value_new_strings(&v, count, n->offsets.data(), n->body.empty() ? nullptr : n->body.data(),
                                              n->body.size());
    bool utf8 = fuzz::valid_utf8(n->body.data(), n->body.size());
    FUZZ_CHECK(st == (utf8 ? TENSO_OK : TENSO_E_INVALID_ARGUMENT), "new_strings of %s bytes: %s",
               utf8 ? "UTF-8" : "non-UTF-8", tenso_status_name(st));
    if (!utf8) return nullptr;
    n->value.reset(v);
    return n;
}

std::unique_ptr<Node> make_ipc(fuzz::Reader &r) {
    auto n = std::make_unique<Node>();
    n->type = Node::kIpc;
    r.bytes(n->ref.handle, sizeof n->ref.handle);
    n->ref.byte_offset = uint64_t(r.u32()) << 16 | r.u8();
    n->ref.nbytes = r.u32();
    r.bytes(n->ref.device_uuid, sizeof n->ref.device_uuid);
    tenso_value *v = nullptr;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_new_ipc_ref(&v, &n->ref));
    n->value.reset(v);
    return n;
}

std::unique_ptr<Node> make_ragged(fuzz::Reader &r) {
    auto n = std::make_unique<Node>();
    n->type = Node::kRagged;
    n->dtype = tenso_dtype(r.range(1, 15));
    uint32_t rows = r.range(0, 4);
    n->offsets.push_back(0);
    for (uint32_t i = 0; i < rows; ++i) n->offsets.push_back(n->offsets.back() + r.range(0, 3));
    n->shape = {n->offsets.back()};
    n->body.resize(n->offsets.back() * tenso_dtype_itemsize(n->dtype));
    r.bytes(n->body.data(), n->body.size());
    tenso_tensor flat = n->tensor();
    tenso_value *v = nullptr;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_new_ragged(&v, &flat, rows, n->offsets.data()));
    n->value.reset(v);
    return n;
}

// Kind byte: 0 pre-encoded packet, 1 sparse, 2 quantized, 3 strings, 4 IPC reference, 5 ragged,
// anything else a dense tensor. A composite the constructor refuses falls back to dense.
std::unique_ptr<Node> make_leaf(fuzz::Reader &r) {
    std::unique_ptr<Node> n;
    switch (r.u8() % 8) {
    case 0: n = make_packet(r); break;
    case 1: n = make_sparse(r); break;
    case 2: n = make_quantized(r); break;
    case 3: n = make_strings(r); break;
    case 4: n = make_ipc(r); break;
    case 5: n = make_ragged(r); break;
    default: break;
    }
    return n ? std::move(n) : make_dense(r);
}

std::string read_key(fuzz::Reader &r) {
    uint8_t kind = r.u8();
    size_t len = r.range(0, 6);
    std::string k(len, '\0');
    for (size_t i = 0; i < len; ++i) {
        uint8_t c = r.u8();
        k[i] = char((kind & 3) == 0 ? c : 'a' + c % 26);  // a quarter of the keys are raw bytes
    }
    return k;
}

// Inserts key -> child into bundle n, checking the status the rules give; keeps the entry in
// the tree only when it went in.
void insert(Node *n, std::string key, std::unique_ptr<Node> child) {
    bool valid = fuzz::valid_utf8(reinterpret_cast<const uint8_t *>(key.data()), key.size());
    bool full = n->entries.size() >= TENSO_MAX_BUNDLE_ENTRIES;
    tenso_status st = tenso_bundle_insert(n->value.get(), key.data(), key.size(), child->value.get());
    if (valid && !full) {
        FUZZ_CHECK(st == TENSO_OK, "insert of a valid key into a bundle of %zu: %s", n->entries.size(),
                   tenso_status_name(st));
        n->entries.emplace_back(std::move(key), std::move(child));
    } else {
        FUZZ_CHECK(st == TENSO_E_INVALID_ARGUMENT, "insert of a %s key into a bundle of %zu: %s",
                   valid ? "valid" : "non-UTF-8", n->entries.size(), tenso_status_name(st));
    }
    FUZZ_CHECK(tenso_bundle_count(n->value.get()) == n->entries.size(), "bundle_count %u, %zu inserted",
               tenso_bundle_count(n->value.get()), n->entries.size());
}

std::unique_ptr<Node> make_bundle() {
    auto n = std::make_unique<Node>();
    n->type = Node::kBundle;
    tenso_value *v = nullptr;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_new_bundle(&v));
    n->value.reset(v);
    return n;
}

std::unique_ptr<Node> make_tree(fuzz::Reader &r, int depth) {
    if (depth >= 4 || r.u8() % 3 != 0) return make_leaf(r);
    auto n = make_bundle();
    uint32_t count = r.range(0, 5);
    for (uint32_t i = 0; i < count; ++i) {
        std::string key = read_key(r);
        insert(n.get(), std::move(key), make_tree(r, depth + 1));
    }
    return n;
}

// Nesting levels below a node, as the encoder and decoder count them: sparse components and
// ragged parts are one level down.
uint32_t tree_depth(const Node &n) {
    if (n.type == Node::kSparse || n.type == Node::kRagged) return 1;
    uint32_t d = 0;
    for (const auto &e : n.entries) d = std::max(d, 1 + tree_depth(*e.second));
    return d;
}

// A chain of `levels` bundles around one tensor; inserts past nesting 64 must be refused.
std::unique_ptr<Node> make_chain(fuzz::Reader &r, uint32_t levels) {
    std::unique_ptr<Node> inner = make_leaf(r);
    for (uint32_t i = 0; i < levels; ++i) {
        const uint32_t depth = tree_depth(*inner);
        auto b = make_bundle();
        tenso_status st = tenso_bundle_insert(b->value.get(), "k", 1, inner->value.get());
        if (depth + 1 > TENSO_MAX_DEPTH) {
            FUZZ_CHECK(st == TENSO_E_INVALID_ARGUMENT, "nesting %u deep was accepted: %s", depth + 1,
                       tenso_status_name(st));
            break;
        }
        FUZZ_CHECK(st == TENSO_OK, "nesting %u deep refused: %s", depth + 1, tenso_status_name(st));
        b->entries.emplace_back("k", std::move(inner));
        inner = std::move(b);
    }
    return inner;
}

// A bundle offered 256 entries: the 256th is refused.
std::unique_ptr<Node> make_wide(fuzz::Reader &r) {
    auto n = make_bundle();
    std::unique_ptr<Node> proto = make_dense(r);
    for (int i = 0; i <= TENSO_MAX_BUNDLE_ENTRIES; ++i) {
        auto leaf = std::make_unique<Node>();
        leaf->type = Node::kTensor;
        leaf->dtype = proto->dtype;
        leaf->shape = proto->shape;
        leaf->body = proto->body;
        tenso_tensor t = leaf->tensor();
        tenso_value *v = nullptr;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_new_tensor(&v, &t));
        leaf->value.reset(v);
        insert(n.get(), std::to_string(i), std::move(leaf));
    }
    FUZZ_CHECK(n->entries.size() == TENSO_MAX_BUNDLE_ENTRIES, "wide bundle holds %zu", n->entries.size());
    return n;
}

uint32_t align_flag(uint32_t a) { return a == 64 ? TENSO_FLAG_ALIGNED : TENSO_FLAG_CUST_ALIGN; }

// A dense view against what was encoded under `o`.
void expect_dense(const tenso_view *v, const Node &n, const tenso_encode_options &o) {
    FUZZ_CHECK(tenso_view_kind(v) == TENSO_KIND_DENSE, "kind %d, wanted dense", tenso_view_kind(v));
    FUZZ_CHECK(tenso_view_dtype(v) == n.dtype, "dtype %d, encoded %d", tenso_view_dtype(v), n.dtype);
    FUZZ_CHECK(tenso_view_ndim(v) == n.shape.size(), "ndim %u, encoded %zu", tenso_view_ndim(v), n.shape.size());
    for (size_t i = 0; i < n.shape.size(); ++i)
        FUZZ_CHECK(tenso_view_shape(v)[i] == n.shape[i], "shape[%zu] differs", i);
    FUZZ_CHECK(tenso_view_nbytes(v) == n.body.size(), "nbytes %llu, encoded %zu",
               (unsigned long long)tenso_view_nbytes(v), n.body.size());
    if (!n.body.empty())
        FUZZ_CHECK(std::memcmp(tenso_view_data(v), n.body.data(), n.body.size()) == 0, "body bytes differ");
    uint32_t a = effective_alignment(o);
    FUZZ_CHECK(tenso_view_alignment(v) == a, "alignment %u, encoded %u", tenso_view_alignment(v), a);
    uint32_t want = align_flag(a) | (o.flags & TENSO_ENCODE_INTEGRITY ? TENSO_FLAG_INTEGRITY : 0) |
                    (o.flags & TENSO_ENCODE_COMPRESS ? TENSO_FLAG_COMPRESSION : 0);
    FUZZ_CHECK(tenso_view_flags(v) == want, "flags 0x%x, wanted 0x%x", tenso_view_flags(v), want);
}

// Dequantizes a quantized description into floats (their bits, for exact comparison).
std::vector<uint32_t> dequantized_bits(const tenso_quantized &q) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < q.ndim; ++i) n *= q.shape[i];
    std::vector<float> f(n ? n : 1);
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_dequantize(f.data(), n, &q));
    std::vector<uint32_t> bits(n);
    if (n) std::memcpy(bits.data(), f.data(), 4 * n);
    return bits;
}

// The decoded view against the tree; `top` are the options the tree was encoded with.
void expect_view(const tenso_view *v, const Node &n, const tenso_encode_options &top) {
    FUZZ_CHECK(tenso_view_version(v) == 4, "version %u", tenso_view_version(v));
    const uint32_t flags = tenso_view_flags(v);
    const uint32_t integrity = (top.flags & TENSO_ENCODE_INTEGRITY) ? TENSO_FLAG_INTEGRITY : 0;
    switch (n.type) {
    case Node::kTensor: expect_dense(v, n, top); return;
    case Node::kPacket: expect_dense(v, n, n.packet_opts); return;
    case Node::kBundle: {
        FUZZ_CHECK(tenso_view_kind(v) == TENSO_KIND_BUNDLE, "kind %d, wanted a bundle", tenso_view_kind(v));
        FUZZ_CHECK(flags == TENSO_FLAG_BUNDLE, "bundle flags 0x%x", flags);
        FUZZ_CHECK(tenso_view_bundle_count(v) == n.entries.size(), "%u entries decoded, %zu encoded",
                   tenso_view_bundle_count(v), n.entries.size());
        for (uint32_t i = 0; i < n.entries.size(); ++i) {
            const char *key;
            size_t key_len;
            const tenso_view *child;
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_bundle_entry(&key, &key_len, &child, v, i));
            const std::string &want = n.entries[i].first;
            FUZZ_CHECK(key_len == want.size() && (key_len == 0 || std::memcmp(key, want.data(), key_len) == 0),
                       "key %u differs", i);
            expect_view(child, *n.entries[i].second, top);
        }
        return;
    }
    case Node::kSparse: {
        FUZZ_CHECK(tenso_view_kind(v) == n.sparse_kind, "kind %d, wanted sparse %d", tenso_view_kind(v), n.sparse_kind);
        uint32_t want = n.sparse_kind == TENSO_KIND_SPARSE_COO   ? TENSO_FLAG_SPARSE_COO
                        : n.sparse_kind == TENSO_KIND_SPARSE_CSR ? TENSO_FLAG_SPARSE_CSR
                                                                 : TENSO_FLAG_SPARSE_CSC;
        FUZZ_CHECK(flags == want, "sparse flags 0x%x, wanted 0x%x", flags, want);
        FUZZ_CHECK(
            tenso_view_ndim(v) == 2 && tenso_view_shape(v)[0] == n.shape[0] && tenso_view_shape(v)[1] == n.shape[1],
            "sparse shape differs");
        // Components are always written with the default options, as upstream does.
        const tenso_encode_options defaults = TENSO_ENCODE_OPTIONS_INIT;
        for (uint32_t i = 0; i < 3; ++i) {
            const tenso_view *c = nullptr;
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_component(&c, v, i));
            expect_dense(c, *n.entries[i].second, defaults);
        }
        return;
    }
    case Node::kQuantized: {
        FUZZ_CHECK(tenso_view_kind(v) == TENSO_KIND_QUANTIZED, "kind %d, wanted quantized", tenso_view_kind(v));
        uint32_t a = effective_alignment(top);
        // Compression never applies to quantized bodies.
        FUZZ_CHECK(flags == (align_flag(a) | integrity), "quantized flags 0x%x", flags);
        FUZZ_CHECK(tenso_view_alignment(v) == a, "quantized alignment %u, encoded %u", tenso_view_alignment(v), a);
        tenso_quantized d, e;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_quantized(&d, v));
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_quantized(&e, n.value.get()));
        FUZZ_CHECK(d.dtype == e.dtype && d.scheme == e.scheme && d.axis == e.axis && d.group_size == e.group_size &&
                       d.num_scales == e.num_scales && d.ndim == e.ndim && d.nbytes == e.nbytes,
                   "quantization parameters differ after the round trip");
        FUZZ_CHECK(d.ndim == 0 || std::memcmp(d.shape, e.shape, 8 * d.ndim) == 0, "quantized shape differs");
        FUZZ_CHECK(fuzz::same_bytes(d.scales, e.scales, 4 * size_t(d.num_scales)) &&
                       fuzz::same_bytes(d.zero_points, e.zero_points, 4 * size_t(d.num_scales)),
                   "scales or zero points differ");
        FUZZ_CHECK(d.nbytes == 0 || std::memcmp(d.data, e.data, d.nbytes) == 0, "quantized codes differ");
        FUZZ_CHECK(dequantized_bits(d) == dequantized_bits(e), "dequantized floats differ");
        return;
    }
    case Node::kStrings: {
        FUZZ_CHECK(tenso_view_kind(v) == TENSO_KIND_STRING && tenso_view_dtype(v) == TENSO_DTYPE_STRING,
                   "kind %d dtype %d, wanted strings", tenso_view_kind(v), tenso_view_dtype(v));
        FUZZ_CHECK(flags == (TENSO_FLAG_STRING | TENSO_FLAG_ALIGNED | integrity), "string flags 0x%x", flags);
        FUZZ_CHECK(tenso_view_alignment(v) == 64, "strings are always 64-aligned, got %u", tenso_view_alignment(v));
        const uint64_t *offs;
        const char *payload;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_string_offsets(&offs, &payload, v));
        FUZZ_CHECK(tenso_view_ndim(v) == 1 && tenso_view_shape(v)[0] + 1 == n.offsets.size(), "string count differs");
        FUZZ_CHECK(std::memcmp(offs, n.offsets.data(), 8 * n.offsets.size()) == 0, "string offsets differ");
        FUZZ_CHECK(tenso_view_nbytes(v) == n.body.size() &&
                       (n.body.empty() || std::memcmp(payload, n.body.data(), n.body.size()) == 0),
                   "string payload differs");
        return;
    }
    case Node::kIpc: {
        FUZZ_CHECK(tenso_view_kind(v) == TENSO_KIND_GPU_IPC_REF, "kind %d, wanted an IPC reference",
                   tenso_view_kind(v));
        FUZZ_CHECK(flags == TENSO_FLAG_GPU_IPC_REF, "IPC reference flags 0x%x", flags);
        FUZZ_CHECK(tenso_view_packet_size(v) == 106, "IPC reference of %llu bytes",
                   (unsigned long long)tenso_view_packet_size(v));
        tenso_ipc_ref ref;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_ipc_ref(&ref, v));
        FUZZ_CHECK(std::memcmp(&ref, &n.ref, sizeof ref) == 0, "IPC reference differs");
        return;
    }
    case Node::kRagged: {
        FUZZ_CHECK(tenso_view_kind(v) == TENSO_KIND_BUNDLE && tenso_view_bundle_count(v) == 3,
                   "a ragged array is a bundle of 3");
        const tenso_view *flat = nullptr, *offs = nullptr;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_ragged(&flat, &offs, v));
        expect_dense(flat, n, top);
        FUZZ_CHECK(tenso_view_dtype(offs) == TENSO_DTYPE_UINT64 && tenso_view_nbytes(offs) == 8 * n.offsets.size() &&
                       std::memcmp(tenso_view_data(offs), n.offsets.data(), 8 * n.offsets.size()) == 0,
                   "ragged offsets differ");
        return;
    }
    }
}

// The standalone packet of a node under `o`.
void encode_alone(Buffer *out, const Node &n, const tenso_encode_options &o) {
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_dumps(&out->b, n.value.get(), &o));
}

uint32_t rd32(const uint8_t *p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// A bundle's wire layout: 10-byte header, then per entry key_len, key, value_len, value. Each
// value must be byte for byte the standalone packet of that entry.
void expect_bundle_bytes(const uint8_t *p, size_t len, const Node &n, const tenso_encode_options &o) {
    FUZZ_CHECK(len >= 10 && p[8] == n.entries.size(), "bundle header does not count %zu entries", n.entries.size());
    size_t off = 10;
    for (const auto &e : n.entries) {
        FUZZ_CHECK(off + 4 <= len && rd32(p + off) == e.first.size(), "key length of '%s'", e.first.c_str());
        off += 4;
        FUZZ_CHECK(off + e.first.size() + 4 <= len && std::memcmp(p + off, e.first.data(), e.first.size()) == 0,
                   "key bytes of '%s'", e.first.c_str());
        off += e.first.size();
        size_t vlen = rd32(p + off);
        off += 4;
        Buffer alone;
        encode_alone(&alone, *e.second, o);
        FUZZ_CHECK(vlen == alone.b.size && off + vlen <= len, "entry '%s' is %zu bytes, alone %zu", e.first.c_str(),
                   vlen, alone.b.size);
        FUZZ_CHECK(std::memcmp(p + off, alone.b.data, vlen) == 0, "entry '%s' differs from its standalone packet",
                   e.first.c_str());
        if (e.second->type == Node::kBundle) expect_bundle_bytes(p + off, vlen, *e.second, o);
        off += vlen;
    }
    FUZZ_CHECK(off == len, "bundle of %zu bytes, entries end at %zu", len, off);
}

// Reads a whole memfd back.
std::vector<uint8_t> read_back(int fd) {
    off_t end = ::lseek(fd, 0, SEEK_END);
    FUZZ_CHECK(end >= 0 && ::lseek(fd, 0, SEEK_SET) == 0, "lseek: %s", std::strerror(errno));
    std::vector<uint8_t> out(static_cast<size_t>(end));
    size_t got = 0;
    while (got < out.size()) {
        ssize_t n = ::read(fd, out.data() + got, out.size() - got);
        FUZZ_CHECK(n > 0, "read back: %s", std::strerror(errno));
        got += size_t(n);
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Reader r(data, size);
    const tenso_encode_options opts = read_opts(r);
    const bool compress = opts.flags & TENSO_ENCODE_COMPRESS;
    const uint8_t shape_sel = r.u8();
    std::unique_ptr<Node> root;
    if (shape_sel % 16 == 15) root = make_chain(r, 60 + r.u8() % 6);
    else if (shape_sel % 16 == 14) root = make_wide(r);
    else if (shape_sel % 2) root = make_tree(r, 0);
    else root = make_leaf(r);
    const tenso_value *value = root->value.get();

    // ---- every encoder, twice ----
    size_t bound = 0;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_dumps_bound(&bound, value, &opts));
    Buffer a, b;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_dumps(&a.b, value, &opts));
    const size_t n = a.b.size;
    FUZZ_CHECK(n > 0 && bound >= n, "bound %zu for a %zu-byte packet", bound, n);
    // Verbatim packets are not recompressed, so only fresh tensors make the bound inexact.
    if (!compress) FUZZ_CHECK(bound == n, "bound %zu is not exact for an uncompressed %zu-byte packet", bound, n);
    FUZZ_CHECK(reinterpret_cast<uintptr_t>(a.b.data) % 64 == 0, "tenso_buffer data is not 64-byte aligned");
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_dumps(&b.b, value, &opts));
    FUZZ_CHECK(b.b.size == n && std::memcmp(a.b.data, b.b.data, n) == 0, "encoding twice gives different bytes");

    std::vector<uint8_t> into(n + 1);
    size_t written = 0;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_dumps_into(into.data(), n, &written, value, &opts));
    FUZZ_CHECK(written == n && std::memcmp(into.data(), a.b.data, n) == 0, "value_dumps_into differs");
    written = 0;
    FUZZ_CHECK_STATUS(TENSO_E_BUFFER_TOO_SMALL, tenso_value_dumps_into(into.data(), n - 1, &written, value, &opts));
    FUZZ_CHECK(written >= n && (compress || written == n), "too small: reported %zu for a %zu-byte packet", written, n);

    int fd = ::memfd_create("tenso-fuzz", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0, "memfd_create: %s", std::strerror(errno));
    uint64_t fd_written = 0;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_write_fd(&fd_written, fd, value, &opts));
    std::vector<uint8_t> from_fd = read_back(fd);
    FUZZ_CHECK(fd_written == n && from_fd.size() == n && std::memcmp(from_fd.data(), a.b.data, n) == 0,
               "value_write_fd differs (%llu bytes written)", (unsigned long long)fd_written);

    if (root->type == Node::kTensor) {
        // The dense entry points give the same bytes as the value ones.
        tenso_tensor t = root->tensor();
        size_t tb = 0;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_dumps_bound(&tb, &t, &opts));
        FUZZ_CHECK(tb == bound, "dumps_bound %zu, value_dumps_bound %zu", tb, bound);
        Buffer c;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_dumps(&c.b, &t, &opts));
        FUZZ_CHECK(c.b.size == n && std::memcmp(c.b.data, a.b.data, n) == 0, "tenso_dumps differs");
        std::fill(into.begin(), into.end(), 0xAB);
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_dumps_into(into.data(), n + 1, &written, &t, &opts));
        FUZZ_CHECK(written == n && std::memcmp(into.data(), a.b.data, n) == 0, "tenso_dumps_into differs");
        FUZZ_CHECK(into[n] == 0xAB, "tenso_dumps_into wrote past the packet");
        FUZZ_CHECK_STATUS(TENSO_E_BUFFER_TOO_SMALL, tenso_dumps_into(into.data(), n - 1, &written, &t, &opts));
        FUZZ_CHECK(written >= n, "too small: reported %zu for a %zu-byte packet", written, n);
        FUZZ_CHECK(::ftruncate(fd, 0) == 0 && ::lseek(fd, 0, SEEK_SET) == 0, "truncate memfd");
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_write_fd(&fd_written, fd, &t, &opts));
        from_fd = read_back(fd);
        FUZZ_CHECK(fd_written == n && from_fd.size() == n && std::memcmp(from_fd.data(), a.b.data, n) == 0,
                   "tenso_write_fd differs");
    }
    ::close(fd);

    // ---- framing ----
    const uint8_t *pkt = a.b.data;
    size_t len = 0;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_packet_length(&len, pkt, n, nullptr));
    FUZZ_CHECK(len == n, "packet_length %zu for a %zu-byte packet", len, n);
    tenso_packet_info info;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_inspect(&info, pkt, n));
    FUZZ_CHECK(info.packet_size == n && info.version == 4, "inspect: size %llu version %u",
               (unsigned long long)info.packet_size, info.version);
    // max_packet_bytes admits the packet at exactly its size, and no less (decompressed bytes,
    // which it also bounds by default, are left to max_decoded_bytes here).
    tenso_decode_options cap;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_decode_options_init(&cap, TENSO_DECODE_OPTIONS_VERSION));
    cap.max_packet_bytes = n;
    cap.max_decoded_bytes = UINT64_MAX;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_packet_length(&len, pkt, n, &cap));
    if (n > 1) {
        cap.max_packet_bytes = n - 1;
        FUZZ_CHECK_STATUS(TENSO_E_LIMIT, tenso_packet_length(&len, pkt, n, &cap));
        tenso_view *none = nullptr;
        FUZZ_CHECK_STATUS(TENSO_E_LIMIT, tenso_loads(&none, pkt, n, &cap));
    }
    const size_t cuts[3] = {0, size_t(shape_sel) * n / 256, n - 1};
    for (size_t cut : cuts) {
        size_t need = 0;
        FUZZ_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_packet_length(&need, pkt, cut, nullptr));
        FUZZ_CHECK(need > cut && need <= n, "prefix %zu of %zu asks for %zu", cut, n, need);
        tenso_view *none = nullptr;
        FUZZ_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_loads(&none, pkt, cut, nullptr));
    }

    // ---- decoding ----
    tenso_view *raw = nullptr;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_loads(&raw, pkt, n, nullptr));
    ViewPtr view(raw);
    FUZZ_CHECK(tenso_view_packet_size(view.get()) == n, "view packet size %llu",
               (unsigned long long)tenso_view_packet_size(view.get()));
    expect_view(view.get(), *root, opts);
    if (root->type == Node::kBundle) expect_bundle_bytes(pkt, n, *root, opts);
    // The nesting the encoder accepted is the nesting the decoder accepts, and no more.
    const uint32_t depth = tree_depth(*root);
    if (depth) {
        tenso_decode_options dopts;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_decode_options_init(&dopts, TENSO_DECODE_OPTIONS_VERSION));
        dopts.max_depth = depth;
        tenso_view *ok = nullptr;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_loads(&ok, pkt, n, &dopts));
        tenso_view_free(ok);
        if (depth > 1) {
            dopts.max_depth = depth - 1;
            tenso_view *deep = nullptr;
            FUZZ_CHECK_STATUS(TENSO_E_LIMIT, tenso_loads(&deep, pkt, n, &dopts));
        }
    }

    // ---- integrity: a flipped footer byte is caught, and only skipped on request ----
    if (root->type == Node::kTensor && (opts.flags & TENSO_ENCODE_INTEGRITY)) {
        std::vector<uint8_t> bad(pkt, pkt + n);
        bad[n - 1] ^= 0x01;
        tenso_view *v = nullptr;
        FUZZ_CHECK_STATUS(TENSO_E_CHECKSUM, tenso_loads(&v, bad.data(), n, nullptr));
        tenso_decode_options skip;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_decode_options_init(&skip, TENSO_DECODE_OPTIONS_VERSION));
        skip.flags = TENSO_DECODE_SKIP_CHECKSUM;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_loads(&v, bad.data(), n, &skip));
        expect_view(v, *root, opts);
        tenso_view_free(v);
    }
    return 0;
}
