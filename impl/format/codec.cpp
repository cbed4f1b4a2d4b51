// codec.cpp - the encoder plan and its sinks, LZ4 and XXH3 glue, and the decoder.
#include "format/codec.hpp"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <new>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "error.hpp"
#include "format/composites.hpp"
#include "format/hash.hpp"
#include "format/lz4.hpp"
#include "format/sparse.hpp"
#include "format/spare_view.hpp"

namespace tenso {

namespace {
std::string num(uint64_t v) { return std::to_string(v); }
constexpr size_t kHashChunk = 16 * 1024;  // copy-then-hash granularity: stays in L1/L2
}  // namespace

// ------------------------------------------------------------------------------------------
// Options and inputs
// ------------------------------------------------------------------------------------------

void bad_alignment(uint64_t alignment) {
    fail(TENSO_E_INVALID_ARGUMENT, "alignment " + num(alignment) + " is not a power of two up to 2^20");
}

// Why make_tensor refused its arguments: built off the hot path, from the copy of the shape it
// checked (the caller's may have changed since).
void bad_tensor(int dtype, uint32_t ndim, const uint64_t *shape, bool shape_given, const void *data, uint64_t nbytes) {
    const size_t item = dtype_itemsize(dtype);
    if (!item)
        fail(TENSO_E_BAD_DTYPE,
             std::string("dtype ") + num(uint32_t(dtype)) + " (" + dtype_name(dtype) + ") is not a dense dtype");
    if (ndim > TENSO_MAX_NDIM) fail(TENSO_E_TOO_MANY_DIMS, "ndim " + num(ndim) + " exceeds 32");
    if (ndim && !shape_given) fail(TENSO_E_INVALID_ARGUMENT, "shape is NULL");
    for (uint32_t i = 0; i < ndim; ++i)
        if (shape[i] > UINT32_MAX)
            fail(TENSO_E_INVALID_ARGUMENT,
                 "dimension " + num(i) + " (" + num(shape[i]) + ") does not fit the wire's u32");
    const uint64_t expect = checked_numel(shape, ndim, TENSO_MAX_ELEMENTS) * item;
    if (nbytes != expect)
        fail(TENSO_E_INVALID_ARGUMENT, "data length " + num(nbytes) + " is not shape x itemsize (" + num(expect) + ")");
    if (expect && !data) fail(TENSO_E_INVALID_ARGUMENT, "data is NULL");
    fail(TENSO_E_INTERNAL, "tensor refused without a reason");
}

uint32_t Value::depth() const {
    if (type == kSparse) return 1;  // components are packets one level down
    if (type == kPacket) return packet_depth;
    uint32_t d = 0;
    for (const auto &e : entries) d = std::max(d, 1 + e.value.depth());
    return d;
}

// ------------------------------------------------------------------------------------------
// LZ4, XXH3, memory
// ------------------------------------------------------------------------------------------

// Large buffers are 2 MiB aligned and asked for transparent huge pages: faulting in 64 MiB of
// 4 KiB pages costs more than writing the packet. Only where base pages are 4 KiB (x86-64, most
// aarch64 kernels), whose huge pages are 2 MiB; kernels with 16 or 64 KiB pages (some aarch64)
// have 32 or 512 MiB huge pages, too large to round buffers up to, and their base pages
// already cut the faults 4 to 16 times: there every buffer is 64-byte aligned.
static size_t huge_align() {
    static const size_t h = ::sysconf(_SC_PAGESIZE) == 4096 ? size_t(2) << 20 : 0;
    return h;
}
size_t alloc_alignment(size_t n) { return huge_align() && n >= huge_align() ? huge_align() : 64; }

size_t alloc_size(size_t n) { return (std::max<size_t>(n, 1) + alloc_alignment(n) - 1) & ~(alloc_alignment(n) - 1); }

namespace {

// Large buffers whose owner let go are kept, pages and all, for the next buffer of the same
// rounded size: a 64 MiB buffer from the kernel is 64 MiB of page faults and zeroing, as much
// work again as writing the packet (glibc unmaps every free above 32 MiB). At most kKeep
// buffers and kKeepBytes are kept; `live` knows every large buffer handed out, so free_bytes()
// pools only memory that came from here, with its real size.
constexpr size_t kPoolMin = size_t(4) << 20;
constexpr size_t kKeep = 2;
constexpr size_t kKeepBytes = size_t(128) << 20;

struct Pool {
    Pool() { kept.reserve(kKeep); }  // so that keeping a buffer never allocates
    std::mutex mu;
    std::vector<std::pair<uint8_t *, size_t>> kept;  // oldest first
    std::vector<std::pair<uint8_t *, size_t>> live;
    size_t kept_bytes = 0;
};
Pool &pool() {
    // Never destroyed: buffers may be freed during exit. fork() in another thread while one
    // holds the lock would leave the child's copy locked forever: the lock is taken around fork.
    static Pool *p = [] {
        Pool *q = new Pool;
        ::pthread_atfork([] { pool().mu.lock(); }, [] { pool().mu.unlock(); }, [] { pool().mu.unlock(); });
        return q;
    }();
    return *p;
}

// A large buffer: an anonymous mapping reserved without commitment, so its pages are backed
// only as they are written (a stream header's claim, within the limits, costs address space
// until the bytes arrive) and malloc never sees it; huge-page aligned where huge_align() says so
// (sz is then a multiple of it) and asked for transparent huge pages, else page aligned.
uint8_t *map_large(size_t sz) {
    const size_t h = huge_align();
    const size_t span = sz + h;
    void *m = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    if (!h) return static_cast<uint8_t *>(m);
    const uintptr_t a = reinterpret_cast<uintptr_t>(m), p = (a + h - 1) & ~uintptr_t(h - 1);
    if (p > a) ::munmap(m, p - a);
    if (a + span > p + sz) ::munmap(reinterpret_cast<void *>(p + sz), a + span - (p + sz));
    ::madvise(reinterpret_cast<void *>(p), sz, MADV_HUGEPAGE);  // advisory: failure changes nothing
    return reinterpret_cast<uint8_t *>(p);
}

}  // namespace

uint8_t *alloc_bytes(size_t n) {
    const size_t align = alloc_alignment(n), sz = alloc_size(n);
    if (sz >= kPoolMin) {
        Pool &pl = pool();
        std::lock_guard<std::mutex> lock(pl.mu);
        pl.live.reserve(pl.live.size() + 1);  // before taking: push_back below cannot throw
        for (size_t i = pl.kept.size(); i-- > 0;) {
            if (pl.kept[i].second != sz) continue;
            uint8_t *p = pl.kept[i].first;
            pl.kept.erase(pl.kept.begin() + ptrdiff_t(i));
            pl.kept_bytes -= sz;
            pl.live.emplace_back(p, sz);
            return p;
        }
    }
    if (sz < kPoolMin) {
        void *p = std::aligned_alloc(align, sz);
        if (!p) throw std::bad_alloc();
        if (align > 64) ::madvise(p, sz, MADV_HUGEPAGE);  // advisory: failure changes nothing
        return static_cast<uint8_t *>(p);
    }
    uint8_t *p = map_large(sz);
    Pool &pl = pool();
    std::lock_guard<std::mutex> lock(pl.mu);
    try {
        pl.live.emplace_back(p, sz);
    } catch (...) {
        ::munmap(p, sz);
        throw;
    }
    return p;
}

void free_bytes(void *p) noexcept {
    if (!p) return;
    uint8_t *q = static_cast<uint8_t *>(p);
    std::pair<uint8_t *, size_t> drop[kKeep + 1];  // never allocates: deleters call this
    size_t drops = 0;
    {
        Pool &pl = pool();
        std::lock_guard<std::mutex> lock(pl.mu);
        auto it = std::find_if(pl.live.begin(), pl.live.end(), [&](const auto &b) { return b.first == q; });
        if (it == pl.live.end()) {
            drop[drops++] = {q, 0};  // not a pooled size (or not from alloc_bytes): malloc's
        } else {
            const size_t sz = it->second;
            pl.live.erase(it);
            if (sz > kKeepBytes) {
                drop[drops++] = {q, sz};
            } else {
                // Make room: the oldest kept buffers go back to the system.
                while (!pl.kept.empty() && (pl.kept.size() >= kKeep || pl.kept_bytes + sz > kKeepBytes)) {
                    drop[drops++] = pl.kept.front();
                    pl.kept_bytes -= pl.kept.front().second;
                    pl.kept.erase(pl.kept.begin());
                }
                pl.kept.emplace_back(q, sz);  // within the capacity reserved
                pl.kept_bytes += sz;
            }
        }
    }
    for (size_t i = 0; i < drops; ++i) {  // outside the lock
        if (drop[i].second) ::munmap(drop[i].first, drop[i].second);
        else std::free(drop[i].first);
    }
}

std::shared_ptr<uint8_t> alloc_aligned(size_t n) {
    return std::shared_ptr<uint8_t>(alloc_bytes(n), [](uint8_t *q) { free_bytes(q); });
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
    else segs_.push_back(Seg{nullptr, off, n, group_, false, false});
    size_ += n;
    return off;
}

void Plan::ext(const uint8_t *p, size_t n, bool borrowed) {
    if (!n) return;
    segs_.push_back(Seg{p, 0, n, group_, false, borrowed});
    size_ += n;
}

void Plan::close_hash() {
    size_t off = arena_.size();
    arena_.resize(off + kFooterLen);
    segs_.push_back(Seg{nullptr, off, kFooterLen, group_, true, false});
    size_ += kFooterLen;
    group_ = -1;
}

void Plan::add(const Value &v) {
    if (v.depth() > TENSO_MAX_DEPTH) fail(TENSO_E_LIMIT, "bundles nest deeper than 64");
    add_value(v, 0);
}

void Plan::add(const Tensor &t) { add_tensor(t, opts_); }

void Plan::add_tensor(const Tensor &t, const EncodeOptions &o) {
    uint8_t head[kDenseHeaderMax];
    const size_t h = dense_header(head, t, o);
    put(head, h);
    put(nullptr, pad_to(h, o.alignment));
    if (o.integrity) open_hash();
    if (!o.compress) {
        ext(t.data, t.nbytes);
    } else if (mode_ == Mode::kMeasure) {
        size_ += lz4_frame_bound(t.nbytes);  // sized, never written
    } else if (mode_ == Mode::kInPlace) {
        // Compressed by write_to where it lands (compressed bodies use opts_: components never are).
        Seg s{t.data, 0, lz4_frame_bound(t.nbytes), group_, false};
        s.lz4 = true;
        s.raw = t.nbytes;
        segs_.push_back(s);
        size_ += s.len;
    } else {
        // Not zero-filled: the frame is written straight into it.
        owned_.emplace_back(new uint8_t[lz4_frame_bound(t.nbytes)]);
        ext(owned_.back().get(), lz4_frame_compress(owned_.back().get(), t.data, t.nbytes, o.level, o.threads), false);
    }
    if (o.integrity) close_hash();
}

// Sparse containers: header, shape, then three length-prefixed dense packets that upstream
// always writes with the default options.
void Plan::add_sparse(const Value &v) {
    static const EncodeOptions kComponent;
    uint16_t flag = v.sparse_kind == TENSO_KIND_SPARSE_COO   ? TENSO_FLAG_SPARSE_COO
                    : v.sparse_kind == TENSO_KIND_SPARSE_CSR ? TENSO_FLAG_SPARSE_CSR
                                                             : TENSO_FLAG_SPARSE_CSC;
    uint8_t head[kHeaderV4 + 4 * TENSO_MAX_NDIM];
    write_header(head, flag, 0, uint8_t(v.tensor.ndim));
    for (uint32_t i = 0; i < v.tensor.ndim; ++i) wr32(head + kHeaderV4 + 4 * i, uint32_t(v.tensor.shape[i]));
    put(head, kHeaderV4 + 4 * size_t(v.tensor.ndim));
    for (const Tensor &part : v.parts) {
        size_t len_off = put(nullptr, 4);
        size_t before = size_;
        add_tensor(part, kComponent);
        wr32(arena_.data() + len_off, uint32_t(size_ - before));
    }
}

// Quantized: the footer hashes the metadata and the body, not the exponent byte or padding.
void Plan::add_quantized(const Value &v) {
    const QuantDesc &q = v.quant;
    const uint32_t a = opts_.alignment;  // compression never applies to quantized bodies
    uint16_t flags = align_flags(a) | (opts_.integrity ? TENSO_FLAG_INTEGRITY : 0);
    uint8_t head[kHeaderV4 + 4 * TENSO_MAX_NDIM];
    write_header(head, flags, uint8_t(q.dtype), uint8_t(v.tensor.ndim));
    size_t h = kHeaderV4;
    for (uint32_t i = 0; i < v.tensor.ndim; ++i, h += 4) wr32(head + h, uint32_t(v.tensor.shape[i]));
    put(head, h);
    if (opts_.integrity) open_hash();
    uint8_t meta[10];
    meta[0] = uint8_t(q.scheme);
    meta[1] = uint8_t(q.axis);
    wr32(meta + 2, q.group_size);
    wr32(meta + 6, q.num_scales);
    put(meta, sizeof meta);
    for (const float *arr : {q.scales, q.zero_points})
        for (uint32_t i = 0; i < q.num_scales; ++i) {
            uint32_t bits;
            std::memcpy(&bits, arr + i, 4);
            uint8_t le[4];
            wr32(le, bits);
            put(le, 4);
        }
    h += sizeof meta + 8 * size_t(q.num_scales);
    const int group = group_;
    group_ = -1;
    if (flags & TENSO_FLAG_CUST_ALIGN) {
        uint8_t e = uint8_t(log2_exact(a));
        put(&e, 1);
        ++h;
    }
    put(nullptr, pad_to(h, a));
    group_ = group;
    ext(q.data, q.nbytes);
    if (opts_.integrity) close_hash();
}

// Strings: always 64-aligned; the footer covers offsets and payload.
void Plan::add_strings(const Value &v) {
    const uint64_t count = v.tensor.shape[0];
    uint16_t flags = TENSO_FLAG_STRING | TENSO_FLAG_ALIGNED | (opts_.integrity ? TENSO_FLAG_INTEGRITY : 0);
    uint8_t head[kHeaderV4 + 4];
    write_header(head, flags, TENSO_DTYPE_STRING, 1);
    wr32(head + kHeaderV4, uint32_t(count));
    put(head, sizeof head);
    put(nullptr, pad_to(sizeof head, TENSO_DEFAULT_ALIGNMENT));
    if (opts_.integrity) open_hash();
    static_assert(sizeof(uint64_t) == 8, "offsets are u64");
    ext(reinterpret_cast<const uint8_t *>(v.offsets), (count + 1) * 8);  // host is little-endian
    ext(v.tensor.data, v.tensor.nbytes);
    if (opts_.integrity) close_hash();
}

void Plan::add_value(const Value &v, int depth) {
    switch (v.type) {
    case Value::kTensor: add_tensor(v.tensor, opts_); return;
    case Value::kPacket: ext(v.packet, v.packet_len); return;
    case Value::kSparse: add_sparse(v); return;
    case Value::kQuantized: add_quantized(v); return;
    case Value::kStrings: add_strings(v); return;
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
        if (mode_ == Mode::kInPlace) {
            lengths_.push_back(Extent{before, size_});  // planned with bounds: write_to writes the real length
            vlen = 0;
        }
        if (vlen > UINT32_MAX) fail(TENSO_E_INVALID_ARGUMENT, "bundle value '" + e.key + "' exceeds 4 GiB");
        wr32(arena_.data() + len_off, uint32_t(vlen));
    }
}

namespace {

// Copies n bytes, bypassing the cache for the stores where SSE2 allows: a large hashed body
// is copied chunk by chunk, and plain stores would read every destination line first.
void copy_streaming(uint8_t *dst, const uint8_t *src, size_t n) {
#if defined(__SSE2__)
    size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
    if (n < head + 64) {
        std::memcpy(dst, src, n);
        return;
    }
    std::memcpy(dst, src, head);
    size_t i = head;
    for (; i + 64 <= n; i += 64) {
        __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i));
        __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 16));
        __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 32));
        __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 48));
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i), a);
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + 16), b);
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + 32), c);
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + 48), d);
    }
    std::memcpy(dst + i, src + i, n - i);
