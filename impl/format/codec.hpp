// codec.hpp - encoding (values -> a plan of byte segments -> a buffer or a file descriptor) and
// decoding (bytes -> scanned Node tree -> View tree bound to the bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <sys/uio.h>

#include "tenso/tenso.h"
#include "format/quant.hpp"
#include "format/wire.hpp"

namespace tenso {

// ------------------------------------------------------------------------------------------
// Encoding
// ------------------------------------------------------------------------------------------

struct EncodeOptions {
    bool integrity = false;
    bool compress = false;
    uint32_t alignment = TENSO_DEFAULT_ALIGNMENT;
    int level = 0;
    unsigned threads = 0;  // LZ4 blocks compressed on this many threads; 0 = every core
};
// An encode alignment as given: a power of two up to TENSO_MAX_ALIGNMENT, or INVALID_ARGUMENT.
[[noreturn]] __attribute__((noinline, cold)) void bad_alignment(uint64_t alignment);
inline uint32_t checked_alignment(uint64_t alignment) {
    if (!is_pow2(alignment) || alignment > TENSO_MAX_ALIGNMENT) bad_alignment(alignment);
    return uint32_t(alignment);
}

// A dense tensor as the caller described it (data borrowed).
struct Tensor {
    int dtype = 0;
    uint32_t ndim = 0;
    uint64_t shape[TENSO_MAX_NDIM];  // ndim entries are set; not zero-filled (encode is hot)
    const uint8_t *data = nullptr;
    uint64_t nbytes = 0;
};
// A dense tensor from its parts: a dense dtype, ndim <= 32, dims that fit the wire's u32 (each
// read once), nbytes == numel x itemsize and data present when there are bytes. Inline: it is
// most of what a small encode costs beyond the copy. bad_tensor says why it refused.
[[noreturn]] __attribute__((noinline, cold)) void bad_tensor(int dtype, uint32_t ndim, const uint64_t *shape,
                                                             bool shape_given, const void *data, uint64_t nbytes);
__attribute__((always_inline)) inline Tensor make_tensor(int dtype, uint32_t ndim, const uint64_t *shape,
                                                         const void *data, uint64_t nbytes) {
    Tensor r;
    const size_t item = dtype_itemsize(dtype);
    if (!item || ndim > TENSO_MAX_NDIM || (ndim && !shape)) bad_tensor(dtype, ndim, r.shape, shape, data, nbytes);
    // One pass: every dim read once, into r.shape, and the checks use the copy (checked_numel's
    // rules: a zero dim makes an empty tensor, whatever the others say; an overflowing product
    // or one over the limit fails).
    uint64_t any = 0, numel = 1;
    bool zero = false, over = false;
    for (uint32_t i = 0; i < ndim; ++i) {
        const uint64_t d = r.shape[i] = shape[i];
        any |= d;
        zero |= d == 0;
        over |= __builtin_mul_overflow(numel, d, &numel);
    }
    if (zero) numel = 0;
    const uint64_t expect = numel * item;  // numel <= TENSO_MAX_ELEMENTS: no overflow
    if (any > UINT32_MAX || (!zero && (over || numel > TENSO_MAX_ELEMENTS)) || nbytes != expect || (expect && !data))
        bad_tensor(dtype, ndim, r.shape, true, data, nbytes);
    r.dtype = dtype;
    r.ndim = ndim;
    r.data = static_cast<const uint8_t *>(data);
    r.nbytes = nbytes;
    return r;
}

// Something to encode. Tensor data and packet bytes are borrowed unless `owned` holds them;
// keys are owned. Copying a Value is cheap (owned storage is shared).
struct Value {
    struct Entry;
    enum Type { kTensor, kBundle, kPacket, kSparse, kQuantized, kStrings } type = kTensor;
    Tensor tensor;  // kTensor; kSparse: the matrix shape; kStrings: shape [count]
    const uint8_t *packet = nullptr;
    size_t packet_len = 0;       // kPacket
    uint32_t packet_depth = 0;   // kPacket: how deep its own bundles/sparse components nest
    std::vector<Entry> entries;  // kBundle
    int sparse_kind = 0;
    std::vector<Tensor> parts;          // kSparse: the three components
    QuantDesc quant;                    // kQuantized (its shape points into tensor.shape)
    const uint64_t *offsets = nullptr;  // kStrings: count + 1 offsets; payload in tensor.data
    std::shared_ptr<const void> owned;
    uint32_t depth() const;  // nesting levels below this value
};
struct Value::Entry {
    std::string key;
    Value value;
};

// The longest header, shape and alignment byte of a dense tensor's packet.
constexpr size_t kDenseHeaderMax = kHeaderV4 + 4 * TENSO_MAX_NDIM + 1;
// Their length for ndim dims under `alignment`: the exponent byte is there for CUST_ALIGN.
inline size_t dense_header_len(uint32_t ndim, uint32_t alignment) {
    return kHeaderV4 + 4 * size_t(ndim) + ((align_flags(alignment) & TENSO_FLAG_CUST_ALIGN) ? 1 : 0);
}
// Writes them for `t` under `o` into head (dense_header_len bytes of room); returns their length.
// Padding to o.alignment follows them.
inline size_t dense_header(uint8_t *head, const Tensor &t, const EncodeOptions &o) {
    const uint32_t a = o.alignment;
    uint16_t flags = align_flags(a);
    if (o.integrity) flags |= TENSO_FLAG_INTEGRITY;
    if (o.compress) flags |= TENSO_FLAG_COMPRESSION;
    write_header(head, flags, uint8_t(t.dtype), uint8_t(t.ndim));
    size_t h = kHeaderV4;
    for (uint32_t i = 0; i < t.ndim; ++i, h += 4) wr32(head + h, uint32_t(t.shape[i]));
    if (flags & TENSO_FLAG_CUST_ALIGN) head[h++] = uint8_t(log2_exact(a));
    return h;  // == dense_header_len(t.ndim, a)
}
// An uncompressed dense packet's length: header, padding, body and footer.
inline size_t dense_packet_len(const Tensor &t, const EncodeOptions &o) {
    const size_t h = dense_header_len(t.ndim, o.alignment);
    return h + pad_to(h, o.alignment) + size_t(t.nbytes) + (o.integrity ? kFooterLen : 0);
}
// Writes the header and padding of an uncompressed dense packet of n bytes at dst; returns
// where the body goes. Padding under 64 bytes is zeroed as a fixed 64 bytes when the packet
// has them (the body and footer, written next, cover the excess): a few stores, not a call.
inline uint8_t *dense_prefix(uint8_t *dst, size_t n, const Tensor &t, const EncodeOptions &o) {
    const size_t h = dense_header(dst, t, o), pad = pad_to(h, o.alignment);
    if (pad < 64 && h + 64 <= n) std::memset(dst + h, 0, 64);
    else std::memset(dst + h, 0, pad);
    return dst + h + pad;
}
// BUFFER_TOO_SMALL: cap bytes of room for a packet of n.
[[noreturn]] __attribute__((noinline, cold)) void too_small(size_t cap, size_t n);

// The packet for a value into dst (cap bytes of room): returns its length; *needed gets it
// too, also when cap is too small (then BUFFER_TOO_SMALL).
size_t encode_into(const Value &v, const EncodeOptions &o, uint8_t *dst, size_t cap, size_t *needed);
// A tensor packet with a footer or a compressed body (encode_into below does the rest).
size_t encode_tensor_into(const Tensor &t, const EncodeOptions &o, uint8_t *dst, size_t cap, size_t *needed);
// A tensor: without a footer or compression (the small-packet case) header, padding and one
// copy, inline, so that a C ABI call is one function.
inline size_t encode_into(const Tensor &t, const EncodeOptions &o, uint8_t *dst, size_t cap, size_t *needed) {
    if (o.compress || o.integrity) return encode_tensor_into(t, o, dst, cap, needed);
    const size_t n = dense_packet_len(t, o);
    *needed = n;
    if (n > cap) too_small(cap, n);
    uint8_t *body = dense_prefix(dst, n, t, o);
    if (t.nbytes) std::memcpy(body, t.data, size_t(t.nbytes));
    return n;
}
// The packet for a value written to fd completely (sockets without SIGPIPE, EAGAIN waited
// out); *written counts what went out, also when it fails.
void encode_to_fd(const Value &v, const EncodeOptions &o, int fd, uint64_t *written);
void encode_to_fd(const Tensor &t, const EncodeOptions &o, int fd, uint64_t *written);

// The bytes of an encoded value as a list of segments: header bytes built in an arena, bodies
// referenced where the caller keeps them (so a fd sink never copies them), and footers that a
// sink computes over the segments of their hash group.
// Writes n bytes to fd completely, as Plan::write_fd does (sockets without SIGPIPE, EAGAIN
// waited out); *written counts what went out.
void write_all(int fd, const uint8_t *p, size_t n, uint64_t *written);

class Plan {
public:
    // How compressed bodies are planned:
    //  kCompress - compressed now, into memory of their own (what write_fd needs);
    //  kMeasure  - sized by their LZ4 bound, never written (size() is an upper bound);
    //  kInPlace  - sized by their bound and compressed by write_to straight into the packet,
    //              whose bundle lengths it then fills in (size() is an upper bound; write_to
    //              returns the real length).
    enum class Mode { kCompress, kMeasure, kInPlace };
    Plan(const EncodeOptions &opts, Mode mode) : opts_(opts), mode_(mode) {}
    // measure_only: kMeasure, else kCompress.
    Plan(const EncodeOptions &opts, bool measure_only) : Plan(opts, measure_only ? Mode::kMeasure : Mode::kCompress) {}

