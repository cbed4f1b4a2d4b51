// wire.hpp - the Tenso wire format, in one place.
//
// Everything that knows where a byte sits in a packet lives in wire.hpp/wire.cpp: the layout
// arithmetic shared by the encoder and the decoder, and the scanner that turns bytes into a
// validated Node tree (which the decoder, the inspector and the stream framer all use).
// Facts: shared/reference/tenso-wire-v4.md; the pinned upstream package's bytes are the law.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tenso/tenso.h"
#include "error.hpp"

namespace tenso {

// Bodies travel as they lie in memory, and the wire is little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "tenso supports little-endian hosts only");

constexpr uint8_t kMagic[4] = {'T', 'N', 'S', 'O'};
constexpr size_t kHeaderV4 = 10;
constexpr size_t kHeaderLegacy = 8;  // v1 to v3
constexpr size_t kFooterLen = 8;
constexpr size_t kIpcRefLen = 106;
constexpr unsigned kMaxAlignLog2 = 20;  // TENSO_MAX_ALIGNMENT

// ---- little-endian helpers (the wire is LE, and so is every host: see above) ----
// One unaligned load or store each; packet fields sit at any offset.
inline uint16_t rd16(const uint8_t *p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}
inline uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
inline uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
inline void wr16(uint8_t *p, uint16_t v) { std::memcpy(p, &v, 2); }
inline void wr32(uint8_t *p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void wr64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }

// ---- dtypes ----
// Element sizes by dtype code (0: not a dense dtype), derived from wire.cpp's dtype table so
// that the encoder and the scanner look one up inline.
struct DtypeSizes {
    uint8_t by_code[256];
};
extern const DtypeSizes kDtypeSizes;
inline size_t dtype_itemsize(int dtype) { return unsigned(dtype) < 256 ? kDtypeSizes.by_code[dtype] : 0; }
const char *dtype_name(int dtype);             // "unknown" for codes we do not know
int dtype_from_name(const std::string &name);  // 0 when unknown
uint32_t dtype_bits(int dtype);                // per element as stored; 0 for strings and unknown codes
int dtype_kind(int dtype);                     // TENSO_KIND_DENSE, _QUANTIZED or _STRING; 0 when unknown
uint32_t dtype_count();                        // the known dtypes, listed by dtype_at(0 .. count - 1)
int dtype_at(uint32_t index);                  // ascending codes; 0 past the end

// ---- kinds ----
uint32_t kind_count();
int kind_at(uint32_t index);                  // ascending codes; 0 past the end
const char *kind_name(int kind);              // "unknown" for codes we do not know
int kind_from_name(const std::string &name);  // 0 when unknown

// RFC 3629 UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool valid_utf8(const uint8_t *s, size_t n);

// ---- layout arithmetic shared by encoder and decoder ----
// Zero bytes after a header of header_len so the body lands on `alignment` (a power of two).
inline size_t pad_to(size_t header_len, size_t alignment) { return (0 - header_len) & (alignment - 1); }
inline bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }
inline unsigned log2_exact(uint64_t v) {
    unsigned e = 0;
    while ((uint64_t(1) << e) < v) ++e;
    return e;
}
// Flags for the alignment choice: ALIGNED for 64, CUST_ALIGN (+ exponent byte) otherwise.
inline uint16_t align_flags(uint32_t alignment) {
    return alignment == TENSO_DEFAULT_ALIGNMENT ? TENSO_FLAG_ALIGNED : TENSO_FLAG_CUST_ALIGN;
}

// Element count of a shape, or fail with TOO_MANY_ELEMENTS on overflow / over the limit.
// One pass, multiplications with an overflow flag rather than a division per dimension (this
// runs on every encode and decode): the product of dims that overflows, or exceeds the limit,
// fails; any zero dim makes an empty tensor, whatever the other dims say.
[[noreturn]] void fail_too_many_elements(uint64_t max_elements);
inline uint64_t checked_numel(const uint64_t *shape, uint32_t ndim, uint64_t max_elements) {
    uint64_t n = 1;
    bool zero = false, over = false;
    for (uint32_t i = 0; i < ndim; ++i) {
        zero |= shape[i] == 0;
        over |= __builtin_mul_overflow(n, shape[i], &n);
    }
    if (zero) return 0;
    if (__builtin_expect(over || n > max_elements, 0)) fail_too_many_elements(max_elements);
    return n;
}

