// codec.hpp - encoding (values -> a plan of byte segments -> a buffer or a file descriptor) and
// decoding (bytes -> scanned Node tree -> View tree bound to the bytes).
#pragma once

#include <cstddef>
#include <cstdint>
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
uint32_t checked_alignment(uint64_t alignment);

// A dense tensor as the caller described it (data borrowed).
struct Tensor {
    int dtype = 0;
    uint32_t ndim = 0;
    uint64_t shape[TENSO_MAX_NDIM] = {};
    const uint8_t *data = nullptr;
    uint64_t nbytes = 0;
};
// A dense tensor from its parts: a dense dtype, ndim <= 32, dims that fit the wire's u32 (each
// read once), nbytes == numel x itemsize and data present when there are bytes.
Tensor make_tensor(int dtype, uint32_t ndim, const uint64_t *shape, const void *data, uint64_t nbytes);

// Something to encode. Tensor data and packet bytes are borrowed unless `owned` holds them;
// keys are owned. Copying a Value is cheap (owned storage is shared).
struct Value {
    struct Entry;
    enum Type { kTensor, kBundle, kPacket, kSparse, kQuantized, kStrings } type = kTensor;
    Tensor tensor;                 // kTensor; kSparse: the matrix shape; kStrings: shape [count]
    const uint8_t *packet = nullptr;
    size_t packet_len = 0;         // kPacket
    uint32_t packet_depth = 0;     // kPacket: how deep its own bundles/sparse components nest
    std::vector<Entry> entries;    // kBundle
    int sparse_kind = 0;
    std::vector<Tensor> parts;     // kSparse: the three components
    QuantDesc quant;               // kQuantized (its shape points into tensor.shape)
    const uint64_t *offsets = nullptr;  // kStrings: count + 1 offsets; payload in tensor.data
    std::shared_ptr<const void> owned;
    uint32_t depth() const;  // nesting levels below this value
};
struct Value::Entry {
    std::string key;
    Value value;
};

// The bytes of an encoded value as a list of segments: header bytes built in an arena, bodies
// referenced where the caller keeps them (so a fd sink never copies them), and footers that a
// sink computes over the segments of their hash group.
class Plan {
public:
    // measure_only: compressed bodies are sized by their LZ4 bound instead of compressed.
    Plan(const EncodeOptions &opts, bool measure_only) : opts_(opts), measure_(measure_only) {}

    void add(const Value &v);
    void add(const Tensor &t);
    size_t size() const { return size_; }

    // Writes the packet to dst (size() bytes): one pass over every body, hashing each chunk
    // right after copying it, while it is still in cache.
    void write_to(uint8_t *dst) const;
    // Writes the packet to fd with vectored I/O. Returns bytes written; throws on failure
    // (with *written updated).
    void write_fd(int fd, uint64_t *written);
    // The packet as segments to write in order (footers computed first): header bytes from the
    // plan's arena, bodies where the caller keeps them. Valid while the plan and value live.
    std::vector<struct iovec> iovecs();

private:
    struct Seg {
        const uint8_t *ext = nullptr;  // external bytes, or nullptr for arena bytes
        size_t off = 0;                // arena offset
        size_t len = 0;
        int group = -1;                // hash group the bytes belong to
        bool footer = false;           // the 8-byte digest of `group`
    };
    EncodeOptions opts_;
    bool measure_;
    std::vector<uint8_t> arena_;
    std::vector<Seg> segs_;
    std::vector<std::unique_ptr<uint8_t[]>> owned_;  // compressed bodies
    size_t size_ = 0;
    int group_ = -1, groups_ = 0;

    size_t put(const void *p, size_t n);  // arena bytes; returns their arena offset
    void ext(const uint8_t *p, size_t n);
    void open_hash() { group_ = groups_++; }
    void close_hash();
    void add_value(const Value &v, int depth);
    void add_tensor(const Tensor &t, const EncodeOptions &o);
    void add_sparse(const Value &v);
    void add_quantized(const Value &v);
    void add_strings(const Value &v);
    const uint8_t *seg_ptr(const Seg &s) const { return s.ext ? s.ext : arena_.data() + s.off; }
};



// 64-byte aligned heap memory (huge-page backed when large), released with free().
uint8_t *alloc_bytes(size_t n);
// What alloc_bytes(n) takes: n rounded up to its alignment (2 MiB for large buffers), which is
// what a decode charges for it.
size_t alloc_size(size_t n);
// The same, shared by the views that point into it.
std::shared_ptr<uint8_t> alloc_aligned(size_t n);

// ------------------------------------------------------------------------------------------
// Decoding
// ------------------------------------------------------------------------------------------

// Views are kept small (a tree of tiny packets costs a few times its bytes): the shape is sized
// by ndim and what only some kinds need lives in `extra`.
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
};
struct View::Extra {
    QuantDesc quant;                // quantized: scales/zero points point into qparams
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
std::unique_ptr<View> decode(const uint8_t *buf, size_t len, const Limits &limits,
                             std::shared_ptr<const void> keep);
// Binds the Node scan() made of buf, without scanning again: what a caller checked on the Node
// is what the view gets, even if others rewrite the bytes meanwhile.
std::unique_ptr<View> bind_scanned(const Node &n, const uint8_t *buf, const Limits &limits,
                                   std::shared_ptr<const void> keep);

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
PacketInfo inspect(const uint8_t *buf, size_t len);

}  // namespace tenso
