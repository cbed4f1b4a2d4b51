// shm.cpp - shared-memory objects and single-packet segments.
#include "shm/shm.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "error.hpp"
#include "io/io.hpp"
#include "shm/fault_guard.hpp"

namespace tenso {

namespace {

std::string errno_text(const std::string &what, int err) { return what + ": " + std::strerror(err); }

struct Fd {
    int fd;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

// Maps the object and takes over its descriptor.
std::shared_ptr<ShmMapping> map_fd(Fd &f, size_t len, bool writable, bool populate, const std::string &name) {
    int prot = PROT_READ | (writable ? PROT_WRITE : 0);
    void *p = ::mmap(nullptr, len, prot, MAP_SHARED | (populate ? MAP_POPULATE : 0), f.fd, 0);
    if (p == MAP_FAILED) fail(TENSO_E_IO, errno_text("mmap " + name, errno));
    auto m = std::make_shared<ShmMapping>();
    m->addr = static_cast<uint8_t *>(p);
    m->len = len;
    m->writable = writable;
    m->fd = f.fd;
    f.fd = -1;
    m->guard = fault_guard::watch(m->addr, len, writable);
    m->tripped = fault_guard::tripped_flag(m->guard);
    return m;
}

}  // namespace

ShmMapping::~ShmMapping() {
    const bool truncated = tripped && tripped->load(std::memory_order_acquire);
    fault_guard::unwatch(guard);
    // A truncated mapping's address range stays reserved, as private zero pages that cost no
    // memory: if the truncation hit while this process held a pool's robust mutex, glibc's
    // per-thread robust list still links through the mutex's zeroed page, and a later lock
    // would write there. Should even that mmap fail, the old mapping stays as it is.
    if (addr && truncated) {
        void *kept =
            ::mmap(addr, len, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        (void)kept;
    } else if (addr) {
        ::munmap(addr, len);
    }
    if (fd >= 0) ::close(fd);
}

void ShmMapping::check_size_slowly(const std::string &name) const {
    const uint64_t size = fd_size(fd);
    if (size < len)
        fail(TENSO_E_TRUNCATED, "shared-memory object '" + name + "' was truncated to " + std::to_string(size) +
                                    " bytes under a mapping of " + std::to_string(len));
}

void ShmMapping::check_filled(const std::string &name) const {
    if (!tripped || !tripped->load(std::memory_order_acquire)) return;
    fail(TENSO_E_TRUNCATED, "shared-memory object '" + name + "' lost pages while it was filled (" +
                                std::to_string(len) +
                                " bytes): /dev/shm is probably full (see df /dev/shm); free space there or "
                                "make the object smaller");
}

void ShmMapping::fail_truncated(const std::string &name) const {
    fail(TENSO_E_TRUNCATED, "shared-memory object '" + name + "' lost pages under this process's mapping of " +
                                std::to_string(len) +
                                " bytes: another process truncated it (or /dev/shm ran out of space); they read "
                                "as zeros here now, open it again if it was recreated");
}

std::string shm_name(const char *name) {
    std::string n = name[0] == '/' ? std::string(name) : "/" + std::string(name);
    if (n.size() < 2) fail(TENSO_E_INVALID_ARGUMENT, "shared-memory name is empty");
    if (n.size() > 255) fail(TENSO_E_INVALID_ARGUMENT, "shared-memory name is longer than 255 bytes");
    if (n.find('/', 1) != std::string::npos)
        fail(TENSO_E_INVALID_ARGUMENT, "shared-memory name '" + n + "' has a '/' after the leading one");
    if (n == "/." || n == "/..") fail(TENSO_E_INVALID_ARGUMENT, "shared-memory name '" + n + "' names a directory");
    return n;
}

std::shared_ptr<ShmMapping> shm_create(const std::string &name, uint64_t size, bool replace, bool populate) {
    if (size == 0) fail(TENSO_E_INVALID_ARGUMENT, "shared-memory size must be at least 1 byte");
    if (size > uint64_t(PTRDIFF_MAX)) fail(TENSO_E_INVALID_ARGUMENT, "shared-memory size too large");
    // 0600: a pool or segment is private to the user that made it, as in multiprocessing.
    Fd f{::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
    if (f.fd < 0 && errno == EEXIST && replace) {
        ::shm_unlink(name.c_str());  // a stale leftover: whoever still maps it keeps their pages
        f.fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    }
    if (f.fd < 0) {
        int err = errno;
        if (err == EEXIST) fail(TENSO_E_EXISTS, "shared-memory segment '" + name + "' exists already");
        if (err == EINVAL || err == ENAMETOOLONG) fail(TENSO_E_INVALID_ARGUMENT, errno_text("shm_open " + name, err));
        fail(TENSO_E_IO, errno_text("shm_open " + name, err));
    }
    try {
        if (::ftruncate(f.fd, off_t(size)) != 0) fail(TENSO_E_IO, errno_text("ftruncate " + name, errno));
        return map_fd(f, size_t(size), true, populate, name);
    } catch (...) {
        ::shm_unlink(name.c_str());  // never leave a half-made object behind
        throw;
    }
}

std::shared_ptr<ShmMapping> shm_open_existing(const std::string &name, bool writable, bool populate, uint64_t min_size,
                                              int32_t too_small_status, bool any_owner) {
    Fd f{::shm_open(name.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0)};
    if (f.fd < 0) {
        int err = errno;
        if (err == ENOENT) fail(TENSO_E_NOT_FOUND, "no shared-memory segment '" + name + "'");
        if (err == EINVAL || err == ENAMETOOLONG) fail(TENSO_E_INVALID_ARGUMENT, errno_text("shm_open " + name, err));
        fail(TENSO_E_IO, errno_text("shm_open " + name, err));
    }
    struct stat st;
    if (::fstat(f.fd, &st) != 0) fail(TENSO_E_IO, errno_text("fstat " + name, errno));
    if (st.st_uid != ::geteuid() && !any_owner)
        fail(TENSO_E_IO, "shared-memory object '" + name + "' is owned by uid " + std::to_string(st.st_uid) +
                             ", not this process's effective uid " + std::to_string(::geteuid()) +
                             " (TENSO_SHM_ANY_OWNER opens it anyway)");
    uint64_t size = uint64_t(st.st_size);
    if (size < min_size || size == 0)
        fail(too_small_status, "shared-memory segment '" + name + "' has " + std::to_string(size) +
                                   " bytes, at least " + std::to_string(min_size ? min_size : 1) + " needed");
    return map_fd(f, size_t(size), writable, populate, name);
}

bool shm_unfinished(const std::string &name, size_t prefix, bool any_owner) {
    Fd f{::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0)};
    if (f.fd < 0) return false;
    struct stat st;
    if (::fstat(f.fd, &st) != 0) return false;
    if (st.st_uid != ::geteuid() && !any_owner) return false;  // refused by the open, not waited for
    if (st.st_size == 0) return true;
    std::string head(prefix, '\0'), zero(prefix, '\0');
    return ::pread(f.fd, &head[0], prefix, 0) == ssize_t(prefix) && head == zero;
}

void shm_remove(const std::string &name) {
    if (::shm_unlink(name.c_str()) != 0) {
        int err = errno;
        if (err == ENOENT) fail(TENSO_E_NOT_FOUND, "no shared-memory segment '" + name + "'");
        fail(TENSO_E_IO, errno_text("shm_unlink " + name, err));
    }
}

// ---------------------------------------------------------------------------- segments

std::unique_ptr<Segment> Segment::create(const char *name, uint64_t size, bool replace) {
    std::unique_ptr<Segment> s(new Segment);
    s->given_ = name;
    s->map_ = shm_create(shm_name(name), size, replace, false);
    return s;
}

std::unique_ptr<Segment> Segment::create_for(const char *name, const Value &v, const EncodeOptions &opts, bool replace,
                                             uint64_t *written) {
    // The real plan (compression already done) gives the exact size: no slack to carry.
    Plan plan(opts, false);
    plan.add(v);
    std::unique_ptr<Segment> s(new Segment);
    s->given_ = name;
    const std::string n = shm_name(name);
    s->map_ = shm_create(n, plan.size() ? plan.size() : 1, replace, false);
    try {
        plan.write_to(s->map_->addr);
        // ftruncate only reserves the size: a page /dev/shm has no room for faults on its
        // first touch, and the guard turns that into zeros. Such a segment is not the packet.
        s->map_->check_filled(name);
    } catch (...) {
        ::shm_unlink(n.c_str());  // no half-written segment is left under the name
        throw;
    }
    if (written) *written = plan.size();
    return s;
}

std::unique_ptr<Segment> Segment::open(const char *name, bool writable, bool any_owner) {
    std::unique_ptr<Segment> s(new Segment);
    s->given_ = name;
    s->map_ = shm_open_existing(shm_name(name), writable, false, 1, TENSO_E_TRUNCATED, any_owner);
    return s;
}

void Segment::put(const Value &v, const EncodeOptions &opts, uint64_t *written) {
    if (!map_->writable) fail(TENSO_E_INVALID_ARGUMENT, "segment '" + given_ + "' was opened read-only");
    Plan plan(opts, false);
    plan.add(v);
    *written = plan.size();
    if (plan.size() > map_->len)
        fail(TENSO_E_BUFFER_TOO_SMALL, "segment '" + given_ + "' holds " + std::to_string(map_->len) +
                                           " bytes, the packet needs " + std::to_string(plan.size()));
    map_->check_size(given_);
    plan.write_to(map_->addr);
    map_->check_intact(given_);
}

std::unique_ptr<View> Segment::get(const Limits &limits) const {
    // decode() scans from byte 0 and frames the packet by its own length, so a segment larger
    // than its packet (stale bytes, zeros, upstream's rounded sizes) reads back exactly.
    map_->check_size(given_);
    std::unique_ptr<View> v;
    try {
        v = decode(map_->addr, map_->len, limits, map_);
    } catch (...) {
        map_->check_intact(given_);  // zeros where a packet was: TRUNCATED, not a decode status
        throw;
    }
    map_->check_intact(given_);
    return v;
}

}  // namespace tenso
