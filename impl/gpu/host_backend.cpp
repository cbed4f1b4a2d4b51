// host_backend.cpp - the device interface in host memory (TENSO_GPU_BACKEND_HOST), so every
// transfer path runs on machines without a GPU. "Device memory" is a memfd segment per
// allocation, so an IPC handle (the owner's pid and fd) opens in another process of the same
// user through /proc; each stream is a worker thread running its queue in order, and an event
// is a generation counter the worker advances, which is how CUDA orders them too.
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "gpu/engine.hpp"
#include "gpu/kernels/dequant.hpp"

namespace tenso::gpu {

namespace {

tenso_status report(char *msg, size_t cap, tenso_status st, const std::string &s) {
    if (cap) {
        const size_t n = std::min(cap - 1, s.size());
        std::memcpy(msg, s.data(), n);
        msg[n] = 0;
    }
    return st;
}
tenso_status sys_error(char *msg, size_t cap, const char *what) {
    return report(msg, cap, TENSO_E_GPU, std::string(what) + ": " + std::strerror(errno));
}

size_t page_round(size_t n) {
    const size_t page = size_t(::sysconf(_SC_PAGESIZE));
    return (std::max<size_t>(n, 1) + page - 1) / page * page;
}

// ---- memory ----

struct Alloc {
    int fd;
    size_t size;
};
std::mutex g_mem_mu;
std::map<uintptr_t, Alloc> &allocs() {  // by base address (ipc_export finds the one holding ptr)
    static auto *m = new std::map<uintptr_t, Alloc>;
    return *m;
}
std::map<uintptr_t, size_t> &opened() {  // ipc_open mappings
    static auto *m = new std::map<uintptr_t, size_t>;
    return *m;
}

// The 64-byte IPC handle: magic, the owner's pid, the segment's fd there, and its size.
constexpr char kMagic[16] = "tenso-host-ipc1";
constexpr char kMemfdName[] = "tenso-gpu";
constexpr char kMemfdLink[] = "/memfd:tenso-gpu ";                 // what /proc/<pid>/fd/<n> links to
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;  // the size is fixed for good
struct Handle {
    char magic[16];
    uint64_t pid;
    int64_t fd;
    uint64_t size;
    uint8_t pad[24];
};
static_assert(sizeof(Handle) == 64, "IPC handles are 64 bytes");

tenso_status check_device(int32_t device, char *msg, size_t cap) {
    if (device == 0) return TENSO_OK;
    return report(msg, cap, TENSO_E_INVALID_ARGUMENT,
                  "the host backend has one device (0), not " + std::to_string(device));
}

tenso_status h_init(char *, size_t) { return TENSO_OK; }

tenso_status h_device_count(int32_t *count, char *, size_t) {
    *count = 1;
    return TENSO_OK;
}

tenso_status h_device_info(tenso_gpu_device_info *out, int32_t device, char *msg, size_t cap) {
    if (tenso_status st = check_device(device, msg, cap)) return st;
    static uint8_t uuid[16];
    static std::once_flag once;
    std::call_once(once, [] {
        if (::getrandom(uuid, sizeof uuid, 0) != ssize_t(sizeof uuid)) {
            const uint64_t pid = uint64_t(::getpid());
            std::memcpy(uuid, &pid, sizeof pid);
        }
    });
    std::snprintf(out->name, sizeof out->name, "tenso host backend (emulated device)");
    std::memcpy(out->uuid, uuid, sizeof uuid);
    out->total_memory = uint64_t(::sysconf(_SC_PHYS_PAGES)) * uint64_t(::sysconf(_SC_PAGESIZE));
    out->multiprocessors = int32_t(std::max(1u, std::thread::hardware_concurrency()));
    out->pci_domain = out->pci_bus = out->pci_device = -1;
    out->backend = TENSO_GPU_BACKEND_HOST;
    out->flags = TENSO_GPU_DEVICE_IPC;
    return TENSO_OK;
}

tenso_status h_malloc_device(void **ptr, size_t n, int32_t device, char *msg, size_t cap) {
    if (tenso_status st = check_device(device, msg, cap)) return st;
    const size_t size = page_round(n);
    const int fd = ::memfd_create(kMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return sys_error(msg, cap, "memfd_create");
    if (::ftruncate(fd, off_t(size)) != 0) {
        const tenso_status st =
            errno == ENOSPC || errno == EFBIG
                ? report(msg, cap, TENSO_E_NO_MEMORY, "out of device memory (" + std::to_string(n) + " bytes)")
                : sys_error(msg, cap, "ftruncate");
        ::close(fd);
        return st;
    }
    // Any process of the user can open the segment through /proc (that is how IPC works here):
    // sealed at its size, it cannot be shrunk under a mapping, which would fault (SIGBUS) on the
    // next access in every process that maps it.
    if (::fcntl(fd, F_ADD_SEALS, kSeals) != 0) {
        const tenso_status st = sys_error(msg, cap, "fcntl(F_ADD_SEALS)");
        ::close(fd);
        return st;
    }
    void *p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        ::close(fd);
        return report(msg, cap, TENSO_E_NO_MEMORY, "out of device memory (" + std::to_string(n) + " bytes)");
    }
    try {
        std::lock_guard<std::mutex> lock(g_mem_mu);
        allocs()[reinterpret_cast<uintptr_t>(p)] = {fd, size};
    } catch (...) {
        ::munmap(p, size);
        ::close(fd);
        return report(msg, cap, TENSO_E_NO_MEMORY, "out of memory");
    }
    *ptr = p;
    return TENSO_OK;
}

// Removes ptr's record from `m` into *out; false when it has none.
template <class V>
bool forget(std::map<uintptr_t, V> &m, const void *ptr, V *out) {
    std::lock_guard<std::mutex> lock(g_mem_mu);
    auto it = m.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == m.end()) return false;
    *out = it->second;
    m.erase(it);
    return true;
}

tenso_status h_free_device(void *ptr, int32_t, char *msg, size_t cap) {
    Alloc a;
    if (!forget(allocs(), ptr, &a))
        return report(msg, cap, TENSO_E_INVALID_ARGUMENT, "free_device of memory it did not allocate");
    ::munmap(ptr, a.size);
    ::close(a.fd);
    return TENSO_OK;
}

tenso_status h_malloc_pinned(void **ptr, size_t n, char *msg, size_t cap) {
    void *p = nullptr;
    if (::posix_memalign(&p, size_t(::sysconf(_SC_PAGESIZE)), page_round(n)) != 0)  // whole pages, as CUDA's
        return report(msg, cap, TENSO_E_NO_MEMORY, "out of pinned memory (" + std::to_string(n) + " bytes)");
    *ptr = p;
    return TENSO_OK;
}

tenso_status h_free_pinned(void *ptr, char *, size_t) {
    std::free(ptr);
    return TENSO_OK;
}

// ---- streams and events ----

struct Stream {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<tenso_status(std::string *)>> q;
    bool busy = false, stop = false;
    tenso_status error = TENSO_OK;  // the first failure since the last synchronize
    std::string why;
    std::thread worker;

