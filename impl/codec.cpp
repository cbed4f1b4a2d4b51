// codec.cpp - the encoder plan and its sinks, LZ4 and XXH3 glue, and the decoder.
#include "codec.hpp"

#include <errno.h>
#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <new>

#include <lz4frame.h>
#define XXH_INLINE_ALL  // static inline: nothing of xxHash is exported from libtenso
#include <xxhash.h>

#include "error.hpp"

namespace tenso {

namespace {
std::string num(uint64_t v) { return std::to_string(v); }
constexpr size_t kHashChunk = 128 * 1024;  // copy-then-hash granularity: stays in L2
}  // namespace

// ------------------------------------------------------------------------------------------
// Options and inputs
// ------------------------------------------------------------------------------------------

EncodeOptions EncodeOptions::from(const tenso_encode_options *o) {
    EncodeOptions e;
    if (!o) return e;
    if (o->version != TENSO_ENCODE_OPTIONS_VERSION)
        fail(TENSO_E_INVALID_ARGUMENT, "unknown tenso_encode_options version " + num(o->version));
    if (o->flags & ~uint32_t(TENSO_ENCODE_INTEGRITY | TENSO_ENCODE_COMPRESS))
        fail(TENSO_E_INVALID_ARGUMENT, "unknown encode flags");
    e.integrity = o->flags & TENSO_ENCODE_INTEGRITY;
    e.compress = o->flags & TENSO_ENCODE_COMPRESS;
    if (o->alignment) {
        if (!is_pow2(o->alignment) || o->alignment > TENSO_MAX_ALIGNMENT)
            fail(TENSO_E_INVALID_ARGUMENT, "alignment " + num(o->alignment) +
                                               " is not a power of two up to 2^20");
        e.alignment = o->alignment;
    }
    e.level = o->compression_level;
    return e;
}

Tensor Tensor::from(const tenso_tensor *t) {
    if (!t) fail(TENSO_E_INVALID_ARGUMENT, "tensor is NULL");
    Tensor r;
    size_t item = dtype_itemsize(t->dtype);
    if (!item) fail(TENSO_E_BAD_DTYPE, std::string("dtype ") + num(uint32_t(t->dtype)) +
                                           " (" + dtype_name(t->dtype) + ") is not a dense dtype");
    if (t->ndim > TENSO_MAX_NDIM)
        fail(TENSO_E_TOO_MANY_DIMS, "ndim " + num(t->ndim) + " exceeds 32");
    if (t->ndim && !t->shape) fail(TENSO_E_INVALID_ARGUMENT, "shape is NULL");
    for (uint32_t i = 0; i < t->ndim; ++i) {
        if (t->shape[i] > UINT32_MAX)
            fail(TENSO_E_INVALID_ARGUMENT, "dimension " + num(i) + " (" + num(t->shape[i]) +
                                               ") does not fit the wire's u32");
        r.shape[i] = t->shape[i];
    }
    r.dtype = t->dtype;
    r.ndim = t->ndim;
    uint64_t expect = checked_numel(r.shape, r.ndim, TENSO_MAX_ELEMENTS) * item;
    if (t->nbytes != expect)
        fail(TENSO_E_INVALID_ARGUMENT, "data length " + num(t->nbytes) + " is not shape x itemsize (" +
                                           num(expect) + ")");
    if (expect && !t->data) fail(TENSO_E_INVALID_ARGUMENT, "data is NULL");
    r.data = static_cast<const uint8_t *>(t->data);
    r.nbytes = t->nbytes;
    return r;
}

uint32_t Value::depth() const {
    uint32_t d = 0;
    for (const auto &e : entries) d = std::max(d, 1 + e.value.depth());
    return d;
}

// ------------------------------------------------------------------------------------------
// LZ4, XXH3, memory
// ------------------------------------------------------------------------------------------

namespace {
LZ4F_preferences_t lz4_prefs(size_t n, int level) {
    LZ4F_preferences_t p;
    std::memset(&p, 0, sizeof p);
    p.frameInfo.blockSizeID = LZ4F_max64KB;             // as upstream's lz4_flex writes
    p.frameInfo.blockMode = LZ4F_blockIndependent;
    p.frameInfo.contentSize = n;                        // lets readers check the size up front
    p.compressionLevel = level;
    return p;
}
}  // namespace

size_t lz4_bound(size_t n, int level) {
    LZ4F_preferences_t p = lz4_prefs(n, level);
    return LZ4F_compressFrameBound(n, &p);
}

size_t lz4_compress(uint8_t *dst, size_t cap, const uint8_t *src, size_t n, int level) {
    LZ4F_preferences_t p = lz4_prefs(n, level);
    size_t r = LZ4F_compressFrame(dst, cap, src, n, &p);
    if (LZ4F_isError(r)) fail(TENSO_E_COMPRESSION, std::string("LZ4 compression failed: ") + LZ4F_getErrorName(r));
    return r;
}

void lz4_decompress(uint8_t *dst, size_t n, const uint8_t *src, size_t len) {
    LZ4F_dctx *ctx = nullptr;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&ctx, LZ4F_VERSION))) throw std::bad_alloc();
    std::unique_ptr<LZ4F_dctx, decltype(&LZ4F_freeDecompressionContext)> guard(ctx, LZ4F_freeDecompressionContext);
    size_t in = 0, out = 0;
    for (;;) {
        size_t src_sz = len - in, dst_sz = n - out;
        size_t r = LZ4F_decompress(ctx, dst + out, &dst_sz, src + in, &src_sz, nullptr);
        if (LZ4F_isError(r)) fail(TENSO_E_COMPRESSION, std::string("LZ4 frame is corrupt: ") + LZ4F_getErrorName(r));
        in += src_sz;
        out += dst_sz;
        if (r == 0) break;  // frame complete
        if (src_sz == 0 && dst_sz == 0) {
            fail(TENSO_E_COMPRESSION, out == n ? "LZ4 frame holds more than shape x itemsize bytes"
                                               : "LZ4 frame ends early");
        }
    }
    if (out != n)
        fail(TENSO_E_COMPRESSION, "LZ4 frame decompressed to " + num(out) + " bytes, not shape x itemsize (" +
                                      num(n) + ")");
    if (in != len) fail(TENSO_E_COMPRESSION, "bytes after the end of the LZ4 frame");
}