#else
    std::memcpy(dst, src, n);
#endif
}

// Above this a hashed body is copied with streaming stores (it will not fit in cache anyway).
constexpr size_t kStreamingCopy = size_t(4) << 20;

}  // namespace

namespace {
// One pass over the source: hash a chunk (which brings it into cache), then copy it.
void copy_hashed(uint8_t *dst, const uint8_t *src, size_t len, Hasher &h) {
    const bool streaming = len >= kStreamingCopy;
    for (size_t done = 0; done < len;) {
        size_t n = std::min(kHashChunk, len - done);
        h.update(src + done, n);
        if (streaming) copy_streaming(dst, src + done, n);
        else std::memcpy(dst, src + done, n);
        dst += n;
        done += n;
    }
#if defined(__SSE2__)
    if (streaming) _mm_sfence();  // order the streaming stores before anything that follows
#endif
}
}  // namespace

size_t Plan::write_to(uint8_t *const out) const {
    uint8_t *dst = out;
    Hasher h;
    int active = -1;
    // kInPlace: (planned end, bytes saved so far) after each compressed body, to move the
    // planned extents of bundle values to where they landed.
    std::vector<std::pair<size_t, size_t>> shrunk;
    size_t planned = 0;
    for (const Seg &s : segs_) {
        planned += s.len;
        if (s.lz4) {
            const size_t n = lz4_frame_compress(dst, s.ext, s.raw, opts_.level, opts_.threads);
            if (s.group >= 0) {
                if (active != s.group) {
                    h.reset();
                    active = s.group;
                }
                h.update(dst, n);
            }
            dst += n;
            shrunk.emplace_back(planned, (shrunk.empty() ? 0 : shrunk.back().second) + (s.len - n));
            continue;
        }
        if (s.footer) {
            if (active != s.group) h.reset();  // an empty body: nothing was hashed
            wr64(dst, h.digest());
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
            h.reset();
            active = s.group;
        }
        copy_hashed(dst, src, s.len, h);
        dst += s.len;
    }
    if (mode_ == Mode::kInPlace) {
        // A value's extent starts and ends between segments: it moved up by what the compressed
        // bodies before each end saved.
        auto landed = [&](size_t at) {
            auto it = std::upper_bound(shrunk.begin(), shrunk.end(), std::make_pair(at, SIZE_MAX));
            return at - (it == shrunk.begin() ? 0 : std::prev(it)->second);
        };
        for (const Extent &e : lengths_) {
            const size_t b = landed(e.begin), len = landed(e.end) - b;
            if (len > UINT32_MAX) fail(TENSO_E_INVALID_ARGUMENT, "a bundle value exceeds 4 GiB");
            wr32(out + b - 4, uint32_t(len));
        }
    }
    return size_t(dst - out);
}