    void add(const Value &v);
    void add(const Tensor &t);
    size_t size() const { return size_; }
    // Empties the plan for another packet, keeping its memory (a plan reused per packet).
    void clear() {
        lengths_.clear();
        arena_.clear();
        segs_.clear();
        owned_.clear();
        size_ = 0;
        group_ = -1;
        groups_ = 0;
    }

    // Writes the packet through `out(p, n)` in order, for a plan whose bodies are not
    // compressed: the body added at `body` (a stand-in the plan never reads) is pulled from
    // `pull(emit)` instead, which hands its bytes over in order; footers are hashed as the
    // pieces pass. A body can so stream from elsewhere (a device) with no whole host copy.
    using Piece = std::function<void(const uint8_t *p, size_t n)>;
    void write_pulled(const uint8_t *body, const std::function<void(const Piece &emit)> &pull, const Piece &out) const;
    // Writes the packet to dst (size() bytes of room) and returns its length (size(), except for
    // kInPlace plans of compressed bodies): one pass over every body, hashing each chunk right
    // after copying it, while it is still in cache.
    size_t write_to(uint8_t *dst) const;
    // Writes the packet to fd with vectored I/O. Returns bytes written; throws on failure
    // (with *written updated).
    void write_fd(int fd, uint64_t *written);
    // Hands the packet to `sink(data, len, borrowed, ctx)` segment by segment, in order, footers
    // computed first. borrowed: the bytes are the caller's own (a tensor body as given),
    // otherwise the plan's, valid only during the call. A sink returning false stops the walk
    // with TENSO_E_USER; *written counts the bytes of the pieces it accepted.
    using Sink = bool (*)(const uint8_t *data, size_t len, bool borrowed, void *ctx);
    void write_each(Sink sink, void *ctx, uint64_t *written);
    // The packet as segments to write in order (footers computed first): header bytes from the
    // plan's arena, bodies where the caller keeps them. Valid while the plan and value live.
    std::vector<struct iovec> iovecs();

private:
    struct Seg {
        const uint8_t *ext = nullptr;  // external bytes, or nullptr for arena bytes
        size_t off = 0;                // arena offset
        size_t len = 0;
        int group = -1;         // hash group the bytes belong to
        bool footer = false;    // the 8-byte digest of `group`
        bool borrowed = false;  // ext bytes that are the caller's (not owned_)
        bool lz4 = false;       // kInPlace: ext[0, raw) is compressed here; len is its bound
        size_t raw = 0;
    };
    // kInPlace: a bundle value's planned extent, whose u32 length sits just before it.
    struct Extent {
        size_t begin, end;
    };
    EncodeOptions opts_;
    Mode mode_;
    std::vector<Extent> lengths_;
    std::vector<uint8_t> arena_;
    std::vector<Seg> segs_;
    std::vector<std::unique_ptr<uint8_t[]>> owned_;  // compressed bodies
    size_t size_ = 0;
    int group_ = -1, groups_ = 0;

