// CapiFileTest - tenso_save_file / tenso_value_save_file / tenso_load_file: round trips in both
// load modes, what a mapping promises (ownership, lifetime, alignment, O(1) in the file size),
// atomic replacement that leaves the old file intact when a save fails, and the statuses for
// empty, missing, truncated and over-long files.
#include <cppunit/extensions/HelperMacros.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "check.hpp"
#include "hostile_util.hpp"
#include "tenso/tenso.h"

using namespace hostile;

namespace {

Bytes dumps(const tenso_tensor &t, const tenso_encode_options &o) {
    Buffer b;
    TENSO_CHECK_OK(tenso_dumps(&b.b, &t, &o));
    return b.bytes();
}

// The view tenso_load_file gives must be the one tenso_loads gives for the same bytes.
std::string same_as_loads(const tenso_view *got, const Bytes &pkt) {
    tenso_view *raw = nullptr;
    tenso_status st = tenso_loads(&raw, pkt.data(), pkt.size(), nullptr);
    ViewPtr want(raw);
    if (st != TENSO_OK) return "loads failed: " + tenso_describe(st);
    return view_diff(got, want.get());
}

ViewPtr load(const std::string &path, uint32_t mode, const tenso_decode_options *o = nullptr) {
    tenso_view *raw = nullptr;
    tenso_status st = tenso_load_file(&raw, path.c_str(), mode, o);
    CPPUNIT_ASSERT_MESSAGE(path + " mode " + std::to_string(mode) + ": " + tenso_describe(st), st == TENSO_OK);
    return ViewPtr(raw);
}

tenso_status load_status(const std::string &path, uint32_t mode, const tenso_decode_options *o = nullptr) {
    tenso_view *raw = nullptr;
    tenso_status st = tenso_load_file(&raw, path.c_str(), mode, o);
    tenso_view_free(raw);
    if (st != TENSO_OK && raw) return TENSO_E_INTERNAL;  // a failed load must not hand out a view
    return st;
}

const uint32_t kModes[] = {TENSO_LOAD_READ, TENSO_LOAD_MMAP};

}  // namespace

class CapiFileTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiFileTest);
    CPPUNIT_TEST(testDenseRoundTrips);
    CPPUNIT_TEST(testBundleRoundTrip);
    CPPUNIT_TEST(testViewsOutliveTheFile);
    CPPUNIT_TEST(testMappedBodiesAreAligned);
    CPPUNIT_TEST(testFreeUnmapsAtOnce);
    CPPUNIT_TEST(testSaveReplacesAtomically);
    CPPUNIT_TEST(testFailedSavesKeepTheOldFile);
    CPPUNIT_TEST(testSaveFailingMidWrite);
    CPPUNIT_TEST(testEmptyMissingTruncated);
    CPPUNIT_TEST(testTrailingBytesAreIgnored);
    CPPUNIT_TEST(testArguments);
    CPPUNIT_TEST(testDecodeOptions);
    CPPUNIT_TEST(testSparseGigabyteFileMapsWithoutReadingTheBody);
    CPPUNIT_TEST_SUITE_END();

    std::string dir_;
    std::string at(const std::string &name) const { return dir_ + "/" + name; }

    // Names in the scratch directory that look like save_file temporaries.
    std::vector<std::string> temporaries() const {
        std::vector<std::string> out;
        for (const auto &n : list_dir(dir_))
            if (n.find(".tmp.") != std::string::npos) out.push_back(n);
        return out;
    }

    void check_intact(const std::string &path, const Bytes &old, const std::string &what) {
        CPPUNIT_ASSERT_MESSAGE(what + ": the old file changed", slurp(path) == old);
        CPPUNIT_ASSERT_MESSAGE(what + ": a temporary was left behind", temporaries().empty());
    }

