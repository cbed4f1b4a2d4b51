// watch.hpp - size changes of shared-memory objects, seen without a system call.
//
// A mapping of an object that another process truncates raises SIGBUS on the lost pages, so
// users of shared memory ask for the object's size before touching it (ShmMapping::check_size).
// That is a system call, several times the cost of a cache hit. The kernel can tell us instead:
// an inotify watch on the object reports every truncate() and write() (never stores through a
// mapping), and a multishot io_uring poll on the inotify descriptor turns each report into
// memory we map: the ring's "task work pending" flag is set by the truncating call itself,
// before it returns, and the completion that follows moves the ring's tail. A reader compares
// both with what it saw at its last size check (two loads) and asks for the size only when they
// differ.
//
// The ring belongs to one watcher thread of ours, which sleeps in the kernel until a report
// comes, takes it in (running the task work that posts the completion) and re-arms the poll, so
// no application thread is ever interrupted on our behalf. Truncation after the check and before
// the pages are touched still faults: the residual race the system call has too. Where io_uring
// (5.19 and later for the flag), inotify or /proc are missing or filtered (seccomp),
// add() says no and the caller asks for the size every time.
#pragma once

#include <atomic>
#include <cstdint>

namespace tenso {

class SizeWatch {
public:
    // The process's watch, created on first use (a forked child gets one that watches
    // nothing: its objects are checked every time). Thread-safe.
    static SizeWatch &get();
    // Starts watching the object open on fd: a watch id, or -1 when the kernel cannot report
    // its changes (then check its size on every use).
    int add(int fd);
    // Undoes one add() that returned `id` (an object added twice stays watched until both go).
    void remove(int id);
    // Changes after any change to a watched object; 0 while a report is being taken in (then
    // nothing can be concluded: check the size). Two loads, no system call.
    uint64_t stamp() const;

    struct Ring;

private:
    SizeWatch() = default;
    Ring *ring_ = nullptr;  // null: unavailable
};

// Whether a shared-memory mapping may have lost pages since its last size check: the fast path
// of ShmMapping::check_size.
class SizeCheck {
public:
    explicit SizeCheck(int fd);
    ~SizeCheck();
    SizeCheck(const SizeCheck &) = delete;
    SizeCheck &operator=(const SizeCheck &) = delete;
    // True when nothing watched has changed since the last passed(): no need to ask.
    bool unchanged() const;
    // Call before asking for the size; after a size check that passed, give it to passed().
    uint64_t before() const;
    void passed(uint64_t before);

private:
    SizeWatch *watch_;
    uint32_t forks_;  // size_watch_forks when made: a forked child's copy checks every time
    int id_ = -1;
    uint64_t seen_ = 0;  // atomically accessed
    bool live() const;
};

// fork()s so far (counted in the child): a watch belongs to the process that made it.
extern std::atomic<uint32_t> size_watch_forks;

}  // namespace tenso
