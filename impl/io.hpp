// io.hpp - packets over file descriptors and files: framed stream reads, atomic saves, mmap.
#pragma once

#include <functional>
#include <memory>

#include "codec.hpp"

namespace tenso {

// Reads exactly one packet from fd (nothing past it is consumed) into one aligned buffer and
// decodes it. Throws Error(TENSO_E_END_OF_STREAM) on a clean end before the first byte.
std::unique_ptr<View> read_packet(int fd, const Limits &limits);

// Loads the first packet of a file, read into memory or mapped.
std::unique_ptr<View> load_file(const char *path, bool mmap_mode, const Limits &limits);

// Runs `write(fd)` on a temporary file next to `path`, flushes it and renames it over `path`;
// on any failure the temporary is removed and `path` is left as it was.
void save_atomic(const char *path, const std::function<void(int fd)> &write);

}  // namespace tenso