public:
    void setUp() override { dir_ = make_scratch("CapiFileTest"); }
    void tearDown() override { remove_dir(dir_); }

    void testDenseRoundTrips() {
        struct Case {
            const char *name;
            OwnedTensor t;
            tenso_encode_options o;
        } cases[] = {
            {"f32 3x4", OwnedTensor(TENSO_DTYPE_FLOAT32, {3, 4}, 1), enc()},
            {"f64 4096 compressed", OwnedTensor(TENSO_DTYPE_FLOAT64, {4096}, 2), enc(TENSO_ENCODE_COMPRESS)},
            {"i32 100 integrity", OwnedTensor(TENSO_DTYPE_INT32, {100}, 3), enc(TENSO_ENCODE_INTEGRITY)},
            {"u8 5000 align 4096", OwnedTensor(TENSO_DTYPE_UINT8, {5000}, 4), enc(0, 4096)},
            {"c64 2x2x2 align 1 integrity compressed", OwnedTensor(TENSO_DTYPE_COMPLEX64, {2, 2, 2}, 5),
             enc(TENSO_ENCODE_INTEGRITY | TENSO_ENCODE_COMPRESS, 1)},
            {"i64 scalar", OwnedTensor(TENSO_DTYPE_INT64, {}, 6), enc()},
            {"f32 [0]", OwnedTensor(TENSO_DTYPE_FLOAT32, {0}, 7), enc()},
            {"bf16 [3,0] align 8", OwnedTensor(TENSO_DTYPE_BFLOAT16, {3, 0}, 8), enc(0, 8)},
        };
        for (auto &c : cases) {
            const std::string path = at("dense.tenso");
            TENSO_CHECK_OK(tenso_save_file(path.c_str(), &c.t.t, &c.o));
            const Bytes pkt = dumps(c.t.t, c.o);
            CPPUNIT_ASSERT_MESSAGE(std::string(c.name) + ": file bytes differ from tenso_dumps", slurp(path) == pkt);
            for (uint32_t mode : kModes) {
                ViewPtr v = load(path, mode);
                const std::string what = std::string(c.name) + " mode " + std::to_string(mode) + ": ";
                std::string diff = same_as_loads(v.get(), pkt);
                CPPUNIT_ASSERT_MESSAGE(what + diff, diff.empty());
                CPPUNIT_ASSERT_EQUAL_MESSAGE(what + "owns_data", 1, tenso_view_owns_data(v.get()));
                CPPUNIT_ASSERT_MESSAGE(
                    what + "body",
                    c.t.data.empty() || std::memcmp(tenso_view_data(v.get()), c.t.data.data(), c.t.data.size()) == 0);
            }
            CPPUNIT_ASSERT(temporaries().empty());
        }
    }

    void testBundleRoundTrip() {
        OwnedTensor a(TENSO_DTYPE_FLOAT32, {64, 3}, 1), b(TENSO_DTYPE_INT16, {7}, 2), c(TENSO_DTYPE_UINT8, {3000}, 3);
        tenso_value *va, *vb, *vc, *inner, *outer;
        TENSO_CHECK_OK(tenso_value_new_tensor(&va, &a.t));
        TENSO_CHECK_OK(tenso_value_new_tensor(&vb, &b.t));
        TENSO_CHECK_OK(tenso_value_new_tensor(&vc, &c.t));
        ValuePtr pa(va), pb(vb), pc(vc);
        TENSO_CHECK_OK(tenso_value_new_bundle(&inner));
        ValuePtr pi(inner);
        TENSO_CHECK_OK(tenso_bundle_insert(inner, "c", 1, vc));
        TENSO_CHECK_OK(tenso_bundle_insert(inner, "b", 1, vb));
        TENSO_CHECK_OK(tenso_value_new_bundle(&outer));
        ValuePtr po(outer);
        TENSO_CHECK_OK(tenso_bundle_insert(outer, "weights", 7, va));
        TENSO_CHECK_OK(tenso_bundle_insert(outer, "inner", 5, inner));
        for (tenso_encode_options o : {enc(), enc(TENSO_ENCODE_COMPRESS | TENSO_ENCODE_INTEGRITY, 128)}) {
            const std::string path = at("bundle.tenso");
            TENSO_CHECK_OK(tenso_value_save_file(path.c_str(), outer, &o));
            Buffer expect;
            TENSO_CHECK_OK(tenso_value_dumps(&expect.b, outer, &o));
            CPPUNIT_ASSERT(slurp(path) == expect.bytes());
            for (uint32_t mode : kModes) {
                ViewPtr v = load(path, mode);
                std::string diff = same_as_loads(v.get(), expect.bytes());
                CPPUNIT_ASSERT_MESSAGE("mode " + std::to_string(mode) + ": " + diff, diff.empty());
                const tenso_view *child = nullptr;
                TENSO_CHECK_OK(tenso_view_bundle_find(&child, v.get(), "weights", 7));
                CPPUNIT_ASSERT(std::memcmp(tenso_view_data(child), a.data.data(), a.data.size()) == 0);
                CPPUNIT_ASSERT_EQUAL(1, tenso_view_owns_data(child));
            }
        }
    }

    // A view owns what it was loaded from: the file may be removed or replaced and the view
    // still reads the bytes it was given, until it is freed.
    void testViewsOutliveTheFile() {
        OwnedTensor first(TENSO_DTYPE_UINT32, {256, 256}, 1), second(TENSO_DTYPE_UINT32, {256, 256}, 2);
        const std::string path = at("outlive.tenso");
        for (uint32_t mode : kModes) {
            TENSO_CHECK_OK(tenso_save_file(path.c_str(), &first.t, nullptr));
            ViewPtr v = load(path, mode);
            CPPUNIT_ASSERT_EQUAL(1, tenso_view_owns_data(v.get()));
            const void *data = tenso_view_data(v.get());
            TENSO_CHECK_OK(tenso_save_file(path.c_str(), &second.t, nullptr));  // renamed over it
            ViewPtr v2 = load(path, mode);
            CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v2.get()), second.data.data(), second.data.size()) == 0);
            CPPUNIT_ASSERT_EQUAL(0, ::unlink(path.c_str()));
            CPPUNIT_ASSERT_MESSAGE("mode " + std::to_string(mode) + ": the first view changed",
                                   std::memcmp(data, first.data.data(), first.data.size()) == 0);
            CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v2.get()), second.data.data(), second.data.size()) == 0);
        }
    }

    // The body of a packet aligned to A sits at an A-aligned address of a mapping (A up to a
    // page); a read buffer is 64-aligned.
    void testMappedBodiesAreAligned() {
        OwnedTensor t(TENSO_DTYPE_FLOAT32, {1000}, 1);
        for (uint32_t align : {64u, 128u, 4096u}) {
            const std::string path = at("aligned.tenso");
            tenso_encode_options o = enc(0, align);
            TENSO_CHECK_OK(tenso_save_file(path.c_str(), &t.t, &o));
            ViewPtr m = load(path, TENSO_LOAD_MMAP);
            CPPUNIT_ASSERT_EQUAL_MESSAGE("mmap, alignment " + std::to_string(align), uintptr_t(0),
                                         reinterpret_cast<uintptr_t>(tenso_view_data(m.get())) % align);
            CPPUNIT_ASSERT_EQUAL(align, tenso_view_alignment(m.get()));
            ViewPtr r = load(path, TENSO_LOAD_READ);
            CPPUNIT_ASSERT_EQUAL_MESSAGE("read, alignment " + std::to_string(align), uintptr_t(0),
                                         reinterpret_cast<uintptr_t>(tenso_view_data(r.get())) % 64);
        }
    }

    // tenso_view_free releases a mapping at once, though the view's storage is kept for this
    // thread's next tenso_loads.
    void testFreeUnmapsAtOnce() {
        OwnedTensor t(TENSO_DTYPE_FLOAT32, {1000}, 1);
        const std::string path = at("unmapped.tenso");
        TENSO_CHECK_OK(tenso_save_file(path.c_str(), &t.t, nullptr));
        auto mapped = [&] {
            const Bytes maps = slurp("/proc/self/maps");
            return std::string(maps.begin(), maps.end()).find(path) != std::string::npos;
        };
        ViewPtr m = load(path, TENSO_LOAD_MMAP);
        CPPUNIT_ASSERT_MESSAGE("the view maps " + path, mapped());
        m.reset();
        CPPUNIT_ASSERT_MESSAGE("the freed view still maps " + path, !mapped());
    }

    void testSaveReplacesAtomically() {
        OwnedTensor big(TENSO_DTYPE_FLOAT64, {10000}, 1), small(TENSO_DTYPE_INT8, {3}, 2);
        const std::string path = at("replace.tenso");
        TENSO_CHECK_OK(tenso_save_file(path.c_str(), &big.t, nullptr));
        struct stat before;
        CPPUNIT_ASSERT_EQUAL(0, ::stat(path.c_str(), &before));
        TENSO_CHECK_OK(tenso_save_file(path.c_str(), &small.t, nullptr));
        CPPUNIT_ASSERT_MESSAGE("the file is exactly the new packet", slurp(path) == dumps(small.t, enc()));
        struct stat after;
        CPPUNIT_ASSERT_EQUAL(0, ::stat(path.c_str(), &after));
        CPPUNIT_ASSERT_MESSAGE("replaced by a rename, not rewritten in place", before.st_ino != after.st_ino);
        CPPUNIT_ASSERT_MESSAGE("only the saved file is in the directory",
                               list_dir(dir_) == std::vector<std::string>{"replace.tenso"});
    }

    // Saves that fail before or after the temporary exists leave the old file byte for byte
    // and no temporary behind.
    void testFailedSavesKeepTheOldFile() {
        OwnedTensor old_t(TENSO_DTYPE_INT32, {50}, 1), t(TENSO_DTYPE_FLOAT32, {10}, 2);
        const std::string path = at("keep.tenso");
        TENSO_CHECK_OK(tenso_save_file(path.c_str(), &old_t.t, nullptr));
        const Bytes old = slurp(path);

        tenso_tensor bad = t.t;
        bad.nbytes -= 1;  // not shape x itemsize
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_save_file(path.c_str(), &bad, nullptr));
        check_intact(path, old, "invalid tensor");
        bad = t.t;
        bad.dtype = TENSO_DTYPE_QINT8;
        TENSO_CHECK_STATUS(TENSO_E_BAD_DTYPE, tenso_save_file(path.c_str(), &bad, nullptr));
        check_intact(path, old, "quantized dtype on the dense path");
        tenso_encode_options o = enc(0, 3);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_save_file(path.c_str(), &t.t, &o));
        check_intact(path, old, "alignment 3");
        tenso_value *b = nullptr;
        TENSO_CHECK_OK(tenso_value_new_bundle(&b));
        ValuePtr bundle(b);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_value_save_file(path.c_str(), bundle.get(), &o));
        check_intact(path, old, "value with alignment 3");

        // The temporary cannot be created: no such directory (and, for a user that
        // permissions apply to, a read-only directory).
        const std::string missing = at("no-such-dir/x.tenso");
        TENSO_CHECK_STATUS(TENSO_E_IO, tenso_save_file(missing.c_str(), &t.t, nullptr));
        CPPUNIT_ASSERT_MESSAGE(tenso_last_error(), std::strstr(tenso_last_error(), "no-such-dir") != nullptr);
        check_intact(path, old, "missing directory");
        if (::geteuid() != 0) {
            CPPUNIT_ASSERT_EQUAL(0, ::chmod(dir_.c_str(), 0555));
            tenso_status st = tenso_save_file(path.c_str(), &t.t, nullptr);
            ::chmod(dir_.c_str(), 0755);
            TENSO_CHECK_STATUS(TENSO_E_IO, st);
            check_intact(path, old, "read-only directory");
        } else {
            std::printf("\n  CapiFileTest: running as root, read-only directory case skipped (root ignores it)");
        }

        // The last step fails: the path is a directory, so renaming the temporary over it
        // fails after the packet was written; the temporary must be removed.
        const std::string subdir = at("a-directory");
        CPPUNIT_ASSERT_EQUAL(0, ::mkdir(subdir.c_str(), 0755));
        TENSO_CHECK_STATUS(TENSO_E_IO, tenso_save_file(subdir.c_str(), &t.t, nullptr));
        check_intact(path, old, "rename over a directory");
        struct stat st;
        CPPUNIT_ASSERT(::stat(subdir.c_str(), &st) == 0 && S_ISDIR(st.st_mode));
        ::rmdir(subdir.c_str());
    }

    // A save that fails in the middle of writing (the file size limit is hit: EFBIG, with
    // SIGXFSZ ignored) in a child process: the old file is untouched, no temporary remains.
    void testSaveFailingMidWrite() {
        OwnedTensor old_t(TENSO_DTYPE_UINT8, {100}, 1), big(TENSO_DTYPE_UINT8, {1u << 20}, 2);
        const std::string path = at("midwrite.tenso");
        TENSO_CHECK_OK(tenso_save_file(path.c_str(), &old_t.t, nullptr));
        const Bytes old = slurp(path);
        for (bool value : {false, true}) {
            int fds[2];
            CPPUNIT_ASSERT_EQUAL(0, ::pipe(fds));
            pid_t pid = ::fork();
            CPPUNIT_ASSERT(pid >= 0);
            if (pid == 0) {
                ::close(fds[0]);
                ::signal(SIGXFSZ, SIG_IGN);
                struct rlimit lim = {65536, 65536};
                if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(3);
                tenso_status st;
                if (value) {
                    tenso_value *v = nullptr;
                    if (tenso_value_new_tensor(&v, &big.t) != TENSO_OK) ::_exit(4);
                    st = tenso_value_save_file(path.c_str(), v, nullptr);
                } else {
                    st = tenso_save_file(path.c_str(), &big.t, nullptr);
                }
                std::string msg = std::string(tenso_status_name(st)) + ": " + tenso_last_error();
                if (::write(fds[1], msg.data(), msg.size()) < 0) ::_exit(5);
                ::_exit(0);
            }
            ::close(fds[1]);
            std::string msg;
            char buf[512];
            ssize_t n;
            while ((n = ::read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, size_t(n));
            ::close(fds[0]);
            int wstatus = 0;
            CPPUNIT_ASSERT_EQUAL(pid, ::waitpid(pid, &wstatus, 0));
            CPPUNIT_ASSERT_MESSAGE("child failed: " + std::to_string(wstatus) + " " + msg,
                                   WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
            CPPUNIT_ASSERT_MESSAGE(msg, msg.rfind("TENSO_E_IO: ", 0) == 0);
            CPPUNIT_ASSERT_MESSAGE(msg, msg.find(std::strerror(EFBIG)) != std::string::npos);
            check_intact(path, old, value ? "value save past RLIMIT_FSIZE" : "save past RLIMIT_FSIZE");
        }
    }

    void testEmptyMissingTruncated() {
        const std::string empty = at("empty.tenso");
        spit(empty, "", 0);
        const std::string missing = at("missing.tenso");
        OwnedTensor t(TENSO_DTYPE_FLOAT64, {3, 5}, 1);
        const Bytes pkt = dumps(t.t, enc(TENSO_ENCODE_INTEGRITY));
        for (uint32_t mode : kModes) {
            const std::string m = " mode " + std::to_string(mode);
            TENSO_CHECK_STATUS(TENSO_E_END_OF_STREAM, load_status(empty, mode));
            TENSO_CHECK_STATUS(TENSO_E_IO, load_status(missing, mode));
            CPPUNIT_ASSERT_MESSAGE(tenso_last_error() + m,
                                   std::strstr(tenso_last_error(), missing.c_str()) != nullptr &&
                                       std::strstr(tenso_last_error(), std::strerror(ENOENT)) != nullptr);
            // Cut in the magic, the header, the shape, the padding, the body and the footer.
            for (size_t cut : {size_t(3), size_t(9), size_t(12), size_t(40), size_t(64), size_t(100), pkt.size() - 1}) {
                const std::string path = at("cut.tenso");
                spit(path, pkt.data(), cut);
                tenso_status st = load_status(path, mode);
                CPPUNIT_ASSERT_MESSAGE("cut at " + std::to_string(cut) + m + ": " + tenso_describe(st),
                                       st == TENSO_E_TRUNCATED);
            }
        }
    }

    void testTrailingBytesAreIgnored() {
        OwnedTensor t(TENSO_DTYPE_INT16, {33}, 1), z(TENSO_DTYPE_FLOAT32, {2048}, 0);
        for (const Bytes &pkt : {dumps(t.t, enc()), dumps(z.t, enc(TENSO_ENCODE_COMPRESS | TENSO_ENCODE_INTEGRITY))}) {
            Bytes file = pkt;
            for (int i = 0; i < 1000; ++i) file.push_back(uint8_t(i * 7));
            const std::string path = at("trailing.tenso");
            spit(path, file.data(), file.size());
            for (uint32_t mode : kModes) {
                ViewPtr v = load(path, mode);
                std::string diff = same_as_loads(v.get(), pkt);
                CPPUNIT_ASSERT_MESSAGE("mode " + std::to_string(mode) + ": " + diff, diff.empty());
            }
            // Another packet after the first one is trailing bytes too: the first is loaded.
            file = pkt;
            const Bytes second = dumps(z.t, enc());
            file.insert(file.end(), second.begin(), second.end());
            spit(path, file.data(), file.size());
            for (uint32_t mode : kModes) {
                ViewPtr v = load(path, mode);
                CPPUNIT_ASSERT_EQUAL(uint64_t(pkt.size()), tenso_view_packet_size(v.get()));
            }
        }
    }

    void testArguments() {
        OwnedTensor t(TENSO_DTYPE_FLOAT32, {4}, 1);
        const std::string path = at("args.tenso");
        TENSO_CHECK_OK(tenso_save_file(path.c_str(), &t.t, nullptr));
        tenso_view *raw = nullptr;
        for (uint32_t mode : {2u, 3u, 0xFFFFFFFFu}) {
            TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_load_file(&raw, path.c_str(), mode, nullptr));
            CPPUNIT_ASSERT(raw == nullptr);
        }
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_load_file(&raw, nullptr, TENSO_LOAD_READ, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_load_file(nullptr, path.c_str(), TENSO_LOAD_MMAP, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_save_file(nullptr, &t.t, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_save_file(path.c_str(), nullptr, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_value_save_file(path.c_str(), nullptr, nullptr));
        // Loading a directory: READ fails in read(2), MMAP maps nothing useful.
        for (uint32_t mode : kModes) {
            tenso_status st = load_status(dir_, mode);
            CPPUNIT_ASSERT_MESSAGE("directory, mode " + std::to_string(mode) + ": " + tenso_describe(st),
                                   st == TENSO_E_IO || st == TENSO_E_END_OF_STREAM);
        }
    }

    void testDecodeOptions() {
        OwnedTensor t(TENSO_DTYPE_UINT16, {100, 10}, 1);
        const std::string path = at("opts.tenso");
        tenso_encode_options eo = enc(TENSO_ENCODE_INTEGRITY);
        TENSO_CHECK_OK(tenso_save_file(path.c_str(), &t.t, &eo));
        const size_t size = slurp(path).size();
        for (uint32_t mode : kModes) {
            tenso_decode_options o = TENSO_DECODE_OPTIONS_INIT;
            o.max_packet_bytes = size - 1;
            TENSO_CHECK_STATUS(TENSO_E_LIMIT, load_status(path, mode, &o));
            o.max_packet_bytes = size;
            TENSO_CHECK_OK(load_status(path, mode, &o));
            o = tenso_decode_options TENSO_DECODE_OPTIONS_INIT;
            o.max_elements = 999;
            TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_ELEMENTS, load_status(path, mode, &o));
            o.max_elements = 0;
            o.max_ndim = 1;
            TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_DIMS, load_status(path, mode, &o));
        }
        Bytes bad = slurp(path);
        bad[100] ^= 1;  // a body byte under the footer
        spit(path, bad.data(), bad.size());
        for (uint32_t mode : kModes) {
            TENSO_CHECK_STATUS(TENSO_E_CHECKSUM, load_status(path, mode));
            tenso_decode_options o = TENSO_DECODE_OPTIONS_INIT;
            o.flags = TENSO_DECODE_SKIP_CHECKSUM;
            TENSO_CHECK_OK(load_status(path, mode, &o));
        }
    }

    // A 1 GiB tensor in a sparse file (a header and a hole): mapping it reads none of the body
    // (no page of it becomes resident: the property itself, not a wall time a busy machine can
    // exceed), and the view spans the whole body. It is uint16 [2^29]: 2^30 uint8 elements
    // would exceed the protocol's 1e9-element limit.
    void testSparseGigabyteFileMapsWithoutReadingTheBody() {
        const uint64_t n = 1ull << 30;
        Bytes head = Pkt().v4(TENSO_FLAG_ALIGNED, TENSO_DTYPE_UINT16, 1).u32(uint32_t(n / 2)).pad(64);
        CPPUNIT_ASSERT_EQUAL(size_t(64), head.size());
        {
            // The hand-made header is the encoder's: tenso_dumps_bound agrees on the size (it
            // never reads the data, so any non-NULL pointer describes the 1 GiB) and inspect
            // reads the header back.
            std::vector<uint64_t> shape = {n / 2};
            tenso_tensor t = tensor(head.data(), n, shape, TENSO_DTYPE_UINT16);
            size_t bound = 0;
            TENSO_CHECK_OK(tenso_dumps_bound(&bound, &t, nullptr));
            CPPUNIT_ASSERT_EQUAL(size_t(64 + n), bound);
            tenso_packet_info info;
            TENSO_CHECK_OK(tenso_inspect(&info, head.data(), head.size()));
            CPPUNIT_ASSERT_EQUAL(uint64_t(64), info.body_offset);
            CPPUNIT_ASSERT_EQUAL(n, info.body_size);
        }
        const std::string path = at("sparse-1g.tenso");
        {
            int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            CPPUNIT_ASSERT(fd >= 0);
            CPPUNIT_ASSERT_EQUAL(ssize_t(head.size()), ::write(fd, head.data(), head.size()));
            CPPUNIT_ASSERT_EQUAL(0, ::ftruncate(fd, off_t(64 + n)));
            ::close(fd);
        }
        tenso_view *raw = nullptr;
        tenso_status st = tenso_load_file(&raw, path.c_str(), TENSO_LOAD_MMAP, nullptr);
        ViewPtr v(raw);
        TENSO_CHECK_OK(st);
        CPPUNIT_ASSERT_EQUAL(n, tenso_view_nbytes(v.get()));
        CPPUNIT_ASSERT_EQUAL(64 + n, tenso_view_packet_size(v.get()));
        CPPUNIT_ASSERT_EQUAL(1, tenso_view_owns_data(v.get()));
        const auto *body = static_cast<const uint8_t *>(tenso_view_data(v.get()));
        CPPUNIT_ASSERT_EQUAL(uintptr_t(64), reinterpret_cast<uintptr_t>(body) % 4096);  // mapping + 64

        // Residency of the body's pages (a hole enters the page cache only when read): a load
        // that read the body would leave all of them resident. The allowance is the kernel's
        // readahead around the header page, when that page had left the cache (read_ahead_kb:
        // 128 KiB by default, 8 MiB on some virtual disks), far below the 1 GiB.
        const size_t page = size_t(::sysconf(_SC_PAGESIZE));
        const uint8_t *first_page = body + (page - 64);
        const size_t pages = size_t(n / page) - 1;
        std::vector<unsigned char> resident(pages);
        CPPUNIT_ASSERT_EQUAL(0, ::mincore(const_cast<uint8_t *>(first_page), pages * page, resident.data()));
        size_t in_core = 0;
        for (unsigned char r : resident) in_core += r & 1;
        CPPUNIT_ASSERT_MESSAGE(std::to_string(in_core) + " of " + std::to_string(pages) + " body pages are resident",
                               in_core < pages / 16);
        // The whole body is addressable: its last byte reads as the hole's zero.
        CPPUNIT_ASSERT_EQUAL(0, int(body[0]) + int(body[n - 1]));

        // Reading the same file would allocate and fill 1 GiB; a packet-size limit refuses it
        // up front.
        tenso_decode_options o = TENSO_DECODE_OPTIONS_INIT;
        o.max_packet_bytes = 1u << 20;
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, load_status(path, TENSO_LOAD_READ, &o));
        TENSO_CHECK_STATUS(TENSO_E_LIMIT, load_status(path, TENSO_LOAD_MMAP, &o));
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiFileTest);
