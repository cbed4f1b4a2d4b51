// fdpass.cpp - the Unix descriptor fast path (see fdpass.hpp).
#include "net/fdpass.hpp"

#include <cerrno>
#include <cstdint>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.hpp"
#include "io/io.hpp"
#include "net/socket.hpp"

namespace tenso::net {

namespace {
// The packet at p must be exactly len bytes by its own headers.
void check_length(const uint8_t *p, uint64_t len, const Limits &lim) {
    size_t end;
    try {
        end = frame_length(p, size_t(len), lim);
    } catch (const NeedMore &) {
        end = SIZE_MAX;  // its headers claim more than the descriptor holds for it
    }
    if (end != len) fail(TENSO_E_MALFORMED, "the passed packet's length is not the one announced");
}
}  // namespace

std::unique_ptr<View> packet_from_fd(int fd, uint64_t offset, uint64_t len, const Limits &lim) {
    struct stat st;
    if (fstat(fd, &st) != 0) sys_fail(TENSO_E_IO, "fstat of a passed descriptor");
    if (len == 0 || offset > uint64_t(st.st_size) || len > uint64_t(st.st_size) - offset)
        fail(TENSO_E_MALFORMED, "a passed descriptor is shorter than its packet");
    if (lim.max_packet_bytes && len > lim.max_packet_bytes) fail(TENSO_E_LIMIT, "packet larger than max_packet_bytes");
    std::unique_ptr<View> v(new View);
    v->nbytes = v->packet_size = len;
    v->owns_data = true;
    const int seals = fcntl(fd, F_GET_SEALS);
    const int need = F_SEAL_SHRINK | F_SEAL_WRITE;
    if (seals >= 0 && (seals & need) == need) {
        const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
        const uint64_t base = offset / page * page;
        const size_t maplen = size_t(offset - base + len);
        void *m = mmap(nullptr, maplen, PROT_READ, MAP_SHARED, fd, off_t(base));
        if (m == MAP_FAILED) sys_fail(TENSO_E_IO, "mmap of a passed descriptor");
        v->keep = std::shared_ptr<const void>(m, [maplen](const void *p) { munmap(const_cast<void *>(p), maplen); });
        v->data = static_cast<const uint8_t *>(m) + (offset - base);
    } else {
        std::shared_ptr<uint8_t> buf = alloc_aligned(size_t(len));
        size_t got = 0;
        while (got < len) {
            const ssize_t r = ::pread(fd, buf.get() + got, size_t(len - got), off_t(offset + got));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) sys_fail(TENSO_E_IO, "pread of a passed descriptor", r == 0 ? EIO : errno);
            got += size_t(r);
        }
        v->data = buf.get();
        v->keep = std::move(buf);
    }
    check_length(v->data, len, lim);
    return v;
}

int packet_memfd(const std::vector<iovec> &iov, uint64_t total) {
    const int fd = memfd_create("tenso-packet", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) sys_fail(TENSO_E_IO, "memfd_create");
    if (ftruncate(fd, off_t(total)) != 0) {
        const int e = errno;
        ::close(fd);
        sys_fail(TENSO_E_IO, "ftruncate of a memfd", e);
    }
    uint64_t off = 0;
    for (const iovec &v : iov) {
        size_t done = 0;
        while (done < v.iov_len) {
            const ssize_t r =
                ::pwrite(fd, static_cast<const uint8_t *>(v.iov_base) + done, v.iov_len - done, off_t(off + done));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                const int e = errno;
                ::close(fd);
                sys_fail(TENSO_E_IO, "write to a memfd", e);
            }
            done += size_t(r);
        }
        off += v.iov_len;
    }
    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    return fd;
}

}  // namespace tenso::net
