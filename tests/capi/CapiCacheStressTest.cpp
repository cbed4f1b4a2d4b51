// CapiCacheStressTest - the cache under several processes: 4 processes x 100k mixed
// put/get/delete with every value verified on read, 4 threads sharing one handle, views held
// (and their bytes compared) across quiet hits while a writer rewrites their keys, and writers
// SIGKILLed while others carry on: half the rounds at a random moment, half caught holding the
// pool's lock (stopped, checked, then killed) so lock recovery runs on every run however the
// scheduler behaves; afterwards tenso_cache_check passes and every surviving entry verifies.
#include <cppunit/extensions/HelperMacros.h>

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CapiCacheUtil.hpp"

using namespace cache_test;

namespace {

constexpr uint32_t kKeys = 200;

// One worker's loop on handle `c`: mixed operations on shared keys; returns "" or the first
// problem.
std::string work_on(tenso_cache *c, uint32_t seed, uint64_t ops, uint32_t max_words) {
    std::mt19937 rng(seed);
    uint32_t version = seed << 20;
    for (uint64_t i = 0; i < ops; ++i) {
        const uint32_t k = rng() % kKeys;
        const std::string key = key_of(k);
        const uint32_t op = rng() % 10;
        if (op < 3) {
            Val v(k, ++version, 1 + rng() % max_words);
            tenso_status st = tenso_cache_put(nullptr, c, key.data(), key.size(), v.value.get(), nullptr, 0);
            if (st != TENSO_OK && st != TENSO_E_FULL) return "put: " + tenso_describe(st);
        } else if (op < 9) {
            tenso_view *v = nullptr;
            tenso_status st = tenso_cache_get(&v, c, key.data(), key.size(), nullptr);
            if (st == TENSO_OK) {
                std::string bad = verify(v, k);
                tenso_view_free(v);
                if (!bad.empty()) return "get " + key + ": " + bad;
            } else if (st != TENSO_E_NOT_FOUND) {
                return "get: " + tenso_describe(st);
            }
        } else {
            tenso_status st = tenso_cache_delete(c, key.data(), key.size());
            if (st != TENSO_OK && st != TENSO_E_NOT_FOUND) return "delete: " + tenso_describe(st);
        }
    }
    return "";
}

// The same on a handle of its own, as a separate process would.
std::string work(const std::string &name, uint32_t seed, uint64_t ops, uint32_t max_words) {
    tenso_cache *c = nullptr;
    if (tenso_cache_open(&c, name.c_str(), nullptr) != TENSO_OK) return std::string("open: ") + tenso_last_error();
    CachePtr cp(c);
    return work_on(c, seed, ops, max_words);
}

// A writer that spends nearly all its time inside the lock: values are built once, so each put
// is a plan and a 256 KiB copy under the lock. Runs until killed.
pid_t spawn_victim(const std::string &name, uint32_t seed) {
    pid_t pid = ::fork();
    if (pid == 0) {
        tenso_cache *c = nullptr;
        if (tenso_cache_open(&c, name.c_str(), nullptr) != TENSO_OK) ::_exit(1);
        std::vector<std::unique_ptr<Val>> vals;
        for (uint32_t k = 0; k < 8; ++k) vals.emplace_back(new Val(k, (seed << 20) + k, 65536 - 64 * k));
        for (uint64_t i = 0;; ++i) {
            const std::string key = key_of(uint32_t(i % 8));
            tenso_status st = tenso_cache_put(nullptr, c, key.data(), key.size(), vals[i % 8]->value.get(), nullptr, 0);
            if (st != TENSO_OK && st != TENSO_E_FULL) ::_exit(1);
        }
    }
    return pid;
}

pid_t spawn(const std::string &name, uint32_t seed, uint64_t ops, uint32_t max_words, int fd) {
    pid_t pid = ::fork();
    if (pid == 0) {
        std::string msg = work(name, seed, ops, max_words);
        if (!msg.empty() && ::write(fd, msg.data(), msg.size()) < 0) msg = "?";
        ::_exit(msg.empty() ? 0 : 1);
    }
    return pid;
}

// The tid holding the pool's robust mutex, 0 when free. glibc keeps it in __data.__owner; the
// victim is single-threaded, so its tid is its pid.
pid_t lock_owner(const RawPool &raw) {
    const auto *m = reinterpret_cast<const pthread_mutex_t *>(raw.p + kMutexOff);
    return __atomic_load_n(&m->__data.__owner, __ATOMIC_ACQUIRE);
}

// Stops the victim at random moments until it is caught inside the lock, then kills it there.
// False when it was never caught (it is killed anyway).
bool kill_holding_lock(pid_t victim, const RawPool &raw, std::mt19937 &rng) {
    for (int tries = 0; tries < 5000; ++tries) {
        struct timespec ts = {0, long(rng() % 500) * 1000};
        ::nanosleep(&ts, nullptr);
        ::kill(victim, SIGSTOP);
        int status = 0;
        ::waitpid(victim, &status, WUNTRACED);
        if (lock_owner(raw) == victim) {
            ::kill(victim, SIGKILL);
            return true;
        }
        ::kill(victim, SIGCONT);
    }
    ::kill(victim, SIGKILL);
    return false;
}

// Every live entry verifies, and the pool's invariants hold.
void verify_pool(tenso_cache *c) {
    TENSO_CHECK_OK(tenso_cache_check(c));
    std::vector<std::string> keys;
    TENSO_CHECK_OK(tenso_cache_keys(
        c,
        [](const char *k, size_t n, void *u) {
            static_cast<std::vector<std::string> *>(u)->emplace_back(k, n);
            return 0;
        },
        &keys));
    for (const std::string &key : keys) {
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_cache_get(&v, c, key.data(), key.size(), nullptr));
        std::string bad = verify(v, uint32_t(std::stoul(key.substr(4))));
        tenso_view_free(v);
        CPPUNIT_ASSERT_EQUAL_MESSAGE(key, std::string(), bad);
    }
}

