// control.hpp - the control frame of the node protocol (docs/net-protocol.md): a Tenso string
// packet of six strings [op, name, status, length, offset, message] that precedes or answers
// every value packet on a node connection.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/codec.hpp"

namespace tenso::net {

enum class Op { kPush, kPushFd, kGet, kOk, kValue, kValueFd, kError };

struct Control {
    Op op = Op::kOk;
    std::string name;
    int32_t status = 0;
    uint64_t length = 0;  // the value packet's bytes (push, value)
    uint64_t offset = 0;  // *-fd: where the packet starts in the passed descriptor
    std::string message;  // error: why; push, push-fd: kCountedOk, or empty
};

// The message of a dialer's push that reads `ok` frames answering several pushes (their count in
// the length field). A listener answers a dialer that never sent it (1.4.0's, which reads one
// push per `ok`) with one `ok` per push.
inline constexpr char kCountedOk[] = "ok-count";

// Largest control packet a node reads: its header and offsets plus a name and a message.
size_t control_packet_limit(uint32_t max_name_bytes);
// The control frame as a Tenso packet.
std::vector<uint8_t> encode_control(const Control &c);
// Reads a decoded control packet. Anything but six strings with a known op, a name of
// 1..max_name_bytes where one belongs, decimal numbers in range and a message of at most 1 KiB
// is TENSO_E_MALFORMED (TENSO_E_LIMIT for a name too long).
Control parse_control(const View &v, uint32_t max_name_bytes);

}  // namespace tenso::net
