// fault_guard.cpp - the SIGBUS handler behind fault_guard.hpp.
//
// The handler may run on any thread at any time, so everything it reads is lock-free: a fixed
// table of slots, each published under a sequence counter (odd while a slot is rewritten), and
// the previous disposition, saved before ours was installed. It calls nothing but mmap,
// sigaction, pthread_sigmask and raise (system calls, safe in a handler).
#include "shm/fault_guard.hpp"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>

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
    std::atomic<uint32_t> busy{0};  // handlers between reading the slot and their mmap
};

Slot g_slots[kSlots];
struct sigaction g_prev;  // written before our handler is installed, never after
uintptr_t g_page = 4096;  // likewise
// 0: not installed; a pid: that process is installing it; kInstalled. No mutex: a fork() while
// another thread installs would leave the child's copy locked for good.
constexpr pid_t kInstalled = -1;
std::atomic<pid_t> g_state{0};

// Odd from the current value, not from +1: a fork() that copied a slot mid-publish leaves it
// odd in the child, and the child's next publish must still end even.
void publish(Slot &s, uintptr_t base, size_t len, int prot) {
    const uint32_t odd = s.seq.load(std::memory_order_relaxed) | 1;
    s.seq.store(odd, std::memory_order_seq_cst);
    s.base.store(base, std::memory_order_seq_cst);
    s.len.store(len, std::memory_order_seq_cst);
    s.prot.store(prot, std::memory_order_seq_cst);
    s.seq.store(odd + 1, std::memory_order_seq_cst);
}

// Replaces the lost tail of the guarded mapping that holds `addr`. False when no guarded
// mapping holds it (or the replacement failed): the fault is someone else's.
bool absorb(uintptr_t addr) {
    for (Slot &s : g_slots) {
        if (!s.len.load(std::memory_order_relaxed)) continue;
        // Counted as busy before the slot is read: unwatch() waits for it, so the mapping
        // cannot be unmapped (and the range reused by someone else) before our mmap is done.
        s.busy.fetch_add(1, std::memory_order_seq_cst);
        const uint32_t q = s.seq.load(std::memory_order_seq_cst);
        const uintptr_t base = s.base.load(std::memory_order_seq_cst);
        const size_t len = s.len.load(std::memory_order_seq_cst);
        const int prot = s.prot.load(std::memory_order_seq_cst);
        const bool held =
            !(q & 1) && s.seq.load(std::memory_order_seq_cst) == q && len && addr >= base && addr - base < len;
        bool done = false;
        if (held) {
            // Flagged first: a thread that sees the zeros must also see the flag.
            s.tripped.store(1, std::memory_order_seq_cst);
            // Truncation takes every page from the new end on, so all of them go. Private
            // zero pages in their place: the faulting access is retried and reads zeros.
            const uintptr_t from = addr & ~(g_page - 1);
            done = ::mmap(reinterpret_cast<void *>(from), size_t(base + len - from), prot,
                          MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) != MAP_FAILED;
        }
        s.busy.fetch_sub(1, std::memory_order_seq_cst);
        if (held) return done;
    }
    return false;
}

// Calls the previous handler with the signal mask it asked for: the interrupted code's mask,
// its sa_mask, and the signal itself unless SA_NODEFER (ours blocks everything).
template <class Call>
void with_prev_mask(int sig, void *ctx, Call call) {
    sigset_t want, old;
    if (ctx) want = static_cast<ucontext_t *>(ctx)->uc_sigmask;
    else sigemptyset(&want);
    sigorset(&want, &want, &g_prev.sa_mask);
    if (!(g_prev.sa_flags & SA_NODEFER)) sigaddset(&want, sig);
    ::pthread_sigmask(SIG_SETMASK, &want, &old);
    call();
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// What the process would have done without us.
void chain(int sig, siginfo_t *info, void *ctx) {
    if (g_prev.sa_flags & SA_SIGINFO) {
        with_prev_mask(sig, ctx, [&] { g_prev.sa_sigaction(sig, info, ctx); });
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
    with_prev_mask(sig, ctx, [&] { g_prev.sa_handler(sig); });
}

void on_sigbus(int sig, siginfo_t *info, void *ctx) {
    const int saved = errno;
    const bool ours = info && info->si_code == BUS_ADRERR && absorb(reinterpret_cast<uintptr_t>(info->si_addr));
    errno = saved;
    if (!ours) chain(sig, info, ctx);
}

bool is_ours(const struct sigaction &sa) { return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == on_sigbus; }

bool install() {
    for (;;) {
        pid_t state = g_state.load(std::memory_order_acquire);
        if (state == kInstalled) return true;
        const pid_t me = ::getpid();
        if (state == me) {  // another thread of this process is installing it
            ::sched_yield();
            continue;
        }
        // Nobody, or a parent whose install a fork() interrupted: this process does it.
        if (g_state.compare_exchange_strong(state, me, std::memory_order_acq_rel)) break;
    }
    // The previous disposition is saved before ours can run. If ours is there already (the
    // parent installed it and forked before marking it so), g_prev was saved then.
    struct sigaction cur;
    if (::sigaction(SIGBUS, nullptr, &cur) != 0) {
        g_state.store(0, std::memory_order_release);
        return false;
    }
    if (!is_ours(cur)) g_prev = cur;
    g_page = uintptr_t(::sysconf(_SC_PAGESIZE));
    struct sigaction sa = {};
    sa.sa_sigaction = on_sigbus;
    sigfillset(&sa.sa_mask);  // nothing interrupts the handler; chain() restores what prev asked
    // SA_ONSTACK: the Go runtime requires it of every handler in a process it runs in.
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    if (::sigaction(SIGBUS, &sa, nullptr) != 0) {
        g_state.store(0, std::memory_order_release);
        return false;
    }
    g_state.store(kInstalled, std::memory_order_release);
    return true;
}

}  // namespace

int watch(uint8_t *addr, size_t len, bool writable) noexcept {
    if (!len || !install()) return -1;
    // A handler installed after ours (Python's faulthandler.enable(), or its disable(), which
    // puts back the default) leaves this mapping unprotected: it falls back to lseek.
    struct sigaction cur;
    if (::sigaction(SIGBUS, nullptr, &cur) != 0 || !is_ours(cur)) return -1;
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
    Slot &s = g_slots[slot];
    publish(s, 0, 0, 0);
    // A handler that read the slot before it was cleared may still be replacing pages: the
    // caller unmaps the range next, and another mapping could take it.
    while (s.busy.load(std::memory_order_seq_cst) != 0) ::sched_yield();
    s.owned.store(0, std::memory_order_release);
}

const std::atomic<uint32_t> *tripped_flag(int slot) noexcept {
    return slot >= 0 && slot < kSlots ? &g_slots[slot].tripped : nullptr;
}

}  // namespace tenso::fault_guard
