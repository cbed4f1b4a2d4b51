// watch.cpp - size changes of shared-memory objects (see watch.hpp).
//
// The ring is driven with the raw system calls rather than liburing: it holds one multishot
// poll request, and a shipped dependency (wheels, vendored Rust builds) for that is not worth it.
#include "shm/watch.hpp"

#include <errno.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace tenso {

std::atomic<uint32_t> size_watch_forks{0};

#if defined(IORING_SETUP_TASKRUN_FLAG) && defined(IORING_POLL_ADD_MULTI) && defined(__NR_io_uring_setup)
#define TENSO_SIZE_WATCH 1
#endif

#ifdef TENSO_SIZE_WATCH

struct SizeWatch::Ring {
    int ring = -1, inotify = -1;
    uint8_t *map = nullptr;
    size_t map_len = 0;
    io_uring_sqe *sqes = nullptr;
    size_t sqes_len = 0;
    uint32_t *sq_tail = nullptr, *sq_mask = nullptr, *sq_flags = nullptr, *sq_array = nullptr;
    uint32_t *cq_head = nullptr, *cq_tail = nullptr, *cq_mask = nullptr;
    io_uring_cqe *cqes = nullptr;
    bool multishot = true;
    std::mutex mu;
    std::map<int, int> refs;  // inotify watch descriptor -> add() calls

    ~Ring() {
        if (sqes) ::munmap(sqes, sqes_len);
        if (map) ::munmap(map, map_len);
        if (ring >= 0) ::close(ring);
        if (inotify >= 0) ::close(inotify);
    }

    bool open() {
        inotify = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (inotify < 0) return false;
        io_uring_params p;
        std::memset(&p, 0, sizeof p);
        // Completions are posted by the watcher thread's own task work, never by interrupting
        // another thread; the flag shows pending work to every reader at once.
        p.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
        ring = int(::syscall(__NR_io_uring_setup, 4, &p));
        if (ring < 0) return false;
        if (!(p.features & IORING_FEAT_SINGLE_MMAP) || !(p.features & IORING_FEAT_NODROP)) return false;
        const size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(uint32_t);
        const size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
        map_len = sq_len > cq_len ? sq_len : cq_len;
        void *m = ::mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING);
        if (m == MAP_FAILED) return false;
        map = static_cast<uint8_t *>(m);
        sqes_len = p.sq_entries * sizeof(io_uring_sqe);
        m = ::mmap(nullptr, sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
        if (m == MAP_FAILED) return false;
        sqes = static_cast<io_uring_sqe *>(m);
        sq_tail = reinterpret_cast<uint32_t *>(map + p.sq_off.tail);
        sq_mask = reinterpret_cast<uint32_t *>(map + p.sq_off.ring_mask);
        sq_flags = reinterpret_cast<uint32_t *>(map + p.sq_off.flags);
        sq_array = reinterpret_cast<uint32_t *>(map + p.sq_off.array);
        cq_head = reinterpret_cast<uint32_t *>(map + p.cq_off.head);
        cq_tail = reinterpret_cast<uint32_t *>(map + p.cq_off.tail);
        cq_mask = reinterpret_cast<uint32_t *>(map + p.cq_off.ring_mask);
        cqes = reinterpret_cast<io_uring_cqe *>(map + p.cq_off.cqes);
        return arm();
    }

    int enter(unsigned submit) { return int(::syscall(__NR_io_uring_enter, ring, submit, 0u, 0u, nullptr, 0)); }

    // Submits the poll on the inotify descriptor (only the watcher thread submits, after open()).
    bool arm() {
        const uint32_t tail = *sq_tail, i = tail & *sq_mask;
        io_uring_sqe &e = sqes[i];
        std::memset(&e, 0, sizeof e);
        e.opcode = IORING_OP_POLL_ADD;
        e.fd = inotify;
        uint32_t events = POLLIN;
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        events = (events << 16) | (events >> 16);  // the kernel swaps the halves back
#endif
        e.poll32_events = events;
        e.len = multishot ? IORING_POLL_ADD_MULTI : 0;
        e.user_data = 1;
        sq_array[i] = i;
        __atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
        for (;;) {
            const int r = enter(1);
            if (r == 1) return true;
            if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            return false;
        }
    }

    // The watcher thread: waits for completions, takes in the reports and re-arms.
    void run() {
        for (;;) {
            // Waits in poll() rather than io_uring_enter: the task work that posts a completion
            // wakes either, and poll() is a wait every tool knows (valgrind serialises threads
            // and would hang in an io_uring wait it does not know to be blocking).
            struct pollfd pf = {ring, POLLIN, 0};
            if (::poll(&pf, 1, -1) < 0 && errno != EINTR) return;
            char buf[4096] __attribute__((aligned(alignof(inotify_event))));
            while (::read(inotify, buf, sizeof buf) > 0) {}
            bool rearm = false;
            uint32_t head = *cq_head;
            for (const uint32_t tail = __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE); head != tail; ++head) {
                const io_uring_cqe &c = cqes[head & *cq_mask];
                if (!(c.flags & IORING_CQE_F_MORE)) rearm = true;
                if (c.res == -EINVAL && multishot) multishot = false;                  // before 5.13: one-shot polls
                else if (c.res < 0 && c.res != -ECANCELED && c.res != -EINTR) return;  // cannot poll: stop
            }
            __atomic_store_n(cq_head, head, __ATOMIC_RELEASE);
            if (rearm && !arm()) return;
        }
    }
};

