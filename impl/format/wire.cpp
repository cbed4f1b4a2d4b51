// wire.cpp - dtype table, layout helpers and the packet scanner.
#include "format/wire.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>

#include "format/codec.hpp"
#include "error.hpp"

namespace tenso {

namespace {

// Every fact about a dtype, in one row: adding a dtype is a row here and its code in tenso.h
// (plus its DLPack and peer-format spellings, where it has them).
struct DtypeInfo {
    int code;
    size_t itemsize;  // 0: not a dense dtype
    uint32_t bits;    // per element as stored; 0 for variable-length data
    int kind;         // the packet kind it travels in
    const char *name;
};

constexpr int D = TENSO_KIND_DENSE, Q = TENSO_KIND_QUANTIZED, S = TENSO_KIND_STRING;
constexpr DtypeInfo kDtypes[] = {
    // ascending codes
    {TENSO_DTYPE_FLOAT32, 4, 32, D, "float32"},
    {TENSO_DTYPE_INT32, 4, 32, D, "int32"},
    {TENSO_DTYPE_FLOAT64, 8, 64, D, "float64"},
    {TENSO_DTYPE_INT64, 8, 64, D, "int64"},
    {TENSO_DTYPE_UINT8, 1, 8, D, "uint8"},
    {TENSO_DTYPE_UINT16, 2, 16, D, "uint16"},
    {TENSO_DTYPE_BOOL, 1, 8, D, "bool"},
    {TENSO_DTYPE_FLOAT16, 2, 16, D, "float16"},
    {TENSO_DTYPE_INT8, 1, 8, D, "int8"},
    {TENSO_DTYPE_INT16, 2, 16, D, "int16"},
    {TENSO_DTYPE_UINT32, 4, 32, D, "uint32"},
    {TENSO_DTYPE_UINT64, 8, 64, D, "uint64"},
    {TENSO_DTYPE_COMPLEX64, 8, 64, D, "complex64"},
    {TENSO_DTYPE_COMPLEX128, 16, 128, D, "complex128"},
    {TENSO_DTYPE_BFLOAT16, 2, 16, D, "bfloat16"},
    {TENSO_DTYPE_QINT8, 0, 8, Q, "qint8"},
    {TENSO_DTYPE_QUINT8, 0, 8, Q, "quint8"},
    {TENSO_DTYPE_QINT4, 0, 4, Q, "qint4"},
    {TENSO_DTYPE_QUINT4, 0, 4, Q, "quint4"},
    {TENSO_DTYPE_STRING, 0, 0, S, "string"},
    {TENSO_DTYPE_BYTES, 0, 0, S, "bytes"},
};
constexpr uint32_t kDtypeCount = sizeof kDtypes / sizeof kDtypes[0];

struct KindInfo {
    int code;
    const char *name;
};
constexpr KindInfo kKinds[] = {
    // ascending codes
    {TENSO_KIND_DENSE, "dense"},
    {TENSO_KIND_BUNDLE, "bundle"},
    {TENSO_KIND_SPARSE_COO, "sparse_coo"},
    {TENSO_KIND_SPARSE_CSR, "sparse_csr"},
    {TENSO_KIND_SPARSE_CSC, "sparse_csc"},
    {TENSO_KIND_QUANTIZED, "quantized"},
    {TENSO_KIND_STRING, "string"},
    {TENSO_KIND_RAGGED, "ragged"},
    {TENSO_KIND_GPU_IPC_REF, "gpu_ipc_ref"},
};
constexpr uint32_t kKindCount = sizeof kKinds / sizeof kKinds[0];

// Codes are 1, 2, 3, ... in table order (checked below), so a code indexes its row.
constexpr bool dense_codes() {
    for (uint32_t i = 0; i < kDtypeCount; ++i)
        if (kDtypes[i].code != int(i) + 1) return false;
    return true;
}
static_assert(dense_codes(), "kDtypes lists codes 1..N in order");

const DtypeInfo *find_dtype(int code) {
    return code >= 1 && uint32_t(code) <= kDtypeCount ? &kDtypes[code - 1] : nullptr;
}

bool is_quantized(int dtype) { return dtype_kind(dtype) == TENSO_KIND_QUANTIZED; }

constexpr DtypeSizes dtype_sizes() {
    DtypeSizes t{};
    for (const DtypeInfo &d : kDtypes) t.by_code[d.code] = uint8_t(d.itemsize);
    return t;
}

}  // namespace

const DtypeSizes kDtypeSizes = dtype_sizes();

// RFC 3629 UTF-8: no overlongs, no surrogates, nothing above U+10FFFF.
bool valid_utf8(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        size_t len;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) {
            len = 2;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4;
            cp = c & 0x07;
        } else return false;
        if (i + len > n) return false;
        for (size_t k = 1; k < len; ++k) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

namespace {

std::string num(uint64_t v) { return std::to_string(v); }

// max_inflation counts a packet as at least this many bytes (tenso.h).
constexpr uint64_t kInflationFloor = uint64_t(4) << 20;

// Walks bytes [0, len) of one packet tree. `bound` arguments are the absolute end a nested
// packet must not pass (its container's length field); the top level has none.
class Scanner {
public:
    Scanner(const uint8_t *buf, size_t len, const Limits &lim, ScanMode mode)
        : b_(buf), len_(len), lim_(lim), header_only_(mode == ScanMode::kHeader) {
        constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();
        avail_ = lim.max_packet_bytes && lim.max_packet_bytes < len ? size_t(lim.max_packet_bytes) : len;
        entries_left_ = lim.max_entries ? lim.max_entries : kNone;
        decoded_left_ = lim.max_decoded_bytes ? lim.max_decoded_bytes : kNone;
        inflated_left_ = !lim.max_decoded_bytes && lim.max_packet_bytes ? lim.max_packet_bytes : kNone;
        // A ratio says nothing useful about small packets: they count as kInflationFloor bytes.
        const uint64_t base = std::max<uint64_t>(len, kInflationFloor);
        ratio_left_ = lim.max_inflation && base <= kNone / lim.max_inflation ? base * lim.max_inflation : kNone;
    }