    size_t put(const void *p, size_t n);  // arena bytes; returns their arena offset
    void ext(const uint8_t *p, size_t n, bool borrowed = true);
    void fill_footers();
    void open_hash() { group_ = groups_++; }
    void close_hash();
    void add_value(const Value &v, int depth);
    void add_tensor(const Tensor &t, const EncodeOptions &o);
    void add_sparse(const Value &v);
    void add_quantized(const Value &v);
    void add_strings(const Value &v);
    const uint8_t *seg_ptr(const Seg &s) const { return s.ext ? s.ext : arena_.data() + s.off; }
};

// 64-byte aligned memory, released with free_bytes(). Large buffers (4 MiB and up) are 2 MiB
// aligned anonymous mappings, reserved without commitment (pages are backed as they are
// written) and asked for huge pages; they come from a small pool that keeps the pages of
// recently freed ones.
uint8_t *alloc_bytes(size_t n);
// Releases alloc_bytes() memory (a large buffer may be kept for reuse); any other malloc'd
// pointer, and nullptr, are accepted too and go to free().
void free_bytes(void *p) noexcept;
// What alloc_bytes(n) takes: n rounded up to its alignment (2 MiB for large buffers), which is
// what a decode charges for it.
size_t alloc_size(size_t n);
// The alignment alloc_bytes(n) gives: 64, or 2 MiB for large buffers.
size_t alloc_alignment(size_t n);
// The same, shared by the views that point into it.
std::shared_ptr<uint8_t> alloc_aligned(size_t n);

// ------------------------------------------------------------------------------------------
// Decoding
// ------------------------------------------------------------------------------------------

// Views are kept small (a tree of tiny packets costs a few times its bytes): the shape is sized
// by ndim and what only some kinds need lives in `extra`. Decoding assigns every field (see
// bare()): a field added here is assigned in bind() (codec.cpp) too.
struct View {
    struct Entry;
    struct Extra;
    int kind = 0;
    uint32_t version = 0, flags = 0;
    int dtype = 0;
    uint32_t ndim = 0;
    uint32_t alignment = 1;
    Shape shape;
    const uint8_t *data = nullptr;  // dense / quantized / ipc: the body; strings: the payload
    uint64_t nbytes = 0;
    uint64_t packet_size = 0;
    bool owns_data = false;
    std::shared_ptr<const void> keep;  // whatever keeps `data` alive, when the view owns it
    std::vector<Entry> entries;        // bundle entries; sparse components (no keys)
    std::unique_ptr<Extra> extra;      // quantized, strings and direct ragged views