uint64_t xxh3(const void *p, size_t n) { return XXH3_64bits(p, n); }

std::shared_ptr<uint8_t> alloc_aligned(size_t n) {
    size_t sz = (std::max<size_t>(n, 1) + 63) & ~size_t(63);
    void *p = std::aligned_alloc(64, sz);
    if (!p) throw std::bad_alloc();
    return std::shared_ptr<uint8_t>(static_cast<uint8_t *>(p), [](uint8_t *q) { std::free(q); });
}

// ------------------------------------------------------------------------------------------
// Plan
// ------------------------------------------------------------------------------------------

size_t Plan::put(const void *p, size_t n) {
    size_t off = arena_.size();
    arena_.resize(off + n);
    if (p) std::memcpy(arena_.data() + off, p, n);
    else std::memset(arena_.data() + off, 0, n);
    // Extend the previous segment when it is arena bytes of the same hash group.
    if (!segs_.empty() && !segs_.back().ext && !segs_.back().footer && segs_.back().group == group_ &&
        segs_.back().off + segs_.back().len == off)
        segs_.back().len += n;
    else
        segs_.push_back(Seg{nullptr, off, n, group_, false});
    size_ += n;
    return off;
}

void Plan::ext(const uint8_t *p, size_t n) {
    if (!n) return;
    segs_.push_back(Seg{p, 0, n, group_, false});
    size_ += n;
}

void Plan::close_hash() {
    size_t off = arena_.size();
    arena_.resize(off + kFooterLen);
    segs_.push_back(Seg{nullptr, off, kFooterLen, group_, true});
    size_ += kFooterLen;
    group_ = -1;
}

void Plan::add(const Value &v) {
    if (v.depth() > TENSO_MAX_DEPTH) fail(TENSO_E_LIMIT, "bundles nest deeper than 64");
    add_value(v, 0);
}

void Plan::add(const Tensor &t) { add_tensor(t); }