    Node packet(size_t start, size_t bound, int bound_status, int depth);

private:
    const uint8_t *b_;
    size_t len_;
    size_t avail_;  // what need() lets a packet reach: len_, or max_packet_bytes when less
    const Limits &lim_;
    bool header_only_;
    // What a full scan's decode may still take: packets (max_entries), bytes it allocates
    // (max_decoded_bytes) and decompressed bytes (max_packet_bytes when max_decoded_bytes is
    // unset: a caller who bounds the packet means to bound what it costs). Counted down.
    uint64_t entries_left_, decoded_left_, inflated_left_;
    uint64_t ratio_left_;  // decompressed bytes: max_inflation x the bytes handed to the decode

    void charge(uint64_t bytes) {
        if (bytes > decoded_left_)
            fail(TENSO_E_LIMIT, "decoding needs more than max_decoded_bytes (" + num(lim_.max_decoded_bytes) + ")");
        decoded_left_ -= bytes;
    }
    void charge_inflated(uint64_t bytes) {
        if (bytes > inflated_left_)
            fail(TENSO_E_LIMIT, "compressed bodies inflate past max_packet_bytes (" + num(lim_.max_packet_bytes) + ")");
        inflated_left_ -= bytes;
        if (bytes > ratio_left_)
            fail(TENSO_E_LIMIT, "compressed bodies inflate past max_inflation (" + num(lim_.max_inflation) +
                                    " x the packet's " + num(len_) + " bytes, counted as at least " +
                                    num(kInflationFloor) + ")");
        ratio_left_ -= bytes;
        charge(alloc_size(bytes));  // the buffer as alloc_bytes rounds it (to 2 MiB when large)
    }
    bool full() const { return !header_only_; }

    // Requires bytes up to `end`: past the container's bound is an inconsistency, past the
    // packet-size limit a LIMIT, past what we have a NeedMore.
    __attribute__((always_inline)) void need(size_t end, size_t bound, int bound_status, const char *what) {
        if (__builtin_expect(end > bound || end > avail_, 0)) refuse(end, bound, bound_status, what);
    }
    [[noreturn]] __attribute__((noinline, cold)) void refuse(size_t end, size_t bound, int bound_status,
                                                             const char *what) const {
        if (end > bound) fail(bound_status, std::string(what) + " runs past the length its container gives");
        if (lim_.max_packet_bytes && end > lim_.max_packet_bytes)
            fail(TENSO_E_LIMIT, "packet is larger than max_packet_bytes (" + num(lim_.max_packet_bytes) + ")");
        throw NeedMore{end};
    }

