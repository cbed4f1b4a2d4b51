// CapiTrustTest - what other users and other processes can do to files and shared memory
// (issue 12, items 3, 5, 6, 7 and the kill-mid-save test): saves keep the replaced file's
// permission bits and group (not its owner, set-id bits or a symlink's target), work without
// /proc, and cannot be blocked by planted names; a writer SIGKILLed mid-save leaves the old
// file and no temporary; truncating a mapped archive, safetensors file, segment or pool gives
// TENSO_E_TRUNCATED instead of SIGBUS; another uid's segment or pool is refused without
// TENSO_SHM_ANY_OWNER; "." and ".." are invalid names.
#include <cppunit/extensions/HelperMacros.h>

#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "CapiArchiveUtil.hpp"
#include "CapiCacheUtil.hpp"
#include "check.hpp"
#include "hostile_util.hpp"
#include "isolated.hpp"
#include "tenso/tenso.h"

using namespace hostile;

namespace {

constexpr uid_t kNobody = 65534;

std::string shm_tag(const char *tag) { return "tenso-test-trust-" + std::to_string(::getpid()) + "-" + tag; }

mode_t mode_of(const std::string &path) {
    struct stat st;
    CPPUNIT_ASSERT_MESSAGE(path, ::stat(path.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

ValuePtr value_of(const tenso_tensor &t) {
    tenso_value *v = nullptr;
    TENSO_CHECK_OK(tenso_value_new_tensor(&v, &t));
    return ValuePtr(v);
}

// The three ways a file is written: a packet, a tenso archive, a safetensors file.
enum class Writer { kSaveFile, kArchive, kSafetensors };
const char *writer_name(Writer w) {
    return w == Writer::kSaveFile ? "tenso_save_file" : w == Writer::kArchive ? "archive writer" : "safetensors writer";
}
std::string file_for(const std::string &dir, Writer w) {
    return dir + (w == Writer::kSaveFile ? "/t.tenso" : w == Writer::kArchive ? "/a.tenso" : "/s.safetensors");
}
tenso_status write_with(Writer w, const std::string &path, const tenso_tensor &t) {
    if (w == Writer::kSaveFile) return tenso_save_file(path.c_str(), &t, nullptr);
    tenso_archive_writer *raw = nullptr;
    auto o = arch::write_opts(w == Writer::kArchive ? TENSO_FORMAT_ARCHIVE : TENSO_FORMAT_SAFETENSORS);
    if (tenso_status st = tenso_archive_writer_open(&raw, path.c_str(), &o)) return st;
    arch::WriterPtr wr(raw);
    ValuePtr v = value_of(t);
    if (tenso_status st = tenso_archive_writer_add(wr.get(), "x", 1, v.get())) return st;
    return tenso_archive_writer_finish(wr.get());
}
const Writer kWriters[] = {Writer::kSaveFile, Writer::kArchive, Writer::kSafetensors};

bool is_root() { return ::geteuid() == 0; }

// Drops CAP_DAC_READ_SEARCH from the effective set: without it, as without /proc, an
// O_TMPFILE cannot be named (linkat AT_EMPTY_PATH needs it). For run_isolated bodies.
void drop_dac_read_search() {
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2] = {};
    CPPUNIT_ASSERT(::syscall(SYS_capget, &h, d) == 0);
    d[CAP_DAC_READ_SEARCH / 32].effective &= ~(1u << (CAP_DAC_READ_SEARCH % 32));
    CPPUNIT_ASSERT(::syscall(SYS_capset, &h, d) == 0);
}

// Drops to uid/gid 65534 in a forked child (for run_isolated bodies).
void become_nobody() {
    CPPUNIT_ASSERT(::setresgid(kNobody, kNobody, kNobody) == 0);
    CPPUNIT_ASSERT(::setresuid(kNobody, kNobody, kNobody) == 0);
}

void chmod_shm(const std::string &name, mode_t mode) {
    int fd = ::shm_open(("/" + name).c_str(), O_RDWR, 0);
    CPPUNIT_ASSERT(fd >= 0);
    CPPUNIT_ASSERT(::fchmod(fd, mode) == 0);
    ::close(fd);
}

// testForeignSigbusChained's handler, installed before libtenso's.
sigjmp_buf g_user_jump;
volatile sig_atomic_t g_user_faults = 0;
volatile sig_atomic_t g_user_mask_ok = 0;  // its sa_mask blocked, nothing else
void on_user_sigbus(int) {
    sigset_t now;
    ::pthread_sigmask(SIG_BLOCK, nullptr, &now);
    g_user_mask_ok = sigismember(&now, SIGUSR2) == 1 && sigismember(&now, SIGUSR1) == 0;
    ++g_user_faults;
    siglongjmp(g_user_jump, 1);
}

void truncate_shm(const std::string &name, off_t size) {
    int fd = ::shm_open(("/" + name).c_str(), O_RDWR, 0);
    CPPUNIT_ASSERT(fd >= 0);
    CPPUNIT_ASSERT(::ftruncate(fd, size) == 0);
    ::close(fd);
}

// A segment holding a 10-byte tensor and an empty pool, made by whoever calls make(), both
// unlinked at scope exit.
struct Objects {
    std::string seg, pool;
    void make() const {
        tenso_shm *s = nullptr;
        TENSO_CHECK_OK(tenso_shm_create(&s, seg.c_str(), 4096, TENSO_SHM_REPLACE));
        OwnedTensor t(TENSO_DTYPE_UINT8, {10}, 8);
        ValuePtr v = value_of(t.t);
        TENSO_CHECK_OK(tenso_shm_put(nullptr, s, v.get(), nullptr));
        tenso_shm_close(s);
        tenso_cache *c = nullptr;
        auto o = cache_test::options(1 << 20, 0, TENSO_SHM_REPLACE);
        TENSO_CHECK_OK(tenso_cache_create(&c, pool.c_str(), &o));
        tenso_cache_close(c);
    }
    ~Objects() {
        tenso_shm_unlink(seg.c_str());
        tenso_cache_unlink(pool.c_str());
    }
};

// The SIGXFSZ handler of a child writing past RLIMIT_FSIZE: tell the parent, then wait to be
// killed, inside the write.
int g_stopped_fd = -1;
extern "C" void on_xfsz(int) {
    char c = 1;
    if (::write(g_stopped_fd, &c, 1) < 0) ::_exit(3);
    for (;;) ::pause();
}

// Forks a writer of `t` to `path` that stops inside the write: RLIMIT_FSIZE makes the kernel
// raise SIGXFSZ there, and its handler waits. *got: it did stop there (else it exited).
pid_t stopped_mid_save(Writer w, const std::string &path, const tenso_tensor &t, bool *got) {
    int fds[2];
    CPPUNIT_ASSERT_EQUAL(0, ::pipe(fds));
    pid_t pid = ::fork();
    CPPUNIT_ASSERT(pid >= 0);
    if (pid == 0) {
        ::close(fds[0]);
        g_stopped_fd = fds[1];
        ::signal(SIGXFSZ, on_xfsz);
        struct rlimit rl = {1u << 20, 1u << 20};
        if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) ::_exit(4);
        write_with(w, path, t);
        ::_exit(5);  // the write finished: the caller reports it
    }
    ::close(fds[1]);
    char c = 0;
    *got = ::read(fds[0], &c, 1) == 1;
    ::close(fds[0]);
    return pid;
}

// Its wait status.
int kill_and_reap(pid_t pid) {
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
}

}  // namespace

class CapiTrustTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiTrustTest);
    CPPUNIT_TEST(testSavesKeepTheMode);
    CPPUNIT_TEST(testSavesKeepTheOwner);
    CPPUNIT_TEST(testSavesCopyNoSetIdBits);
    CPPUNIT_TEST(testSavesReplaceSymlinks);
    CPPUNIT_TEST(testSavesWithoutProc);
    CPPUNIT_TEST(testPlantedTempNames);
    CPPUNIT_TEST(testKilledMidSave);
    CPPUNIT_TEST(testTruncatedFiles);
    CPPUNIT_TEST(testTruncatedSegment);
    CPPUNIT_TEST(testTruncatedPool);
    CPPUNIT_TEST(testFullDevShm);
    CPPUNIT_TEST(testSubPageShrinkOfPool);
    CPPUNIT_TEST(testPutIntoLostPages);
    CPPUNIT_TEST(testViewsOfTruncatedObjects);
    CPPUNIT_TEST(testForeignSigbusChained);
    CPPUNIT_TEST(testUnguardedMappings);
    CPPUNIT_TEST(testReplacedHandler);
    CPPUNIT_TEST(testOtherUsersObjects);
    CPPUNIT_TEST(testOwnObjectsAsAnotherUid);
    CPPUNIT_TEST(testDotNames);
    CPPUNIT_TEST(testOpenFlags);
    CPPUNIT_TEST(testForeignEmptyPoolRefusedAtOnce);
    CPPUNIT_TEST_SUITE_END();

    std::string dir_;

