// lz4.cpp - LZ4 frames written and read block by block with liblz4's block API (the frame
// layout is the LZ4 frame format's own: magic, FLG, BD, header checksum, sized blocks, end mark).
#include "format/lz4.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <lz4.h>
#include <lz4frame.h>
#include <lz4hc.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "error.hpp"
#include "format/wire.hpp"

namespace tenso {

namespace {

constexpr uint32_t kMagic = 0x184D2204u;
constexpr uint32_t kRaw = 0x80000000u;  // block size high bit: stored uncompressed
constexpr uint8_t kFlg = 0x60;          // version 01, independent blocks, nothing optional
constexpr uint8_t kBd = 0x70;           // 4 MiB blocks
constexpr size_t kHeader = 7, kEndMark = 4;

std::string num(uint64_t v) { return std::to_string(v); }

uint8_t header_checksum(const uint8_t *desc, size_t n) { return uint8_t(XXH32(desc, n, 0) >> 8); }

// Runs f(i) for i in [0, count) on up to `threads` threads (this one included), in increasing
// order of i per taker. f must not throw.
template <class F>
void parallel_for(size_t count, unsigned threads, F &&f) {
    const size_t workers = std::min<size_t>(resolve_threads(threads), count);
    std::atomic<size_t> next{0};
    auto run = [&] {
        for (size_t i; (i = next.fetch_add(1)) < count;) f(i);
    };
    std::vector<std::thread> pool;
    pool.reserve(workers ? workers - 1 : 0);
    try {
        for (size_t w = 1; w < workers; ++w) pool.emplace_back(run);
    } catch (...) {
        // No more threads to be had (or no memory for one): those started and this one do the work.
    }
    run();
    for (auto &t : pool) t.join();
}

// Per-thread compression state (the fast and HC states are large: not on the stack).
struct CState {
    std::unique_ptr<char[]> mem;
    explicit CState(int level)
        : mem(new char[size_t(level >= LZ4HC_CLEVEL_MIN ? LZ4_sizeofStateHC() : LZ4_sizeofState())]) {}
};

// Compresses one block to dst+4 and writes its size word; returns the bytes written (4 + body).
size_t compress_block(CState &st, uint8_t *dst, const uint8_t *src, size_t n, int level) {
    // Capacity n - 1: a block that would not shrink is stored raw, as LZ4F does.
    const int cap = int(n) - 1;
    int c = 0;
    if (cap > 0) {
        c = level >= LZ4HC_CLEVEL_MIN
                ? LZ4_compress_HC_extStateHC(st.mem.get(), reinterpret_cast<const char *>(src),
                                             reinterpret_cast<char *>(dst + 4), int(n), cap, level)
                : LZ4_compress_fast_extState(st.mem.get(), reinterpret_cast<const char *>(src),
                                             reinterpret_cast<char *>(dst + 4), int(n), cap, level < 0 ? 1 - level : 1);
    }
    if (c <= 0) {
        wr32(dst, uint32_t(n) | kRaw);
        std::memcpy(dst + 4, src, n);
        return 4 + n;
    }
    wr32(dst, uint32_t(c));
    return 4 + size_t(c);
}

// liblz4's frame decoder: any valid frame (linked blocks, checksums, content size).
void decompress_lz4f(uint8_t *dst, size_t n, const uint8_t *src, size_t len) {
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
            fail(TENSO_E_COMPRESSION,
                 out == n ? "LZ4 frame holds more than shape x itemsize bytes" : "LZ4 frame ends early");
        }
    }
    if (out != n)
        fail(TENSO_E_COMPRESSION,
             "LZ4 frame decompressed to " + num(out) + " bytes, not shape x itemsize (" + num(n) + ")");
    if (in != len) fail(TENSO_E_COMPRESSION, "bytes after the end of the LZ4 frame");
}

struct Block {
    size_t off;    // of the block's data in the frame
    uint32_t len;  // stored length
    bool raw;
};

