// decoder.hpp - the stream decoder: the one framing state machine of the library.
//
// Bytes arrive in any pieces; the Framer walks the packet's own structure (header, shape and
// metadata, LZ4 block headers, bundle entries, sparse components) as they come, resuming where
// it stopped, so the work is linear in the bytes fed. Nested packets get a header check while
// framing; once the packet is complete, decode() (codec.hpp) checks and binds everything.
// Memory for the packet is asked for once the headers have fixed its exact length; before
// that, bytes wait in a small staging area that grows with the bytes received.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tenso/tenso.h"
#include "format/codec.hpp"
#include "format/wire.hpp"

namespace tenso {

// Resumable framing of one packet whose bytes lie contiguously from offset 0.
class Framer {
public:
    explicit Framer(const Limits &lim) : lim_(lim) {}
    void reset();
    // Advances over b[0, have). Returns 0 when the packet's end is known (end()), else the total
    // byte count needed to go on (> have). Throws Error for anything invalid.
    size_t run(const uint8_t *b, size_t have);
    // The exact packet length once known (0 before); may be known before the walk completes.
    size_t end() const { return end_; }
    // Alignment the packet's buffer should have for its body to be aligned in memory.
    size_t alignment() const { return align_; }
    // The next packet must be exactly n bytes (0: any): framing fails with TENSO_E_MALFORMED as
    // soon as its headers say otherwise (before any size limit, which then applies to the
    // expected length). Cleared by reset().
    void expect(size_t n) {
        expect_ = n;
        relaxed_ = lim_;
        relaxed_.max_packet_bytes = relaxed_.max_decoded_bytes = 0;
    }
    // The last failure was a length other than the expected one.
    bool mismatch() const { return mismatch_; }

private:
    enum class Stage { kHeader, kLz4, kEntries, kDone };
    const Limits &lim_;
    Stage stage_ = Stage::kHeader;
    size_t need_ = 0, end_ = 0, align_ = 64;
    size_t expect_ = 0;
    mutable bool mismatch_ = false;
    Limits relaxed_;  // lim_ without the size limits, which checked() applies after expect_
    const Limits &scan_lim() const { return expect_ ? relaxed_ : lim_; }
    // kLz4: the frame walk; kEntries: the container walk.
    Lz4Walk lz4_{0, 0};
    size_t pos_ = 0;        // next entry's first byte
    uint32_t left_ = 0;     // entries still to walk
    bool bundle_ = false;   // else sparse components
    bool checked_ = false;  // the current entry's nested header is checked
    bool footer_ = false;   // an LZ4 body's integrity footer follows the frame
    uint64_t packets_ = 1;  // packets the tree holds, as far as the headers seen tell

    void count(const Node &n, int depth);  // max_entries and max_depth, as headers arrive

    size_t entries(const uint8_t *b, size_t have);
    size_t checked(size_t n) const;  // n, once the limits allow a packet that long
    size_t known(size_t end);        // the exact length is known
};

// What one decoder is set up with (tenso_decoder_options, checked and copied).
struct DecoderConfig {
    Limits limits;
    bool read_ahead = false;
    // Complete packets are framed but not decoded: feed/commit hand out a View with only `data`
    // (the packet's bytes), `packet_size`, `nbytes` (the same) and `keep` set, for the caller to
    // decode where and when it chooses (bind_scanned). Nodes decode pushes off their event loop.
    bool frame_only = false;
    tenso_alloc_fn alloc = nullptr;
    tenso_release_fn release = nullptr;
    void *alloc_user = nullptr;
};

// The exact length of the packet at buf[0], from its headers alone (tenso_packet_length, pool
// checks). Throws NeedMore with the total bytes needed to go on when `len` is short.
size_t frame_length(const uint8_t *buf, size_t len, const Limits &limits);

// tenso_packet_length: frame_length, then the packet checked as a decode checks it (all but
// checksums), so a length is only given for a packet tenso_loads could take.
size_t packet_length(const uint8_t *buf, size_t len, const Limits &limits);

// Throws the error a full scan of buf (as tenso_loads does) finds, if any; returns otherwise.
void as_loads_says(const uint8_t *buf, size_t len, const Limits &limits);

class Decoder {
public:
    explicit Decoder(const DecoderConfig &cfg);
    ~Decoder();
    Decoder(const Decoder &) = delete;
    Decoder &operator=(const Decoder &) = delete;

    void reset();
    // The next packet must be exactly n bytes (a length announced out of band, as a node's
    // control frame does): one whose headers say otherwise fails with TENSO_E_MALFORMED before
    // its buffer is allocated. Only between packets (idle()); applies to that packet alone.
    void expect(size_t n);
    // Copies in at most what the packet still needs; returns the bytes taken. *out gets the
    // packet's view when it completes.
    size_t feed(const uint8_t *src, size_t len, std::unique_ptr<View> *out);
    // The length of the packet at src[0] when all of it is in src[0, len) and the decoder is
    // between packets (and not frame_only); else 0, and also for headers that fail or a length
    // other than expect()'s (feed() then says how). Lets a reader decode a small packet where
    // it lies, as feed() would, without a copy into a buffer of its own.
    size_t whole(const uint8_t *src, size_t len) const;
    // Where the next bytes go and how many are needed (never 0).
    uint8_t *buffer(size_t *len);
    std::unique_ptr<View> commit(size_t n);
    size_t needed() const;
    // Bytes the last feed() took, also when it failed: a packet that failed after it was
    // framed (checksum, decode limits, structure) counts whole, so the caller stays in step.
    size_t fed() const { return fed_; }
    // The current packet's buffer once its length is known (else null), and the bytes in it:
    // lets a reader use a body while the rest of the packet is still arriving (GPU staging).
    const uint8_t *received(size_t *have) const {
        *have = have_;
        return packet_ ? packet_.get() : nullptr;
    }
    bool idle() const { return have_ == 0 && ahead_pos_ == ahead_end_ && !failed_; }
    void finish() const;

    const DecoderConfig &config() const { return cfg_; }
    // Read-ahead storage for the fd loop (impl/io): bytes read past a packet, not yet fed.
    std::vector<uint8_t> &ahead() { return ahead_; }
    size_t &ahead_pos() { return ahead_pos_; }  // next byte not fed
    size_t &ahead_end() { return ahead_end_; }  // one past the last byte read

    struct Spare;  // the default allocator's reusable buffer (shared with live views)

private:
    DecoderConfig cfg_;
    Framer framer_;
    std::vector<uint8_t> stage_;       // bytes before the packet buffer exists
    std::shared_ptr<uint8_t> packet_;  // the packet's buffer, once its length is known
    size_t have_ = 0;                  // bytes of the current packet received
    size_t want_ = 0;                  // total bytes needed to go on (framer's answer)
    bool failed_ = false;
    bool framed_failure_ = false;  // the failure came after the packet was framed
    size_t fed_ = 0;
    std::shared_ptr<Spare> spare_;
    std::vector<uint8_t> ahead_;
    size_t ahead_pos_ = 0, ahead_end_ = 0;

    void check_usable() const;
    void sized();
    std::unique_ptr<View> complete();
    std::unique_ptr<View> complete_framed();
    size_t frame(const uint8_t *b, size_t n);
    template <class F>
    auto guarded(F f) -> decltype(f());
    std::shared_ptr<uint8_t> allocate(size_t size, size_t alignment);
};

}  // namespace tenso
