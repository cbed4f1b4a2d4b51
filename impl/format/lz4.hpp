// lz4.hpp - LZ4 frames for compressed dense bodies: written the way upstream writes them
// (independent 4 MiB blocks, FLG 0x60, BD 0x70, no content size or checksums), straight into
// the caller's buffer, with the blocks compressed and decompressed on several threads.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tenso {

// Upstream's block size (lz4_flex FrameEncoder default, BD byte 0x70).
constexpr size_t kLz4Block = size_t(4) << 20;

// The most lz4_frame_compress writes for n bytes: a block that does not shrink is stored raw,
// so the bound is the input plus 4 bytes a block and the 7-byte header and 4-byte end mark.
size_t lz4_frame_bound(size_t n);

// Compresses src[0, n) into dst (at least lz4_frame_bound(n) bytes) as one frame and returns its
// length. level <= 2 is liblz4's fast mode (negative: acceleration 1 - level), 3 and up HC.
// threads: 0 = every core, 1 = this thread only. The bytes do not depend on `threads`.
size_t lz4_frame_compress(uint8_t *dst, const uint8_t *src, size_t n, int level, unsigned threads);

// Decompresses a whole frame into exactly n bytes; fails with TENSO_E_COMPRESSION unless the
// frame holds exactly n bytes and nothing follows it. Frames of independent blocks are
// decompressed block-parallel; any other valid frame goes through liblz4's frame decoder.
void lz4_frame_decompress(uint8_t *dst, size_t n, const uint8_t *src, size_t len, unsigned threads);

// 0 -> the number of cores; otherwise threads itself.
unsigned resolve_threads(unsigned threads);

}  // namespace tenso