// Readers that hold each view while writers rewrite, replace, delete and evict its key: a
// held view's bytes never change. Each reader gets its key several times running, so most
// gets take back the pin the last free parked and run without the lock (docs/cache-layout.md,
// "Spare pins"); threads of one process share the handle and so race for its one spare.
std::string read_and_hold(tenso_cache *c, uint32_t seed, uint64_t rounds) {
    std::mt19937 rng(seed);
    for (uint64_t r = 0; r < rounds; ++r) {
        const uint32_t k = rng() % 8;
        const std::string key = key_of(k);
        tenso_view *held = nullptr;
        tenso_status st = tenso_cache_get(&held, c, key.data(), key.size(), nullptr);
        if (st == TENSO_E_NOT_FOUND) continue;
        if (st != TENSO_OK) return "get: " + tenso_describe(st);
        hostile::ViewPtr hold(held);
        std::string bad = verify(held, k);
        if (!bad.empty()) return "get " + key + ": " + bad;
        const auto *bytes = static_cast<const uint8_t *>(tenso_view_data(held));
        const std::vector<uint8_t> seen(bytes, bytes + tenso_view_nbytes(held));
        for (int again = 0; again < 4; ++again) {  // the same key (quiet hits), then another one
            const std::string other = again < 3 ? key : key_of((k + 1) % 8);
            tenso_view *v = nullptr;
            st = tenso_cache_get(&v, c, other.data(), other.size(), nullptr);
            if (st == TENSO_OK) {
                bad = verify(v, uint32_t(std::stoul(other.substr(4))));
                tenso_view_free(v);
                if (!bad.empty()) return "get " + other + ": " + bad;
            } else if (st != TENSO_E_NOT_FOUND) {
                return "get: " + tenso_describe(st);
            }
            std::this_thread::yield();
        }
        if (std::memcmp(bytes, seen.data(), seen.size()) != 0)
            return "the bytes of a held view of " + key + " changed under it";
    }
    return "";
}

std::string drain(int fd) {
    std::string msg;
    char buf[512];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) msg.append(buf, size_t(n));
    return msg;
}

}  // namespace

class CapiCacheStressTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiCacheStressTest);
    CPPUNIT_TEST(testFourProcesses);
    CPPUNIT_TEST(testThreadsShareOneHandle);
    CPPUNIT_TEST(testKilledWriters);
    CPPUNIT_TEST(testHeldViewsAgainstWriters);
    CPPUNIT_TEST_SUITE_END();