// How many scales a quantization scheme needs (0 per tensor, 1 per channel, 2 per group);
// fails with `status` for an unknown scheme, an axis out of range or a group size of 0.
uint64_t expected_num_scales(int scheme, uint32_t axis, uint32_t group_size, const uint64_t *shape, uint32_t ndim,
                             uint64_t numel, int32_t status);

// Writes a v4 base header (10 bytes).
inline void write_header(uint8_t *p, uint16_t flags, uint8_t dtype, uint8_t ndim, uint8_t reserved = 0) {
    std::memcpy(p, kMagic, 4);
    p[4] = 4;
    wr16(p + 5, flags);
    p[7] = dtype;
    p[8] = ndim;
    p[9] = reserved;
}

// ---- GPU IPC reference packets ----
// A v4 header (GPU_IPC_REF flag, discriminator 1 in the reserved byte) and a 96-byte body:
// handle[64], byte_offset u64, nbytes u64, device_uuid[16].
struct IpcRef {
    uint8_t handle[64] = {};
    uint64_t byte_offset = 0;
    uint64_t nbytes = 0;
    uint8_t device_uuid[16] = {};
};
void write_ipc_ref(uint8_t *packet, const IpcRef &ref);  // kIpcRefLen bytes
IpcRef read_ipc_ref(const uint8_t *body);                // the body after the header

// ---- decode limits ----
struct Limits {
    uint32_t max_ndim = TENSO_MAX_NDIM;
    uint32_t max_depth = TENSO_MAX_DEPTH;
    uint64_t max_elements = TENSO_MAX_ELEMENTS;
    uint64_t max_packet_bytes = 0;   // 0 = none
    uint64_t max_decoded_bytes = 0;  // 0 = none, but inflated bodies stay within max_packet_bytes
    uint64_t max_entries = 0;        // packets in one tree; 0 = none
    bool verify_checksums = true;
    bool validate_utf8 = false;
    uint64_t timeout_ms = 0;     // fd reads; 0 = none (decode options v3)
    unsigned threads = 0;        // LZ4 blocks decompressed on this many threads; 0 = every core
    uint32_t max_inflation = 0;  // decompressed bytes per byte decoded; 0 = none (decode options v4)
};

// A shape sized by its ndim: a few dims in place, more on the heap, so a tree of small packets
// does not carry 32 dims per node (wire.cpp charges the heap part to max_decoded_bytes).
class Shape {
public:
    static constexpr uint32_t kInline = 4;
    Shape() {}  // not zero-filled: loads is hot
    Shape(const Shape &o) { *this = o; }
    Shape &operator=(const Shape &o) {
        if (this == &o) return *this;
        if (o.heap_) {
            assign(o.heap_.get(), o.n_);
            return *this;
        }
        // In place, a dim at a time: no call to memcpy, and each load matches the store that
        // wrote the dim (a scan just did), so the store forwards (a wider load would stall).
        heap_.reset();
        switch (o.n_) {
        case 4: in_[3] = o.in_[3]; [[fallthrough]];
        case 3: in_[2] = o.in_[2]; [[fallthrough]];
        case 2: in_[1] = o.in_[1]; [[fallthrough]];
        case 1: in_[0] = o.in_[0]; [[fallthrough]];
        default: break;
        }
        n_ = o.n_;
        return *this;
    }
    Shape(Shape &&) noexcept = default;
    Shape &operator=(Shape &&) noexcept = default;

    // Room for ndim dims, contents unset.
    uint64_t *resize(uint32_t ndim) {
        if (ndim > kInline || heap_) heap_.reset(ndim > kInline ? new uint64_t[ndim] : nullptr);
        n_ = ndim;
        return data();
    }
    void assign(const uint64_t *p, uint32_t ndim) {
        uint64_t *d = resize(ndim);
        if (ndim) std::memcpy(d, p, sizeof(uint64_t) * ndim);  // a scalar's p may be null
    }
    bool on_heap() const { return bool(heap_); }
    uint64_t *data() { return heap_ ? heap_.get() : in_; }
    const uint64_t *data() const { return heap_ ? heap_.get() : in_; }
    uint64_t &operator[](size_t i) { return data()[i]; }
    uint64_t operator[](size_t i) const { return data()[i]; }

private:
    uint64_t in_[kInline];
    std::unique_ptr<uint64_t[]> heap_;
    uint32_t n_ = 0;
};

// ---- the scanned form of a packet ----
// Offsets are absolute within the scanned buffer. A Node never points at memory itself, so
// scanning can run on a prefix (a header) and the same Node can later be bound to bytes.
struct Node {
    struct Child;