    static size_t add(size_t a, uint64_t b) {
        if (b > std::numeric_limits<size_t>::max() - a) fail_msg(TENSO_E_MALFORMED, "packet length overflows");
        return a + size_t(b);
    }

    // The helpers every kind's header goes through are inlined into each (they are most of a
    // small packet's scan); what they say on failure is built out of line.
    [[noreturn]] __attribute__((noinline, cold)) void too_many_dims(uint32_t ndim) const {
        fail(TENSO_E_TOO_MANY_DIMS, "ndim " + num(ndim) + " exceeds the limit of " + num(lim_.max_ndim));
    }
    [[noreturn]] __attribute__((noinline, cold)) static void bad_exponent(unsigned e) {
        if (e >= 64) fail(TENSO_E_MALFORMED, "alignment exponent " + num(e) + " is not < 64");
        fail(TENSO_E_LIMIT, "alignment 2^" + num(e) + " exceeds the limit of 2^" + num(kMaxAlignLog2));
    }

    __attribute__((always_inline)) size_t read_shape(Node &n, size_t pos, size_t bound, int bst) {
        if (n.ndim > lim_.max_ndim) too_many_dims(n.ndim);
        need(pos + 4 * size_t(n.ndim), bound, bst, "shape");
        uint64_t *shape = n.shape.resize(n.ndim);
        for (uint32_t i = 0; i < n.ndim; ++i) shape[i] = rd32(b_ + pos + 4 * i);
        if (full() && n.ndim > Shape::kInline) charge(2 * sizeof(uint64_t) * n.ndim);  // Node's and View's
        return pos + 4 * size_t(n.ndim);
    }

    // Reads the optional exponent byte, then sets alignment and body_off.
    __attribute__((always_inline)) size_t read_alignment(Node &n, size_t pos, size_t bound, int bst) {
        if (n.flags & TENSO_FLAG_CUST_ALIGN) {
            need(pos + 1, bound, bst, "alignment exponent");
            unsigned e = b_[pos++];
            if (e > kMaxAlignLog2) bad_exponent(e);
            n.alignment = 1u << e;
        } else {
            n.alignment = (n.flags & TENSO_FLAG_ALIGNED) ? TENSO_DEFAULT_ALIGNMENT : 1;
        }
        n.body_off = pos + pad_to(pos - n.start, n.alignment);
        return n.body_off;
    }

    // Body of body_len bytes at body_off, then the footer if flagged.
    __attribute__((always_inline)) void finish(Node &n, size_t bound, int bst) {
        if (header_only_) return;
        size_t end = add(n.body_off, n.body_len);
        if (n.flags & TENSO_FLAG_INTEGRITY) {
            n.footer = true;
            end = add(end, kFooterLen);
        }
        need(end, bound, bst, "body");
        n.end = end;
    }

