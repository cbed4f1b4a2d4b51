// value.hpp - a received value packet between framing and decoding: its bytes are all here
// (read from the socket by a frame_only decoder, or passed as a descriptor); it is scanned
// (checked, and measured: what decoding it will allocate), charged, then bound - where a
// decode that inflates much runs off the event loop.
#pragma once

#include <cstdint>
#include <memory>

#include "format/codec.hpp"
#include "format/wire.hpp"

namespace tenso::net {

struct Scanned {
    std::unique_ptr<View> raw;  // the packet's bytes (data, packet_size, keep)
    tenso::Node node;           // its scan, bound without a second read of the bytes
    uint64_t inflated = 0;      // bytes its compressed bodies inflate to
    uint64_t checksummed = 0;   // bytes its integrity footers cover (hashed by the bind)
    // Bytes the decoded value holds: the packet and its inflated bodies.
    uint64_t held() const { return raw->packet_size + inflated; }
    // Work a bind does beyond walking headers: inflating and hashing.
    uint64_t work() const { return inflated + checksummed; }
};

// Scans raw against lim (max_decoded_bytes bounds what the decode allocates). A packet that is
// not whole is TENSO_E_MALFORMED: its length was fixed before.
Scanned scan_received(std::unique_ptr<View> raw, const Limits &lim);
// The value: its bodies inflated and checksums verified, in s.raw's view (taken: s holds no
// bytes after). Any thread.
std::unique_ptr<View> bind_received(Scanned &s, const Limits &lim);

}  // namespace tenso::net
