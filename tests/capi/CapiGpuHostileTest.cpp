// CapiGpuHostileTest - tenso_gpu_* against a hostile peer or caller, on the host backend (device
// memory is a memfd segment per allocation, so /proc/self/fd shows what is held):
//  - tenso_gpu_read_fd holds device memory in proportion to the bytes that arrived, not to the
//    header's claim: 8 GB claimed, 64 bytes sent, then EOF -> TRUNCATED with no device memory
//    and little RSS held meanwhile; a large body is allocated once half of it arrived;
//  - tenso_gpu_tensor_from_dlpack with counts whose products overflow (2^40 x 2^40, strides of
//    an empty tensor, byte_offset at the end of the address space): a status, and no undefined
//    behaviour (make asan runs this under UBSan);
//  - host backend IPC segments: another process of the user can open them through /proc, but
//    not shrink them (sealed), and a segment that could be shrunk is refused by ipc_open.
#include <cppunit/extensions/HelperMacros.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "hostile_util.hpp"
#include "tenso/tenso.h"

using namespace hostile;

namespace {

// Device memory the host backend holds: the sizes of this process's tenso-gpu segments.
uint64_t device_bytes() {
    uint64_t total = 0;
    DIR *d = ::opendir("/proc/self/fd");
    while (struct dirent *e = ::readdir(d)) {
        const std::string path = std::string("/proc/self/fd/") + e->d_name;
        char target[128] = "";
        const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
        if (n <= 0 || std::strncmp(target, "/memfd:tenso-gpu", 16) != 0) continue;
        struct stat st;
        if (::stat(path.c_str(), &st) == 0) total += uint64_t(st.st_size);
    }
    ::closedir(d);
    return total;
}

uint64_t rss_bytes() {
    std::ifstream f("/proc/self/status");
    std::string key;
    uint64_t kib = 0;
    while (f >> key) {
        if (key == "VmRSS:") {
            f >> kib;
            return kib << 10;
        }
        f.ignore(1 << 10, '\n');
    }
    return 0;
}

// The packet header of a dense tensor of `dtype` and `shape` (v4, default alignment): what a
// peer sends before the body.
Bytes dense_header(tenso_dtype dtype, const std::vector<uint64_t> &shape) {
    Pkt p;
    p.v4(1 /* ALIGNED: padded to 64 */, uint8_t(dtype), uint8_t(shape.size()));
    for (uint64_t d : shape) p.u32(uint32_t(d));
    p.pad(64);
    return p.b;
}

// tenso_gpu_read_fd on a thread, from a pipe the test writes piece by piece.
class PipeReader {
public:
    PipeReader() {
        ::signal(SIGPIPE, SIG_IGN);
        CPPUNIT_ASSERT(::pipe2(fds_, O_CLOEXEC) == 0);
        thread_ = std::thread([this] {
            tid_ = pid_t(::syscall(SYS_gettid));
            const tenso_gpu_options o = TENSO_GPU_OPTIONS_INIT;
            tenso_gpu_value *v = nullptr;
            status_ = tenso_gpu_read_fd(&v, fds_[0], &o);
            message_ = tenso_last_error();  // thread-local: kept for the test's thread
            value_ = v;
            done_ = true;
        });
    }
    ~PipeReader() {
        if (fds_[1] >= 0) ::close(fds_[1]);
        thread_.join();
        ::close(fds_[0]);
        tenso_gpu_value_free(value_);
    }
    void write(const uint8_t *p, size_t n) {
        while (n) {
            const ssize_t w = ::write(fds_[1], p, n);
            CPPUNIT_ASSERT(w > 0);
            p += w;
            n -= size_t(w);
        }
    }
    void write(const Bytes &b) { write(b.data(), b.size()); }
    // Waits until the reader took every byte written and sleeps in read (or poll) for more,
    // so what it holds now is what those bytes made it hold.
    void wait_starved() {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (std::chrono::steady_clock::now() < until) {
            int queued = -1;
            CPPUNIT_ASSERT(::ioctl(fds_[0], FIONREAD, &queued) == 0);
            if (queued == 0 && tid_ && waiting_in_read()) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        CPPUNIT_FAIL("the reader did not come back to read more within 30 s");
    }
    tenso_status finish() {
        ::close(fds_[1]);
        fds_[1] = -1;
        thread_.join();
        thread_ = std::thread([] {});
        return status_;
    }
    tenso_gpu_value *value() const { return value_; }
    const std::string &message() const { return message_; }

private:
    int fds_[2] = {-1, -1};
    std::thread thread_;
    std::atomic<pid_t> tid_{0};
    std::atomic<bool> done_{false};
    tenso_status status_ = TENSO_OK;
    std::string message_;
    tenso_gpu_value *value_ = nullptr;

    // The reader thread is blocked in read(2) or poll(2) (x86-64 and arm64 numbers).
    bool waiting_in_read() const {
        std::ifstream f("/proc/self/task/" + std::to_string(tid_.load()) + "/syscall");
        long nr = -1;
        if (!(f >> nr)) return false;
        return nr == SYS_read || nr == SYS_ppoll
#ifdef SYS_poll
               || nr == SYS_poll
#endif
            ;
    }
};

void no_op_deleter(DLManagedTensorVersioned *) {}

}  // namespace

class CapiGpuHostileTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiGpuHostileTest);
    CPPUNIT_TEST(readFdHeaderClaimHoldsNothing);
    CPPUNIT_TEST(readFdAllocatesAsBytesArrive);
    CPPUNIT_TEST(dlpackCountsOverflow);
    CPPUNIT_TEST(ipcSegmentCannotShrink);
    CPPUNIT_TEST_SUITE_END();

