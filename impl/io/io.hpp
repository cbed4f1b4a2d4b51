// io.hpp - packets over file descriptors and files: stream reads through the decoder, atomic
// saves, mmap.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "format/codec.hpp"
#include "format/decoder.hpp"

namespace tenso {

// Reads one packet from fd through the decoder: nothing past it is consumed unless the decoder
// reads ahead (then the rest waits in the decoder for its next call). Throws
// Error(TENSO_E_END_OF_STREAM) on a clean end before the first byte, TENSO_E_TIMEOUT when the
// socket's SO_RCVTIMEO or the limits' timeout_ms expires (the partial packet stays in `d`).
std::unique_ptr<View> read_packet(Decoder &d, int fd);
// The same reading at most max_read bytes at a time and calling progress(d) after each read
// that did not complete the packet (decoders without read-ahead only), so a caller can work on
// the bytes already in while the rest arrives.
std::unique_ptr<View> read_packet(Decoder &d, int fd, size_t max_read,
                                  const std::function<void(const Decoder &)> &progress);
// The same with a decoder of its own (tenso_read_fd).
std::unique_ptr<View> read_packet(int fd, const Limits &limits);

// Loads the first packet of a file, read into memory or mapped.
std::unique_ptr<View> load_file(const char *path, bool mmap_mode, const Limits &limits);

// Runs `write(fd)` on a temporary file next to `path`, flushes it and renames it over `path`;
// on any failure the temporary is removed and `path` is left as it was.
void save_atomic(const char *path, const std::function<void(int fd)> &write);

// A scratch file in `path`'s directory, read-write and 0600: unnamed (O_TMPFILE, *name empty)
// where the file system and /proc allow, else created O_EXCL under a random name in *name.
int create_temp(const std::string &path, std::string *name);

// The temporary file behind save_atomic, for writers that fill it over several calls: a
// create_temp file given the permission bits (and, where permitted, the group) of the regular
// file it replaces, or 0600 for a new one; commit() fsyncs it, names it and renames it over
// `path`, and the destructor drops it when never committed, so `path` only ever sees a finished
// file. With O_TMPFILE (and /proc) it is unnamed until commit, so a process killed while
// writing leaves nothing behind; otherwise a killed writer leaves `<path>.tmp.<hex>`.
class TempFile {
public:
    explicit TempFile(const char *path);
    ~TempFile();
    TempFile(const TempFile &) = delete;
    TempFile &operator=(const TempFile &) = delete;
    int fd() const { return fd_; }
    void commit();

private:
    std::string path_, tmp_;  // tmp_: its name, once it has one
    int fd_ = -1;
    void discard() noexcept;
};

// Writes all n bytes at `offset` (pwrite, retried on EINTR and short writes).
void pwrite_all(int fd, const void *p, size_t n, uint64_t offset);
// Reads exactly n bytes at `offset`; TENSO_E_TRUNCATED when the file ends first.
void pread_all(int fd, void *p, size_t n, uint64_t offset);

// A read-only shared mapping of a whole file; views point into it and keep it alive through
// View::keep. An empty file maps to {nullptr, 0}.
struct FileMap {
    const uint8_t *data = nullptr;
    size_t size = 0;
    FileMap() = default;
    FileMap(const FileMap &) = delete;
    FileMap &operator=(const FileMap &) = delete;
    ~FileMap();

    // Page-cache hints for readers of a header or index in a cold file (ignored on failure:
    // they are hints). The kernel's fault read-around pulls megabytes of tensor data into the
    // page cache per fault; with random() set, a fault reads its page only, prefetch() asks for
    // exactly the index range in one request, and normal() restores read-around for tensor
    // access afterwards.
    void random() const;
    void normal() const;
    void prefetch(uint64_t off, uint64_t len) const;
};
std::shared_ptr<const FileMap> map_file(int fd, size_t size);

// The current size of an open file: lseek to its end, half the cost of fstat on the hit paths
// that check it (the descriptors checked are only ever mapped or pread, never read at the offset).
uint64_t fd_size(int fd);

// Opens `path` read-only: TENSO_E_NOT_FOUND when it does not exist, TENSO_E_IO otherwise.
int open_read(const char *path);

}  // namespace tenso