void Plan::add_tensor(const Tensor &t) {
    const uint32_t a = opts_.alignment;
    uint16_t flags = align_flags(a);
    if (opts_.integrity) flags |= TENSO_FLAG_INTEGRITY;
    if (opts_.compress) flags |= TENSO_FLAG_COMPRESSION;
    uint8_t head[kHeaderV4 + 4 * TENSO_MAX_NDIM + 1];
    write_header(head, flags, uint8_t(t.dtype), uint8_t(t.ndim));
    size_t h = kHeaderV4;
    for (uint32_t i = 0; i < t.ndim; ++i, h += 4) wr32(head + h, uint32_t(t.shape[i]));
    if (flags & TENSO_FLAG_CUST_ALIGN) head[h++] = uint8_t(log2_exact(a));
    put(head, h);
    put(nullptr, pad_to(h, a));
    if (opts_.integrity) open_hash();
    if (!opts_.compress) {
        ext(t.data, t.nbytes);
    } else if (measure_) {
        size_ += lz4_bound(t.nbytes, opts_.level);  // sized, never written
    } else {
        std::vector<uint8_t> z(lz4_bound(t.nbytes, opts_.level));
        z.resize(lz4_compress(z.data(), z.size(), t.data, t.nbytes, opts_.level));
        owned_.push_back(std::move(z));
        ext(owned_.back().data(), owned_.back().size());
    }
    if (opts_.integrity) close_hash();
}

void Plan::add_value(const Value &v, int depth) {
    switch (v.type) {
    case Value::kTensor: add_tensor(v.tensor); return;
    case Value::kPacket: ext(v.packet, v.packet_len); return;
    case Value::kBundle: break;
    }
    if (v.entries.size() > TENSO_MAX_BUNDLE_ENTRIES)
        fail(TENSO_E_INVALID_ARGUMENT, "a bundle holds at most 255 entries");
    uint8_t head[kHeaderV4];
    write_header(head, TENSO_FLAG_BUNDLE, 0, uint8_t(v.entries.size()));
    put(head, sizeof head);
    for (const auto &e : v.entries) {
        uint8_t len[4];
        wr32(len, uint32_t(e.key.size()));
        put(len, 4);
        put(e.key.data(), e.key.size());
        size_t len_off = put(nullptr, 4);
        size_t before = size_;
        add_value(e.value, depth + 1);
        size_t vlen = size_ - before;
        if (vlen > UINT32_MAX) fail(TENSO_E_INVALID_ARGUMENT, "bundle value '" + e.key + "' exceeds 4 GiB");
        wr32(arena_.data() + len_off, uint32_t(vlen));
    }
}

void Plan::write_to(uint8_t *dst) const {
    XXH3_state_t st;
    int active = -1;
    for (const Seg &s : segs_) {
        if (s.footer) {
            wr64(dst, XXH3_64bits_digest(&st));
            dst += kFooterLen;
            active = -1;
            continue;
        }
        const uint8_t *src = seg_ptr(s);
        if (s.group < 0) {
            std::memcpy(dst, src, s.len);
            dst += s.len;
            continue;
        }
        if (active != s.group) {
            XXH3_64bits_reset(&st);
            active = s.group;
        }
        for (size_t done = 0; done < s.len;) {
            size_t n = std::min(kHashChunk, s.len - done);
            std::memcpy(dst, src + done, n);
            XXH3_64bits_update(&st, dst, n);  // the chunk is still in cache
            dst += n;
            done += n;
        }
    }
}

namespace {
// Writes an iovec array completely: partial writes, EINTR, and EAGAIN on non-blocking fds.
void writev_all(int fd, struct iovec *iov, size_t cnt, uint64_t *written) {
    while (cnt) {
        ssize_t r = ::writev(fd, iov, int(std::min<size_t>(cnt, IOV_MAX)));
        if (r < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd p = {fd, POLLOUT, 0};
                if (::poll(&p, 1, -1) < 0 && errno != EINTR)
                    fail(TENSO_E_IO, std::string("poll: ") + std::strerror(errno));
                continue;
            }
            fail(TENSO_E_IO, std::string("write: ") + std::strerror(errno));
        }
        size_t left = size_t(r);
        if (written) *written += left;
        while (cnt && left >= iov->iov_len) {
            left -= iov->iov_len;
            ++iov;
            --cnt;
        }
        if (cnt) {
            iov->iov_base = static_cast<uint8_t *>(iov->iov_base) + left;
            iov->iov_len -= left;
        }
    }
}
}  // namespace