public:
    void setUp() override { TENSO_CHECK_OK(tenso_gpu_select_backend(TENSO_GPU_BACKEND_HOST)); }

    // A header claiming 8 GB (float64 x 10^9), 64 bytes of body, then EOF: while the reader
    // waits for the rest it holds no device memory and under 64 MiB more RSS; then TRUNCATED.
    void readFdHeaderClaimHoldsNothing() {
        const uint64_t rss0 = rss_bytes();
        const uint64_t dev0 = device_bytes();
        {
            PipeReader r;
            r.write(dense_header(TENSO_DTYPE_FLOAT64, {1000000000}));
            r.write(Bytes(64, 0x5a));
            r.wait_starved();
            const uint64_t held = device_bytes() - dev0;
            CPPUNIT_ASSERT_MESSAGE("device memory held for a claim: " + std::to_string(held), held == 0);
            const uint64_t grew = rss_bytes() > rss0 ? rss_bytes() - rss0 : 0;
            CPPUNIT_ASSERT_MESSAGE("RSS grew by " + std::to_string(grew), grew < (64u << 20));
            const tenso_status st = r.finish();
            CPPUNIT_ASSERT_EQUAL_MESSAGE(r.message(), TENSO_E_TRUNCATED, st);
            CPPUNIT_ASSERT(!r.message().empty());
            CPPUNIT_ASSERT(!r.value());
        }
        CPPUNIT_ASSERT_EQUAL(dev0, device_bytes());
    }

    // An 80 MiB body (over the 64 MiB read_fd allocates up front) from a pipe: with a quarter
    // of it sent, nothing is allocated; past half, the whole tensor; the result is exact.
    void readFdAllocatesAsBytesArrive() {
        const size_t n = size_t(80) << 20;
        Bytes body(n);
        for (size_t i = 0; i < n; ++i) body[i] = uint8_t(i * 2654435761u >> 13);
        const Bytes head = dense_header(TENSO_DTYPE_UINT8, {n});
        const uint64_t dev0 = device_bytes();
        PipeReader r;
        r.write(head);
        r.write(body.data(), n / 4);
        r.wait_starved();
        CPPUNIT_ASSERT_EQUAL(dev0, device_bytes());
        r.write(body.data() + n / 4, n / 2 - n / 4 + 4096);
        r.wait_starved();
        CPPUNIT_ASSERT(device_bytes() - dev0 >= n);
        r.write(body.data() + n / 2 + 4096, n - n / 2 - 4096);
        const tenso_status st = r.finish();
        CPPUNIT_ASSERT_EQUAL_MESSAGE(r.message(), TENSO_OK, st);
        const tenso_gpu_tensor *t = tenso_gpu_value_tensor(r.value());
        CPPUNIT_ASSERT(t);
        CPPUNIT_ASSERT_EQUAL(uint64_t(n), tenso_gpu_tensor_nbytes(t));
        // The host backend's device memory is host memory.
        CPPUNIT_ASSERT(std::memcmp(tenso_gpu_tensor_data(t), body.data(), n) == 0);
    }

    // Counts that overflow when multiplied: refused with a status, the caller keeps the tensor.
    void dlpackCountsOverflow() {
        float cell[4] = {};
        int64_t shape[3], strides[3];
        DLManagedTensorVersioned m;
        std::memset(&m, 0, sizeof m);
        m.version = {DLPACK_MAJOR_VERSION, 0};
        m.deleter = no_op_deleter;
        m.dl_tensor.data = cell;
        m.dl_tensor.device = {kDLCPU, 0};
        m.dl_tensor.dtype = {uint8_t(kDLFloat), 32, 1};
        m.dl_tensor.shape = shape;
        m.dl_tensor.strides = strides;
        tenso_gpu_tensor *t = nullptr;
        // 2^40 x 2^40: the row-major stride of dimension 0 is 2^40, its extent times that 2^80.
        m.dl_tensor.ndim = 2;
        shape[0] = shape[1] = int64_t(1) << 40;
        strides[0] = int64_t(1) << 40;
        strides[1] = 1;
        TENSO_CHECK_STATUS(TENSO_E_TOO_MANY_ELEMENTS, tenso_gpu_tensor_from_dlpack(&t, &m));
        CPPUNIT_ASSERT(!t);
        // Empty (a zero extent passes the element count), the others 2^40 x 2^40: the strides'
        // running product overflows.
        m.dl_tensor.ndim = 3;
        shape[0] = 0;
        shape[1] = shape[2] = int64_t(1) << 40;
        strides[2] = 1;
        strides[1] = int64_t(1) << 40;
        strides[0] = INT64_MAX;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_gpu_tensor_from_dlpack(&t, &m));
        // byte_offset to the end of the address space.
        m.dl_tensor.ndim = 1;
        shape[0] = 4;
        strides[0] = 1;
        m.dl_tensor.byte_offset = UINT64_MAX - 8;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_gpu_tensor_from_dlpack(&t, &m));
        // ndim without a shape.
        m.dl_tensor.byte_offset = 0;
        m.dl_tensor.shape = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_gpu_tensor_from_dlpack(&t, &m));
        // And the valid one is taken (no-op deleter: the cells are on the stack).
        m.dl_tensor.shape = shape;
        TENSO_CHECK_OK(tenso_gpu_tensor_from_dlpack(&t, &m));
        CPPUNIT_ASSERT_EQUAL(uint64_t(16), tenso_gpu_tensor_nbytes(t));
        tenso_gpu_tensor_free(t);
    }

    // The segment behind an exported tensor, opened through /proc as any process of the user
    // can: it cannot be shrunk (which would SIGBUS every process that maps it), and a segment
    // named like ours that could be shrunk is refused by ipc_open with a status.
    void ipcSegmentCannotShrink() {
        const uint64_t shape[1] = {8192};
        tenso_gpu_tensor *raw = nullptr;
        TENSO_CHECK_OK(tenso_gpu_tensor_new(&raw, 0, TENSO_DTYPE_UINT8, 1, shape));
        std::unique_ptr<tenso_gpu_tensor, void (*)(tenso_gpu_tensor *)> t(raw, tenso_gpu_tensor_free);
        tenso_value *rv = nullptr;
        TENSO_CHECK_OK(tenso_gpu_ipc_export(&rv, t.get()));
        ValuePtr ref(rv);
        Buffer pb;
        TENSO_CHECK_OK(tenso_value_dumps(&pb.b, ref.get(), nullptr));
        Bytes packet = pb.bytes();
        // The body: handle[64] (magic[16], pid u64, fd i64, size u64, pad), offset, nbytes, uuid.
        const size_t body = packet.size() - 96;
        int64_t seg_fd = 0;
        std::memcpy(&seg_fd, packet.data() + body + 24, 8);
        const std::string path = "/proc/self/fd/" + std::to_string(seg_fd);
        const int other = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        CPPUNIT_ASSERT(other >= 0);
        CPPUNIT_ASSERT_MESSAGE("a tenso-gpu segment could be shrunk", ::ftruncate(other, 0) != 0);
        CPPUNIT_ASSERT_EQUAL(EPERM, errno);
        ::close(other);
        Bytes data(8192, 7);
        TENSO_CHECK_OK(tenso_gpu_tensor_upload(t.get(), data.data(), data.size(), nullptr));
        // A forged segment: named like ours, the right size, not sealed.
        const int forged = ::memfd_create("tenso-gpu", MFD_CLOEXEC);
        CPPUNIT_ASSERT(forged >= 0);
        CPPUNIT_ASSERT(::ftruncate(forged, 8192) == 0);
        const int64_t forged64 = forged;
        std::memcpy(packet.data() + body + 24, &forged64, 8);
        tenso_view *vr = nullptr;
        TENSO_CHECK_OK(tenso_loads(&vr, packet.data(), packet.size(), nullptr));
        ViewPtr view(vr);
        tenso_gpu_tensor *opened = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT,
                           tenso_gpu_ipc_open(&opened, view.get(), TENSO_DTYPE_UINT8, 1, shape));
        CPPUNIT_ASSERT(!opened);
        ::close(forged);
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiGpuHostileTest);