    Stream() : worker([this] { run(); }) {}
    ~Stream() {
        {
            std::lock_guard<std::mutex> lock(mu);
            stop = true;
        }
        cv.notify_all();
        worker.join();
    }
    void run() {
        std::unique_lock<std::mutex> lock(mu);
        for (;;) {
            cv.wait(lock, [&] { return stop || !q.empty(); });
            if (q.empty()) return;  // stop, with the queue drained
            auto task = std::move(q.front());
            q.pop_front();
            busy = true;
            lock.unlock();
            std::string w;
            tenso_status st;
            try {
                st = task(&w);
            } catch (...) {
                st = TENSO_E_NO_MEMORY;
                w = "out of memory in a stream task";
            }
            lock.lock();
            busy = false;
            if (st != TENSO_OK && error == TENSO_OK) {
                error = st;
                why = std::move(w);
            }
            cv.notify_all();
        }
    }
    void push(std::function<tenso_status(std::string *)> f) {
        {
            std::lock_guard<std::mutex> lock(mu);
            q.push_back(std::move(f));
        }
        cv.notify_all();
    }
    tenso_status sync(char *msg, size_t cap) {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return q.empty() && !busy; });
        const tenso_status st = error;
        if (st != TENSO_OK) report(msg, cap, st, why);
        error = TENSO_OK;
        return st;
    }
};