public:
    void testFourProcesses() {
        Unlink u{pool_name("stress")};
        // Small enough that puts evict constantly, and 200 keys contend on 128 slots.
        tenso_cache_options o = options(2 << 20, 128);
        CachePtr c = create(u.name, o);
        int fds[2];
        CPPUNIT_ASSERT(::pipe(fds) == 0);
        std::vector<pid_t> pids;
        for (uint32_t p = 0; p < 4; ++p) pids.push_back(spawn(u.name, p + 1, 100000, 2048, fds[1]));
        ::close(fds[1]);
        std::string msg = drain(fds[0]);
        ::close(fds[0]);
        for (pid_t pid : pids) {
            int status = 0;
            ::waitpid(pid, &status, 0);
            CPPUNIT_ASSERT_MESSAGE(msg, WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
        verify_pool(c.get());
        tenso_cache_stats s = stats(c.get());
        CPPUNIT_ASSERT(s.hits > 10000 && s.evictions > 0);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), s.pinned_entries);
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s.clients);
    }

    // shm.h: "a handle may be used from several threads at once" - its pins included.
    void testThreadsShareOneHandle() {
        Unlink u{pool_name("threads")};
        CachePtr c = create(u.name, options(2 << 20, 128));
        std::vector<std::string> errors(4);
        std::vector<std::thread> threads;
        for (uint32_t t = 0; t < 4; ++t)
            threads.emplace_back([&, t] { errors[t] = work_on(c.get(), 50 + t, 20000, 2048); });
        for (std::thread &th : threads) th.join();
        for (const std::string &e : errors) CPPUNIT_ASSERT_MESSAGE(e, e.empty());
        verify_pool(c.get());
        tenso_cache_stats s = stats(c.get());
        CPPUNIT_ASSERT(s.hits > 1000 && s.evictions > 0);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), s.pinned_entries);
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s.clients);
    }

    // A writer process rewrites the readers' 8 keys in place (same sizes, new versions), with
    // new sizes (new copies), deletes them and evicts them (8 slots, filler keys), while two
    // reader processes of two threads each hold views across their own quiet hits.
    void testHeldViewsAgainstWriters() {
        Unlink u{pool_name("held")};
        CachePtr c = create(u.name, options(2 << 20, 8));
        for (uint32_t k = 0; k < 8; ++k) {
            Val v(k, 0, 200);
            TENSO_CHECK_OK(
                tenso_cache_put(nullptr, c.get(), key_of(k).data(), key_of(k).size(), v.value.get(), nullptr, 0));
        }
        struct Shared {
            std::atomic<int> stop{0};
            std::atomic<uint64_t> writes{0};  // the readers start once the writer runs
        };
        void *mem = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        CPPUNIT_ASSERT(mem != MAP_FAILED);
        Shared *shared = new (mem) Shared;
        int fds[2];
        CPPUNIT_ASSERT(::pipe(fds) == 0);
        const pid_t writer = ::fork();
        if (writer == 0) {
            std::string msg;
            tenso_cache *w = nullptr;
            if (tenso_cache_open(&w, u.name.c_str(), nullptr) != TENSO_OK) ::_exit(1);
            std::vector<std::unique_ptr<Val>> vals;  // per key: 4 versions of one size, 1 larger
            for (uint32_t k = 0; k < 8; ++k)
                for (uint32_t ver = 0; ver < 5; ++ver) vals.emplace_back(new Val(k, ver, ver < 4 ? 200 : 900));
            Val filler(100, 1, 300);
            std::mt19937 rng(7);
            while (msg.empty() && !shared->stop.load()) {
                const uint32_t k = rng() % 8, op = rng() % 16;
                const std::string key = key_of(k);
                tenso_status st = TENSO_OK;
                if (op < 12)
                    st = tenso_cache_put(nullptr, w, key.data(), key.size(), vals[k * 5 + rng() % 5]->value.get(),
                                         nullptr, 0);
                else if (op < 14) st = tenso_cache_delete(w, key.data(), key.size());
                else st = tenso_cache_put(nullptr, w, "key/100", 7, filler.value.get(), nullptr, 0);
                if (st != TENSO_OK && st != TENSO_E_NOT_FOUND && st != TENSO_E_FULL)
                    msg = "writer: " + tenso_describe(st);
                shared->writes.fetch_add(1);
            }
            tenso_cache_close(w);
            if (!msg.empty() && ::write(fds[1], msg.data(), msg.size()) < 0) msg = "?";
            ::_exit(msg.empty() ? 0 : 1);
        }
        std::vector<pid_t> readers;
        for (uint32_t p = 0; p < 2; ++p) {
            const pid_t pid = ::fork();
            if (pid == 0) {
                tenso_cache *rc = nullptr;
                if (tenso_cache_open(&rc, u.name.c_str(), nullptr) != TENSO_OK) ::_exit(1);
                while (!shared->writes.load()) std::this_thread::yield();
                std::string errors[2];
                std::thread t([&] { errors[1] = read_and_hold(rc, 20 + p, 1500); });
                errors[0] = read_and_hold(rc, 10 + p, 1500);
                t.join();
                tenso_cache_close(rc);
                std::string msg = errors[0] + errors[1];
                if (!msg.empty() && ::write(fds[1], msg.data(), msg.size()) < 0) msg = "?";
                ::_exit(msg.empty() ? 0 : 1);
            }
            readers.push_back(pid);
        }
        ::close(fds[1]);
        bool readers_ok = true;
        for (pid_t pid : readers) {
            int status = 0;
            ::waitpid(pid, &status, 0);
            readers_ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
        }
        const uint64_t writes = shared->writes.load();
        shared->stop.store(1);
        int status = 0;
        ::waitpid(writer, &status, 0);
        const std::string msg = drain(fds[0]);
        ::close(fds[0]);
        ::munmap(mem, sizeof(Shared));
        CPPUNIT_ASSERT_MESSAGE(msg, readers_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        CPPUNIT_ASSERT_MESSAGE(std::to_string(writes) + " writes while the readers ran", writes > 100);
        verify_pool(c.get());
        tenso_cache_stats s = stats(c.get());
        CPPUNIT_ASSERT(s.hits > 1000 && s.evictions > 0);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), s.pinned_entries);
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s.clients);
    }

    void testKilledWriters() {
        Unlink u{pool_name("kill")};
        tenso_cache_options o = options(4 << 20, 64);
        o.lock_timeout_ms = 5000;
        CachePtr c = create(u.name, o);
        RawPool raw(u.name);
        std::mt19937 rng{uint32_t(::getpid())};
        constexpr int kRounds = 12;
        int inside = 0;
        for (int round = 0; round < kRounds; ++round) {
            int fds[2];
            CPPUNIT_ASSERT(::pipe(fds) == 0);
            pid_t victim = spawn_victim(u.name, 100 + uint32_t(round));
            pid_t survivor = spawn(u.name, 200 + uint32_t(round), 3000, 4096, fds[1]);
            ::close(fds[1]);
            if (round % 2) {
                inside += kill_holding_lock(victim, raw, rng);
            } else {
                struct timespec ts = {0, long(1 + rng() % 20) * 1000000};
                ::nanosleep(&ts, nullptr);
                ::kill(victim, SIGKILL);
            }
            int status = 0;
            ::waitpid(victim, &status, 0);
            CPPUNIT_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
            ::waitpid(survivor, &status, 0);
            std::string msg = drain(fds[0]);
            ::close(fds[0]);
            CPPUNIT_ASSERT_MESSAGE("round " + std::to_string(round) + ": " + msg,
                                   WIFEXITED(status) && WEXITSTATUS(status) == 0);
            verify_pool(c.get());
        }
        // Each kill inside the lock is recovered exactly once by the next locker; random kills
        // may add more.
        tenso_cache_stats s = stats(c.get());
        CPPUNIT_ASSERT_EQUAL_MESSAGE("victims caught holding the lock", kRounds / 2, inside);
        CPPUNIT_ASSERT(s.recoveries >= uint64_t(inside));
        std::printf("[%d kill rounds, %llu recoveries] ", kRounds, (unsigned long long)s.recoveries);
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiCacheStressTest);