namespace {
void writev_all(int fd, struct iovec *iov, size_t cnt, uint64_t *written);
}  // namespace

void write_all(int fd, const uint8_t *p, size_t n, uint64_t *written) {
    struct iovec iov = {const_cast<uint8_t *>(p), n};
    writev_all(fd, &iov, 1, written);
}

void Plan::write_pulled(const uint8_t *body, const std::function<void(const Piece &)> &pull, const Piece &out) const {
    Hasher h;
    int active = -1;
    for (const Seg &s : segs_) {
        if (s.lz4) fail(TENSO_E_INTERNAL, "write_pulled of a plan with a body compressed in place");
        if (s.footer) {
            if (active != s.group) h.reset();  // an empty body: nothing was hashed
            uint8_t f[kFooterLen];
            wr64(f, h.digest());
            out(f, kFooterLen);
            active = -1;
            continue;
        }
        if (s.group >= 0 && active != s.group) {
            h.reset();
            active = s.group;
        }
        const auto pass = [&](const uint8_t *p, size_t n) {
            if (s.group >= 0) h.update(p, n);
            out(p, n);
        };
        if (!s.ext || s.ext != body) {
            pass(seg_ptr(s), s.len);
            continue;
        }
        size_t got = 0;
        pull([&](const uint8_t *p, size_t n) {
            if (n > s.len - got) fail(TENSO_E_INTERNAL, "a pulled body is longer than planned");
            got += n;
            pass(p, n);
        });
        if (got != s.len) fail(TENSO_E_INTERNAL, "a pulled body is shorter than planned");
    }
}