struct Event {
    std::mutex mu;
    std::condition_variable cv;
    uint64_t recorded = 0, reached = 0;
};

tenso_status h_stream_create(void **stream, int32_t device, char *msg, size_t cap) {
    if (tenso_status st = check_device(device, msg, cap)) return st;
    try {
        *stream = new Stream;
    } catch (const std::system_error &e) {
        return report(msg, cap, TENSO_E_GPU, std::string("stream worker: ") + e.what());
    } catch (...) {
        return report(msg, cap, TENSO_E_NO_MEMORY, "out of memory");
    }
    return TENSO_OK;
}

tenso_status h_stream_destroy(void *stream, char *, size_t) {
    delete static_cast<Stream *>(stream);
    return TENSO_OK;
}

tenso_status h_stream_synchronize(void *stream, char *msg, size_t cap) {
    if (!stream) return TENSO_OK;  // the "null stream": every op on it already ran
    return static_cast<Stream *>(stream)->sync(msg, cap);
}

tenso_status h_event_create(void **event, int32_t device, char *msg, size_t cap) {
    if (tenso_status st = check_device(device, msg, cap)) return st;
    *event = new (std::nothrow) Event;
    return *event ? TENSO_OK : report(msg, cap, TENSO_E_NO_MEMORY, "out of memory");
}

tenso_status h_event_destroy(void *event, char *, size_t) {
    delete static_cast<Event *>(event);
    return TENSO_OK;
}

// Runs `f` on the stream's worker, or right away on the null stream.
template <class F>
tenso_status enqueue(void *stream, F f, char *msg, size_t cap) {
    if (!stream) {
        std::string w;
        const tenso_status st = f(&w);
        return st == TENSO_OK ? st : report(msg, cap, st, w);
    }
    try {
        static_cast<Stream *>(stream)->push(std::move(f));
    } catch (...) {
        return report(msg, cap, TENSO_E_NO_MEMORY, "out of memory");
    }
    return TENSO_OK;
}

tenso_status h_event_record(void *event, void *stream, char *msg, size_t cap) {
    auto *e = static_cast<Event *>(event);
    uint64_t gen;
    {
        std::lock_guard<std::mutex> lock(e->mu);
        gen = ++e->recorded;
    }
    return enqueue(
        stream,
        [e, gen](std::string *) {
            // Notify under the lock: a waiter that sees `reached` may destroy the event at once, so
            // the worker must not touch it after unlocking (TSan: notify racing the destructor).
            std::lock_guard<std::mutex> lock(e->mu);
            e->reached = std::max(e->reached, gen);
            e->cv.notify_all();
            return TENSO_OK;
        },
        msg, cap);
}

tenso_status h_event_synchronize(void *event, char *, size_t) {
    auto *e = static_cast<Event *>(event);
    std::unique_lock<std::mutex> lock(e->mu);
    const uint64_t gen = e->recorded;
    e->cv.wait(lock, [&] { return e->reached >= gen; });
    return TENSO_OK;
}

tenso_status copy(void *dst, const void *src, size_t n, void *stream, char *msg, size_t cap) {
    return enqueue(
        stream,
        [dst, src, n](std::string *) {
            std::memcpy(dst, src, n);
            return TENSO_OK;
        },
        msg, cap);
}

// ---- IPC ----

tenso_status h_ipc_export(uint8_t handle[64], uint64_t *offset, const void *ptr, int32_t device, char *msg,
                          size_t cap) {
    if (tenso_status st = check_device(device, msg, cap)) return st;
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(g_mem_mu);
    auto it = allocs().upper_bound(p);
    if (it == allocs().begin() || p >= std::prev(it)->first + std::prev(it)->second.size)
        return report(msg, cap, TENSO_E_INVALID_ARGUMENT, "ipc_export of memory the host backend did not allocate");
    --it;
    Handle h;
    std::memset(&h, 0, sizeof h);
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.pid = uint64_t(::getpid());
    h.fd = it->second.fd;
    h.size = it->second.size;
    std::memcpy(handle, &h, sizeof h);
    *offset = p - it->first;
    return TENSO_OK;
}

