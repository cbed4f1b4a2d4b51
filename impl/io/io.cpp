// io.cpp - stream framing, files and mappings.
#include "io/io.hpp"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
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

}  // namespace

namespace {

struct Unmap {
    size_t len;
    void operator()(uint8_t *p) const { ::munmap(p, len); }
};

// The buffer a stream packet is read into. Small packets live on the heap; past 64 KiB the
// buffer is anonymous pages grown with mremap, which moves page tables instead of copying
// bytes, so it can grow with the bytes that actually arrive at no cost.
class PacketBuffer {
public:
    static constexpr size_t kHeapMax = size_t(64) << 10;

    uint8_t *data() { return map_ ? map_.get() : heap_.get(); }

    void reserve(size_t n, size_t used) {
        if (n <= cap_) return;
        if (n <= kHeapMax) {
            auto nb = alloc_aligned(n);
            if (used) std::memcpy(nb.get(), heap_.get(), used);
            heap_ = std::move(nb);
            cap_ = n;
            return;
        }
        const size_t page = size_t(::sysconf(_SC_PAGESIZE));
        n = (n + page - 1) / page * page;
        void *p;
        if (map_) {
            p = ::mremap(map_.get(), cap_, n, MREMAP_MAYMOVE);
        } else {
            p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p != MAP_FAILED && used) std::memcpy(p, heap_.get(), used);
        }
        if (p == MAP_FAILED) throw std::bad_alloc();
        (void)map_.release();  // mremap already retired the old mapping
        map_.reset(static_cast<uint8_t *>(p));
        map_.get_deleter().len = n;
        heap_.reset();
        cap_ = n;
    }

    // Hands the memory to the views that will point into it.
    std::shared_ptr<const void> share() {
        if (map_) return std::shared_ptr<const void>(std::move(map_));
        return heap_;
    }

private:
    std::shared_ptr<uint8_t> heap_;
    std::unique_ptr<uint8_t, Unmap> map_{nullptr, Unmap{0}};
    size_t cap_ = 0;
};

}  // namespace

std::unique_ptr<View> read_packet(int fd, const Limits &limits) {
    PacketBuffer buf;
    size_t have = 0, want = sizeof kMagic;  // garbage is told apart from a cut stream
    for (;;) {
        while (have < want) {
            // Memory follows the bytes received (at most twice as many, from 64 KiB on), never
            // a length the stream merely claims.
            size_t target = std::min(want, std::max(2 * have, PacketBuffer::kHeapMax));
            buf.reserve(target, have);
            have += read_full(fd, buf.data() + have, target - have);
            if (have < target) {
                if (have == 0) fail(TENSO_E_END_OF_STREAM, "end of stream");
                fail(TENSO_E_TRUNCATED, "stream ended inside a packet after " + std::to_string(have) + " bytes");
            }
        }
        try {
            scan(buf.data(), have, limits, ScanMode::kFrame);  // decode() checks everything
            break;
        } catch (const NeedMore &m) {
            // The buffer is memory the decode holds: max_decoded_bytes bounds it too (the scan
            // has already held it to max_packet_bytes).
            if (limits.max_decoded_bytes && m.need > limits.max_decoded_bytes)
                fail(TENSO_E_LIMIT, "packet of at least " + std::to_string(m.need) + " bytes is larger than max_decoded_bytes (" +
                                        std::to_string(limits.max_decoded_bytes) + ")");
            want = m.need;
        }
    }
    const uint8_t *bytes = buf.data();
    return decode(bytes, have, limits, buf.share());
}

std::unique_ptr<View> load_file(const char *path, bool mmap_mode, const Limits &limits) {
    Fd f{::open(path, O_RDONLY | O_CLOEXEC)};
    if (f.fd < 0) fail(TENSO_E_IO, errno_text(path));
    if (!mmap_mode) return read_packet(f.fd, limits);
    struct stat st;
    if (::fstat(f.fd, &st) != 0) fail(TENSO_E_IO, errno_text("fstat"));
    if (st.st_size == 0) fail(TENSO_E_END_OF_STREAM, "empty file");
    auto map = map_file(f.fd, size_t(st.st_size));
    return decode(map->data, map->size, limits, map);
}

FileMap::~FileMap() {
    if (data) ::munmap(const_cast<uint8_t *>(data), size);
}

void FileMap::random() const {
    if (size) ::madvise(const_cast<uint8_t *>(data), size, MADV_RANDOM);
}

void FileMap::normal() const {
    if (size) ::madvise(const_cast<uint8_t *>(data), size, MADV_NORMAL);
}

void FileMap::prefetch(uint64_t off, uint64_t len) const {
    if (off >= size || !len) return;
    const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
    const uint64_t begin = off & ~(page - 1), end = off + std::min<uint64_t>(len, size - off);
    ::madvise(const_cast<uint8_t *>(data) + begin, size_t(end - begin), MADV_WILLNEED);
}

std::shared_ptr<const FileMap> map_file(int fd, size_t size) {
    auto m = std::make_shared<FileMap>();
    if (!size) return m;
    void *addr = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) fail(TENSO_E_IO, errno_text("mmap"));
    m->data = static_cast<const uint8_t *>(addr);
    m->size = size;
    return m;
}

uint64_t fd_size(int fd) {
    const off_t end = ::lseek(fd, 0, SEEK_END);
    if (end < 0) fail(TENSO_E_IO, errno_text("lseek"));
    return uint64_t(end);
}

int open_read(const char *path) {
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(errno == ENOENT ? TENSO_E_NOT_FOUND : TENSO_E_IO, errno_text(path));
    return fd;
}