    size_t lz4_frame_end(size_t pos, size_t bound, int bst, uint64_t raw_len);
    void dense(Node &n, size_t pos, size_t bound, int bst);
    void quantized(Node &n, size_t pos, size_t bound, int bst);
    void string_like(Node &n, size_t pos, size_t bound, int bst);
    void bundle(Node &n, size_t pos, size_t bound, int bst, int depth);
    void sparse(Node &n, size_t pos, size_t bound, int bst, int depth);
};

Node Scanner::packet(size_t start, size_t bound, int bst, int depth) {
    if (depth > int(lim_.max_depth)) fail(TENSO_E_LIMIT, "packets nest deeper than " + num(lim_.max_depth));
    if (full()) {
        if (!entries_left_--)
            fail(TENSO_E_LIMIT, "packet holds more than max_entries (" + num(lim_.max_entries) + ") packets");
        charge(kViewEntryBytes + sizeof(Node::Child));
    }
    Node n;
    n.start = start;
    // Each need() below decides which error a short header gets; when the longest header fits,
    // none of them can fail.
    const bool whole = start + kHeaderV4 <= bound && start + kHeaderV4 <= avail_;
    if (!whole) need(start + 4, bound, bst, "header");
    if (rd32(b_ + start) != rd32(kMagic)) fail_msg(TENSO_E_BAD_MAGIC, "bad magic: not a Tenso packet");
    if (!whole) need(start + kHeaderLegacy, bound, bst, "header");
    n.version = b_[start + 4];
    size_t pos;
    uint8_t reserved = 0;
    if (n.version == 4) {
        if (!whole) need(start + kHeaderV4, bound, bst, "header");
        n.flags = rd16(b_ + start + 5);
        n.dtype = b_[start + 7];
        n.ndim = b_[start + 8];
        reserved = b_[start + 9];
        pos = start + kHeaderV4;
    } else if (n.version >= 1 && n.version <= 3) {
        // v1 to v3 share one 8-byte layout; v2 never sets bit 7, v1 never sets any flag.
        n.flags = b_[start + 5];
        n.dtype = b_[start + 6];
        n.ndim = b_[start + 7];
        pos = start + kHeaderLegacy;
    } else {
        fail(TENSO_E_UNSUPPORTED_VERSION, "unsupported protocol version " + num(n.version));
    }
    n.kind = kind_of(n.flags, n.dtype);
    switch (n.kind) {
    case TENSO_KIND_GPU_IPC_REF:
        if (n.version != 4 || reserved != 1 || n.ndim != 0)
            fail(TENSO_E_MALFORMED, "GPU IPC reference needs v4, discriminator 1 and ndim 0");
        if (n.flags & TENSO_FLAG_INTEGRITY)
            fail(TENSO_E_MALFORMED, "GPU IPC reference must not carry an integrity footer");
        need(start + kIpcRefLen, bound, bst, "GPU IPC reference");
        n.end = start + kIpcRefLen;
        n.dtype = 0;
        break;
    case TENSO_KIND_BUNDLE: bundle(n, pos, bound, bst, depth); break;
    case TENSO_KIND_SPARSE_COO:
    case TENSO_KIND_SPARSE_CSR:
    case TENSO_KIND_SPARSE_CSC: sparse(n, pos, bound, bst, depth); break;
    case TENSO_KIND_STRING:
    case TENSO_KIND_RAGGED: string_like(n, pos, bound, bst); break;
    case TENSO_KIND_QUANTIZED: quantized(n, pos, bound, bst); break;
    default: dense(n, pos, bound, bst); break;
    }
    return n;
}

[[noreturn]] __attribute__((noinline, cold)) void bad_dtype(int dtype) {
    fail(TENSO_E_BAD_DTYPE, "unknown dtype code " + num(unsigned(dtype)));
}

void Scanner::dense(Node &n, size_t pos, size_t bound, int bst) {
    const size_t item = dtype_itemsize(n.dtype);
    if (!item) bad_dtype(n.dtype);
    pos = read_shape(n, pos, bound, bst);
    n.nbytes = checked_numel(n.shape.data(), n.ndim, lim_.max_elements) * item;
    read_alignment(n, pos, bound, bst);
    if (n.flags & TENSO_FLAG_COMPRESSION) {
        n.compressed = true;
        if (header_only_) return;
        n.body_len = lz4_frame_end(n.body_off, bound, bst, n.nbytes) - n.body_off;
        if (full()) charge_inflated(n.nbytes);
    } else {
        n.body_len = n.nbytes;
    }
    finish(n, bound, bst);
}

size_t Scanner::lz4_frame_end(size_t pos, size_t bound, int bst, uint64_t raw_len) {
    Lz4Walk w(pos, raw_len);
    if (const size_t more = w.run(b_, std::min(bound, len_))) {
        need(more, bound, bst, "LZ4 frame");  // throws: more bytes than we have or may have
        fail(TENSO_E_INTERNAL, "LZ4 frame walk stopped early");
    }
    return w.end();
}

void Scanner::quantized(Node &n, size_t pos, size_t bound, int bst) {
    pos = read_shape(n, pos, bound, bst);
    uint64_t count = checked_numel(n.shape.data(), n.ndim, lim_.max_elements);
    need(pos + 10, bound, bst, "quantization metadata");
    uint8_t scheme = b_[pos], axis = b_[pos + 1];
    uint32_t group = rd32(b_ + pos + 2), nscales = rd32(b_ + pos + 6);
    uint64_t expect = expected_num_scales(scheme, axis, group, n.shape.data(), n.ndim, count, TENSO_E_MALFORMED);
    if (nscales != expect)
        fail(TENSO_E_MALFORMED, "num_scales " + num(nscales) + " does not match the scheme (" + num(expect) + ")");
    n.scheme = scheme;
    n.axis = axis;
    n.group_size = group;
    n.num_scales = nscales;
    n.meta_off = pos;
    pos = add(pos + 10, uint64_t(nscales) * 8);
    n.meta_len = pos - n.meta_off;
    need(pos, bound, bst, "quantization scales");
    if (full()) charge(kViewExtraBytes + uint64_t(nscales) * 8);  // View::Extra, qparams
    read_alignment(n, pos, bound, bst);
    bool four_bit = n.dtype == TENSO_DTYPE_QINT4 || n.dtype == TENSO_DTYPE_QUINT4;
    n.nbytes = four_bit ? (count + 1) / 2 : count;
    n.body_len = n.nbytes;
    finish(n, bound, bst);
}

// String (dtype 20) and direct ragged packets: u64 offsets x (count+1), then the payload.
void Scanner::string_like(Node &n, size_t pos, size_t bound, int bst) {
    if (n.ndim != 1) fail(TENSO_E_MALFORMED, "string/ragged packet needs ndim 1, has " + num(n.ndim));
    pos = read_shape(n, pos, bound, bst);
    uint64_t count = n.shape[0];
    if (count > lim_.max_elements) fail(TENSO_E_TOO_MANY_ELEMENTS, "too many strings: " + num(count));
    read_alignment(n, pos, bound, bst);
    size_t offs_end = add(n.body_off, (count + 1) * 8);
    need(offs_end, bound, bst, "string offsets");
    if (full()) charge(kViewExtraBytes + (count + 1) * 8);  // View::Extra, offsets
    uint64_t payload = rd64(b_ + offs_end - 8);
    if (payload > lim_.max_elements)
        fail(TENSO_E_TOO_MANY_ELEMENTS, "string payload of " + num(payload) + " bytes exceeds the limit");
    n.body_len = add(offs_end - n.body_off, payload);
    n.nbytes = n.body_len;
    finish(n, bound, bst);
}

void Scanner::bundle(Node &n, size_t pos, size_t bound, int bst, int depth) {
    uint32_t count = n.count = n.ndim;
    n.ndim = 0;
    n.dtype = 0;
    if (header_only_) return;
    // The claimed count is neither charged nor read yet: the top bundle reserves only what the
    // bytes at hand can hold (an entry takes at least 16: two lengths, a legacy header); nested
    // ones grow with the entries they really hold, since reserving against the same bytes at
    // every level would cost depth x bytes.
    const size_t have = std::min(bound, len_);
    if (full() && depth == 0) n.children.reserve(std::min<size_t>(count, pos < have ? (have - pos) / 16 : 0));
    for (uint32_t i = 0; i < count; ++i) {
        need(pos + 4, bound, bst, "bundle key length");
        Node::Child c;
        c.key_len = rd32(b_ + pos);
        if (c.key_len > TENSO_MAX_KEY_BYTES)
            fail(TENSO_E_LIMIT,
                 "bundle key of " + num(c.key_len) + " bytes exceeds the limit of " + num(TENSO_MAX_KEY_BYTES));
        c.key_off = pos + 4;
        pos = add(c.key_off, c.key_len);
        need(pos + 4, bound, bst, "bundle key");
        if (!valid_utf8(b_ + c.key_off, c.key_len))
            fail(TENSO_E_BAD_BUNDLE, "bundle key " + num(i) + " is not valid UTF-8");
        size_t vlen = rd32(b_ + pos);
        pos += 4;
        size_t vend = add(pos, vlen);
        if (vend > bound) fail(bst, "bundle value runs past the length its container gives");
        try {
            c.node = packet(pos, vend, TENSO_E_BAD_BUNDLE, depth + 1);
        } catch (const NeedMore &) {
            // Ask for the whole value at once: loads and packet_length report one TRUNCATED
            // claim per entry, not one per nested header (the decoder frames on its own).
            need(vend, bound, bst, "bundle value");
            throw;
        }
        if (c.node.end != vend)
            fail(TENSO_E_BAD_BUNDLE, "bundle value length " + num(vlen) + " disagrees with its packet (" +
                                         num(c.node.end - pos) + " bytes)");
        pos = vend;
        n.children.push_back(std::move(c));
    }
    n.end = pos;
}

void Scanner::sparse(Node &n, size_t pos, size_t bound, int bst, int depth) {
    n.dtype = 0;
    pos = read_shape(n, pos, bound, bst);
    if (header_only_) return;
    n.children.reserve(3);
    for (int i = 0; i < 3; ++i) {
        need(pos + 4, bound, bst, "sparse component length");
        size_t clen = rd32(b_ + pos);
        pos += 4;
        size_t cend = add(pos, clen);
        if (cend > bound) fail(bst, "sparse component runs past the length its container gives");
        Node::Child c;
        try {
            c.node = packet(pos, cend, TENSO_E_MALFORMED, depth + 1);
        } catch (const NeedMore &) {
            need(cend, bound, bst, "sparse component");  // the whole component, as for bundles
            throw;
        }
        if (c.node.kind != TENSO_KIND_DENSE)
            fail(TENSO_E_MALFORMED, "sparse component " + num(i) + " is not a dense packet");
        if (c.node.end != cend) fail(TENSO_E_MALFORMED, "sparse component length disagrees with its packet");
        pos = cend;
        n.children.push_back(std::move(c));
    }
    n.end = pos;
}

}  // namespace

const char *dtype_name(int dtype) {
    const DtypeInfo *d = find_dtype(dtype);
    return d ? d->name : "unknown";
}

int dtype_from_name(const std::string &name) {
    for (const auto &d : kDtypes)
        if (name == d.name) return d.code;
    return 0;
}

uint32_t dtype_bits(int dtype) {
    const DtypeInfo *d = find_dtype(dtype);
    return d ? d->bits : 0;
}

int dtype_kind(int dtype) {
    const DtypeInfo *d = find_dtype(dtype);
    return d ? d->kind : 0;
}

uint32_t dtype_count() { return kDtypeCount; }
int dtype_at(uint32_t index) { return index < kDtypeCount ? kDtypes[index].code : 0; }

uint32_t kind_count() { return kKindCount; }
int kind_at(uint32_t index) { return index < kKindCount ? kKinds[index].code : 0; }

const char *kind_name(int kind) {
    for (const auto &k : kKinds)
        if (k.code == kind) return k.name;
    return "unknown";
}

int kind_from_name(const std::string &name) {
    for (const auto &k : kKinds)
        if (name == k.name) return k.code;
    return 0;
}

void fail_too_many_elements(uint64_t max_elements) {
    fail(TENSO_E_TOO_MANY_ELEMENTS, "shape has more than " + num(max_elements) + " elements");
}

uint64_t expected_num_scales(int scheme, uint32_t axis, uint32_t group_size, const uint64_t *shape, uint32_t ndim,
                             uint64_t numel, int32_t status) {
    switch (scheme) {
    case 0: return 1;
    case 1:
        if (axis >= ndim) fail(status, "per-channel axis " + num(axis) + " is out of range");
        return shape[axis];
    case 2:
        if (group_size == 0) fail(status, "per-group quantization with group size 0");
        return (numel + group_size - 1) / group_size;
    default: fail(status, "unknown quantization scheme " + num(unsigned(scheme)));
    }
}

void write_ipc_ref(uint8_t *p, const IpcRef &ref) {
    write_header(p, TENSO_FLAG_GPU_IPC_REF, 0, 0, 1);  // reserved byte 1: the discriminator
    std::memcpy(p + kHeaderV4, ref.handle, 64);
    wr64(p + kHeaderV4 + 64, ref.byte_offset);
    wr64(p + kHeaderV4 + 72, ref.nbytes);
    std::memcpy(p + kHeaderV4 + 80, ref.device_uuid, 16);
}

IpcRef read_ipc_ref(const uint8_t *body) {
    IpcRef r;
    std::memcpy(r.handle, body, 64);
    r.byte_offset = rd64(body + 64);
    r.nbytes = rd64(body + 72);
    std::memcpy(r.device_uuid, body + 80, 16);
    return r;
}

uint32_t nesting_depth(const Node &n) {
    uint32_t d = 0;
    for (const auto &c : n.children) d = std::max(d, 1 + nesting_depth(c.node));
    return d;
}

int kind_of_flagged(uint32_t flags, int dtype) {
    if (flags & TENSO_FLAG_GPU_IPC_REF) return TENSO_KIND_GPU_IPC_REF;
    if (flags & TENSO_FLAG_BUNDLE) return TENSO_KIND_BUNDLE;
    if (flags & TENSO_FLAG_SPARSE_COO) return TENSO_KIND_SPARSE_COO;
    if (flags & TENSO_FLAG_SPARSE_CSR) return TENSO_KIND_SPARSE_CSR;
    if (flags & TENSO_FLAG_SPARSE_CSC) return TENSO_KIND_SPARSE_CSC;
    if (flags & TENSO_FLAG_STRING) return TENSO_KIND_STRING;
    if (flags & TENSO_FLAG_RAGGED) return TENSO_KIND_RAGGED;
    if (is_quantized(dtype)) return TENSO_KIND_QUANTIZED;
    return TENSO_KIND_DENSE;
}

size_t Lz4Walk::run(const uint8_t *b, size_t avail) {
    if (!in_blocks_) {
        if (start_ + 7 > avail) return start_ + 7;
        const uint8_t *p = b + start_;
        if (rd32(p) != 0x184D2204u) fail(TENSO_E_COMPRESSION, "compressed body is not an LZ4 frame");
        uint8_t flg = p[4], bd = p[5];
        if ((flg >> 6) != 1 || (flg & 0x02) || (bd & 0x8F))
            fail(TENSO_E_COMPRESSION, "LZ4 frame descriptor is invalid");
        unsigned bsid = (bd >> 4) & 7;
        if (bsid < 4) fail(TENSO_E_COMPRESSION, "LZ4 frame block size id is invalid");
        block_sum_ = flg & 0x10;
        content_sum_ = flg & 0x04;
        const bool content_size = flg & 0x08;
        size_t hdr = 7 + (content_size ? 8 : 0) + ((flg & 0x01) ? 4 : 0);
        if (start_ + hdr > avail) return start_ + hdr;
        const uint64_t declared = content_size ? rd64(p + 6) : raw_;
        if (declared != raw_)
            fail(TENSO_E_COMPRESSION,
                 "LZ4 frame content size " + num(declared) + " is not the tensor's " + num(raw_) + " bytes");
        max_block_ = size_t(1) << (8 + 2 * bsid);
        q_ = start_ + hdr;
        in_blocks_ = true;
    }
    // No sane encoder needs more than 2x + 64 KiB; beyond that the frame is hostile.
    const uint64_t cap = 2 * raw_ + 65536;
    // And the frame must be able to hold what the shape claims, or decoding would allocate
    // for a claim no data backs: a stored block yields its size, a compressed one at most
    // 255 bytes per input byte (LZ4's longest match run), never more than the block size.
    for (;;) {
        if (q_ + 4 > avail || q_ + 4 < q_) return q_ + 4;
        uint32_t bs = rd32(b + q_);
        if (bs == 0) break;
        size_t size = bs & 0x7FFFFFFFu;
        if (size > max_block_) fail(TENSO_E_COMPRESSION, "LZ4 block larger than the frame's block size");
        const size_t next = q_ + 4 + size + (block_sum_ ? 4 : 0);
        if (next - start_ > cap)
            fail(TENSO_E_COMPRESSION, "LZ4 frame is longer than any encoding of " + num(raw_) + " bytes");
        can_hold_ += (bs & 0x80000000u) ? size : std::min<uint64_t>(max_block_, 255 * uint64_t(size));
        q_ = next;
    }
    const size_t end = q_ + 4 + (content_sum_ ? 4 : 0);
    if (end > avail) return end;
    if (can_hold_ < raw_)
        fail(TENSO_E_COMPRESSION, "LZ4 frame cannot hold the " + num(raw_) + " bytes the shape claims");
    q_ = end;
    return 0;
}

Node scan_header_at(const uint8_t *buf, size_t len, size_t start, size_t bound, int bound_status, int depth,
                    const Limits &limits) {
    Scanner s(buf, len, limits, ScanMode::kHeader);
    return s.packet(start, bound, bound_status, depth);
}

Node scan(const uint8_t *buf, size_t len, const Limits &limits, ScanMode mode) {
    Scanner s(buf, len, limits, mode);
    return s.packet(0, std::numeric_limits<size_t>::max(), TENSO_E_MALFORMED, 0);
}

}  // namespace tenso