tenso_status h_ipc_open(void **ptr, uint64_t *size, const uint8_t handle[64], int32_t device, char *msg, size_t cap) {
    if (tenso_status st = check_device(device, msg, cap)) return st;
    Handle h;
    std::memcpy(&h, handle, sizeof h);
    if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0)
        return report(msg, cap, TENSO_E_INVALID_ARGUMENT, "not a host backend IPC handle");
    const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
    // Only a segment of this backend: a reference from a packet must not map whatever other
    // file that process has open.
    char target[64] = "";
    const ssize_t tl = ::readlink(path.c_str(), target, sizeof target - 1);
    if (tl < 0 || std::strncmp(target, kMemfdLink, std::strlen(kMemfdLink)) != 0)
        return report(msg, cap, TENSO_E_INVALID_ARGUMENT, "ipc_open: " + path + " is not a host backend segment");
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return sys_error(msg, cap, ("ipc_open " + path).c_str());
    struct stat st;
    // The size the exporter recorded must be there, and stay there: a shorter segment, or one
    // that could still be shrunk (not sealed as malloc_device seals it: a segment some other
    // process made and named like ours), would fault on access.
    const int seals = ::fcntl(fd, F_GET_SEALS);
    if (::fstat(fd, &st) != 0 || !h.size || uint64_t(st.st_size) < h.size || h.size > SIZE_MAX) {
        ::close(fd);
        return report(msg, cap, TENSO_E_INVALID_ARGUMENT, "ipc_open: the segment is not the one the handle names");
    }
    if (seals < 0 || (seals & kSeals) != kSeals) {
        ::close(fd);
        return report(msg, cap, TENSO_E_INVALID_ARGUMENT,
                      "ipc_open: " + path + " is not sealed against shrinking, so it is not a host backend segment");
    }
    void *p = ::mmap(nullptr, size_t(h.size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return sys_error(msg, cap, "ipc_open mmap");
    try {
        std::lock_guard<std::mutex> lock(g_mem_mu);
        opened()[reinterpret_cast<uintptr_t>(p)] = size_t(h.size);
    } catch (...) {
        ::munmap(p, size_t(h.size));
        return report(msg, cap, TENSO_E_NO_MEMORY, "out of memory");
    }
    *ptr = p;
    *size = h.size;  // what is mapped; fstat above saw at least that much in the segment
    return TENSO_OK;
}

tenso_status h_ipc_close(void *ptr, int32_t, char *msg, size_t cap) {
    size_t size;
    if (!forget(opened(), ptr, &size))
        return report(msg, cap, TENSO_E_INVALID_ARGUMENT, "ipc_close of a pointer ipc_open did not return");
    ::munmap(ptr, size);
    return TENSO_OK;
}

// ---- kernels: the shared element code, run on the stream's worker ----

tenso_status h_dequantize(const tenso_gpu_dequant_args *args, void *stream, char *msg, size_t cap) {
    const tenso_gpu_dequant_args a = *args;
    return enqueue(
        stream,
        [a](std::string *why) {
            char m[512] = "";
            const tenso_status st = dequantize_host(a, m, sizeof m);
            if (st != TENSO_OK) *why = m;
            return st;
        },
        msg, cap);
}

const tenso_gpu_backend_ops kHostOps = {
    TENSO_GPU_BACKEND_ABI,
    TENSO_GPU_BACKEND_HOST,
    h_init,
    h_device_count,
    h_device_info,
    h_malloc_device,
    h_free_device,
    h_malloc_pinned,
    h_free_pinned,
    h_stream_create,
    h_stream_destroy,
    h_stream_synchronize,
    h_event_create,
    h_event_destroy,
    h_event_record,
    h_event_synchronize,
    copy,
    copy,
    h_ipc_export,
    h_ipc_open,
    h_ipc_close,
    h_dequantize,
    nullptr,
    nullptr,  // no GPUDirect Storage: files are staged
};

}  // namespace

const tenso_gpu_backend_ops *host_backend() { return &kHostOps; }

}  // namespace tenso::gpu
