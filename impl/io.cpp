// io.cpp - stream framing, files and mappings.
#include "io.hpp"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

#include "error.hpp"

namespace tenso {

namespace {

std::string errno_text(const char *what) { return std::string(what) + ": " + std::strerror(errno); }

// Reads until `n` bytes or end of file; returns the count read.
size_t read_full(int fd, uint8_t *p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = ::read(fd, p + got, n - got);
        if (r > 0) { got += size_t(r); continue; }
        if (r == 0) break;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            struct pollfd pf = {fd, POLLIN, 0};
            if (::poll(&pf, 1, -1) < 0 && errno != EINTR) fail(TENSO_E_IO, errno_text("poll"));
            continue;
        }
        fail(TENSO_E_IO, errno_text("read"));
    }
    return got;
}

struct Fd {
    int fd;
    ~Fd() { if (fd >= 0) ::close(fd); }
};

struct Mapping {
    void *addr;
    size_t len;
    Mapping(void *a, size_t n) : addr(a), len(n) {}
    Mapping(const Mapping &) = delete;  // exactly one owner unmaps
    Mapping &operator=(const Mapping &) = delete;
    ~Mapping() { ::munmap(addr, len); }
};

}  // namespace

std::unique_ptr<View> read_packet(int fd, const Limits &limits) {
    std::shared_ptr<uint8_t> buf;
    size_t cap = 0, have = 0, want = sizeof kMagic;  // garbage is told apart from a cut stream
    for (;;) {
        if (want > cap) {
            // Grow to what the scanner asks for: sizes it has checked against the limits
            // (shape x itemsize, element-bounded string payloads, keys up to 64 KiB, LZ4
            // blocks up to 4 MiB) -- geometrically for bundles, learnt entry by entry.
            size_t ncap = std::max(want, std::min(cap * 2, want + (size_t(1) << 20)));
            auto nb = alloc_aligned(ncap);
            if (have) std::memcpy(nb.get(), buf.get(), have);
            buf = std::move(nb);
            cap = ncap;
        }
        size_t got = read_full(fd, buf.get() + have, want - have);
        have += got;
        if (have < want) {
            if (have == 0) fail(TENSO_E_END_OF_STREAM, "end of stream");
            fail(TENSO_E_TRUNCATED, "stream ended inside a packet after " + std::to_string(have) + " bytes");
        }
        try {
            Node n = scan(buf.get(), have, limits);
            (void)n;
            break;
        } catch (const NeedMore &m) {
            want = m.need;
        }
    }
    return decode(buf.get(), have, limits, buf);
}

std::unique_ptr<View> load_file(const char *path, bool mmap_mode, const Limits &limits) {
    Fd f{::open(path, O_RDONLY | O_CLOEXEC)};
    if (f.fd < 0) fail(TENSO_E_IO, errno_text(path));
    if (!mmap_mode) return read_packet(f.fd, limits);
    struct stat st;
    if (::fstat(f.fd, &st) != 0) fail(TENSO_E_IO, errno_text("fstat"));
    if (st.st_size == 0) fail(TENSO_E_END_OF_STREAM, "empty file");
    size_t len = size_t(st.st_size);
    void *addr = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, f.fd, 0);
    if (addr == MAP_FAILED) fail(TENSO_E_IO, errno_text("mmap"));
    auto map = std::make_shared<Mapping>(addr, len);
    return decode(static_cast<const uint8_t *>(addr), len, limits, map);
}

void save_atomic(const char *path, const std::function<void(int fd)> &write) {
    static std::atomic<unsigned> counter{0};
    std::string tmp = std::string(path) + ".tmp." + std::to_string(::getpid()) + "." +
                      std::to_string(counter++);
    // 0666 & ~umask, like any file the user creates; O_EXCL never clobbers a stranger's file.
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) fail(TENSO_E_IO, errno_text(tmp.c_str()));
    try {
        write(fd);
        if (::fsync(fd) != 0) fail(TENSO_E_IO, errno_text("fsync"));
        if (::close(fd) != 0) { fd = -1; fail(TENSO_E_IO, errno_text("close")); }
        fd = -1;
        if (::rename(tmp.c_str(), path) != 0) fail(TENSO_E_IO, errno_text("rename"));
    } catch (...) {
        if (fd >= 0) ::close(fd);
        ::unlink(tmp.c_str());
        throw;
    }
}

}  // namespace tenso