void Plan::write_fd(int fd, uint64_t *written) {
    // Footers first (one pass over each hashed body), then everything in one writev stream.
    XXH3_state_t st;
    int active = -1;
    for (const Seg &s : segs_) {
        if (s.group < 0) continue;
        if (s.footer) {
            wr64(arena_.data() + s.off, XXH3_64bits_digest(&st));
            active = -1;
            continue;
        }
        if (active != s.group) {
            XXH3_64bits_reset(&st);
            active = s.group;
        }
        XXH3_64bits_update(&st, seg_ptr(s), s.len);
    }
    std::vector<struct iovec> iov;
    iov.reserve(segs_.size());
    for (const Seg &s : segs_)
        iov.push_back({const_cast<uint8_t *>(seg_ptr(s)), s.len});
    writev_all(fd, iov.data(), iov.size(), written);
}

// ------------------------------------------------------------------------------------------
// Decoding
// ------------------------------------------------------------------------------------------

namespace {

void bind(View &v, const Node &n, const uint8_t *buf, const Limits &lim,
          const std::shared_ptr<const void> &keep) {
    v.kind = n.kind;
    v.version = n.version;
    v.flags = n.flags;
    v.dtype = n.dtype;
    v.ndim = n.ndim;
    std::memcpy(v.shape, n.shape, sizeof(uint64_t) * n.ndim);
    v.alignment = n.alignment;
    v.packet_size = n.end - n.start;
    v.keep = keep;
    v.owns_data = bool(keep);
    switch (n.kind) {
    case TENSO_KIND_DENSE: break;
    case TENSO_KIND_BUNDLE:
        v.entries.resize(n.children.size());
        for (size_t i = 0; i < n.children.size(); ++i) {
            const Node::Child &c = n.children[i];
            v.entries[i].key = reinterpret_cast<const char *>(buf + c.key_off);
            v.entries[i].key_len = c.key_len;
            bind(v.entries[i].view, c.node, buf, lim, keep);
        }
        return;
    default:
        fail(TENSO_E_UNSUPPORTED_KIND, std::string("packets of this kind (") +
                                           (n.kind == TENSO_KIND_STRING ? "string" : "composite") +
                                           ") are not decoded by this build");
    }
    const uint8_t *body = buf + n.body_off;
    if (n.footer && lim.verify_checksums) {
        uint64_t want = rd64(body + n.body_len);
        uint64_t got = xxh3(body, n.body_len);
        if (want != got) fail(TENSO_E_CHECKSUM, "integrity check failed: XXH3 of the body does not match the footer");
    }
    v.nbytes = n.nbytes;
    if (n.compressed) {
        std::shared_ptr<uint8_t> out = alloc_aligned(n.nbytes);
        lz4_decompress(out.get(), n.nbytes, body, n.body_len);
        v.data = n.nbytes ? out.get() : nullptr;
        v.keep = std::move(out);
        v.owns_data = true;
    } else {
        v.data = n.nbytes ? body : nullptr;
    }
}

}  // namespace

std::unique_ptr<View> decode(const uint8_t *buf, size_t len, const Limits &limits,
                             std::shared_ptr<const void> keep) {
    Node n;
    try {
        n = scan(buf, len, limits);
    } catch (const NeedMore &m) {
        fail(TENSO_E_TRUNCATED, "packet is truncated: needs at least " + num(m.need) + " bytes, has " + num(len));
    }
    auto v = std::make_unique<View>();
    bind(*v, n, buf, limits, keep);
    return v;
}

void inspect(tenso_packet_info *out, const uint8_t *buf, size_t len) {
    Limits lim;
    Node n;
    bool complete = true;
    try {
        n = scan(buf, len, lim);
    } catch (const NeedMore &) {
        complete = false;
    }
    if (!complete) {
        try {
            n = scan(buf, len, lim, true);
        } catch (const NeedMore &m) {
            fail(TENSO_E_TRUNCATED, "header is truncated: needs " + num(m.need) + " bytes, has " + num(len));
        }
    }
    std::memset(out, 0, sizeof *out);
    out->version = n.version;
    out->flags = n.flags;
    out->kind = n.kind;
    out->dtype = n.dtype;
    out->ndim = n.ndim;
    out->entry_count = n.count;
    out->alignment = n.alignment;
    std::memcpy(out->shape, n.shape, sizeof(uint64_t) * n.ndim);
    out->body_offset = n.body_off;
    out->body_size = complete ? n.body_len : (n.compressed ? 0 : n.nbytes);
    out->packet_size = complete ? n.end : 0;
}

}  // namespace tenso