namespace {
// Writes an iovec array completely: partial writes, EINTR, and EAGAIN on non-blocking fds.
// Sockets go through sendmsg(MSG_NOSIGNAL): a peer that hung up is an I/O error for the
// caller, not a SIGPIPE that kills the process. sendmsg is tried first and anything else
// (ENOTSOCK) falls back to writev: no fstat per packet on the path that streams small ones.
void writev_all(int fd, struct iovec *iov, size_t cnt, uint64_t *written) {
    bool sock = true;
    while (cnt) {
        const size_t batch = std::min<size_t>(cnt, IOV_MAX);
        ssize_t r;
        if (sock) {
            struct msghdr m;
            std::memset(&m, 0, sizeof m);
            m.msg_iov = iov;
            m.msg_iovlen = batch;
            r = ::sendmsg(fd, &m, MSG_NOSIGNAL);
            if (r < 0 && errno == ENOTSOCK) {
                sock = false;
                continue;
            }
        } else {
            r = ::writev(fd, iov, int(batch));
        }
        if (r < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                // On a blocking fd that is the socket's SO_SNDTIMEO expiring: a peer that stopped
                // reading is a timeout for the caller, not a wait forever.
                const int fl = ::fcntl(fd, F_GETFL);
                if (fl >= 0 && !(fl & O_NONBLOCK))
                    fail(TENSO_E_TIMEOUT, "the peer took nothing within the socket's SO_SNDTIMEO");
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

void Plan::fill_footers() {
    // One read pass over each hashed body, before any byte leaves.
    Hasher h;
    int active = -1;
    for (const Seg &s : segs_) {
        if (s.group < 0) continue;
        if (s.footer) {
            if (active != s.group) h.reset();  // an empty body: nothing was hashed
            wr64(arena_.data() + s.off, h.digest());
            active = -1;
            continue;
        }
        if (active != s.group) {
            h.reset();
            active = s.group;
        }
        h.update(seg_ptr(s), s.len);
    }
}

std::vector<struct iovec> Plan::iovecs() {
    // Footers first, then the segments as they lie.
    fill_footers();
    std::vector<struct iovec> iov;
    iov.reserve(segs_.size());
    for (const Seg &s : segs_) iov.push_back({const_cast<uint8_t *>(seg_ptr(s)), s.len});
    return iov;
}

void Plan::write_fd(int fd, uint64_t *written) {
    std::vector<struct iovec> iov = iovecs();
    writev_all(fd, iov.data(), iov.size(), written);
}

void Plan::write_each(Sink sink, void *ctx, uint64_t *written) {
    fill_footers();
    for (const Seg &s : segs_) {
        if (!sink(seg_ptr(s), s.len, s.ext && s.borrowed, ctx))
            fail(TENSO_E_USER, "the write callback stopped the packet");
        if (written) *written += s.len;
    }
}

// ------------------------------------------------------------------------------------------
// Decoding
// ------------------------------------------------------------------------------------------

namespace {

void check_footer(const Node &n, const uint8_t *buf, const Limits &lim) {
    if (!n.footer || !lim.verify_checksums) return;
    const uint8_t *body = buf + n.body_off;
    uint64_t got;
    if (n.meta_len) {  // quantized: metadata and body, as one stream
        Hasher h;
        h.update(buf + n.meta_off, n.meta_len);
        h.update(body, n.body_len);
        got = h.digest();
    } else {
        got = xxh3(body, n.body_len);
    }
    check_digest(body + n.body_len, got);
}

void bind(View &v, const Node &n, const uint8_t *buf, const Limits &lim, const std::shared_ptr<const void> &keep);

void bind_children(View &v, const Node &n, const uint8_t *buf, const Limits &lim,
                   const std::shared_ptr<const void> &keep) {
    v.entries.resize(n.children.size());  // exactly: scan() reserved children exactly
    for (size_t i = 0; i < n.children.size(); ++i) {
        const Node::Child &c = n.children[i];
        v.entries[i].key = reinterpret_cast<const char *>(buf + c.key_off);
        v.entries[i].key_len = c.key_len;
        tenso::bind(v.entries[i].view, c.node, buf, lim, keep);
    }
}

void bind_sparse(View &v) {
    SparseArray comps[3];
    for (int i = 0; i < 3; ++i) {
        const View &c = v.entries[size_t(i)].view;
        comps[i] = SparseArray{c.dtype, c.ndim, c.ndim ? c.shape[0] : 0, c.data};
    }
    check_sparse(v.kind, v.shape.data(), v.ndim, comps, TENSO_E_MALFORMED);
}

// The metadata as scan() checked it; only the scale values are read here (bytes, not sizes).
void bind_quantized(View &v, const Node &n, const uint8_t *buf) {
    v.extra.reset(new View::Extra);
    QuantDesc &q = v.extra->quant;
    q.dtype = n.dtype;
    q.scheme = n.scheme;
    q.axis = n.axis;
    q.group_size = n.group_size;
    q.num_scales = n.num_scales;
    v.extra->qparams.resize(2 * size_t(q.num_scales));
    if (q.num_scales)  // (a zero-length channel axis has none)
        std::memcpy(v.extra->qparams.data(), buf + n.meta_off + 10, 8 * size_t(q.num_scales));  // f32 LE on an LE host
    v.data = buf + n.body_off;
    v.nbytes = n.body_len;
}

// Strings and direct ragged packets: offsets must start at 0, never decrease and end where
// scan() sized the payload. They are read again here (into the copy everything then uses), and
// bytes another process rewrites may differ from what scan() saw: that is MALFORMED.
void bind_strings(View &v, const Node &n, const uint8_t *buf, const Limits &lim) {
    const uint64_t count = n.shape[0];
    const uint8_t *body = buf + n.body_off;
    v.extra.reset(new View::Extra);
    std::vector<uint64_t> &offs = v.extra->offsets;
    offs.resize(count + 1);
    std::memcpy(offs.data(), body, (count + 1) * 8);
    const uint64_t payload = n.body_len - (count + 1) * 8;
    check_offsets(offs.data(), count, payload, TENSO_E_MALFORMED, "string");
    v.data = body + (count + 1) * 8;
    v.nbytes = payload;
    if (lim.validate_utf8 && n.kind == TENSO_KIND_STRING && !valid_utf8(v.data, v.nbytes))
        fail(TENSO_E_MALFORMED, "string payload is not valid UTF-8");
}

[[noreturn]] __attribute__((noinline, cold)) void fail_truncated(size_t need, size_t len) {
    fail(TENSO_E_TRUNCATED, "packet is truncated: needs at least " + num(need) + " bytes, has " + num(len));
}

// scan() of a whole packet: too few bytes is TRUNCATED. (Returned, not assigned, and inlined
// into its callers: loads is hot, and a call level is a few percent of a small packet's.)
// The catch (...) { throw; } here and in as_loads_says (decoder.cpp) is for ThreadSanitizer:
// clang's TSan pass (14) calls __tsan_func_exit for an unwinding frame only from a cleanup
// landing pad, so each Error passing a frame whose only catch is NeedMore's left an entry on the
// thread's TSan shadow stack (65,536 entries): hostile-input loops overflowed it (a SEGV in the
// runtime's FuncEntry, past the stack's mapping). Other typed-only catches on failure paths that
// inputs can repeat should do the same.
__attribute__((always_inline)) inline Node scan_whole(const uint8_t *buf, size_t len, const Limits &limits) {
    try {
        return scan(buf, len, limits);
    } catch (const NeedMore &m) {
        fail_truncated(m.need, len);
    } catch (...) {
        throw;  // for TSan: see above
    }
}

// Assigns every field of `v` (bare(): a freed view is reused) as for a packet without a body;
// bind() and decode_into() go on from there.
inline void bind_fields(View &v, const Node &n, const uint8_t *buf, const Limits &lim,
                        std::shared_ptr<const void> keep) {
    v.kind = n.kind;
    v.version = n.version;
    v.flags = n.flags;
    v.dtype = n.dtype;
    v.ndim = n.ndim;
    v.shape = n.shape;
    v.alignment = n.alignment;
    v.packet_size = n.end - n.start;
    v.owns_data = bool(keep);
    v.keep = std::move(keep);
    v.data = nullptr;  // containers have no body
    v.nbytes = 0;
    check_footer(n, buf, lim);
}

// The body of a dense packet that is not compressed: in the bytes bound.
inline void bind_body(View &v, const Node &n, const uint8_t *buf) {
    v.nbytes = n.nbytes;
    v.data = n.nbytes ? buf + n.body_off : nullptr;
}

// bind_fields(), then the children, extra parts and body the packet has.
void bind(View &v, const Node &n, const uint8_t *buf, const Limits &lim, const std::shared_ptr<const void> &keep) {
    bind_fields(v, n, buf, lim, keep);
    switch (n.kind) {
    case TENSO_KIND_BUNDLE: bind_children(v, n, buf, lim, keep); return;
    case TENSO_KIND_SPARSE_COO:
    case TENSO_KIND_SPARSE_CSR:
    case TENSO_KIND_SPARSE_CSC:
        bind_children(v, n, buf, lim, keep);
        bind_sparse(v);
        return;
    case TENSO_KIND_QUANTIZED: bind_quantized(v, n, buf); return;
    case TENSO_KIND_STRING:
    case TENSO_KIND_RAGGED: bind_strings(v, n, buf, lim); return;
    case TENSO_KIND_GPU_IPC_REF:
        v.data = buf + n.start + kHeaderV4;
        v.nbytes = kIpcRefLen - kHeaderV4;
        return;
    default: break;
    }
    if (!n.compressed) return bind_body(v, n, buf);
    std::shared_ptr<uint8_t> out = alloc_aligned(n.nbytes);
    lz4_frame_decompress(out.get(), n.nbytes, buf + n.body_off, n.body_len, lim.threads);
    v.nbytes = n.nbytes;
    v.data = n.nbytes ? out.get() : nullptr;
    v.keep = std::move(out);
    v.owns_data = true;
}

}  // namespace

void check_digest(const uint8_t *footer, uint64_t digest) {
    if (rd64(footer) != digest)
        fail(TENSO_E_CHECKSUM, "integrity check failed: XXH3 of the body does not match the footer");
}

bool scan_detached(Node *out, const uint8_t *head, size_t have, size_t len, const Limits &limits) {
    Node h;
    try {
        h = scan(head, have, limits, ScanMode::kHeader);
    } catch (...) {
        return false;
    }
    if (h.kind != TENSO_KIND_DENSE || h.compressed) return false;
    // The header read again as a whole decode reads it, now against the packet's full length:
    // every byte it reads lies before the body, so inside `head`.
    *out = scan_whole(head, len, limits);
    return true;
}

void decode_into(View &v, const uint8_t *buf, size_t len, const Limits &limits, std::shared_ptr<const void> keep) {
    const Node n = scan_whole(buf, len, limits);
    if (n.kind == TENSO_KIND_DENSE && !n.compressed) {    // most packets: bind() without its call
        bind_fields(v, n, buf, limits, std::move(keep));  // moved: a shared count not touched
        return bind_body(v, n, buf);
    }
    tenso::bind(v, n, buf, limits, keep);
}

// The View is this thread's spare (spare_view.hpp) when it keeps one: views these return end
// in tenso_view_free, which gives the spare back, so a get-and-free loop allocates no View.
std::unique_ptr<View> decode(const uint8_t *buf, size_t len, const Limits &limits, std::shared_ptr<const void> keep) {
    std::unique_ptr<View> v(take_view());
    decode_into(*v, buf, len, limits, std::move(keep));
    return v;
}

void bind_scanned_into(View &v, const Node &n, const uint8_t *buf, const Limits &limits,
                       const std::shared_ptr<const void> &keep) {
    tenso::bind(v, n, buf, limits, keep);
}

std::unique_ptr<View> bind_scanned(const Node &n, const uint8_t *buf, const Limits &limits,
                                   std::shared_ptr<const void> keep) {
    std::unique_ptr<View> v(take_view());
    bind_scanned_into(*v, n, buf, limits, keep);
    return v;
}

// ------------------------------------------------------------------------------------------
// Encoding into a caller's buffer
// ------------------------------------------------------------------------------------------

void too_small(size_t cap, size_t n) {
    fail(TENSO_E_BUFFER_TOO_SMALL, "destination holds " + num(cap) + " bytes, the packet needs " + num(n));
}

namespace {

// The general path: the plan, written at its bound straight into dst when dst holds that
// (compressed bodies then land in place), else compressed aside first, so that any room for
// the real packet is enough.
template <class Input>
size_t planned_into(const Input &in, const EncodeOptions &o, uint8_t *dst, size_t cap, size_t *needed) {
    Plan direct(o, Plan::Mode::kInPlace);
    direct.add(in);
    if (direct.size() <= cap) return *needed = direct.write_to(dst);
    Plan p(o, Plan::Mode::kCompress);
    p.add(in);
    *needed = p.size();
    if (p.size() > cap) too_small(cap, p.size());
    return p.write_to(dst);
}

}  // namespace

size_t encode_into(const Value &v, const EncodeOptions &o, uint8_t *dst, size_t cap, size_t *needed) {
    return planned_into(v, o, dst, cap, needed);
}

// An uncompressed tensor with a footer needs no plan either: header, body and footer go
// straight to dst, with no allocation.
size_t encode_tensor_into(const Tensor &t, const EncodeOptions &o, uint8_t *dst, size_t cap, size_t *needed) {
    if (o.compress) return planned_into(t, o, dst, cap, needed);
    const size_t n = dense_packet_len(t, o);
    *needed = n;
    if (n > cap) too_small(cap, n);
    uint8_t *body = dense_prefix(dst, n, t, o);
    if (!o.integrity) {
        if (t.nbytes) std::memcpy(body, t.data, size_t(t.nbytes));
    } else if (t.nbytes <= kHashChunk) {
        if (t.nbytes) std::memcpy(body, t.data, size_t(t.nbytes));
        wr64(body + t.nbytes, xxh3(body, size_t(t.nbytes)));  // still in cache
    } else {
        Hasher hs;
        copy_hashed(body, t.data, size_t(t.nbytes), hs);
        wr64(body + t.nbytes, hs.digest());
    }
    return n;
}

void decode_dense(tenso_tensor_view *out, const uint8_t *buf, size_t len, const Limits &limits) {
    const Node n = scan_whole(buf, len, limits);
    if (n.kind != TENSO_KIND_DENSE || n.compressed)
        fail(TENSO_E_UNSUPPORTED_KIND,
             std::string(n.compressed ? "a compressed" : "a " + std::string(kind_name(n.kind))) +
                 " packet needs memory of its own: decode it with tenso_loads");
    check_footer(n, buf, limits);
    out->data = n.nbytes ? buf + n.body_off : nullptr;
    out->nbytes = n.nbytes;
    out->packet_size = n.end - n.start;
    out->dtype = n.dtype;
    out->ndim = n.ndim;
    out->flags = n.flags;
    out->version = n.version;
    out->alignment = n.alignment;
    out->reserved = 0;
    const uint64_t *shape = n.shape.data();
    for (uint32_t i = 0; i < n.ndim; ++i) out->shape[i] = shape[i];
}

void encode_to_fd(const Value &v, const EncodeOptions &o, int fd, uint64_t *written) {
    Plan p(o, Plan::Mode::kCompress);
    p.add(v);
    p.write_fd(fd, written);
}

// A small uncompressed tensor is built on the stack and written with one write(): the plan's
// allocations would cost more than the packet. Larger ones go out vectored, the body never copied.
void encode_to_fd(const Tensor &t, const EncodeOptions &o, int fd, uint64_t *written) {
    constexpr size_t kSmall = 4096;
    if (!o.compress && t.nbytes <= kSmall && o.alignment <= TENSO_DEFAULT_ALIGNMENT) {
        alignas(64) uint8_t buf[kDenseHeaderMax + TENSO_DEFAULT_ALIGNMENT + kSmall + kFooterLen];
        size_t n = 0;
        encode_into(t, o, buf, sizeof buf, &n);
        write_all(fd, buf, n, written);
        return;
    }
    Plan p(o, Plan::Mode::kCompress);
    p.add(t);
    p.write_fd(fd, written);
}

PacketInfo inspect(const uint8_t *buf, size_t len) {
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
            n = scan(buf, len, lim, ScanMode::kHeader);
        } catch (const NeedMore &m) {
            fail(TENSO_E_TRUNCATED, "header is truncated: needs " + num(m.need) + " bytes, has " + num(len));
        }
    }
    PacketInfo info;
    PacketInfo *out = &info;
    out->version = n.version;
    out->flags = n.flags;
    out->kind = n.kind;
    out->dtype = n.dtype;
    out->ndim = n.ndim;
    out->entry_count = n.count;
    out->alignment = n.alignment;
    std::memcpy(out->shape, n.shape.data(), sizeof(uint64_t) * n.ndim);
    out->body_offset = n.body_off;
    out->body_size = complete ? n.body_len : (n.compressed ? 0 : n.nbytes);
    out->packet_size = complete ? n.end : 0;
    return info;
}

}  // namespace tenso