namespace {

std::mutex g_mu;
std::atomic<SizeWatch *> g_watch{nullptr};
std::atomic<bool> g_dead{false};  // the watcher thread stopped: nothing is reported any more
bool g_child = false;             // a forked child: no watcher thread (under g_mu)

void *watcher(void *arg) {
    static_cast<SizeWatch::Ring *>(arg)->run();
    // Stopped by a kernel refusal while re-arming: from now on every reader checks sizes itself.
    g_dead = true;
    return nullptr;
}

// The watcher thread, which gets no signals: they are the application's.
bool start_watcher(SizeWatch::Ring *r) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, size_t(64) << 10);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    const bool started = pthread_create(&t, &a, watcher, r) == 0;
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    pthread_attr_destroy(&a);
    if (started) pthread_setname_np(t, "tenso-shmwatch");
    return started;
}

}  // namespace

SizeWatch &SizeWatch::get() {
    if (SizeWatch *w = g_watch.load(std::memory_order_acquire)) return *w;
    std::lock_guard<std::mutex> l(g_mu);
    if (SizeWatch *w = g_watch.load(std::memory_order_acquire)) return *w;
    static const bool once = [] {
        // A forked child has no watcher thread, and starts none: a child of a threaded parent
        // should not start threads (sanitizers refuse it), so its objects are checked every
        // time. The parent's ring and descriptors stay as they are.
        ::pthread_atfork([] { g_mu.lock(); }, [] { g_mu.unlock(); },
                         [] {
                             g_mu.unlock();
                             g_watch.store(nullptr, std::memory_order_relaxed);
                             g_child = true;
                             ++size_watch_forks;
                         });
        return true;
    }();
    (void)once;
    auto *w = new SizeWatch;  // never destroyed: mappings may be released during exit
    std::unique_ptr<Ring> r(new Ring);
    if (!g_child && r->open() && start_watcher(r.get())) w->ring_ = r.release();
    g_watch.store(w, std::memory_order_release);
    return *w;
}

int SizeWatch::add(int fd) {
    if (!ring_ || g_dead) return -1;
    // /proc/self/fd/N names the very object we mapped, even when its name was unlinked or
    // taken over since.
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    const int wd = ::inotify_add_watch(ring_->inotify, path.c_str(), IN_MODIFY);
    if (wd < 0) return -1;
    std::lock_guard<std::mutex> l(ring_->mu);
    ++ring_->refs[wd];
    return wd;
}

void SizeWatch::remove(int id) {
    if (!ring_ || id < 0) return;
    std::lock_guard<std::mutex> l(ring_->mu);
    auto it = ring_->refs.find(id);
    if (it == ring_->refs.end() || --it->second) return;
    ring_->refs.erase(it);
    ::inotify_rm_watch(ring_->inotify, id);
}

uint64_t SizeWatch::stamp() const {
    if (!ring_ || g_dead.load(std::memory_order_relaxed)) return 0;
    // The flag first: the kernel clears it just before it posts the completion, so seeing it
    // clear and then the tail tells of every report made before the flag was read.
    const uint32_t flags = __atomic_load_n(ring_->sq_flags, __ATOMIC_ACQUIRE);
    if (flags & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) return 0;
    return uint64_t(__atomic_load_n(ring_->cq_tail, __ATOMIC_ACQUIRE)) << 1 | 1;
}

#else  // no io_uring headers for it: every check asks the kernel

struct SizeWatch::Ring {};
SizeWatch &SizeWatch::get() {
    (void)size_watch_forks;
    static SizeWatch w;
    return w;
}
int SizeWatch::add(int) { return -1; }
void SizeWatch::remove(int) {}
uint64_t SizeWatch::stamp() const { return 0; }

#endif

SizeCheck::SizeCheck(int fd) : watch_(&SizeWatch::get()), forks_(size_watch_forks.load()) { id_ = watch_->add(fd); }

SizeCheck::~SizeCheck() {
    if (live()) watch_->remove(id_);
}

bool SizeCheck::live() const { return id_ >= 0 && forks_ == size_watch_forks.load(std::memory_order_relaxed); }

bool SizeCheck::unchanged() const {
    if (!live()) return false;
    const uint64_t s = watch_->stamp();
    return s && s == __atomic_load_n(&seen_, __ATOMIC_RELAXED);
}

uint64_t SizeCheck::before() const { return live() ? watch_->stamp() : 0; }

void SizeCheck::passed(uint64_t before) {
    if (before) __atomic_store_n(&seen_, before, __ATOMIC_RELAXED);
}

}  // namespace tenso
