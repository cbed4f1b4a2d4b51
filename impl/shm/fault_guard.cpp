// fault_guard.cpp - the SIGBUS handler behind fault_guard.hpp.
//
// The handler may run on any thread at any time, so everything it reads is lock-free: a fixed
// table of slots, each published under a sequence counter (odd while a slot is rewritten), and
// the previous disposition, saved before ours was installed. It calls nothing but mmap,
// sigaction and raise (system calls, safe in a handler).
#include "shm/fault_guard.hpp"

#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace tenso::fault_guard {

namespace {

// A process with more shared mappings than this checks the rest with a system call.
constexpr int kSlots = 1024;

struct Slot {
    std::atomic<uint32_t> owned{0};  // taken by watch(), given back by unwatch()
    std::atomic<uint32_t> seq{0};    // odd while base/len/prot change
    std::atomic<uintptr_t> base{0};
    std::atomic<size_t> len{0};  // 0: not guarding anything
    std::atomic<int> prot{0};
    std::atomic<uint32_t> tripped{0};
};

Slot g_slots[kSlots];
struct sigaction g_prev;  // written once, before our handler can run
uintptr_t g_page = 4096;  // likewise
std::atomic<bool> g_installed{false};
std::mutex g_install_mu;

void publish(Slot &s, uintptr_t base, size_t len, int prot) {
    const uint32_t q = s.seq.load(std::memory_order_relaxed);
    s.seq.store(q + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s.base.store(base, std::memory_order_relaxed);
    s.len.store(len, std::memory_order_relaxed);
    s.prot.store(prot, std::memory_order_relaxed);
    s.seq.store(q + 2, std::memory_order_release);
}

// Replaces the lost tail of the guarded mapping that holds `addr`. False when no guarded
// mapping holds it (or the replacement failed): the fault is someone else's.
bool absorb(uintptr_t addr) {
    for (Slot &s : g_slots) {
        const uint32_t q = s.seq.load(std::memory_order_acquire);
        if (q & 1) continue;
        const uintptr_t base = s.base.load(std::memory_order_relaxed);
        const size_t len = s.len.load(std::memory_order_relaxed);
        const int prot = s.prot.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (s.seq.load(std::memory_order_relaxed) != q) continue;  // rewritten while read
        if (!len || addr < base || addr - base >= len) continue;
        // Truncation takes every page from the new end on, so all of them go. Private zero
        // pages in their place: the faulting access is retried and reads (or writes) zeros.
        const uintptr_t from = addr & ~(g_page - 1);
        const size_t span = size_t(base + len - from);
        if (::mmap(reinterpret_cast<void *>(from), span, prot, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0) == MAP_FAILED)
            return false;
        s.tripped.store(1, std::memory_order_release);
        return true;
    }
    return false;
}

// What the process would have done without us.
void chain(int sig, siginfo_t *info, void *ctx) {
    if (g_prev.sa_flags & SA_SIGINFO) {
        g_prev.sa_sigaction(sig, info, ctx);
        return;
    }
    const bool sent = !info || info->si_code <= 0;  // kill(), tgkill(), sigqueue(): not a fault
    if (g_prev.sa_handler == SIG_IGN && sent) return;
    if (g_prev.sa_handler == SIG_DFL || g_prev.sa_handler == SIG_IGN) {
        // A fault cannot be ignored: with the default back, returning retries the access and
        // the kernel ends the process as it would have (a core names the right address).
        struct sigaction dfl = {};
        dfl.sa_handler = SIG_DFL;
        ::sigaction(sig, &dfl, nullptr);
        if (sent) ::raise(sig);  // blocked until we return, then fatal
        return;
    }
    g_prev.sa_handler(sig);
}

void on_sigbus(int sig, siginfo_t *info, void *ctx) {
    const int saved = errno;
    const bool ours = info && info->si_code == BUS_ADRERR && absorb(reinterpret_cast<uintptr_t>(info->si_addr));
    errno = saved;
    if (!ours) chain(sig, info, ctx);
}

bool install() {
    if (g_installed.load(std::memory_order_acquire)) return true;
    std::lock_guard<std::mutex> lock(g_install_mu);
    if (g_installed.load(std::memory_order_relaxed)) return true;
    g_page = uintptr_t(::sysconf(_SC_PAGESIZE));
    struct sigaction sa = {};
    sa.sa_sigaction = on_sigbus;
    sigemptyset(&sa.sa_mask);
    // SA_ONSTACK: the Go runtime requires it of every handler in a process it runs in.
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    if (::sigaction(SIGBUS, &sa, &g_prev) != 0) return false;
    g_installed.store(true, std::memory_order_release);
    return true;
}

}  // namespace

int watch(uint8_t *addr, size_t len, bool writable) noexcept {
    if (!len || !install()) return -1;
    // A handler installed after ours (Python's faulthandler.enable(), or its disable(), which
    // puts back the default) leaves this mapping unprotected: it falls back to lseek.
    struct sigaction cur;
    if (::sigaction(SIGBUS, nullptr, &cur) != 0 || !(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_sigbus)
        return -1;
    for (int i = 0; i < kSlots; ++i) {
        uint32_t free = 0;
        if (!g_slots[i].owned.compare_exchange_strong(free, 1, std::memory_order_acquire)) continue;
        g_slots[i].tripped.store(0, std::memory_order_relaxed);
        publish(g_slots[i], reinterpret_cast<uintptr_t>(addr), len, PROT_READ | (writable ? PROT_WRITE : 0));
        return i;
    }
    return -1;
}

void unwatch(int slot) noexcept {
    if (slot < 0 || slot >= kSlots) return;
    publish(g_slots[slot], 0, 0, 0);
    g_slots[slot].owned.store(0, std::memory_order_release);
}

const std::atomic<uint32_t> *tripped_flag(int slot) noexcept {
    return slot >= 0 && slot < kSlots ? &g_slots[slot].tripped : nullptr;
}

}  // namespace tenso::fault_guard
