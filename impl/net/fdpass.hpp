// fdpass.hpp - the Unix descriptor fast path: a packet travels as a sealed memfd (or any file
// the sender passes) beside its control frame, not through the socket.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <sys/uio.h>

#include "format/decoder.hpp"

namespace tenso::net {

// The packet passed as [offset, offset + len) of fd, framed but not decoded (a View as a
// frame_only decoder hands out): mapped when the sender sealed it against writes and shrinking
// (nobody can change or truncate it under the view), else read into memory. Its headers must
// say exactly len bytes: anything else is TENSO_E_MALFORMED.
std::unique_ptr<View> packet_from_fd(int fd, uint64_t offset, uint64_t len, const Limits &lim);

// A sealed memfd holding the packet the segments make (total bytes).
int packet_memfd(const std::vector<iovec> &iov, uint64_t total);

}  // namespace tenso::net