    // Holds nothing beyond its fields (no keep, children, extra or heap shape): decode_into()
    // then makes it another packet's view by assignment alone, which is how the C ABI reuses
    // a freed view without constructing it again.
    bool bare() const { return !keep && entries.capacity() == 0 && !extra && !shape.on_heap(); }
};
struct View::Extra {
    QuantDesc quant;  // quantized: scales/zero points point into qparams
    std::vector<float> qparams;
    std::vector<uint64_t> offsets;  // strings and direct ragged: count + 1, checked
};
struct View::Entry {
    const char *key = nullptr;
    size_t key_len = 0;
    View view;
};
static_assert(sizeof(View::Entry) <= kViewEntryBytes, "max_decoded_bytes charges kViewEntryBytes a view");
static_assert(sizeof(View::Extra) <= kViewExtraBytes, "max_decoded_bytes charges kViewExtraBytes for extra");

// Decodes the packet at buf[0]. `keep` owns buf when the caller hands ownership to the view
// (stream buffers, mappings); null when the view borrows the caller's bytes.
std::unique_ptr<View> decode(const uint8_t *buf, size_t len, const Limits &limits, std::shared_ptr<const void> keep);
// decode() into `v`, which must be bare() (a new View is, and so is take_view()'s spare:
// spare_view.hpp). On failure `v` may hold part of the packet: destroy it or give_view() it.
void decode_into(View &v, const uint8_t *buf, size_t len, const Limits &limits,
                 std::shared_ptr<const void> keep = nullptr);
// Binds the Node scan() made of buf, without scanning again: what a caller checked on the Node
// is what the view gets, even if others rewrite the bytes meanwhile.
std::unique_ptr<View> bind_scanned(const Node &n, const uint8_t *buf, const Limits &limits,
                                   std::shared_ptr<const void> keep);
// bind_scanned() into `v`, which must be bare() (as for decode_into()).
void bind_scanned_into(View &v, const Node &n, const uint8_t *buf, const Limits &limits,
                       const std::shared_ptr<const void> &keep);

// A dense, uncompressed packet whose body lies in memory the engine cannot read (sdk/js: the
// caller's ArrayBuffer, outside WebAssembly memory). `head` holds the first `have` of its `len`
// bytes; *out gets decode()'s own scan of it (limits; TRUNCATED when `len` is short), which
// reads the header alone since scan() never reads a dense body. Returns false, with *out
// untouched, for any other packet (another kind, an LZ4 body, a header `have` does not hold,
// a header the scan refuses): decode those whole, which also gives their exact error.
bool scan_detached(Node *out, const uint8_t *head, size_t have, size_t len, const Limits &limits);
// The integrity check of a body hashed elsewhere: TENSO_E_CHECKSUM unless `digest` (its XXH3-64,
// Hasher) is the value of the 8-byte footer at `footer`.
void check_digest(const uint8_t *footer, uint64_t digest);

// What a packet's header says, read from a (possibly partial) packet without decoding it.
struct PacketInfo {
    uint32_t version = 0, flags = 0;
    int kind = 0, dtype = 0;
    uint32_t ndim = 0, entry_count = 0, alignment = 0;
    uint64_t shape[TENSO_MAX_NDIM] = {};
    uint64_t body_offset = 0;
    uint64_t body_size = 0;    // as stored; 0 when unknown (a compressed body not all there)
    uint64_t packet_size = 0;  // 0 when the bytes are too few to tell
};

// A dense, uncompressed packet, checked as decode() checks it and described without a View
// (tenso_loads_tensor): into the ABI's own struct, which is this result field for field (a
// copy through an engine type was a tenth of a small decode). *out is written only once every
// check has passed. Other kinds, and compressed bodies, are UNSUPPORTED_KIND.
void decode_dense(tenso_tensor_view *out, const uint8_t *buf, size_t len, const Limits &limits);

PacketInfo inspect(const uint8_t *buf, size_t len);

}  // namespace tenso