// The block table of a frame of independent blocks, each but the last holding a full block
// (what upstream, LZ4F and this file write). False for anything else: such frames, and every
// corrupt one, go to liblz4's frame decoder, which decodes them or says what is wrong.
bool block_table(const uint8_t *src, size_t len, size_t n, std::vector<Block> &blocks, size_t &bmax) {
    if (len < kHeader || rd32(src) != kMagic) return false;
    const uint8_t flg = src[4], bd = src[5];
    // version 01, independent, no block/content checksum, no dict id; reserved bits clear.
    if ((flg & 0xFD) != 0x60 || (bd & 0x8F)) return false;
    const unsigned bsid = (bd >> 4) & 7;
    if (bsid < 4) return false;
    bmax = size_t(1) << (8 + 2 * bsid);
    size_t pos = 6;
    if (flg & 0x08) {
        if (len < pos + 9 || rd64(src + pos) != n) return false;
        pos += 8;
    }
    if (header_checksum(src + 4, pos - 4) != src[pos]) return false;
    ++pos;
    const size_t count = n ? (n - 1) / bmax + 1 : 0;
    blocks.clear();
    blocks.reserve(count);
    for (size_t i = 0;; ++i) {
        if (len - pos < 4) return false;
        const uint32_t word = rd32(src + pos);
        pos += 4;
        if (word == 0) break;  // end mark
        const uint32_t blen = word & ~kRaw;
        if (i == count || blen > bmax || blen > len - pos) return false;
        const size_t want = std::min(bmax, n - i * bmax);
        if ((word & kRaw) && blen != want) return false;
        blocks.push_back(Block{pos, blen, (word & kRaw) != 0});
        pos += blen;
    }
    return blocks.size() == count && pos == len;
}

}  // namespace

unsigned resolve_threads(unsigned threads) {
    if (threads) return threads;
    const unsigned hw = std::thread::hardware_concurrency();
    return hw ? hw : 1;
}

size_t lz4_frame_bound(size_t n) { return kHeader + n + 4 * ((n + kLz4Block - 1) / kLz4Block) + kEndMark; }

size_t lz4_frame_compress(uint8_t *dst, const uint8_t *src, size_t n, int level, unsigned threads) {
    dst[0] = 0x04, dst[1] = 0x22, dst[2] = 0x4D, dst[3] = 0x18;
    dst[4] = kFlg;
    dst[5] = kBd;
    dst[6] = header_checksum(dst + 4, 2);
    size_t pos = kHeader;
    const size_t count = (n + kLz4Block - 1) / kLz4Block;
    if (count <= 1 || resolve_threads(threads) == 1) {
        CState st(level);
        for (size_t i = 0; i < count; ++i) {
            const size_t off = i * kLz4Block;
            pos += compress_block(st, dst + pos, src + off, std::min(kLz4Block, n - off), level);
        }
    } else {
        // Block i is compressed where it would sit if every block before it were stored raw
        // (so no two blocks overlap), then moved down to its place once block i - 1 is placed:
        // the same bytes as the loop above, written on several threads.
        std::mutex mu;
        std::condition_variable cv;
        size_t placed = 0;  // blocks at their final place; pos is where the next one goes
        bool failed = false;
        parallel_for(count, threads, [&](size_t i) {
            const size_t off = i * kLz4Block;
            uint8_t *slot = dst + kHeader + i * (kLz4Block + 4);
            size_t w = 0;
            try {
                thread_local std::unique_ptr<CState> st;
                thread_local int st_level = 0;
                if (!st || st_level != level) st.reset(new CState(level)), st_level = level;
                w = compress_block(*st, slot, src + off, std::min(kLz4Block, n - off), level);
            } catch (...) {
                w = 0;  // out of memory: reported after every worker is done
            }
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return placed == i; });
            if (!w) failed = true;
            const size_t at = pos;
            lock.unlock();
            if (w && dst + at != slot) std::memmove(dst + at, slot, w);  // only blocks <= i touch [at, slot + w)
            lock.lock();
            pos = at + w;
            ++placed;
            cv.notify_all();
        });
        if (failed) throw std::bad_alloc();
    }
    wr32(dst + pos, 0);
    return pos + kEndMark;
}

void lz4_frame_decompress(uint8_t *dst, size_t n, const uint8_t *src, size_t len, unsigned threads) {
    std::vector<Block> blocks;
    size_t bmax = 0;
    if (block_table(src, len, n, blocks, bmax)) {
        std::atomic<bool> ok{true};
        auto one = [&](size_t i) {
            const Block &b = blocks[i];
            uint8_t *out = dst + i * bmax;
            const size_t want = std::min(bmax, n - i * bmax);
            if (b.raw) {
                std::memcpy(out, src + b.off, b.len);
                return;
            }
            const int r = LZ4_decompress_safe(reinterpret_cast<const char *>(src + b.off),
                                              reinterpret_cast<char *>(out), int(b.len), int(want));
            if (r < 0 || size_t(r) != want) ok.store(false, std::memory_order_relaxed);
        };
        if (blocks.size() <= 1 || resolve_threads(threads) == 1) {
            for (size_t i = 0; i < blocks.size(); ++i) one(i);
        } else {
            parallel_for(blocks.size(), threads, one);
        }
        if (ok.load()) return;
        // A corrupt block, or one shorter than a full block: the frame decoder says which.
    }
    decompress_lz4f(dst, n, src, len);
}

}  // namespace tenso
