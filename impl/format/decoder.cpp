// decoder.cpp - the stream decoder (see decoder.hpp).
#include "format/decoder.hpp"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>

#include "error.hpp"

namespace tenso {

namespace {

std::string num(uint64_t v) { return std::to_string(v); }

constexpr size_t kNoBound = std::numeric_limits<size_t>::max();
constexpr size_t kFirstNeed = sizeof kMagic;  // garbage is told apart from a cut stream early
// Bytes the staging area takes beyond the framer's need when they are at hand, so a packet
// that straddles two feeds is framed in a few steps, not one per header field.
constexpr size_t kStageChunk = 4096;
constexpr size_t kStageKeep = size_t(64) << 10;  // staging capacity kept between packets

// Bytes a header at `start` surely needs beyond `have` (the fixed part; for v4 then its shape),
// as the scanner would say, or 0 when they are there or the header is not plain: the scanner
// then decides. Asked
// first, it spares the scanner's NeedMore exception on the common partial header.
size_t v4_header_short(const uint8_t *b, size_t have, size_t start, const Limits &lim) {
    if (have < start + kHeaderLegacy) {                      // the magic, then any version's fixed part
        const size_t n = std::min<size_t>(have - start, 4);  // 0 with no bytes yet (b may be NULL)
        if (n && std::memcmp(b + start, kMagic, n) != 0) return 0;
        return have < start + 4 ? start + 4 : start + kHeaderLegacy;
    }
    if (std::memcmp(b + start, kMagic, 4) != 0 || b[start + 4] != 4) return 0;
    if (have < start + kHeaderV4) return start + kHeaderV4;
    const uint8_t ndim = b[start + 8];
    if (ndim > lim.max_ndim) return 0;
    const size_t shape = start + kHeaderV4 + 4 * size_t(ndim);
    return have < shape ? shape : 0;
}

size_t add(size_t a, uint64_t b) {
    if (b > kNoBound - a) fail(TENSO_E_MALFORMED, "packet length overflows");
    return a + size_t(b);
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Framer
// ------------------------------------------------------------------------------------------

void Framer::reset() {
    stage_ = Stage::kHeader;
    need_ = end_ = 0;
    expect_ = 0;
    mismatch_ = false;
    align_ = TENSO_DEFAULT_ALIGNMENT;
    left_ = 0;
    checked_ = false;
    packets_ = 1;
}

// A container's header says how many packets it holds and that they nest one level deeper:
// the limits refuse a tree at its headers, before its bytes are taken.
void Framer::count(const Node &n, int depth) {
    uint64_t inner = 0;
    if (n.kind == TENSO_KIND_BUNDLE) inner = n.count;
    else if (n.kind == TENSO_KIND_SPARSE_COO || n.kind == TENSO_KIND_SPARSE_CSR || n.kind == TENSO_KIND_SPARSE_CSC)
        inner = 3;
    if (!inner) return;
    if (depth + 1 > int(lim_.max_depth)) fail(TENSO_E_LIMIT, "packets nest deeper than " + num(lim_.max_depth));
    packets_ += inner;
    if (lim_.max_entries && packets_ > lim_.max_entries)
        fail(TENSO_E_LIMIT, "packet holds more than max_entries (" + num(lim_.max_entries) + ") packets");
}

size_t Framer::checked(size_t n) const {
    if (expect_ && n > expect_) {
        mismatch_ = true;
        fail(TENSO_E_MALFORMED, "the packet is longer than the " + num(expect_) + " bytes announced for it");
    }
    if (lim_.max_packet_bytes && n > lim_.max_packet_bytes)
        fail(TENSO_E_LIMIT, "packet of at least " + num(n) + " bytes is larger than max_packet_bytes (" +
                                num(lim_.max_packet_bytes) + ")");
    // The packet's buffer is memory the decode holds: max_decoded_bytes bounds it too.
    if (lim_.max_decoded_bytes && n > lim_.max_decoded_bytes)
        fail(TENSO_E_LIMIT, "packet of at least " + num(n) + " bytes is larger than max_decoded_bytes (" +
                                num(lim_.max_decoded_bytes) + ")");
    return n;
}

size_t Framer::known(size_t end) {
    end_ = checked(end);
    if (expect_ && end_ != expect_) {
        mismatch_ = true;
        fail(TENSO_E_MALFORMED, "the packet is " + num(end_) + " bytes, not the " + num(expect_) + " announced for it");
    }
    stage_ = Stage::kDone;
    return 0;
}

size_t Framer::run(const uint8_t *b, size_t have) {
    switch (stage_) {
    case Stage::kHeader: {
        if (const size_t more = v4_header_short(b, have, 0, scan_lim())) return checked(more);
        Node n;
        try {
            n = scan_header_at(b, have, 0, kNoBound, TENSO_E_MALFORMED, 0, scan_lim());
        } catch (const NeedMore &m) {
            return checked(m.need);
        }
        align_ = std::max<size_t>(TENSO_DEFAULT_ALIGNMENT, n.alignment);
        count(n, 0);
        const size_t header = n.version == 4 ? kHeaderV4 : kHeaderLegacy;
        switch (n.kind) {
        case TENSO_KIND_GPU_IPC_REF: return known(n.end);
        case TENSO_KIND_BUNDLE:
            bundle_ = true;
            pos_ = header;
            left_ = n.count;
            stage_ = Stage::kEntries;
            return entries(b, have);
        case TENSO_KIND_SPARSE_COO:
        case TENSO_KIND_SPARSE_CSR:
        case TENSO_KIND_SPARSE_CSC:
            bundle_ = false;
            pos_ = header + 4 * size_t(n.ndim);
            left_ = 3;
            stage_ = Stage::kEntries;
            return entries(b, have);
        default: break;
        }
        footer_ = n.flags & TENSO_FLAG_INTEGRITY;
        if (!n.compressed) return known(add(add(n.body_off, n.body_len), footer_ ? kFooterLen : 0));
        lz4_ = Lz4Walk(n.body_off, n.nbytes);
        stage_ = Stage::kLz4;
    }
        [[fallthrough]];
    case Stage::kLz4:
        if (const size_t more = lz4_.run(b, have)) return checked(more);
        return known(add(lz4_.end(), footer_ ? kFooterLen : 0));
    case Stage::kEntries: return entries(b, have);
    case Stage::kDone: return 0;
    }
    return 0;
}

// The container's own structure: each entry's lengths (and a bundle key) are read and its
// nested packet's header checked, then the entry is skipped whole. decode() checks the rest.
size_t Framer::entries(const uint8_t *b, size_t have) {
    const int status = bundle_ ? TENSO_E_BAD_BUNDLE : TENSO_E_MALFORMED;
    for (; left_; --left_) {
        size_t p = pos_;
        if (bundle_) {
            if (p + 4 > have) return checked(p + 4);
            const size_t key_len = rd32(b + p);
            if (key_len > TENSO_MAX_KEY_BYTES)
                fail(TENSO_E_LIMIT,
                     "bundle key of " + num(key_len) + " bytes exceeds the limit of " + num(TENSO_MAX_KEY_BYTES));
            p += 4 + key_len;
            if (p + 4 > have) return checked(p + 4);
            if (!valid_utf8(b + pos_ + 4, key_len)) fail(TENSO_E_BAD_BUNDLE, "a bundle key is not valid UTF-8");
        } else if (p + 4 > have) {
            return checked(p + 4);
        }
        const size_t start = p + 4, end = add(start, rd32(b + p));
        if (!checked_) {
            const size_t more = v4_header_short(b, have, start, scan_lim());
            if (more && more <= end) return checked(more);  // past its end: the scanner says why
            try {
                count(scan_header_at(b, have, start, end, status, 1, scan_lim()), 1);
            } catch (const NeedMore &m) {
                return checked(m.need);
            }
            checked_ = true;
        }
        if (end > have) return checked(end);
        pos_ = end;
        checked_ = false;
    }
    return known(pos_);
}

size_t frame_length(const uint8_t *buf, size_t len, const Limits &limits) {
    Framer f(limits);
    if (const size_t more = f.run(buf, len)) throw NeedMore{more};
    if (f.end() > len) throw NeedMore{f.end()};
    return f.end();
}

void as_loads_says(const uint8_t *buf, size_t len, const Limits &limits) {
    try {
        scan(buf, len, limits);
    } catch (const NeedMore &) {
    } catch (...) {
        throw;  // for TSan: see scan_whole in codec.cpp
    }
}

size_t packet_length(const uint8_t *buf, size_t len, const Limits &limits) {
    size_t end;
    try {
        end = frame_length(buf, len, limits);
    } catch (const NeedMore &) {
        // Framing skips nested packets whole, so a bad nested length shows up as garbage where
        // the next entry should be: a claim for more bytes, or an error. The full scan of the
        // bytes at hand names such a fault where it is, as loads does.
        try {
            scan(buf, len, limits);
        } catch (const NeedMore &) {}
        throw;
    } catch (const Error &) {
        as_loads_says(buf, len, limits);
        throw;
    }
    scan(buf, end, limits);  // what a decode would check inside, checksums aside
    return end;
}

// ------------------------------------------------------------------------------------------
// Decoder
// ------------------------------------------------------------------------------------------

// A buffer of the default allocator: alloc_bytes() memory, so a large one comes from the
// process's page-keeping pool (codec.hpp) when it holds a buffer of that size, and otherwise is
// fresh memory whose pages are only backed as the bytes arrive: a header's claim (within the
// limits) costs address space, not memory, until the peer really sends that much. A reader
// that makes a decoder per packet (tenso_read_fd) so reuses the last packet's pages instead of
// faulting in 64 MiB of fresh ones per packet.
struct Block {
    uint8_t *p = nullptr;
    size_t cap = 0, align = 0;

    static Block make(size_t size, size_t alignment) {
        Block b;
        if (alignment <= alloc_alignment(size)) {
            b.p = alloc_bytes(size);
            b.cap = alloc_size(size);
            b.align = alloc_alignment(size);
        } else {
            b.cap = (size + alignment - 1) & ~(alignment - 1);
            b.p = static_cast<uint8_t *>(std::aligned_alloc(alignment, b.cap));
            if (!b.p) throw std::bad_alloc();
            b.align = alignment;
        }
        return b;
    }
    void drop() {
        free_bytes(p);
        p = nullptr;
    }
};

// The default allocator's reusable buffers, shared with the deleters of live buffers, which may
// run on any thread and after the decoder is gone. Two kinds are kept:
// - the largest buffer freed (as one spare always was): a reader of big packets reuses its pages;
// - small buffers (under kSmallBytes), up to kPoolBlocks of them and kPoolBytes in all: pushes
//   that queue up while the application holds their views (a node's receive queue holds up to
//   max_queued of them) would otherwise each cost a fresh allocation on the reading thread and
//   a free on the application's, and glibc consolidates the freeing thread's chunks on every
//   allocation of this size.
// So a peer can make a decoder hold at most kPoolBytes more than the one spare it held before,
// and only while the decoder lives. A small buffer serves a packet only if it wastes little
// (slack()): what a receive queue charges (the packet's length) stays what the buffer holds,
// give or take the kCountBytes of its shared count (InBlock, below): at most 128 KiB more for
// a queue of 1024 small pushes.
struct Decoder::Spare : std::enable_shared_from_this<Decoder::Spare> {
    static constexpr size_t kSmallBytes = size_t(64) << 10;
    static constexpr size_t kPoolBlocks = 1024;
    static constexpr size_t kPoolBytes = size_t(1) << 20;
    static constexpr size_t kLook = 8;  // newest pooled buffers a packet looks at
    static size_t slack(size_t size) { return size / 8 + 64; }

    std::mutex m;
    Block b;  // the one spare: the largest buffer freed (small ones too while there is no ring)
    // The small buffers: a ring, oldest at `first`, newest at first + n - 1. Made once two small
    // buffers are out at once, so a decoder per packet (tenso_read_fd) never pays for it.
    std::unique_ptr<Block[]> ring;
    size_t first = 0, n = 0, pooled = 0;  // pooled: their bytes
    size_t out = 0;                       // small buffers handed out and not given back
    bool open = true;                     // the decoder is alive
    // Buffers whose control block is in them (InBlock) refer to this by pointer, which costs no
    // atomic count shared with the thread freeing them: while any is out, this owns itself.
    size_t pinned = 0;
    std::shared_ptr<Spare> self;

    ~Spare() { clear(); }
    Block &at(size_t i) { return ring[(first + i) % kPoolBlocks]; }
    static bool serves(const Block &q, size_t size, size_t alignment) {
        return q.p && q.cap >= size && q.align >= alignment && (size > kSmallBytes || q.cap - size <= slack(size));
    }
    void drop_oldest() {
        pooled -= ring[first].cap;
        ring[first].drop();
        first = (first + 1) % kPoolBlocks;
        --n;
    }
    void clear() {
        b.drop();
        while (n) drop_oldest();
    }
    Block take(size_t size, size_t alignment) {
        std::lock_guard<std::mutex> g(m);
        return take_locked(size, alignment);
    }
    Block take_pinned(size_t size, size_t alignment) {
        std::lock_guard<std::mutex> g(m);
        const Block q = take_locked(size, alignment);
        if (pinned++ == 0) self = shared_from_this();
        return q;
    }
    Block take_locked(size_t size, size_t alignment) {
        const bool small = alloc_size(size) <= kSmallBytes;
        Block q;
        if (small)
            for (size_t i = n, looked = 0; i-- > 0 && looked++ < kLook;)
                if (serves(at(i), size, alignment)) {
                    q = at(i);
                    at(i) = at(n - 1);
                    --n;
                    pooled -= q.cap;
                    break;
                }
        if (!q.p && serves(b, size, alignment)) {
            q = b;
            b.p = nullptr;
        }
        if (!q.p) {
            if (small && !ring && out) ring.reset(new Block[kPoolBlocks]);  // on the decoder's thread
            if (small && n) drop_oldest();                                  // a size that no longer comes ages out
            if (!small) b.drop();                                           // a large spare that does not fit goes
            q = Block::make(size, alignment);
        }
        if (q.cap <= kSmallBytes) ++out;
        return q;
    }
    void give_pinned(Block q) {
        std::shared_ptr<Spare> last;  // released after the lock: it may own this
        std::lock_guard<std::mutex> g(m);
        keep_or_drop(q);
        if (--pinned == 0) last = std::move(self);
    }
    // Keeps a small buffer in the ring (the oldest kept go to make room), else the larger of the
    // spare and this one; drops what it does not keep.
    void give(Block q) {
        std::lock_guard<std::mutex> g(m);
        keep_or_drop(q);
    }
    void keep_or_drop(Block q) {
        if (q.cap <= kSmallBytes) --out;
        if (open && ring && q.cap <= kSmallBytes) {
            while (n == kPoolBlocks || pooled + q.cap > kPoolBytes) drop_oldest();
            at(n++) = q;
            pooled += q.cap;
        } else if (!open || (b.p && b.cap >= q.cap)) {
            q.drop();
        } else {
            b.drop();
            b = q;
        }
    }
    void close() {
        std::lock_guard<std::mutex> g(m);
        open = false;
        clear();
    }
};

namespace {
// A small buffer's shared_ptr keeps its control block (the counts) in the buffer's own last
// kCountBytes, past the packet: std::shared_ptr places it where this allocator says, and
// deallocate(), the last thing a control block does (after the counts and any weak reference
// are done with), gives the buffer back to the pool. So a pooled buffer costs no allocation: a
// receiving node's loop thread allocates one per push and the application frees it on another
// thread, and glibc takes its arena lock on both sides for such pairs (futex waits at ~300k/s).
constexpr size_t kCountBytes = 128;
template <class T>
struct InBlock {
    using value_type = T;
    Decoder::Spare *spare;  // pinned (Spare::take_pinned) until the buffer is given back
    Block blk;
    size_t at = 0;  // where the control block goes (16-aligned, past the packet)
    InBlock(Decoder::Spare *s, Block b, size_t a) : spare(s), blk(b), at(a) {}
    template <class U>
    InBlock(const InBlock<U> &o) : spare(o.spare), blk(o.blk), at(o.at) {}
    T *allocate(size_t n) {
        static_assert(sizeof(T) <= kCountBytes && alignof(T) <= 16, "the control block fits its slot");
        assert(n == 1);
        (void)n;
        return reinterpret_cast<T *>(blk.p + at);
    }
    void deallocate(T *, size_t) noexcept;
    template <class U>
    bool operator==(const InBlock<U> &o) const {
        return blk.p == o.blk.p;
    }
    template <class U>
    bool operator!=(const InBlock<U> &o) const {
        return blk.p != o.blk.p;
    }
};
struct KeepsNothing {
    void operator()(uint8_t *) const {}  // the allocator's deallocate() gives the buffer back
};
}  // namespace

Decoder::Decoder(const DecoderConfig &cfg) : cfg_(cfg), framer_(cfg_.limits), spare_(std::make_shared<Spare>()) {
    reset();
}

Decoder::~Decoder() {
    packet_.reset();
    spare_->close();
}

void Decoder::reset() {
    framer_.reset();
    packet_.reset();
    if (stage_.capacity() > kStageKeep) std::vector<uint8_t>().swap(stage_);
    stage_.clear();
    have_ = 0;
    want_ = kFirstNeed;
    failed_ = false;
    // Read-ahead bytes past a packet that failed after framing are the next packets'; after a
    // framing failure the stream's position is unknown and they are dropped.
    if (!framed_failure_) ahead_pos_ = ahead_end_ = 0;
    framed_failure_ = false;
}

void Decoder::check_usable() const {
    if (failed_) fail(TENSO_E_INVALID_ARGUMENT, "the decoder failed on an earlier packet: reset it first");
}

std::shared_ptr<uint8_t> Decoder::allocate(size_t size, size_t alignment) {
    if (cfg_.alloc) {
        void *p = cfg_.alloc(cfg_.alloc_user, size, alignment);
        if (!p) fail(TENSO_E_NO_MEMORY, "the allocator refused " + num(size) + " bytes");
        const tenso_release_fn release = cfg_.release;
        void *user = cfg_.alloc_user;
        // Owned before it is checked: memory the decoder refuses goes back to the caller too.
        std::shared_ptr<uint8_t> mem(static_cast<uint8_t *>(p),
                                     [release, user, size](uint8_t *q) { release(user, q, size); });
        if (reinterpret_cast<uintptr_t>(p) % alignment)
            fail(TENSO_E_INVALID_ARGUMENT,
                 "the allocator returned memory that is not " + num(alignment) + "-byte aligned");
        return mem;
    }
    const size_t at = (size + 15) & ~size_t(15);
    if (alloc_size(at + kCountBytes) <= Spare::kSmallBytes) {
        const Block blk = spare_->take_pinned(at + kCountBytes, alignment);
        return std::shared_ptr<uint8_t>(blk.p, KeepsNothing{}, InBlock<uint8_t>(spare_.get(), blk, at));
    }
    const Block blk = spare_->take(size, alignment);
    std::shared_ptr<Spare> spare = spare_;
    return std::shared_ptr<uint8_t>(blk.p, [spare, blk](uint8_t *) { spare->give(blk); });
}

template <class T>
void InBlock<T>::deallocate(T *, size_t) noexcept {
    spare->give_pinned(blk);
}

size_t Decoder::whole(const uint8_t *src, size_t len) const {
    if (!idle() || cfg_.frame_only) return 0;
    Framer f(framer_);  // idle: a fresh framer, but for a length expect() set
    try {
        return f.run(src, len) == 0 && f.end() <= len ? f.end() : 0;
    } catch (const Error &) {
        return 0;
    }
}

size_t Decoder::needed() const { return failed_ ? 0 : want_ - have_; }

// Upstream's wording for a stream cut inside a packet (tenso 0.24 read_stream, which users
// match on): the read it was in, and for a dense or quantized body the bytes that read expected
// (body and footer) and got. Our own detail follows in finish().
namespace {
std::string upstream_truncation(const uint8_t *p, size_t have, size_t want, bool sized) {
    if (have < 8) return "Stream ended during header read. Expected 8 bytes, got " + num(have);
    if (have < 10 && p[4] == 4) return "Stream ended during v4 header read";
    try {
        const PacketInfo info = inspect(p, have);
        const bool body_kind = info.kind == TENSO_KIND_DENSE || info.kind == TENSO_KIND_QUANTIZED;
        if (body_kind && sized && have >= info.body_offset)
            return "Stream ended during body read. Expected " + num(want - info.body_offset) + " bytes, got " +
                   num(have - info.body_offset);
    } catch (const Error &) {
        // The header itself is not all there: upstream was still reading its packet.
    }
    return "Stream ended during packet read";
}
}  // namespace

void Decoder::finish() const {
    check_usable();
    if (have_ == 0) return;
    const uint8_t *bytes = packet_ ? packet_.get() : stage_.data();
    fail(TENSO_E_TRUNCATED, upstream_truncation(bytes, have_, want_, bool(packet_)) +
                                " (stream ended inside a packet after " + num(have_) + " bytes, at least " +
                                num(want_ - have_) + " more needed)");
}

// The framer has fixed the exact length: the packet's own buffer takes over from staging.
void Decoder::sized() {
    packet_ = allocate(framer_.end(), framer_.alignment());
    if (have_) std::memcpy(packet_.get(), stage_.data(), have_);
    if (stage_.capacity() > kStageKeep) std::vector<uint8_t>().swap(stage_);
    stage_.clear();
    want_ = framer_.end();
}

std::unique_ptr<View> Decoder::complete() {
    std::shared_ptr<uint8_t> buf = std::move(packet_);
    const uint8_t *bytes = buf.get();  // read before the move below (argument order is unspecified)
    const size_t len = have_;
    framer_.reset();
    have_ = 0;
    want_ = kFirstNeed;
    if (cfg_.frame_only) {
        std::unique_ptr<View> v(new View);
        v->data = bytes;
        v->nbytes = v->packet_size = len;
        v->keep = std::move(buf);
        v->owns_data = true;
        return v;
    }
    return decode(bytes, len, cfg_.limits, std::move(buf));
}

void Decoder::expect(size_t n) {
    if (!idle() || have_) fail(TENSO_E_INVALID_ARGUMENT, "expect() in the middle of a packet");
    framer_.expect(n);
}

size_t Decoder::frame(const uint8_t *b, size_t n) {
    try {
        return framer_.run(b, n);
    } catch (const Error &) {
        // Framing checks headers only and skips nested packets whole, so its fault may be a
        // symptom of an earlier one: the full scan of the bytes at hand names it as loads does.
        // Not a length other than the one expected: that is the fault whatever else the bytes hold.
        if (!framer_.mismatch()) as_loads_says(b, n, cfg_.limits);
        throw;
    }
}

// The packet is framed and all here: a failure from here on leaves the stream in step.
std::unique_ptr<View> Decoder::complete_framed() {
    framed_failure_ = true;
    std::unique_ptr<View> v = complete();
    framed_failure_ = false;
    return v;
}

template <class F>
auto Decoder::guarded(F f) -> decltype(f()) {
    check_usable();
    try {
        return f();
    } catch (...) {
        // A packet that failed is dropped (its memory released); the decoder waits for reset().
        failed_ = true;
        if (!framed_failure_) fed_ = 0;  // where the stream stands is unknown
        packet_.reset();
        stage_.clear();
        have_ = 0;
        throw;
    }
}

size_t Decoder::feed(const uint8_t *src, size_t len, std::unique_ptr<View> *out) {
    out->reset();
    fed_ = 0;
    return guarded([&] {
        size_t &used = fed_;
        while (used < len && !*out) {
            const uint8_t *s = src + used;
            const size_t n = len - used;
            if (packet_) {
                const size_t k = std::min(n, want_ - have_);
                std::memcpy(packet_.get() + have_, s, k);
                have_ += k;
                used += k;
            } else if (have_ == 0) {
                // A packet starts here: frame it on the caller's bytes, staging nothing when
                // its headers are all at hand.
                if (const size_t more = frame(s, n)) {
                    stage_.assign(s, s + n);  // all of it is the packet's: it needs more
                    have_ = n;
                    used += n;
                    want_ = more;
                    continue;
                }
                sized();
                const size_t k = std::min(n, want_);
                std::memcpy(packet_.get(), s, k);
                have_ = k;
                used += k;
            } else {
                // Staging: take what the framer needs (and a little more when at hand), let it
                // go on, then keep only what belongs to the packet. The framer never reads past
                // the packet, so bytes beyond it are harmless while it runs.
                const size_t take = std::min(n, std::max(want_ - have_, kStageChunk));
                stage_.resize(have_ + take);
                std::memcpy(stage_.data() + have_, s, take);
                const size_t more = have_ + take >= want_ ? frame(stage_.data(), have_ + take) : want_;
                const size_t keep = more ? take : std::min(take, framer_.end() - have_);
                have_ += keep;
                used += keep;
                stage_.resize(have_);
                if (more) {
                    want_ = more;
                    continue;
                }
                sized();
            }
            if (packet_ && have_ == want_) *out = complete_framed();
        }
        return used;
    });
}

uint8_t *Decoder::buffer(size_t *len) {
    return guarded([&] {
        if (packet_) {
            *len = want_ - have_;
            return packet_.get() + have_;
        }
        // Staging grows with the bytes received (at most doubling), never with a claimed length.
        const size_t target = std::min(want_, std::max(2 * have_, have_ + kStageChunk));
        if (stage_.size() < target) stage_.resize(target);
        *len = target - have_;
        return stage_.data() + have_;
    });
}

std::unique_ptr<View> Decoder::commit(size_t n) {
    return guarded([&]() -> std::unique_ptr<View> {
        const size_t room = packet_ ? want_ - have_ : stage_.size() - have_;
        if (n > room)
            fail(TENSO_E_INVALID_ARGUMENT, "commit of " + num(n) + " bytes, more than the buffer's " + num(room));
        have_ += n;
        if (!packet_) {
            if (have_ < want_) return nullptr;
            if (const size_t more = frame(stage_.data(), have_)) {
                want_ = more;
                return nullptr;
            }
            stage_.resize(have_);
            sized();
        }
        return have_ == want_ ? complete_framed() : nullptr;
    });
}

}  // namespace tenso