    int kind = 0;
    uint32_t version = 0;
    uint32_t flags = 0;
    int dtype = 0;
    uint32_t ndim = 0;
    uint32_t alignment = 1;
    size_t start = 0;     // first byte of the packet
    size_t body_off = 0;  // first byte of the body (0 for containers)
    size_t body_len = 0;  // body bytes as stored (compressed length for LZ4)
    uint64_t nbytes = 0;  // logical body bytes (numel * itemsize for dense)
    size_t end = 0;       // one past the last byte, footer included
    size_t meta_off = 0;  // quantized: scheme byte .. last zero point
    size_t meta_len = 0;
    uint32_t count = 0;  // bundle entries
    // Quantized metadata as checked: bind uses these, never a second read of bytes that
    // another process may rewrite in between (shared memory).
    uint32_t group_size = 0, num_scales = 0;
    uint8_t scheme = 0, axis = 0;
    bool footer = false;
    bool compressed = false;
    std::vector<Child> children;  // bundle entries, sparse components
    // Last, so that what is zeroed above is contiguous: a scan constructs a Node per packet.
    Shape shape;
};

struct Node::Child {
    size_t key_off = 0;  // bundles only
    size_t key_len = 0;
    Node node;
};

// What one decoded packet node costs beyond its wire bytes, charged to max_decoded_bytes: its
// Node::Child while decoding plus its View::Entry (codec.hpp asserts that bound).
constexpr size_t kViewEntryBytes = 176;
constexpr size_t kViewExtraBytes = 128;  // View::Extra, for quantized and string-like packets

// Scans the packet that starts at buf[0], validating its structure and the limits, without
// reading bodies (except LZ4 block headers, to find a compressed body's end).
// Throws NeedMore when `len` bytes are not enough, Error for anything invalid.
enum class ScanMode {
    kFull,    // everything, recursively
    kHeader,  // stop after the header, shape and metadata (end, body_len, children unset)
};
Node scan(const uint8_t *buf, size_t len, const Limits &limits, ScanMode mode = ScanMode::kFull);

// Checks the header (shape, metadata) of the packet at buf[start], nested `depth` levels deep,
// which must end by `bound` (else `bound_status`): what stream framing checks of a packet
// before skipping it. Throws NeedMore / Error as scan() does.
Node scan_header_at(const uint8_t *buf, size_t len, size_t start, size_t bound, int bound_status, int depth,
                    const Limits &limits);

// Finds the end of the LZ4 frame at `pos` from its header and block headers alone (the wire
// stores no compressed length), resumably: each call goes on from where the last one stopped,
// so a frame of many small blocks arriving in pieces is walked once. The frame must be able to
// hold `raw_len` bytes (the shape's claim) and be no longer than any sane encoding of them.
class Lz4Walk {
public:
    Lz4Walk(size_t pos, uint64_t raw_len) : start_(pos), raw_(raw_len), q_(pos) {}
    // Walks over buf[0, avail). Returns 0 when the frame is complete (end()), else the total
    // byte count needed to go on (> avail). Throws Error(TENSO_E_COMPRESSION) when invalid.
    size_t run(const uint8_t *buf, size_t avail);
    size_t end() const { return q_; }

private:
    size_t start_;
    uint64_t raw_;
    size_t q_;  // next thing to read: the frame header, then each block header
    bool in_blocks_ = false;
    bool block_sum_ = false, content_sum_ = false;
    size_t max_block_ = 0;
    uint64_t can_hold_ = 0;
};

// Levels of packets nested below `n` (bundle values, sparse components).
uint32_t nesting_depth(const Node &n);

// The kind a header announces (dispatch order of the reference engine). Inline for the common
// case, a dense dtype with no kind flag; kind_of_flagged decides the rest.
int kind_of_flagged(uint32_t flags, int dtype);
inline int kind_of(uint32_t flags, int dtype) {
    constexpr uint32_t kFlagged = TENSO_FLAG_GPU_IPC_REF | TENSO_FLAG_BUNDLE | TENSO_FLAG_SPARSE_COO |
                                  TENSO_FLAG_SPARSE_CSR | TENSO_FLAG_SPARSE_CSC | TENSO_FLAG_STRING | TENSO_FLAG_RAGGED;
    return !(flags & kFlagged) && dtype_itemsize(dtype) ? TENSO_KIND_DENSE : kind_of_flagged(flags, dtype);
}

}  // namespace tenso