public:
    void setUp() override { dir_ = make_scratch("CapiTrustTest"); }
    void tearDown() override { remove_dir(dir_); }

    // Replacing a 0600 (or 0640) file keeps its mode; a new file is 0600 whatever the umask.
    void testSavesKeepTheMode() {
        OwnedTensor t(TENSO_DTYPE_FLOAT32, {16}, 1);
        const mode_t old_mask = ::umask(022);
        for (Writer w : kWriters) {
            const std::string path = file_for(dir_, w), what = writer_name(w);
            TENSO_CHECK_OK(write_with(w, path, t.t));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(what + ": new file", mode_t(0600), mode_of(path));
            for (mode_t m : {mode_t(0600), mode_t(0640), mode_t(0604)}) {
                CPPUNIT_ASSERT_EQUAL(0, ::chmod(path.c_str(), m));
                TENSO_CHECK_OK(write_with(w, path, t.t));
                CPPUNIT_ASSERT_EQUAL_MESSAGE(what + ": replaced file", m, mode_of(path));
            }
        }
        ::umask(old_mask);
    }

    // Root replacing another user's file keeps its group but not its owner: a file planted by
    // someone else must not make our output theirs.
    void testSavesKeepTheOwner() {
        if (!is_root()) {
            std::printf("\n  CapiTrustTest: not root, owner case skipped");
            return;
        }
        OwnedTensor t(TENSO_DTYPE_UINT8, {100}, 2);
        for (Writer w : kWriters) {
            const std::string path = file_for(dir_, w);
            TENSO_CHECK_OK(write_with(w, path, t.t));
            CPPUNIT_ASSERT_EQUAL(0, ::chown(path.c_str(), kNobody, kNobody));
            CPPUNIT_ASSERT_EQUAL(0, ::chmod(path.c_str(), 0666));
            TENSO_CHECK_OK(write_with(w, path, t.t));
            struct stat st;
            CPPUNIT_ASSERT_EQUAL(0, ::stat(path.c_str(), &st));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(writer_name(w), ::geteuid(), st.st_uid);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(writer_name(w), gid_t(kNobody), st.st_gid);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(writer_name(w), mode_t(0666), st.st_mode & 07777);
        }
    }

    // Set-id and sticky bits of the replaced file are not copied, the permission bits are.
    void testSavesCopyNoSetIdBits() {
        OwnedTensor t(TENSO_DTYPE_UINT8, {10}, 2);
        for (Writer w : kWriters) {
            const std::string path = file_for(dir_, w);
            TENSO_CHECK_OK(write_with(w, path, t.t));
            CPPUNIT_ASSERT_EQUAL(0, ::chmod(path.c_str(), 06750));
            TENSO_CHECK_OK(write_with(w, path, t.t));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(writer_name(w), mode_t(0750), mode_of(path));
        }
    }

    // A symlink at the target is replaced by a new 0600 file; what it points to is untouched.
    void testSavesReplaceSymlinks() {
        OwnedTensor t(TENSO_DTYPE_UINT8, {10}, 2);
        const std::string victim = dir_ + "/victim";
        for (Writer w : kWriters) {
            const std::string path = file_for(dir_, w);
            spit(victim, "old", 3);
            CPPUNIT_ASSERT_EQUAL(0, ::chmod(victim.c_str(), 0666));
            CPPUNIT_ASSERT_EQUAL(0, ::symlink(victim.c_str(), path.c_str()));
            TENSO_CHECK_OK(write_with(w, path, t.t));
            struct stat st;
            CPPUNIT_ASSERT_EQUAL(0, ::lstat(path.c_str(), &st));
            CPPUNIT_ASSERT_MESSAGE(writer_name(w), S_ISREG(st.st_mode));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(writer_name(w), mode_t(0600), st.st_mode & 07777);
            CPPUNIT_ASSERT_MESSAGE(writer_name(w), slurp(victim) == Bytes({'o', 'l', 'd'}));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(writer_name(w), mode_t(0666), mode_of(victim));
            ::unlink(path.c_str());
        }
    }

    // With no /proc (a tmpfs over it, in a private mount namespace) and no CAP_DAC_READ_SEARCH
    // an O_TMPFILE could not be named at commit: saves fall back to a named temporary and
    // succeed (they used to fail after writing the whole file).
    void testSavesWithoutProc() {
        std::string msg = run_isolated([&] {
            if (::unshare(CLONE_NEWNS) != 0 || ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
                ::mount("tenso-noproc", "/proc", "tmpfs", 0, nullptr) != 0) {
                std::printf("\n  CapiTrustTest: no mount namespace (%s), no-/proc case skipped", std::strerror(errno));
                return;
            }
            CPPUNIT_ASSERT(::access("/proc/self/fd", F_OK) != 0);
            drop_dac_read_search();
            OwnedTensor t(TENSO_DTYPE_UINT8, {10}, 2), big(TENSO_DTYPE_UINT8, {4u << 20}, 5);
            for (Writer w : kWriters) {
                const std::string path = file_for(dir_, w), what = writer_name(w);
                // The temporary has its `<path>.tmp.<hex>` name while it is written (with an
                // O_TMPFILE it would have none, and could get none at commit on kernels
                // before 6.10, which require CAP_DAC_READ_SEARCH for linkat AT_EMPTY_PATH).
                bool got = false;
                const pid_t pid = stopped_mid_save(w, path, big.t, &got);
                std::vector<std::string> named;
                for (const std::string &n : list_dir(dir_))
                    if (n.find(path.substr(dir_.size() + 1) + ".tmp.") == 0) named.push_back(n);
                kill_and_reap(pid);
                CPPUNIT_ASSERT_MESSAGE(what + ": the child never reached the file size limit", got);
                CPPUNIT_ASSERT_EQUAL_MESSAGE(what + ": named temporaries while writing", size_t(1), named.size());
                ::unlink((dir_ + "/" + named[0]).c_str());  // what a killed writer leaves here
                TENSO_CHECK_OK(write_with(w, path, t.t));
                arch::ArchivePtr a = arch::open_ok(path);
                CPPUNIT_ASSERT_EQUAL(uint64_t(1), tenso_archive_count(a.get()));
            }
            CPPUNIT_ASSERT_EQUAL(size_t(3), list_dir(dir_).size());  // no temporary left
        });
        CPPUNIT_ASSERT_MESSAGE(msg, msg.empty());
    }

    // Files planted at the names a pid-and-counter scheme would use do not make saves fail.
    void testPlantedTempNames() {
        OwnedTensor t(TENSO_DTYPE_INT32, {8}, 3);
        for (Writer w : kWriters) {
            const std::string path = file_for(dir_, w);
            for (int n = 0; n < 4096; ++n) {
                const std::string p = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(n);
                spit(p, "x", 1);
            }
            TENSO_CHECK_OK(write_with(w, path, t.t));
            arch::ArchivePtr a = arch::open_ok(path);
            CPPUNIT_ASSERT_EQUAL(uint64_t(1), tenso_archive_count(a.get()));
            for (const std::string &n : list_dir(dir_))
                if (n.find(".tmp.") != std::string::npos) ::unlink((dir_ + "/" + n).c_str());
        }
    }

    // A writer SIGKILLed in the middle of writing: the old file keeps its bytes and mode, and
    // nothing else is left in the directory. The child stops deterministically inside the
    // write: RLIMIT_FSIZE makes the kernel raise SIGXFSZ there, and its handler waits.
    void testKilledMidSave() {
        OwnedTensor small(TENSO_DTYPE_UINT8, {100}, 4), big(TENSO_DTYPE_UINT8, {4u << 20}, 5);
        for (Writer w : kWriters) {
            const std::string path = file_for(dir_, w), what = writer_name(w);
            TENSO_CHECK_OK(write_with(w, path, small.t));
            CPPUNIT_ASSERT_EQUAL(0, ::chmod(path.c_str(), 0640));
            const Bytes old = slurp(path);
            bool got = false;
            const pid_t pid = stopped_mid_save(w, path, big.t, &got);
            // Inside the save: the child holds a file in our directory open, already with the
            // target's mode and owner (a spooling writer's 0600 scratch file sits beside it).
            bool writing = false, same_mode = false;
            const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
            struct stat target_st;
            CPPUNIT_ASSERT_EQUAL(0, ::stat(path.c_str(), &target_st));
            for (const std::string &n : list_dir(fd_dir)) {
                char target[4096];
                ssize_t len = ::readlink((fd_dir + "/" + n).c_str(), target, sizeof target - 1);
                if (len <= 0 || std::string(target, size_t(len)).find(dir_ + "/") != 0) continue;
                writing = true;
                struct stat st;
                if (::stat((fd_dir + "/" + n).c_str(), &st) == 0 && st.st_ino != target_st.st_ino)
                    same_mode |=
                        (st.st_mode & 07777) == 0640 && st.st_uid == target_st.st_uid && st.st_gid == target_st.st_gid;
            }
            const int status = kill_and_reap(pid);
            CPPUNIT_ASSERT_MESSAGE(what + ": the child never reached the file size limit", got);
            CPPUNIT_ASSERT_MESSAGE(what + ": the child had no file of the directory open", writing);
            CPPUNIT_ASSERT_MESSAGE(what + ": the temporary lacks the target's mode or owner while written", same_mode);
            CPPUNIT_ASSERT_MESSAGE(what + ": killed by something else",
                                   WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
            CPPUNIT_ASSERT_MESSAGE(what + ": the old file changed", slurp(path) == old);
            const std::vector<std::string> left = list_dir(dir_);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(
                what + ": something was left behind (" + (left.empty() ? "" : left.back()) + ")", size_t(1),
                left.size());
            ::unlink(path.c_str());
        }
    }

    // A tenso archive or safetensors file truncated while it is open and mapped.
    void testTruncatedFiles() {
        std::string msg = run_isolated([&] {
            OwnedTensor t(TENSO_DTYPE_FLOAT32, {256, 1024}, 6);
            for (Writer w : {Writer::kArchive, Writer::kSafetensors}) {
                const std::string path = file_for(dir_, w), what = writer_name(w);
                TENSO_CHECK_OK(write_with(w, path, t.t));
                arch::ArchivePtr a = arch::open_ok(path);
                CPPUNIT_ASSERT_EQUAL(0, ::truncate(path.c_str(), 4096));
                uint64_t idx = 0;
                tenso_view *v = nullptr;
                if (w == Writer::kArchive) {
                    TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_archive_find(&idx, a.get(), "x", 1));
                    uint64_t bad = 99;
                    TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_archive_verify(&bad, a.get(), nullptr, nullptr));
                    CPPUNIT_ASSERT_EQUAL_MESSAGE(what, uint64_t(0), bad);
                } else {
                    TENSO_CHECK_OK(tenso_archive_find(&idx, a.get(), "x", 1));
                }
                TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_archive_get(&v, a.get(), 0, nullptr));
                CPPUNIT_ASSERT(v == nullptr);
            }
            // A tenso archive's metadata, a packet file's bundle keys: both in the mapping.
            const std::string meta = dir_ + "/meta.tenso", bundle = dir_ + "/bundle.tenso";
            {
                tenso_archive_writer *raw = nullptr;
                auto o = arch::write_opts(TENSO_FORMAT_ARCHIVE);
                TENSO_CHECK_OK(tenso_archive_writer_open(&raw, meta.c_str(), &o));
                arch::WriterPtr wr(raw);
                TENSO_CHECK_OK(tenso_archive_writer_set_metadata(wr.get(), "k", 1, "v", 1));
                arch::add_tensor(wr.get(), "x", t.t);
                TENSO_CHECK_OK(tenso_archive_writer_finish(wr.get()));
            }
            arch::ArchivePtr m = arch::open_ok(meta);
            CPPUNIT_ASSERT_EQUAL(0, ::truncate(meta.c_str(), 4096));
            const char *val = nullptr;
            size_t vlen = 0;
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_archive_metadata_find(&val, &vlen, m.get(), "k", 1));
            tenso_value *b = nullptr;
            TENSO_CHECK_OK(tenso_value_new_bundle(&b));
            ValuePtr hb(b);
            ValuePtr x = value_of(t.t);
            TENSO_CHECK_OK(tenso_bundle_insert(b, "x", 1, x.get()));
            TENSO_CHECK_OK(tenso_value_save_file(bundle.c_str(), b, nullptr));
            arch::ArchivePtr p = arch::open_ok(bundle);
            CPPUNIT_ASSERT_EQUAL(0, ::truncate(bundle.c_str(), 0));
            uint64_t idx = 0;
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_archive_find(&idx, p.get(), "x", 1));
        });
        CPPUNIT_ASSERT_MESSAGE(msg, msg.empty());
    }

    void testTruncatedSegment() {
        std::string msg = run_isolated([&] {
            const std::string name = shm_tag("seg-trunc");
            struct Gone {
                std::string n;
                ~Gone() { tenso_shm_unlink(n.c_str()); }
            } gone{name};
            tenso_shm *raw = nullptr;
            TENSO_CHECK_OK(tenso_shm_create(&raw, name.c_str(), 1 << 20, TENSO_SHM_REPLACE));
            std::unique_ptr<tenso_shm, void (*)(tenso_shm *)> s(raw, tenso_shm_close);
            OwnedTensor t(TENSO_DTYPE_FLOAT32, {1000}, 7);
            ValuePtr v = value_of(t.t);
            TENSO_CHECK_OK(tenso_shm_put(nullptr, s.get(), v.get(), nullptr));
            truncate_shm(name, 0);
            tenso_view *out = nullptr;
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_shm_get(&out, s.get(), nullptr));
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_shm_put(nullptr, s.get(), v.get(), nullptr));
        });
        CPPUNIT_ASSERT_MESSAGE(msg, msg.empty());
    }

    // A segment bigger than /dev/shm has room for (a 4 MiB tmpfs over it, in a private mount
    // namespace): ftruncate reserves nothing, the pages past the room fault as they are
    // written, and create_for used to report success with them lost. Now TRUNCATED, naming
    // /dev/shm, and no object is left under the name.
    void testFullDevShm() {
        std::string msg = run_isolated([&] {
            if (::unshare(CLONE_NEWNS) != 0 || ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
                ::mount("tenso-full", "/dev/shm", "tmpfs", 0, "size=4m") != 0) {
                std::printf("\n  CapiTrustTest: no mount namespace (%s), full-/dev/shm case skipped",
                            std::strerror(errno));
                return;
            }
            const std::string name = shm_tag("seg-full");
            cache_test::Val val(1, 1, 3000000);  // 12 MB
            tenso_shm *raw = nullptr;
            uint64_t written = 0;
            const tenso_status st =
                tenso_shm_create_for(&raw, &written, name.c_str(), val.value.get(), nullptr, TENSO_SHM_REPLACE);
            if (st == TENSO_OK) tenso_shm_close(raw);
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, st);
            const std::string why = tenso_last_error();
            CPPUNIT_ASSERT_MESSAGE(why, why.find("/dev/shm is probably full") != std::string::npos);
            CPPUNIT_ASSERT_EQUAL(TENSO_E_NOT_FOUND, tenso_shm_open(&raw, name.c_str(), 0));
            // A pool: its pages are faulted in at create, the last one by the size check.
            tenso_cache *c = nullptr;
            auto o = cache_test::options(12 << 20, 0, TENSO_SHM_REPLACE);
            const tenso_status pst = tenso_cache_create(&c, name.c_str(), &o);
            if (pst == TENSO_OK) tenso_cache_close(c);
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, pst);
            CPPUNIT_ASSERT_EQUAL(TENSO_E_NOT_FOUND, tenso_cache_open(&c, name.c_str(), nullptr));
        });
        CPPUNIT_ASSERT_MESSAGE(msg, msg.empty());
    }

    // A shrink that leaves the new end inside a mapping's last page raises no fault, so it must
    // not reach a packet: a pool full to the brim, cut by one byte or to one byte into its last
    // page, either answers TRUNCATED or gives its packet back exactly (it used to give it back
    // with its tail zeroed).
    void testSubPageShrinkOfPool() {
        const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
        for (uint64_t size : {uint64_t(4) << 20, (uint64_t(4) << 20) + 100}) {
            const uint64_t last_page = (size - 1) / page * page;
            for (uint64_t cut : {size - 1, last_page + 1}) {
                std::string msg = run_isolated([&] {
                    const std::string name = shm_tag("pool-subpage");
                    cache_test::Unlink gone{name};
                    cache_test::CachePtr c = cache_test::create(name, cache_test::options(size, 0, TENSO_SHM_REPLACE));
                    // 64 bytes of header and shape, then the body: the largest packet that fits.
                    uint64_t n = cache_test::stats(c.get()).free_bytes - 64;
                    std::unique_ptr<OwnedTensor> t;
                    for (;; n -= 64) {
                        t.reset(new OwnedTensor(TENSO_DTYPE_UINT8, {n}, 3));
                        t->data.back() = 0xff;
                        ValuePtr v = value_of(t->t);
                        const tenso_status st = tenso_cache_put(nullptr, c.get(), "k", 1, v.get(), nullptr, 0);
                        if (st == TENSO_OK) break;
                        TENSO_CHECK_STATUS(TENSO_E_FULL, st);
                    }
                    truncate_shm(name, off_t(cut));
                    tenso_view *raw = nullptr;
                    const tenso_status st = tenso_cache_get(&raw, c.get(), "k", 1, nullptr);
                    if (st == TENSO_E_TRUNCATED) return;
                    TENSO_CHECK_OK(st);
                    ViewPtr v(raw);
                    CPPUNIT_ASSERT_EQUAL(n, tenso_view_nbytes(v.get()));
                    CPPUNIT_ASSERT_MESSAGE("the packet's tail was lost without TRUNCATED",
                                           std::memcmp(tenso_view_data(v.get()), t->data.data(), n) == 0);
                });
                CPPUNIT_ASSERT_MESSAGE(
                    "pool of " + std::to_string(size) + " cut to " + std::to_string(cut) + ": " + msg, msg.empty());
            }
        }
    }

    // A put whose packet lands on pages the kernel cannot provide (a hole punched into the data
    // region while /dev/shm is full) answers TRUNCATED and leaves no entry behind: other
    // handles must not find the key (a put used to publish it LIVE, zeros and all, before it
    // looked at the flag), in place or in a new slot. Opening a pool whose header page is lost
    // so answers TRUNCATED, not CORRUPT.
    void testPutIntoLostPages() {
        std::string msg = run_isolated([&] {
            if (::unshare(CLONE_NEWNS) != 0 || ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
                ::mount("tenso-full", "/dev/shm", "tmpfs", 0, "size=8m") != 0) {
                std::printf("\n  CapiTrustTest: no mount namespace (%s), lost-pages put skipped", std::strerror(errno));
                return;
            }
            const std::string name = shm_tag("pool-lost");
            cache_test::Unlink gone{name};
            cache_test::CachePtr c = cache_test::create(name, cache_test::options(4 << 20, 0, TENSO_SHM_REPLACE));
            cache_test::Val v1(1, 1, 200000), v2(1, 2, 200000), v3(2, 1, 200000);
            TENSO_CHECK_OK(tenso_cache_put(nullptr, c.get(), "k", 1, v1.value.get(), nullptr, 0));
            cache_test::CachePtr other = cache_test::open(name);
            // The data region's pages dropped, then /dev/shm filled: touching them faults.
            {
                const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
                cache_test::RawPool raw(name);
                const uint64_t off = raw.get<uint64_t>(cache_test::kDataOff),
                               len = raw.get<uint64_t>(cache_test::kDataSizeOff) / page * page;
                CPPUNIT_ASSERT_EQUAL(
                    0, ::fallocate(raw.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(off), off_t(len)));
            }
            const auto fill_up = [] {
                const int fill = ::open("/dev/shm/filler", O_WRONLY | O_CREAT | O_APPEND, 0600);
                CPPUNIT_ASSERT(fill >= 0);
                std::vector<char> chunk(1 << 12, 1);
                while (::write(fill, chunk.data(), chunk.size()) > 0) {}
                ::close(fill);
            };
            fill_up();
            int found = -1;
            // In place: same key, same size, no pins.
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED,
                               tenso_cache_put(nullptr, c.get(), "k", 1, v2.value.get(), nullptr, 0));
            TENSO_CHECK_OK(tenso_cache_contains(&found, other.get(), "k", 1));
            CPPUNIT_ASSERT_EQUAL_MESSAGE("in place: the failed put's entry is gone", 0, found);
            // A new slot, through the other handle (this one is marked truncated now).
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED,
                               tenso_cache_put(nullptr, other.get(), "j", 1, v3.value.get(), nullptr, 0));
            cache_test::CachePtr third = cache_test::open(name);
            TENSO_CHECK_OK(tenso_cache_contains(&found, third.get(), "j", 1));
            CPPUNIT_ASSERT_EQUAL_MESSAGE("new slot: the failed put's entry is not published", 0, found);
            // Opening a pool whose header page is lost: zeros for a magic, TRUNCATED (not CORRUPT).
            {
                cache_test::RawPool raw(name);
                CPPUNIT_ASSERT_EQUAL(0, ::fallocate(raw.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                                                    off_t(::sysconf(_SC_PAGESIZE))));
            }
            fill_up();
            tenso_cache_options o = TENSO_CACHE_OPTIONS_INIT;
            o.lock_timeout_ms = 50;  // the zero magic looks unfinished until then
            tenso_cache *raw = nullptr;
            const tenso_status st = tenso_cache_open(&raw, name.c_str(), &o);
            if (st == TENSO_OK) tenso_cache_close(raw);
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, st);
        });
        CPPUNIT_ASSERT_MESSAGE(msg, msg.empty());
    }

    void testTruncatedPool() {
        std::string msg = run_isolated([&] {
            const std::string name = shm_tag("pool-trunc");
            cache_test::Unlink gone{name};
            cache_test::CachePtr c = cache_test::create(name, cache_test::options(4 << 20, 0, TENSO_SHM_REPLACE));
            cache_test::Val val(1, 1, 200000);
            TENSO_CHECK_OK(tenso_cache_put(nullptr, c.get(), "k", 1, val.value.get(), nullptr, 0));
            for (off_t size : {off_t(1 << 20), off_t(0)}) {
                // A get and free first: the next get of "k" would be served from the parked pin
                // without the lock (docs/cache-layout.md, "Spare pins"), and must refuse too.
                tenso_view *v = nullptr;
                if (size) {
                    TENSO_CHECK_OK(tenso_cache_get(&v, c.get(), "k", 1, nullptr));
                    tenso_view_free(v);
                    v = nullptr;
                }
                truncate_shm(name, size);
                TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_cache_get(&v, c.get(), "k", 1, nullptr));
                TENSO_CHECK_STATUS(TENSO_E_TRUNCATED,
                                   tenso_cache_put(nullptr, c.get(), "j", 1, val.value.get(), nullptr, 0));
                tenso_cache_stats st;
                TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_cache_stats_get(&st, c.get()));
            }
            c.reset();  // detaching must not touch the lost pages either
        });
        CPPUNIT_ASSERT_MESSAGE(msg, msg.empty());
    }

    // Views held while their segment or pool is truncated (to nothing, or by its last page)
    // read zeros where the lost pages were instead of raising SIGBUS, and their bytes below the
    // cut as they were; freeing them is safe; every later call answers TRUNCATED, also once the
    // object has grown back.
    void testViewsOfTruncatedObjects() {
        const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
        for (bool whole : {true, false}) {
            std::string msg = run_isolated([&] {
                const std::string seg = shm_tag("seg-view"), pool = shm_tag("pool-view");
                struct Gone {
                    std::string n;
                    ~Gone() { tenso_shm_unlink(n.c_str()); }
                } gone{seg};
                cache_test::Unlink gone_pool{pool};
                cache_test::Val val(1, 1, 1000000 - 3);  // 4 MB
                // The segment is sized to its packet, so the last page holds the body's tail.
                tenso_shm *raw = nullptr;
                TENSO_CHECK_OK(
                    tenso_shm_create_for(&raw, nullptr, seg.c_str(), val.value.get(), nullptr, TENSO_SHM_REPLACE));
                std::unique_ptr<tenso_shm, void (*)(tenso_shm *)> s(raw, tenso_shm_close);
                const uint64_t seg_size = tenso_shm_size(s.get());
                cache_test::CachePtr c = cache_test::create(pool, cache_test::options(8 << 20, 0, TENSO_SHM_REPLACE));
                TENSO_CHECK_OK(tenso_cache_put(nullptr, c.get(), "k", 1, val.value.get(), nullptr, 0));
                tenso_view *sv = nullptr, *cv = nullptr;
                TENSO_CHECK_OK(tenso_shm_get(&sv, s.get(), nullptr));
                ViewPtr seg_view(sv);
                TENSO_CHECK_OK(tenso_cache_get(&cv, c.get(), "k", 1, nullptr));
                ViewPtr pool_view(cv);
                truncate_shm(seg, whole ? 0 : off_t((seg_size - 1) / page * page));
                truncate_shm(pool, whole ? 0 : off_t((8 << 20) - page));
                const size_t n = val.data.size();
                for (const tenso_view *v : {seg_view.get(), pool_view.get()}) {
                    CPPUNIT_ASSERT_EQUAL(uint64_t(n * 4), tenso_view_nbytes(v));
                    const auto *p = static_cast<const volatile uint32_t *>(tenso_view_data(v));
                    size_t zeros = 0, kept = 0;
                    for (size_t i = 0; i < n; ++i) {
                        const uint32_t x = p[i];
                        zeros += x == 0 && val.data[i] != 0;
                        kept += x == val.data[i];
                    }
                    CPPUNIT_ASSERT_EQUAL_MESSAGE("every element as it was, or zero", n, zeros + kept);
                    if (whole) CPPUNIT_ASSERT_EQUAL(size_t(std::count(val.data.begin(), val.data.end(), 0u)), kept);
                }
                // Cut by its last page, the segment's view lost its tail; the pool's packet ends
                // below its last page and reads as it was.
                if (!whole)
                    CPPUNIT_ASSERT(static_cast<const volatile uint32_t *>(tenso_view_data(seg_view.get()))[n - 1] == 0);
                seg_view.reset();
                pool_view.reset();  // the unpin lands in zeros, not in a SIGBUS
                tenso_view *v = nullptr;
                int found = 0;
                for (int grown = 0; grown < 2; ++grown) {
                    TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_shm_get(&v, s.get(), nullptr));
                    TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_cache_get(&v, c.get(), "k", 1, nullptr));
                    TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_cache_contains(&found, c.get(), "k", 1));
                    truncate_shm(seg, off_t(seg_size));
                    truncate_shm(pool, 8 << 20);
                }
                c.reset();  // detaching skips the pool
                s.reset();
            });
            CPPUNIT_ASSERT_MESSAGE(std::string(whole ? "cut to 0: " : "cut by a page: ") + msg, msg.empty());
        }
    }

    // The SIGBUS handler that guards mappings passes on faults that are not in them: a handler
    // installed before libtenso's first mapping still gets a fault in a foreign object (with the
    // signal mask its sa_mask asked for), and a
    // fault in a tenso segment does not reach it. Runs in a fresh process (this binary, run
    // again for this test), where no earlier test has installed libtenso's handler yet.
    void testForeignSigbusChained() {
        if (!std::getenv("TENSO_TEST_FRESH_PROCESS")) {
            const pid_t pid = ::fork();
            CPPUNIT_ASSERT(pid >= 0);
            if (pid == 0) {
                ::setenv("TENSO_TEST_FRESH_PROCESS", "1", 1);
                ::execl("/proc/self/exe", "tenso_capi_tests", "CapiTrustTest::testForeignSigbusChained", nullptr);
                ::_exit(127);
            }
            int status = 0;
            CPPUNIT_ASSERT_EQUAL(pid, ::waitpid(pid, &status, 0));
            CPPUNIT_ASSERT_MESSAGE("the fresh process failed (its output is above)",
                                   WIFEXITED(status) && WEXITSTATUS(status) == 0);
            return;
        }
        struct sigaction mine = {};
        mine.sa_handler = on_user_sigbus;
        sigemptyset(&mine.sa_mask);
        sigaddset(&mine.sa_mask, SIGUSR2);
        CPPUNIT_ASSERT_EQUAL(0, ::sigaction(SIGBUS, &mine, nullptr));
        const std::string seg = shm_tag("seg-chain"), foreign = "/" + shm_tag("foreign");
        struct Gone {
            std::string a, b;
            ~Gone() {
                tenso_shm_unlink(a.c_str());
                ::shm_unlink(b.c_str());
            }
        } gone{seg, foreign};
        tenso_shm *raw = nullptr;
        TENSO_CHECK_OK(tenso_shm_create(&raw, seg.c_str(), 1 << 20, TENSO_SHM_REPLACE));  // installs it
        std::unique_ptr<tenso_shm, void (*)(tenso_shm *)> s(raw, tenso_shm_close);
        // A foreign object, mapped and then truncated by hand.
        const int fd = ::shm_open(foreign.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
        CPPUNIT_ASSERT(fd >= 0);
        CPPUNIT_ASSERT_EQUAL(0, ::ftruncate(fd, 1 << 16));
        void *m = ::mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        CPPUNIT_ASSERT(m != MAP_FAILED);
        CPPUNIT_ASSERT_EQUAL(0, ::ftruncate(fd, 0));
        ::close(fd);
        if (sigsetjmp(g_user_jump, 1) == 0) {
            (void)*static_cast<volatile uint8_t *>(m);
            CPPUNIT_FAIL("a read past the end of a truncated foreign object did not fault");
        }
        ::munmap(m, 1 << 16);
        CPPUNIT_ASSERT_EQUAL(1, int(g_user_faults));
        CPPUNIT_ASSERT_MESSAGE("the chained handler ran with its own sa_mask (SIGUSR2), not libtenso's",
                               g_user_mask_ok);
        // Tenso's own segment, truncated: absorbed, the user's handler is not called.
        truncate_shm(seg, 0);
        CPPUNIT_ASSERT_EQUAL(0, int(*static_cast<volatile uint8_t *>(tenso_shm_data(s.get()))));
        CPPUNIT_ASSERT_EQUAL(1, int(g_user_faults));
        tenso_view *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_shm_get(&v, s.get(), nullptr));
    }

    // Past the guard's 1024 slots a mapping is checked with a system call per call instead:
    // truncated, it still answers TRUNCATED rather than raising SIGBUS.
    void testUnguardedMappings() {
        std::string msg = run_isolated([&] {
            struct rlimit rl;
            CPPUNIT_ASSERT_EQUAL(0, ::getrlimit(RLIMIT_NOFILE, &rl));
            if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 1200) {
                std::printf("\n  CapiTrustTest: RLIMIT_NOFILE hard limit %lu, unguarded case skipped",
                            (unsigned long)rl.rlim_max);
                return;
            }
            rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? 4096 : std::min<rlim_t>(rl.rlim_max, 4096);
            CPPUNIT_ASSERT_EQUAL(0, ::setrlimit(RLIMIT_NOFILE, &rl));
            const std::string name = shm_tag("seg-many");
            struct Gone {
                std::string n;
                ~Gone() { tenso_shm_unlink(n.c_str()); }
            } gone{name};
            OwnedTensor t(TENSO_DTYPE_FLOAT32, {1000}, 7);
            ValuePtr v = value_of(t.t);
            tenso_shm *raw = nullptr;
            TENSO_CHECK_OK(tenso_shm_create_for(&raw, nullptr, name.c_str(), v.get(), nullptr, TENSO_SHM_REPLACE));
            std::vector<std::unique_ptr<tenso_shm, void (*)(tenso_shm *)>> maps;
            maps.emplace_back(raw, tenso_shm_close);
            for (int i = 0; i < 1100; ++i) {  // every slot taken, whatever this process held before
                TENSO_CHECK_OK(tenso_shm_open(&raw, name.c_str(), 0));
                maps.emplace_back(raw, tenso_shm_close);
            }
            tenso_view *out = nullptr;
            TENSO_CHECK_OK(tenso_shm_get(&out, maps.back().get(), nullptr));
            tenso_view_free(out);
            truncate_shm(name, 0);
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_shm_get(&out, maps.back().get(), nullptr));
            const std::string asked = tenso_last_error();  // lseek's answer
            CPPUNIT_ASSERT_MESSAGE(asked, asked.find("truncated to 0 bytes") != std::string::npos);
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_shm_get(&out, maps.front().get(), nullptr));
            const std::string guarded = tenso_last_error();  // the guard's
            CPPUNIT_ASSERT_MESSAGE(guarded, guarded.find("lost pages") != std::string::npos);
        });
        CPPUNIT_ASSERT_MESSAGE(msg, msg.empty());
    }

    // A SIGBUS handler installed over libtenso's (Python's faulthandler.enable(); its disable()
    // puts SIG_DFL back) would end the process at a truncation: a segment mapped after that is
    // not guarded but checked with lseek per call, and answers TRUNCATED.
    void testReplacedHandler() {
        std::string msg = run_isolated([&] {
            const std::string first = shm_tag("seg-before"), name = shm_tag("seg-replaced");
            struct Gone {
                std::string a, b;
                ~Gone() {
                    tenso_shm_unlink(a.c_str());
                    tenso_shm_unlink(b.c_str());
                }
            } gone{first, name};
            tenso_shm *raw = nullptr;
            TENSO_CHECK_OK(tenso_shm_create(&raw, first.c_str(), 4096, TENSO_SHM_REPLACE));  // installs it
            tenso_shm_close(raw);
            struct sigaction dfl = {};
            dfl.sa_handler = SIG_DFL;
            CPPUNIT_ASSERT_EQUAL(0, ::sigaction(SIGBUS, &dfl, nullptr));
            OwnedTensor t(TENSO_DTYPE_FLOAT32, {1000}, 7);
            ValuePtr v = value_of(t.t);
            TENSO_CHECK_OK(tenso_shm_create_for(&raw, nullptr, name.c_str(), v.get(), nullptr, TENSO_SHM_REPLACE));
            std::unique_ptr<tenso_shm, void (*)(tenso_shm *)> s(raw, tenso_shm_close);
            truncate_shm(name, 0);
            tenso_view *out = nullptr;
            TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_shm_get(&out, s.get(), nullptr));
            const std::string asked = tenso_last_error();  // lseek's answer
            CPPUNIT_ASSERT_MESSAGE(asked, asked.find("truncated to 0 bytes") != std::string::npos);
        });
        CPPUNIT_ASSERT_MESSAGE(msg, msg.empty());
    }

    // uid 65534 creates a segment and a pool; root refuses them unless it opts in.
    void testOtherUsersObjects() {
        if (!is_root()) {
            std::printf("\n  CapiTrustTest: not root, two-uid case skipped");
            return;
        }
        Objects o{shm_tag("theirs-seg"), shm_tag("theirs-pool")};
        std::string msg = run_isolated([&] {
            become_nobody();
            o.make();
        });
        CPPUNIT_ASSERT_MESSAGE("uid 65534 creating: " + msg, msg.empty());
        expect_refused_then_opened(o.seg, o.pool, std::to_string(kNobody));
    }

    // Root's objects, made world-writable, are refused by uid 65534 unless it opts in.
    void testOwnObjectsAsAnotherUid() {
        if (!is_root()) {
            std::printf("\n  CapiTrustTest: not root, two-uid case skipped");
            return;
        }
        Objects o{shm_tag("ours-seg"), shm_tag("ours-pool")};
        o.make();
        chmod_shm(o.seg, 0666);
        chmod_shm(o.pool, 0666);
        std::string msg = run_isolated([&] {
            become_nobody();
            expect_refused_then_opened(o.seg, o.pool, "0");
        });
        CPPUNIT_ASSERT_MESSAGE("uid 65534 opening root's objects: " + msg, msg.empty());
    }

    // Opening without the flag: TENSO_E_IO naming the owner; with it: the object works.
    static void expect_refused_then_opened(const std::string &seg, const std::string &pool, const std::string &owner) {
        tenso_shm *s = nullptr;
        for (int writable : {0, 1}) {
            TENSO_CHECK_STATUS(TENSO_E_IO, tenso_shm_open(&s, seg.c_str(), writable));
            CPPUNIT_ASSERT_MESSAGE(tenso_last_error(),
                                   std::strstr(tenso_last_error(), ("owned by uid " + owner).c_str()));
        }
        tenso_cache *c = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_IO, tenso_cache_open(&c, pool.c_str(), nullptr));
        CPPUNIT_ASSERT_MESSAGE(tenso_last_error(), std::strstr(tenso_last_error(), ("owned by uid " + owner).c_str()));

        TENSO_CHECK_OK(tenso_shm_open_flags(&s, seg.c_str(), TENSO_SHM_ANY_OWNER));
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_shm_get(&v, s, nullptr));
        CPPUNIT_ASSERT_EQUAL(uint64_t(10), tenso_view_nbytes(v));
        tenso_view_free(v);
        tenso_shm_close(s);
        tenso_cache_options o = TENSO_CACHE_OPTIONS_INIT;
        o.flags = TENSO_SHM_ANY_OWNER;
        TENSO_CHECK_OK(tenso_cache_open(&c, pool.c_str(), &o));
        cache_test::CachePtr owned(c);
        cache_test::Val val(2, 1, 100);
        TENSO_CHECK_OK(tenso_cache_put(nullptr, c, "k", 1, val.value.get(), nullptr, 0));
        TENSO_CHECK_OK(tenso_cache_check(c));
    }

    void testDotNames() {
        for (const char *n : {".", "..", "/.", "/.."}) {
            tenso_shm *s = nullptr;
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_shm_create(&s, n, 4096, 0));
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_shm_open(&s, n, 0));
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_shm_unlink(n));
            tenso_cache *c = nullptr;
            auto o = cache_test::options(1 << 20);
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_cache_create(&c, n, &o));
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_cache_open(&c, n, nullptr));
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_cache_unlink(n));
        }
        // Names that merely contain dots are fine.
        const std::string dotted = "..." + shm_tag("dots");
        tenso_shm *s = nullptr;
        TENSO_CHECK_OK(tenso_shm_create(&s, dotted.c_str(), 64, TENSO_SHM_REPLACE));
        tenso_shm_close(s);
        TENSO_CHECK_OK(tenso_shm_unlink(dotted.c_str()));
    }

    // A 0-byte pool of another uid looks like one being created, but is refused at once, not
    // waited on for the lock timeout (an hour here: the old wait would hang the suite).
    void testForeignEmptyPoolRefusedAtOnce() {
        if (!is_root()) {
            std::printf("\n  CapiTrustTest: not root, two-uid case skipped");
            return;
        }
        const std::string name = shm_tag("empty-pool");
        int fd = ::shm_open(("/" + name).c_str(), O_RDWR | O_CREAT | O_EXCL, 0644);
        CPPUNIT_ASSERT(fd >= 0);
        cache_test::Unlink gone{name};
        CPPUNIT_ASSERT_EQUAL(0, ::fchown(fd, kNobody, kNobody));
        ::close(fd);
        tenso_cache_options o = TENSO_CACHE_OPTIONS_INIT;
        o.lock_timeout_ms = 3600u * 1000u;
        tenso_cache *c = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_IO, tenso_cache_open(&c, name.c_str(), &o));
        CPPUNIT_ASSERT_MESSAGE(tenso_last_error(), std::strstr(tenso_last_error(), "owned by uid 65534"));
    }

    // tenso_shm_open keeps its 1.1 meaning (any non-zero `writable` is read-write, owner check
    // on); tenso_shm_open_flags refuses bits other than TENSO_SHM_WRITABLE | TENSO_SHM_ANY_OWNER.
    void testOpenFlags() {
        const std::string name = shm_tag("flags");
        tenso_shm *s = nullptr;
        TENSO_CHECK_OK(tenso_shm_create(&s, name.c_str(), 4096, TENSO_SHM_REPLACE));
        tenso_shm_close(s);
        OwnedTensor t(TENSO_DTYPE_UINT8, {4}, 9);
        ValuePtr v = value_of(t.t);
        for (int writable : {1, 4, -1, 0x100}) {
            TENSO_CHECK_OK(tenso_shm_open(&s, name.c_str(), writable));
            TENSO_CHECK_OK(tenso_shm_put(nullptr, s, v.get(), nullptr));
            tenso_shm_close(s);
        }
        TENSO_CHECK_OK(tenso_shm_open(&s, name.c_str(), 0));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_shm_put(nullptr, s, v.get(), nullptr));  // read-only
        tenso_shm_close(s);
        for (uint32_t bad : {4u, ~0u, 0x100u})
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_shm_open_flags(&s, name.c_str(), bad));
        TENSO_CHECK_OK(tenso_shm_open_flags(&s, name.c_str(), TENSO_SHM_WRITABLE | TENSO_SHM_ANY_OWNER));
        TENSO_CHECK_OK(tenso_shm_put(nullptr, s, v.get(), nullptr));
        tenso_shm_close(s);
        TENSO_CHECK_OK(tenso_shm_unlink(name.c_str()));
        tenso_cache_options o = TENSO_CACHE_OPTIONS_INIT;
        o.flags = 0x4;
        tenso_cache *c = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_cache_open(&c, name.c_str(), &o));
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiTrustTest);
