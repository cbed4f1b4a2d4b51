// error.hpp - the engine's one error type. Every failure inside impl/ is a tenso::Error
// carrying a pinned status code; the C ABI firewall turns it into a return value and a
// thread-local message.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tenso {

class Error : public std::runtime_error {
public:
    Error(int32_t status, const std::string &msg) : std::runtime_error(msg), status_(status) {}
    int32_t status() const noexcept { return status_; }

private:
    int32_t status_;
};

[[noreturn]] inline void fail(int32_t status, const std::string &msg) { throw Error(status, msg); }
// fail() out of line, for a message that is a C string: the hot functions that can fail then
// build no std::string, and need no registers for one, on their fast path.
[[noreturn]] __attribute__((noinline, cold)) inline void fail_msg(int32_t status, const char *msg) {
    throw Error(status, msg);
}

// Thrown by the scanner when the bytes end before the packet does. `need` is the total number
// of bytes (from the scan origin) required to make progress; framing loops read up to it.
struct NeedMore {
    size_t need;
};

}  // namespace tenso
