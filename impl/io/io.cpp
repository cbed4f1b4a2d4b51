// io.cpp - stream framing, files and mappings.
#include "io/io.hpp"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
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

// The deadline of one call: timeout_ms from its start, or none.
class Deadline {
public:
    // Beyond about 68 years a deadline is none: the sums below stay far from overflow.
    static constexpr uint64_t kForever = uint64_t(1) << 41;
    explicit Deadline(uint64_t timeout_ms) : on_(timeout_ms != 0 && timeout_ms < kForever) {
        if (on_) {
            ::clock_gettime(CLOCK_MONOTONIC, &end_);
            end_.tv_sec += time_t(timeout_ms / 1000);
            end_.tv_nsec += long(timeout_ms % 1000) * 1000000L;
            if (end_.tv_nsec >= 1000000000L) {
                ++end_.tv_sec;
                end_.tv_nsec -= 1000000000L;
            }
        }
    }
    bool on() const { return on_; }
    // Milliseconds left for poll(), rounded up; -1 when there is no deadline.
    int left_ms() const {
        if (!on_) return -1;
        struct timespec now;
        ::clock_gettime(CLOCK_MONOTONIC, &now);
        const int64_t ns = (int64_t(end_.tv_sec) - now.tv_sec) * 1000000000LL + (end_.tv_nsec - now.tv_nsec);
        if (ns <= 0) return 0;
        return int(std::min<int64_t>((ns + 999999) / 1000000, 1 << 30));
    }

private:
    bool on_;
    struct timespec end_ = {};
};

bool blocking(int fd) {
    const int fl = ::fcntl(fd, F_GETFL);
    return fl >= 0 && !(fl & O_NONBLOCK);
}

// Reads what is there (at most n, at least 1 byte unless the stream ends: 0). A blocking fd
// that gives EAGAIN has hit its SO_RCVTIMEO; a non-blocking one is polled; with a deadline
// every wait is a poll bounded by what is left of it. peek: recv(MSG_PEEK), which leaves the
// bytes queued; -1 (no exception) when fd is not a socket.
ssize_t read_some(int fd, uint8_t *p, size_t n, const Deadline &dl, bool peek) {
    for (;;) {
        if (dl.on()) {
            struct pollfd pf = {fd, POLLIN, 0};
            const int r = ::poll(&pf, 1, dl.left_ms());
            if (r < 0 && errno != EINTR) fail(TENSO_E_IO, errno_text("poll"));
            if (r == 0) fail(TENSO_E_TIMEOUT, "no data from the peer within timeout_ms");
            if (r < 0) continue;
        }
        const ssize_t r = peek ? ::recv(fd, p, n, MSG_PEEK) : ::read(fd, p, n);
        if (r >= 0) return r;
        if (errno == EINTR) continue;
        if (peek && errno == ENOTSOCK) return -1;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (blocking(fd)) fail(TENSO_E_TIMEOUT, "no data from the peer within the socket's SO_RCVTIMEO");
            if (!dl.on()) {
                struct pollfd pf = {fd, POLLIN, 0};
                if (::poll(&pf, 1, -1) < 0 && errno != EINTR) fail(TENSO_E_IO, errno_text("poll"));
            }
            continue;
        }
        fail(TENSO_E_IO, errno_text("read"));
    }
}

size_t read_some(int fd, uint8_t *p, size_t n, const Deadline &dl) { return size_t(read_some(fd, p, n, dl, false)); }

[[noreturn]] void ended(const Decoder &d) {
    if (d.idle()) fail(TENSO_E_END_OF_STREAM, "end of stream");
    d.finish();  // throws TRUNCATED
    fail(TENSO_E_INTERNAL, "decoder neither idle nor partial at end of stream");
}

// What one look at a socket's queue may take: a small packet whole, a large one's header.
constexpr size_t kPeek = 4096;

// The start of a packet from a socket in two system calls: a look at what is queued (recv
// MSG_PEEK), fed to the decoder, which takes only bytes of this packet, then a read that
// consumes exactly those. Without it the header arrives in several exact reads (magic, fixed
// part, shape) before the body. False when fd is not a socket (nothing was read); otherwise *v
// is the packet when the look held all of it.
bool peek_start(Decoder &d, int fd, const Deadline &dl, std::unique_ptr<View> *v) {
    uint8_t look[kPeek];
    const ssize_t n = read_some(fd, look, sizeof look, dl, true);
    if (n < 0) return false;
    if (n == 0) ended(d);
    auto consume = [&](size_t taken) {
        for (size_t done = 0; done < taken;) {
            const size_t got = read_some(fd, look, taken - done, dl);
            if (got == 0) fail(TENSO_E_IO, "socket bytes seen by MSG_PEEK vanished (another reader?)");
            done += got;
        }
    };
    try {
        consume(d.feed(look, size_t(n), v));
    } catch (const Error &) {
        consume(d.fed());  // a packet that failed after framing is consumed whole: in step
        throw;
    }
    return true;
}

struct Fd {
    int fd;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

// Read-ahead: what one read may fetch beyond the packet at hand.
constexpr size_t kReadAhead = size_t(64) << 10;

std::unique_ptr<View> read_packet(Decoder &d, int fd) { return read_packet(d, fd, SIZE_MAX, {}); }

std::unique_ptr<View> read_packet(Decoder &d, int fd, size_t max_read,
                                  const std::function<void(const Decoder &)> &progress) {
    const Deadline dl(d.config().limits.timeout_ms);
    std::unique_ptr<View> v;
    if (!d.config().read_ahead) {
        // A socket at a packet's start: a look frames it (a small packet then takes two system
        // calls); anything else goes on with exact reads.
        if (d.idle() && !progress && peek_start(d, fd, dl, &v) && v) return v;
        // Exactly what the decoder needs, straight into its buffer: never past the packet.
        for (;;) {
            size_t want = 0;
            uint8_t *dst = d.buffer(&want);
            const size_t got = read_some(fd, dst, std::min(want, std::max<size_t>(max_read, 1)), dl);
            if (got == 0) ended(d);
            if ((v = d.commit(got))) return v;
            if (progress) progress(d);
        }
    }
    std::vector<uint8_t> &ahead = d.ahead();
    size_t &pos = d.ahead_pos(), &end = d.ahead_end();
    for (;;) {
        while (pos < end) {
            try {
                pos += d.feed(ahead.data() + pos, end - pos, &v);
            } catch (...) {
                pos += d.fed();  // a packet that failed after framing is behind us
                throw;
            }
            if (v) return v;
        }
        pos = end = 0;
        size_t want = 0;
        uint8_t *dst = d.buffer(&want);
        if (want >= kReadAhead) {
            // A large body: straight into the packet's buffer, no copy through read-ahead.
            const size_t got = read_some(fd, dst, want, dl);
            if (got == 0) ended(d);
            if ((v = d.commit(got))) return v;
            continue;
        }
        if (ahead.size() < kReadAhead) ahead.resize(kReadAhead);
        end = read_some(fd, ahead.data(), kReadAhead, dl);
        if (end == 0) ended(d);
    }
}

std::unique_ptr<View> read_packet(int fd, const Limits &limits) {
    DecoderConfig cfg;
    cfg.limits = limits;
    Decoder d(cfg);
    return read_packet(d, fd);
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