void pwrite_all(int fd, const void *p, size_t n, uint64_t offset) {
    const auto *b = static_cast<const uint8_t *>(p);
    while (n) {
        ssize_t r = ::pwrite(fd, b, n, off_t(offset));
        if (r < 0) {
            if (errno == EINTR) continue;
            fail(TENSO_E_IO, errno_text("pwrite"));
        }
        b += r;
        n -= size_t(r);
        offset += uint64_t(r);
    }
}

void pread_all(int fd, void *p, size_t n, uint64_t offset) {
    auto *b = static_cast<uint8_t *>(p);
    while (n) {
        ssize_t r = ::pread(fd, b, n, off_t(offset));
        if (r < 0) {
            if (errno == EINTR) continue;
            fail(TENSO_E_IO, errno_text("pread"));
        }
        if (r == 0) fail(TENSO_E_TRUNCATED, "file ends " + std::to_string(n) + " bytes early");
        b += r;
        n -= size_t(r);
        offset += uint64_t(r);
    }
}

namespace {

std::string dir_of(const std::string &path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// `path` + ".tmp." + 16 random hex digits: a name nobody can plant in advance.
std::string random_name(const std::string &path) {
    uint64_t r = 0;
    if (::getrandom(&r, sizeof r, GRND_NONBLOCK) != ssize_t(sizeof r)) {
        static std::atomic<uint64_t> counter{0};  // no entropy yet: still unique, O_EXCL decides
        struct timespec ts;
        ::clock_gettime(CLOCK_MONOTONIC, &ts);
        r = (uint64_t(ts.tv_nsec) << 20) ^ (uint64_t(::getpid()) << 40) ^ counter++;
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
    return path + ".tmp." + hex;
}

// Runs `make(name)` on fresh random names until one is not taken (EEXIST).
template <class F>
std::string with_fresh_name(const std::string &path, F make) {
    for (int tries = 0;; ++tries) {
        std::string name = random_name(path);
        if (make(name)) return name;
        if (errno != EEXIST || tries == 100) fail(TENSO_E_IO, errno_text(name.c_str()));
    }
}

// O_TMPFILE files get their name through /proc/self/fd (linkat AT_EMPTY_PATH needs
// CAP_DAC_READ_SEARCH): without /proc a save would fail only after writing the whole file.
// Asked on every save (one syscall beside an fsync), as /proc can differ per mount namespace.
bool proc_fd_usable() { return ::access("/proc/self/fd", X_OK) == 0; }

}  // namespace

int create_temp(const std::string &path, std::string *name) {
    name->clear();
#ifdef O_TMPFILE
    // Unnamed until committed: a process killed while writing leaves nothing behind.
    const std::string dir = dir_of(path);
    if (proc_fd_usable()) {
        int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0) return fd;
        if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) fail(TENSO_E_IO, errno_text(dir.c_str()));
    }
#endif
    int fd_named = -1;  // no O_TMPFILE or no /proc: a random name, O_EXCL
    *name = with_fresh_name(path, [&](const std::string &n) {
        fd_named = ::open(n.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        return fd_named >= 0;
    });
    return fd_named;
}

TempFile::TempFile(const char *path) : path_(path) {
    fd_ = create_temp(path_, &tmp_);
    // Replacing a file never widens its permissions: the temp takes the target's permission
    // bits (no set-id) and its group where we may, never its owner (a file planted by another
    // user must not make our output theirs). A symlink or anything not regular counts as new:
    // 0600 whatever the umask, and the rename replaces the link, not what it points to.
    struct stat st;
    if (::lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        mode_t mode = st.st_mode & 0777;
        if (::fchown(fd_, uid_t(-1), st.st_gid) != 0) mode &= ~mode_t(0070);  // not our group
        if (::fchmod(fd_, mode) != 0) {
            const std::string err = errno_text("fchmod");
            discard();
            fail(TENSO_E_IO, err);
        }
    }
}

TempFile::~TempFile() { discard(); }

void TempFile::discard() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
    tmp_.clear();
}

void TempFile::commit() {
    if (fd_ < 0) fail(TENSO_E_IO, "temporary file is already closed");
    if (::fsync(fd_) != 0) fail(TENSO_E_IO, errno_text("fsync"));
    if (tmp_.empty()) {
        // An O_TMPFILE gets a random name only now, for the rename (link() cannot replace).
        const std::string proc = "/proc/self/fd/" + std::to_string(fd_);
        tmp_ = with_fresh_name(path_, [&](const std::string &n) {
            if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, n.c_str(), AT_SYMLINK_FOLLOW) == 0) return true;
            const int err = errno;  // the one to report: the fallback mostly fails for lack of privilege
            if (err != EEXIST && ::linkat(fd_, "", AT_FDCWD, n.c_str(), AT_EMPTY_PATH) == 0) return true;
            errno = err;
            return false;
        });
    }
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(TENSO_E_IO, errno_text("close"));
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail(TENSO_E_IO, errno_text("rename"));
    tmp_.clear();  // renamed: nothing left to remove
    // The rename is durable once the directory is: a crash now leaves the new file, not neither.
    const std::string dir = dir_of(path_);
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) fail(TENSO_E_IO, errno_text(dir.c_str()));
    const int err = ::fsync(dfd) == 0 ? 0 : errno;
    ::close(dfd);
    if (err && err != EINVAL) {  // EINVAL: a file system without directory fsync
        errno = err;
        fail(TENSO_E_IO, errno_text("fsync of the directory"));
    }
}

void save_atomic(const char *path, const std::function<void(int fd)> &write) {
    TempFile t(path);
    write(t.fd());
    t.commit();
}

}  // namespace tenso
