// CapiGpuTest - tenso_gpu_* through the public calls on the backend TENSO_GPU_BACKEND names
// (tests/gpu/run-device-suite.sh runs it on CUDA), the host backend otherwise (device memory in
// memfd segments, a worker thread per stream; what only holds there is marked): dense packets of every dtype, bundles,
// LZ4 and integrity, chunk sizes below the body and odd ones with 1-3 staging buffers, fd reads that stream the body up
// while it arrives, hostile and truncated packets from an fd (exact statuses, no device memory left behind: each
// allocation holds an fd, so /proc/self/fd is the leak count), the caller's device memory too small, IPC opened in a
// forked child, DLPack round trips, the pinned pool's hits and limit, device dequantize bit-exact with
// tenso_dequantize, and the CUDA backend in a child process answering GPU_UNAVAILABLE cleanly.
#include <cppunit/extensions/HelperMacros.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "hostile_util.hpp"
#include "tenso/tenso.h"

extern char **environ;

using namespace hostile;

namespace {

struct GpuValueFree {
    void operator()(tenso_gpu_value *v) const { tenso_gpu_value_free(v); }
};
struct GpuTensorFree {
    void operator()(tenso_gpu_tensor *t) const { tenso_gpu_tensor_free(t); }
};
using GpuValuePtr = std::unique_ptr<tenso_gpu_value, GpuValueFree>;
using GpuTensorPtr = std::unique_ptr<tenso_gpu_tensor, GpuTensorFree>;

tenso_gpu_options gopts(uint64_t chunk = 0, uint32_t buffers = 0) {
    tenso_gpu_options o = TENSO_GPU_OPTIONS_INIT;
    o.chunk_bytes = chunk;
    o.staging_buffers = buffers;
    return o;
}

Bytes download(const tenso_gpu_tensor *t) {
    Bytes out(size_t(tenso_gpu_tensor_nbytes(t)));
    TENSO_CHECK_OK(tenso_gpu_tensor_download(out.data(), out.size(), t, nullptr));
    return out;
}

Bytes pattern(size_t n, uint32_t seed) {
    Bytes b(n);
    uint32_t x = seed * 2654435761u + 1;
    for (auto &c : b) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        c = uint8_t(x);
    }
    return b;
}

// A new device tensor holding `data`.
GpuTensorPtr device_tensor(tenso_dtype dtype, const std::vector<uint64_t> &shape, const Bytes &data) {
    tenso_gpu_tensor *raw = nullptr;
    TENSO_CHECK_OK(tenso_gpu_tensor_new(&raw, 0, dtype, uint32_t(shape.size()), shape.data()));
    GpuTensorPtr t(raw);
    TENSO_CHECK_OK(tenso_gpu_tensor_upload(t.get(), data.data(), data.size(), nullptr));
    return t;
}

Bytes dumps(const Bytes &data, const std::vector<uint64_t> &shape, tenso_dtype dtype, uint32_t flags = 0) {
    const tenso_tensor t = tensor(data.data(), data.size(), shape, dtype);
    const tenso_encode_options e = enc(flags);
    Buffer b;
    TENSO_CHECK_OK(tenso_dumps(&b.b, &t, &e));
    return b.bytes();
}

size_t open_fds() {
    size_t n = 0;
    DIR *d = ::opendir("/proc/self/fd");
    while (::readdir(d)) ++n;
    ::closedir(d);
    return n;
}

// A pipe whose writer thread sends `bytes` and closes, so reads see pipe-sized pieces.
struct Feed {
    int fds[2] = {-1, -1};
    std::thread writer;
    explicit Feed(Bytes bytes) {
        ::signal(SIGPIPE, SIG_IGN);  // a reader that refuses a packet closes before the writer ends
        CPPUNIT_ASSERT(::pipe2(fds, O_CLOEXEC) == 0);
        writer = std::thread([this, b = std::move(bytes)] {
            size_t off = 0;
            while (off < b.size()) {
                const ssize_t w = ::write(fds[1], b.data() + off, b.size() - off);
                if (w <= 0) break;  // the reader gave up
                off += size_t(w);
            }
            ::close(fds[1]);
        });
    }
    ~Feed() {
        ::close(fds[0]);
        writer.join();
    }
    int fd() const { return fds[0]; }
};

// The result of a loads or read_fd of a dense packet, checked against what was encoded.
void check_dense(const tenso_gpu_value *v, const Bytes &data, const std::vector<uint64_t> &shape, tenso_dtype dtype) {
    CPPUNIT_ASSERT(v);
    const tenso_gpu_tensor *t = tenso_gpu_value_tensor(v);
    CPPUNIT_ASSERT(t);
    CPPUNIT_ASSERT_EQUAL(0u, tenso_gpu_value_bundle_count(v));
    CPPUNIT_ASSERT_EQUAL(dtype, tenso_gpu_tensor_dtype(t));
    CPPUNIT_ASSERT_EQUAL(uint32_t(shape.size()), tenso_gpu_tensor_ndim(t));
    for (size_t i = 0; i < shape.size(); ++i) CPPUNIT_ASSERT_EQUAL(shape[i], tenso_gpu_tensor_shape(t)[i]);
    CPPUNIT_ASSERT(download(t) == data);
}

// float32 -> float16 / bfloat16, round to nearest even (an independent reference).
uint16_t to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
    return uint16_t((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}
uint16_t to_f16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const float a = std::fabs(f);
    if (std::isnan(f)) return uint16_t(sign | 0x7e00u);
    if (a >= 65520.0f) return uint16_t(sign | 0x7c00u);
    if (a < 6.103515625e-05f) {  // subnormal: a multiple of 2^-24, rounded to even by rint
        return uint16_t(sign | uint32_t(std::nearbyint(a * 16777216.0f)));
    }
    const uint32_t au = u & 0x7fffffffu;
    const uint32_t mant = au & 0x7fffffu;
    const int32_t exp = int32_t(au >> 23) - 127 + 15;
    uint32_t h = uint32_t(exp) << 10 | (mant >> 13);
    const uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;
    return uint16_t(sign | h);
}

}  // namespace

class CapiGpuTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiGpuTest);
    CPPUNIT_TEST(backendAndDevice);
    CPPUNIT_TEST(denseEveryDtype);
    CPPUNIT_TEST(chunkSizesAndStaging);
    CPPUNIT_TEST(defaultChunkBoundariesFromFd);
    CPPUNIT_TEST(lz4AndIntegrity);
    CPPUNIT_TEST(bundlesMemberByMember);
    CPPUNIT_TEST(hostileFromFd);
    CPPUNIT_TEST(loadsIntoCallerMemory);
    CPPUNIT_TEST(deviceToPacket);
    CPPUNIT_TEST(deviceToPacketChunked);
    CPPUNIT_TEST(callerStream);
    CPPUNIT_TEST(loadFileStaged);
    CPPUNIT_TEST(ipcInForkedChild);
    CPPUNIT_TEST(dlpackRoundTrip);
    CPPUNIT_TEST(pinnedPool);
    CPPUNIT_TEST(stagingFailsHalfway);
    CPPUNIT_TEST(dequantizeBitExact);
    CPPUNIT_TEST(cudaBackendUnavailable);
    CPPUNIT_TEST(cudaChild);
    CPPUNIT_TEST_SUITE_END();

public:
    // The backend under test: TENSO_GPU_BACKEND's, the host backend when it is unset.
    static uint32_t backend() {
        const char *env = std::getenv("TENSO_GPU_BACKEND");
        return env && std::string(env) == "cuda" ? TENSO_GPU_BACKEND_CUDA : TENSO_GPU_BACKEND_HOST;
    }
    static bool on_host() { return backend() == TENSO_GPU_BACKEND_HOST; }

    void setUp() override {
        if (std::getenv("TENSO_GPU_TEST_CUDA_CHILD")) return;  // cudaChild picks its own backend
        TENSO_CHECK_OK(tenso_gpu_select_backend(backend()));
    }

    bool child() const { return std::getenv("TENSO_GPU_TEST_CUDA_CHILD") != nullptr; }

    void backendAndDevice() {
        if (child()) return;
        TENSO_CHECK_OK(tenso_gpu_available());
        CPPUNIT_ASSERT_EQUAL(backend(), tenso_gpu_backend());
        CPPUNIT_ASSERT_EQUAL(std::string(on_host() ? "host" : "cuda"),
                             std::string(tenso_gpu_backend_name(tenso_gpu_backend())));
        CPPUNIT_ASSERT_EQUAL(std::string("none"), std::string(tenso_gpu_backend_name(7)));
        const uint32_t other = on_host() ? TENSO_GPU_BACKEND_CUDA : TENSO_GPU_BACKEND_HOST;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_gpu_select_backend(other));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_gpu_select_backend(9));
        int32_t n = 0;
        TENSO_CHECK_OK(tenso_gpu_device_count(&n));
        if (on_host()) CPPUNIT_ASSERT_EQUAL(1, n);
        CPPUNIT_ASSERT(n >= 1);
        tenso_gpu_device_info info;
        info.version = TENSO_GPU_DEVICE_INFO_VERSION;
        TENSO_CHECK_OK(tenso_gpu_device_info_get(&info, 0));
        CPPUNIT_ASSERT_EQUAL(backend(), info.backend);
        CPPUNIT_ASSERT(info.flags & TENSO_GPU_DEVICE_IPC);
        CPPUNIT_ASSERT(info.total_memory > 0);
        CPPUNIT_ASSERT(std::strlen(info.name) > 0);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_gpu_device_info_get(&info, n));
        info.version = 99;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_gpu_device_info_get(&info, 0));
        const uint64_t shape[1] = {4};
        tenso_gpu_tensor *t = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_gpu_tensor_new(&t, n, TENSO_DTYPE_FLOAT32, 1, shape));
        TENSO_CHECK_STATUS(TENSO_E_BAD_DTYPE, tenso_gpu_tensor_new(&t, 0, 99, 1, shape));
        CPPUNIT_ASSERT(!t);
        tenso_gpu_options o = gopts();
        o.version = 2;
        tenso_gpu_value *v = nullptr;
        const Bytes p = dumps(Bytes(16), {4}, TENSO_DTYPE_FLOAT32);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_gpu_loads(&v, p.data(), p.size(), &o));
        o = gopts();
        o.dequantize_to = TENSO_DTYPE_INT32;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_gpu_loads(&v, p.data(), p.size(), &o));
        CPPUNIT_ASSERT(!v);
    }

    void denseEveryDtype() {
        if (child()) return;
        for (uint32_t i = 0; i < tenso_dtype_count(); ++i) {
            const tenso_dtype dt = tenso_dtype_at(i);
            const size_t item = tenso_dtype_itemsize(dt);
            if (!item) continue;
            for (const std::vector<uint64_t> &shape : {std::vector<uint64_t>{}, {0}, {3, 5}, {2, 1, 7}}) {
                size_t n = item;
                for (uint64_t d : shape) n *= size_t(d);
                Bytes data = pattern(n, uint32_t(dt));
                if (dt == TENSO_DTYPE_BOOL)
                    for (auto &c : data) c &= 1;
                const Bytes p = dumps(data, shape, dt);
                tenso_gpu_value *raw = nullptr;
                TENSO_CHECK_OK(tenso_gpu_loads(&raw, p.data(), p.size(), nullptr));
                GpuValuePtr v(raw);
                check_dense(v.get(), data, shape, dt);
                CPPUNIT_ASSERT_EQUAL(TENSO_GPU_PATH_STAGED, tenso_gpu_value_path(v.get()));
                // And back: byte for byte what tenso_dumps makes of the same tensor.
                Buffer back;
                TENSO_CHECK_OK(tenso_gpu_dumps(&back.b, tenso_gpu_value_tensor(v.get()), nullptr, nullptr));
                CPPUNIT_ASSERT(back.bytes() == p);
            }
        }
    }

    void chunkSizesAndStaging() {
        if (child()) return;
        const Bytes data = pattern(100003, 5);  // odd: no chunk size divides it
        const Bytes p = dumps(data, {100003}, TENSO_DTYPE_UINT8);
        for (uint64_t chunk : {uint64_t(13), uint64_t(4096), uint64_t(65536), uint64_t(1) << 20, uint64_t(0)}) {
            for (uint32_t bufs : {1u, 2u, 3u}) {
                const tenso_gpu_options o = gopts(chunk, bufs);
                tenso_gpu_value *raw = nullptr;
                TENSO_CHECK_OK(tenso_gpu_loads(&raw, p.data(), p.size(), &o));
                GpuValuePtr a(raw);
                check_dense(a.get(), data, {100003}, TENSO_DTYPE_UINT8);
                Feed f(p);
                TENSO_CHECK_OK(tenso_gpu_read_fd(&raw, f.fd(), &o));
                GpuValuePtr b(raw);
                check_dense(b.get(), data, {100003}, TENSO_DTYPE_UINT8);
            }
        }
    }

    // Bodies around the default 8 MiB chunk and its multiples, float32 as tenso_dumps aligns
    // them, from a pipe (pipe-sized reads) and a file (reads of a whole chunk): read_fd and
    // load_file must give what loads gives.
    void defaultChunkBoundariesFromFd() {
        if (child()) return;
        const size_t mib8 = size_t(8) << 20;
        for (size_t n : {mib8 - 4, mib8, mib8 + 4, 2 * mib8, 2 * mib8 + 64}) {
            const Bytes data = pattern(n, uint32_t(n));
            const std::vector<uint64_t> shape = {n / 4};
            const Bytes p = dumps(data, shape, TENSO_DTYPE_FLOAT32);
            tenso_gpu_value *raw = nullptr;
            {
                Feed f(p);
                TENSO_CHECK_OK(tenso_gpu_read_fd(&raw, f.fd(), nullptr));
                GpuValuePtr v(raw);
                check_dense(v.get(), data, shape, TENSO_DTYPE_FLOAT32);
            }
            char path[] = "/tmp/tenso-gpu-chunk-XXXXXX";
            const int fd = ::mkstemp(path);
            CPPUNIT_ASSERT(fd >= 0);
            spit(path, p.data(), p.size());
            const tenso_status st = tenso_gpu_read_fd(&raw, fd, nullptr);
            ::close(fd);
            GpuValuePtr a(raw);
            raw = nullptr;
            const tenso_status st2 = tenso_gpu_load_file(&raw, path, nullptr);
            ::unlink(path);
            GpuValuePtr b(raw);
            TENSO_CHECK_OK(st);
            check_dense(a.get(), data, shape, TENSO_DTYPE_FLOAT32);
            TENSO_CHECK_OK(st2);
            check_dense(b.get(), data, shape, TENSO_DTYPE_FLOAT32);
        }
    }

    void lz4AndIntegrity() {
        if (child()) return;
        Bytes data(1 << 20);
        for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i / 1000);  // compressible
        const std::vector<uint64_t> shape = {1024, 256};
        for (uint32_t flags : {uint32_t(TENSO_ENCODE_COMPRESS), uint32_t(TENSO_ENCODE_INTEGRITY),
                               uint32_t(TENSO_ENCODE_COMPRESS | TENSO_ENCODE_INTEGRITY)}) {
            const Bytes p = dumps(data, shape, TENSO_DTYPE_FLOAT32, flags);
            const tenso_gpu_options o = gopts(65536 + 3, 2);
            tenso_gpu_value *raw = nullptr;
            TENSO_CHECK_OK(tenso_gpu_loads(&raw, p.data(), p.size(), &o));
            GpuValuePtr a(raw);
            check_dense(a.get(), data, shape, TENSO_DTYPE_FLOAT32);
            {
                Feed f(p);
                TENSO_CHECK_OK(tenso_gpu_read_fd(&raw, f.fd(), &o));
                GpuValuePtr b(raw);
                check_dense(b.get(), data, shape, TENSO_DTYPE_FLOAT32);
            }
            if (!(flags & TENSO_ENCODE_INTEGRITY)) continue;
            // A flipped body byte: the footer catches it, from memory and from an fd (where the
            // body was already on its way to the device), and nothing stays allocated.
            Bytes bad = p;
            bad[bad.size() - 1] ^= 0x40;  // the footer's last byte
            const size_t fds = open_fds();
            const tenso_status want = TENSO_E_CHECKSUM;
            TENSO_CHECK_STATUS(want, tenso_gpu_loads(&raw, bad.data(), bad.size(), &o));
            CPPUNIT_ASSERT(!raw);
            {
                Feed f(bad);
                TENSO_CHECK_STATUS(want, tenso_gpu_read_fd(&raw, f.fd(), &o));
                CPPUNIT_ASSERT(!raw);
            }
            CPPUNIT_ASSERT_EQUAL(fds, open_fds());
        }
    }

    void bundlesMemberByMember() {
        if (child()) return;
        const Bytes a = pattern(40, 1), b = pattern(6, 2), c = pattern(64, 3);
        const std::vector<uint64_t> sa = {10}, sb = {3}, sc = {2, 4};
        tenso_tensor ta = tensor(a.data(), a.size(), sa, TENSO_DTYPE_FLOAT32);
        tenso_tensor tb = tensor(b.data(), b.size(), sb, TENSO_DTYPE_INT16);
        tenso_tensor tc = tensor(c.data(), c.size(), sc, TENSO_DTYPE_FLOAT64);
        tenso_value *raw = nullptr;
        TENSO_CHECK_OK(tenso_value_new_bundle(&raw));
        ValuePtr outer(raw), inner, va, vb, vc;
        TENSO_CHECK_OK(tenso_value_new_bundle(&raw));
        inner.reset(raw);
        TENSO_CHECK_OK(tenso_value_new_tensor(&raw, &ta));
        va.reset(raw);
        TENSO_CHECK_OK(tenso_value_new_tensor(&raw, &tb));
        vb.reset(raw);
        TENSO_CHECK_OK(tenso_value_new_tensor(&raw, &tc));
        vc.reset(raw);
        TENSO_CHECK_OK(tenso_bundle_insert(inner.get(), "c", 1, vc.get()));
        TENSO_CHECK_OK(tenso_bundle_insert(outer.get(), "a", 1, va.get()));
        TENSO_CHECK_OK(tenso_bundle_insert(outer.get(), "inner", 5, inner.get()));
        TENSO_CHECK_OK(tenso_bundle_insert(outer.get(), "b", 1, vb.get()));
        for (uint32_t flags : {0u, uint32_t(TENSO_ENCODE_INTEGRITY | TENSO_ENCODE_COMPRESS)}) {
            const tenso_encode_options e = enc(flags);
            Buffer pb;
            TENSO_CHECK_OK(tenso_value_dumps(&pb.b, outer.get(), &e));
            const Bytes p = pb.bytes();
            for (int from_fd = 0; from_fd < 2; ++from_fd) {
                tenso_gpu_value *gv = nullptr;
                const tenso_gpu_options o = gopts(7, 3);
                if (from_fd) {
                    Feed f(p);
                    TENSO_CHECK_OK(tenso_gpu_read_fd(&gv, f.fd(), &o));
                } else {
                    TENSO_CHECK_OK(tenso_gpu_loads(&gv, p.data(), p.size(), &o));
                }
                GpuValuePtr v(gv);
                CPPUNIT_ASSERT(!tenso_gpu_value_tensor(v.get()));
                CPPUNIT_ASSERT_EQUAL(3u, tenso_gpu_value_bundle_count(v.get()));
                const char *key = nullptr;
                size_t key_len = 0;
                const tenso_gpu_value *child_v = nullptr;
                TENSO_CHECK_OK(tenso_gpu_value_bundle_entry(&key, &key_len, &child_v, v.get(), 0));
                CPPUNIT_ASSERT_EQUAL(std::string("a"), std::string(key, key_len));
                check_dense(child_v, a, sa, TENSO_DTYPE_FLOAT32);
                TENSO_CHECK_OK(tenso_gpu_value_bundle_entry(&key, &key_len, &child_v, v.get(), 1));
                CPPUNIT_ASSERT_EQUAL(std::string("inner"), std::string(key, key_len));
                CPPUNIT_ASSERT_EQUAL(1u, tenso_gpu_value_bundle_count(child_v));
                const tenso_gpu_value *grand = nullptr;
                TENSO_CHECK_OK(tenso_gpu_value_bundle_entry(&key, &key_len, &grand, child_v, 0));
                CPPUNIT_ASSERT_EQUAL(std::string("c"), std::string(key, key_len));
                check_dense(grand, c, sc, TENSO_DTYPE_FLOAT64);
                TENSO_CHECK_OK(tenso_gpu_value_bundle_entry(&key, &key_len, &child_v, v.get(), 2));
                check_dense(child_v, b, sb, TENSO_DTYPE_INT16);
                TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT,
                                   tenso_gpu_value_bundle_entry(&key, &key_len, &child_v, v.get(), 3));
                tenso_gpu_tensor *taken = nullptr;
                TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_gpu_value_take_tensor(&taken, v.get()));
            }
        }
        // A member with no device form fails the whole value, leaving nothing allocated.
        const uint64_t offs[3] = {0, 2, 5};
        TENSO_CHECK_OK(tenso_value_new_strings(&raw, 2, offs, "abcde", 5));
        ValuePtr strs(raw);
        TENSO_CHECK_OK(tenso_bundle_insert(outer.get(), "s", 1, strs.get()));
        Buffer pb;
        TENSO_CHECK_OK(tenso_value_dumps(&pb.b, outer.get(), nullptr));
        const size_t fds = open_fds();
        tenso_gpu_value *gv = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_gpu_loads(&gv, pb.b.data, pb.b.size, nullptr));
        CPPUNIT_ASSERT(!gv);
        CPPUNIT_ASSERT_EQUAL(fds, open_fds());
        // tenso_gpu_loads_into takes dense packets only.
        uint64_t nbytes = 1;
        TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND,
                           tenso_gpu_loads_into(nullptr, 0, &nbytes, pb.b.data, pb.b.size, nullptr));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), nbytes);
    }

    void hostileFromFd() {
        if (child()) return;
        const Bytes data = pattern(300000, 9);
        const Bytes p = dumps(data, {300000}, TENSO_DTYPE_UINT8, TENSO_ENCODE_INTEGRITY);
        const tenso_gpu_options o = gopts(4096, 2);
        const size_t fds = open_fds();
        struct Case {
            Bytes bytes;
            tenso_status want;
        };
        std::vector<Case> cases;
        cases.push_back({Bytes(), TENSO_E_END_OF_STREAM});
        cases.push_back({Bytes(p.begin(), p.begin() + 5), TENSO_E_TRUNCATED});       // inside the header
        cases.push_back({Bytes(p.begin(), p.begin() + 200000), TENSO_E_TRUNCATED});  // inside the body
        cases.push_back({Bytes(p.begin(), p.end() - 3), TENSO_E_TRUNCATED});         // inside the footer
        Bytes magic = p;
        magic[0] ^= 0xff;
        cases.push_back({magic, TENSO_E_BAD_MAGIC});
        Bytes dtype = p;
        dtype[7] = 0xee;  // the dtype byte of the v4 header
        cases.push_back({dtype, TENSO_E_BAD_DTYPE});
        Bytes body = p;
        body[150000] ^= 1;
        cases.push_back({body, TENSO_E_CHECKSUM});
        for (const Case &c : cases) {
            Feed f(c.bytes);
            tenso_gpu_value *raw = nullptr;
            TENSO_CHECK_STATUS(c.want, tenso_gpu_read_fd(&raw, f.fd(), &o));
            CPPUNIT_ASSERT(!raw);
        }
        tenso_gpu_value *raw = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_IO, tenso_gpu_read_fd(&raw, -1, &o));
        CPPUNIT_ASSERT_EQUAL(fds, open_fds());  // no device memory (memfd) left behind
        // The same packets from memory.
        TENSO_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_gpu_loads(&raw, p.data(), 200000, &o));
        TENSO_CHECK_STATUS(TENSO_E_BAD_MAGIC, tenso_gpu_loads(&raw, magic.data(), magic.size(), &o));
        TENSO_CHECK_STATUS(TENSO_E_CHECKSUM, tenso_gpu_loads(&raw, body.data(), body.size(), &o));
        CPPUNIT_ASSERT_EQUAL(fds, open_fds());
        // Quantized packets need dequantize_to; sparse ones have no device form.
        std::vector<float> f(64, 1.5f);
        const std::vector<uint64_t> shape = {64};
        const tenso_tensor t = tensor(f.data(), 256, shape, TENSO_DTYPE_FLOAT32);
        tenso_value *q = nullptr;
        TENSO_CHECK_OK(tenso_quantize(&q, &t, TENSO_DTYPE_QINT8, TENSO_QUANT_PER_TENSOR, 0, 0));
        ValuePtr qv(q);
        Buffer qb;
        TENSO_CHECK_OK(tenso_value_dumps(&qb.b, qv.get(), nullptr));
        TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_gpu_loads(&raw, qb.b.data, qb.b.size, nullptr));
        CPPUNIT_ASSERT_EQUAL(fds, open_fds());
    }

    void loadsIntoCallerMemory() {
        if (child()) return;
        const Bytes data = pattern(4000, 11);
        const Bytes p = dumps(data, {1000}, TENSO_DTYPE_INT32);
        const uint64_t shape[1] = {1024};
        tenso_gpu_tensor *raw = nullptr;
        TENSO_CHECK_OK(tenso_gpu_tensor_new(&raw, 0, TENSO_DTYPE_INT32, 1, shape));
        GpuTensorPtr dst(raw);
        uint64_t n = 0;
        TENSO_CHECK_STATUS(TENSO_E_BUFFER_TOO_SMALL, tenso_gpu_loads_into(tenso_gpu_tensor_data(dst.get()), 3999, &n,
                                                                          p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), n);
        const tenso_gpu_options o = gopts(333, 3);
        TENSO_CHECK_OK(tenso_gpu_loads_into(tenso_gpu_tensor_data(dst.get()), 4096, &n, p.data(), p.size(), &o));
        CPPUNIT_ASSERT_EQUAL(uint64_t(4000), n);
        const Bytes got = download(dst.get());
        CPPUNIT_ASSERT(Bytes(got.begin(), got.begin() + 4000) == data);
    }

    void deviceToPacket() {
        if (child()) return;
        Bytes data(3 << 20);
        for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i % 251 / 3);
        const std::vector<uint64_t> shape = {768, 1024};
        tenso_gpu_tensor *raw = nullptr;
        TENSO_CHECK_OK(tenso_gpu_tensor_new(&raw, 0, TENSO_DTYPE_FLOAT32, 2, shape.data()));
        GpuTensorPtr t(raw);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT,
                           tenso_gpu_tensor_upload(t.get(), data.data(), data.size() - 1, nullptr));
        TENSO_CHECK_OK(tenso_gpu_tensor_upload(t.get(), data.data(), data.size(), nullptr));
        const tenso_gpu_options o = gopts(100001, 3);
        for (uint32_t flags :
             {0u, uint32_t(TENSO_ENCODE_INTEGRITY), uint32_t(TENSO_ENCODE_INTEGRITY | TENSO_ENCODE_COMPRESS)}) {
            const tenso_encode_options e = enc(flags);
            Buffer b;
            TENSO_CHECK_OK(tenso_gpu_dumps(&b.b, t.get(), &e, &o));
            CPPUNIT_ASSERT(b.bytes() == dumps(data, shape, TENSO_DTYPE_FLOAT32, flags));
            // To an fd: what tenso_read_fd reads back, footer checked.
            char path[] = "/tmp/tenso-gpu-test-XXXXXX";
            const int fd = ::mkstemp(path);
            CPPUNIT_ASSERT(fd >= 0);
            ::unlink(path);
            uint64_t written = 0;
            TENSO_CHECK_OK(tenso_gpu_write_fd(&written, fd, t.get(), &e, &o));
            CPPUNIT_ASSERT_EQUAL(uint64_t(b.b.size), written);
            CPPUNIT_ASSERT(::lseek(fd, 0, SEEK_SET) == 0);
            tenso_view *vr = nullptr;
            TENSO_CHECK_OK(tenso_read_fd(&vr, fd, nullptr));
            ViewPtr v(vr);
            CPPUNIT_ASSERT_EQUAL(flags & TENSO_ENCODE_INTEGRITY ? TENSO_FLAG_INTEGRITY : 0u,
                                 tenso_view_flags(v.get()) & TENSO_FLAG_INTEGRITY);
            CPPUNIT_ASSERT(std::memcmp(tenso_view_data(v.get()), data.data(), data.size()) == 0);
            ::close(fd);
        }
        uint64_t written = 7;
        TENSO_CHECK_STATUS(TENSO_E_IO, tenso_gpu_write_fd(&written, -1, t.get(), nullptr, nullptr));
    }

    // Device -> packet through staging chunk by chunk: byte for byte tenso_dumps, for bodies
    // around the chunk size and its multiples (a small chunk, and the default 8 MiB), with and
    // without the footer, into memory and into a pipe whose reader takes small bites slowly.
    void deviceToPacketChunked() {
        if (child()) return;
        const size_t mib8 = size_t(8) << 20;
        struct Case {
            size_t n;
            uint64_t chunk;
        };
        for (const Case &c :
             {Case{4095, 4096}, Case{4096, 4096}, Case{4097, 4096}, Case{3 * 4096, 4096}, Case{3 * 4096 + 1, 4096},
              Case{0, 4096}, Case{mib8 - 1, 0}, Case{mib8 + 1, 0}, Case{2 * mib8, 0}}) {
            const Bytes data = pattern(c.n, uint32_t(c.n));
            GpuTensorPtr t = device_tensor(TENSO_DTYPE_UINT8, {c.n}, data);
            for (uint32_t flags : {0u, uint32_t(TENSO_ENCODE_INTEGRITY)}) {
                const std::string what = "n " + std::to_string(c.n) + " flags " + std::to_string(flags);
                const Bytes want = dumps(data, {c.n}, TENSO_DTYPE_UINT8, flags);
                const tenso_encode_options e = enc(flags);
                const tenso_gpu_options o = gopts(c.chunk, 2);
                Buffer mem;
                TENSO_CHECK_OK(tenso_gpu_dumps(&mem.b, t.get(), &e, &o));
                CPPUNIT_ASSERT_MESSAGE(what, mem.bytes() == want);
                int fds[2];
                CPPUNIT_ASSERT(::pipe2(fds, O_CLOEXEC) == 0);
                Bytes got;
                std::thread reader([&] {
                    uint8_t bite[1000];
                    for (;;) {
                        const ssize_t r = ::read(fds[0], bite, sizeof bite);
                        if (r <= 0) break;
                        got.insert(got.end(), bite, bite + r);
                        if (got.size() % 64 < 8) std::this_thread::yield();  // slower than the writer
                    }
                    ::close(fds[0]);
                });
                uint64_t written = 0;
                const tenso_status st = tenso_gpu_write_fd(&written, fds[1], t.get(), &e, &o);
                ::close(fds[1]);
                reader.join();
                TENSO_CHECK_OK(st);
                CPPUNIT_ASSERT_EQUAL_MESSAGE(what, uint64_t(want.size()), written);
                CPPUNIT_ASSERT_MESSAGE(what, got == want);
            }
        }
    }

    void callerStream() {
        if (child()) return;
        void *s = nullptr;
        TENSO_CHECK_OK(tenso_gpu_stream_new(&s, 0));
        CPPUNIT_ASSERT(s);
        const Bytes data = pattern(1 << 20, 4);
        const Bytes p = dumps(data, {1 << 18}, TENSO_DTYPE_UINT32);
        tenso_gpu_options o = gopts(4099, 2);
        o.stream = s;
        tenso_gpu_value *raw = nullptr;
        TENSO_CHECK_OK(tenso_gpu_loads(&raw, p.data(), p.size(), &o));
        GpuValuePtr v(raw);
        TENSO_CHECK_OK(tenso_gpu_stream_synchronize(s));
        tenso_gpu_tensor *taken = nullptr;
        TENSO_CHECK_OK(tenso_gpu_value_take_tensor(&taken, v.get()));
        GpuTensorPtr t(taken);
        CPPUNIT_ASSERT(!tenso_gpu_value_tensor(v.get()));
        Bytes back(data.size());
        TENSO_CHECK_OK(tenso_gpu_tensor_download(back.data(), back.size(), t.get(), s));
        TENSO_CHECK_OK(tenso_gpu_stream_synchronize(s));
        CPPUNIT_ASSERT(back == data);
        tenso_gpu_stream_free(s);
    }

    void loadFileStaged() {
        if (child()) return;
        const Bytes data = pattern(77777 * 2, 8);
        const Bytes p = dumps(data, {77777}, TENSO_DTYPE_FLOAT16, TENSO_ENCODE_INTEGRITY);
        char path[] = "/tmp/tenso-gpu-file-XXXXXX";
        const int fd = ::mkstemp(path);
        CPPUNIT_ASSERT(fd >= 0);
        ::close(fd);
        spit(path, p.data(), p.size());
        const tenso_gpu_options o = gopts(1000, 2);
        tenso_gpu_value *raw = nullptr;
        const tenso_status st = tenso_gpu_load_file(&raw, path, &o);
        ::unlink(path);
        TENSO_CHECK_OK(st);
        GpuValuePtr v(raw);
        check_dense(v.get(), data, {77777}, TENSO_DTYPE_FLOAT16);
        if (on_host()) CPPUNIT_ASSERT_EQUAL(TENSO_GPU_PATH_STAGED, tenso_gpu_value_path(v.get()));  // no cuFile there
        TENSO_CHECK_STATUS(TENSO_E_NOT_FOUND, tenso_gpu_load_file(&raw, "/nonexistent/tenso.tnso", &o));
    }

    // Host backend only: a CUDA context does not survive fork(), and CUDA refuses to open a
    // handle in the process that exported it (CudaPluginTest covers CUDA IPC offsets).
    void ipcInForkedChild() {
        if (child() || !on_host()) return;
        const Bytes data = pattern(8192, 21);
        GpuTensorPtr t = device_tensor(TENSO_DTYPE_FLOAT32, {64, 32}, data);
        tenso_gpu_tensor *raw = nullptr;
        tenso_value *rv = nullptr;
        TENSO_CHECK_OK(tenso_gpu_ipc_export(&rv, t.get()));
        ValuePtr ref(rv);
        Buffer pb;
        TENSO_CHECK_OK(tenso_value_dumps(&pb.b, ref.get(), nullptr));
        CPPUNIT_ASSERT_EQUAL(size_t(106), pb.b.size);
        const Bytes packet = pb.bytes();
        // The child opens the reference, checks the bytes and writes its answer into the same memory.
        const pid_t pid = ::fork();
        CPPUNIT_ASSERT(pid >= 0);
        if (pid == 0) {
            int code = 10;
            tenso_view *vr = nullptr;
            if (tenso_loads(&vr, packet.data(), packet.size(), nullptr) == TENSO_OK) {
                tenso_gpu_tensor *opened = nullptr;
                const uint64_t wrong[1] = {100};
                code = 11;
                if (tenso_gpu_ipc_open(&opened, vr, TENSO_DTYPE_FLOAT32, 1, wrong) == TENSO_E_INVALID_ARGUMENT &&
                    tenso_gpu_ipc_open(&opened, vr, TENSO_DTYPE_UINT8, 1, (const uint64_t[]){8192}) == TENSO_OK) {
                    code = 12;
                    Bytes got(8192);
                    if (tenso_gpu_tensor_download(got.data(), got.size(), opened, nullptr) == TENSO_OK && got == data) {
                        got[0] ^= 0xff;
                        code = tenso_gpu_tensor_upload(opened, got.data(), got.size(), nullptr) == TENSO_OK ? 0 : 13;
                    }
                    tenso_gpu_tensor_free(opened);
                }
                tenso_view_free(vr);
            }
            ::_exit(code);
        }
        int status = 0;
        CPPUNIT_ASSERT(::waitpid(pid, &status, 0) == pid);
        CPPUNIT_ASSERT(WIFEXITED(status));
        CPPUNIT_ASSERT_EQUAL(0, WEXITSTATUS(status));
        Bytes want = data;
        want[0] ^= 0xff;
        CPPUNIT_ASSERT(download(t.get()) == want);  // the child's write, through the shared segment
        // The reference read as a packet in this process opens too, as uint8 bytes.
        tenso_gpu_value *gv = nullptr;
        TENSO_CHECK_OK(tenso_gpu_loads(&gv, packet.data(), packet.size(), nullptr));
        GpuValuePtr v(gv);
        CPPUNIT_ASSERT_EQUAL(TENSO_GPU_PATH_IPC, tenso_gpu_value_path(v.get()));
        CPPUNIT_ASSERT(download(tenso_gpu_value_tensor(v.get())) == want);
        // A reference whose range leaves the opened allocation (8192 bytes, two pages) is
        // refused, its handle closed again; a range inside it opens.
        {
            const size_t body = packet.size() - 96;  // handle[64] offset u64 nbytes u64 uuid[16]
            struct Case {
                uint64_t offset, nbytes;
                tenso_status want;
            };
            for (const Case &c : {Case{4096, 8192, TENSO_E_BAD_OFFSET}, Case{0, 8193, TENSO_E_BAD_OFFSET},
                                  Case{8192, 1, TENSO_E_BAD_OFFSET}, Case{4096, 4096, TENSO_OK}}) {
                Bytes bad = packet;
                for (int i = 0; i < 8; ++i) {
                    bad[body + 64 + size_t(i)] = uint8_t(c.offset >> (8 * i));
                    bad[body + 72 + size_t(i)] = uint8_t(c.nbytes >> (8 * i));
                }
                const size_t fds = open_fds();
                tenso_gpu_value *bv = nullptr;
                const tenso_status st = tenso_gpu_loads(&bv, bad.data(), bad.size(), nullptr);
                GpuValuePtr opened(bv);
                TENSO_CHECK_STATUS(c.want, st);
                if (c.want != TENSO_OK) {
                    CPPUNIT_ASSERT(!bv);
                    CPPUNIT_ASSERT_EQUAL(fds, open_fds());
                    continue;
                }
                CPPUNIT_ASSERT(download(tenso_gpu_value_tensor(opened.get())) ==
                               Bytes(want.begin() + 4096, want.end()));
            }
        }
        // Only memory tenso allocated has a handle.
        float local[4] = {};
        const uint64_t s4[1] = {4};
        TENSO_CHECK_OK(tenso_gpu_tensor_wrap(&raw, local, 0, TENSO_DTYPE_FLOAT32, 1, s4, nullptr, nullptr));
        GpuTensorPtr wrapped(raw);
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_gpu_ipc_export(&rv, wrapped.get()));
    }

    void dlpackRoundTrip() {
        if (child()) return;
        const Bytes data = pattern(6 * 4 * 2, 31);
        GpuTensorPtr t = device_tensor(TENSO_DTYPE_BFLOAT16, {6, 4}, data);
        tenso_gpu_tensor *raw = nullptr;
        DLManagedTensorVersioned *m = nullptr;
        TENSO_CHECK_OK(tenso_gpu_tensor_to_dlpack(&m, t.get()));
        void *const ptr = tenso_gpu_tensor_data(t.get());
        t.reset();  // the DLPack tensor holds its own reference
        // The host backend's memory is host memory, so it goes out as kDLCPU.
        const int32_t here = on_host() ? int32_t(kDLCPU) : int32_t(kDLCUDA);
        CPPUNIT_ASSERT_EQUAL(here, int32_t(m->dl_tensor.device.device_type));
        CPPUNIT_ASSERT_EQUAL(2, m->dl_tensor.ndim);
        CPPUNIT_ASSERT_EQUAL(int64_t(6), m->dl_tensor.shape[0]);
        CPPUNIT_ASSERT_EQUAL(int64_t(1), m->dl_tensor.strides[1]);
        CPPUNIT_ASSERT_EQUAL(int32_t(kDLBfloat), int32_t(m->dl_tensor.dtype.code));
        CPPUNIT_ASSERT(m->dl_tensor.data == ptr);
        if (on_host()) CPPUNIT_ASSERT(std::memcmp(m->dl_tensor.data, data.data(), data.size()) == 0);
        TENSO_CHECK_OK(tenso_gpu_tensor_from_dlpack(&raw, m));
        GpuTensorPtr back(raw);
        CPPUNIT_ASSERT(tenso_gpu_tensor_data(back.get()) == ptr);  // no copy
        CPPUNIT_ASSERT_EQUAL(TENSO_DTYPE_BFLOAT16, tenso_gpu_tensor_dtype(back.get()));
        CPPUNIT_ASSERT(download(back.get()) == data);
        // Refusals leave the caller owning the tensor.
        DLManagedTensorVersioned *m2 = nullptr;
        TENSO_CHECK_OK(tenso_gpu_tensor_to_dlpack(&m2, back.get()));
        m2->dl_tensor.strides[0] = 1;  // not C-contiguous
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_gpu_tensor_from_dlpack(&raw, m2));
        m2->dl_tensor.strides[0] = 4;
        m2->dl_tensor.device.device_type = on_host() ? kDLCUDA : kDLCPU;
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_gpu_tensor_from_dlpack(&raw, m2));
        m2->dl_tensor.device.device_type = DLDeviceType(here);
        m2->dl_tensor.dtype.lanes = 4;
        TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_gpu_tensor_from_dlpack(&raw, m2));
        m2->deleter(m2);
        back.reset();  // runs m's deleter, the last reference to the memory
    }

    // The second staging chunk cannot be had (an address-space limit, in a forked child): the
    // call answers NO_MEMORY and the first chunk goes back to the pool, which (limit 0) unpins
    // it, so no pinned buffer stays behind. 64 MiB chunks: malloc maps those afresh.
    void stagingFailsHalfway() {
        if (child() || !on_host()) return;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
        return;  // RLIMIT_AS arithmetic means nothing beside a sanitizer's shadow memory (make test runs it)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
        return;
#endif
#endif
        // The address-space arithmetic below needs a process without earlier tests' kept buffers
        // and cached thread stacks (freeing those mid-call would make room for the second chunk).
        if (!std::getenv("TENSO_GPU_TEST_STAGING_CHILD")) {
            run_in_fresh_process("CapiGpuTest::stagingFailsHalfway",
                                 {"TENSO_GPU_TEST_STAGING_CHILD=1", "TENSO_GPU_BACKEND=host"});
            return;
        }
        const size_t mib = size_t(1) << 20, n = 128 * mib;
        const Bytes p = dumps(Bytes(n), {n}, TENSO_DTYPE_UINT8);
        void *aligned = nullptr;  // the packet where loads takes it without an aligning copy
        CPPUNIT_ASSERT_EQUAL(0, ::posix_memalign(&aligned, 4096, p.size()));
        std::unique_ptr<void, decltype(&std::free)> keep(aligned, std::free);
        std::memcpy(aligned, p.data(), p.size());
        const pid_t pid = ::fork();
        CPPUNIT_ASSERT(pid >= 0);
        if (pid == 0) {
            int code = 10;
            tenso_gpu_pool_set_limit(0);  // before measuring: it unpins what earlier tests left
            tenso_gpu_pool_stats before;
            tenso_gpu_pool_stats_get(&before);
            long pages = 0;
            if (FILE *f = std::fopen("/proc/self/statm", "r")) {
                if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
                std::fclose(f);
            }
            // Room for the device tensor, one chunk, the stream's worker stack and a little; not
            // for a second chunk, even where making the worker frees glibc's cache of old thread
            // stacks (at most 40 MiB).
            const rlim_t room = rlim_t(pages) * rlim_t(::sysconf(_SC_PAGESIZE)) + n + 64 * mib + 8 * mib + 4 * mib;
            const struct rlimit lim = {room, room};
            if (pages && ::setrlimit(RLIMIT_AS, &lim) == 0) {
                const tenso_gpu_options o = gopts(64 * mib, 2);
                tenso_gpu_value *raw = nullptr;
                const tenso_status st = tenso_gpu_loads(&raw, aligned, p.size(), &o);
                tenso_gpu_pool_stats ps;
                tenso_gpu_pool_stats_get(&ps);
                if (st != TENSO_E_NO_MEMORY)
                    std::fprintf(stderr, "stagingFailsHalfway: %s\n", tenso_describe(st).c_str());
                // Both chunks asked for (the first pinned, the second refused), none kept.
                code = st != TENSO_E_NO_MEMORY ? 11 : ps.misses != before.misses + 2 ? 13 : ps.buffers != 0 ? 12 : 0;
            }
            ::_exit(code);
        }
        int status = 0;
        CPPUNIT_ASSERT(::waitpid(pid, &status, 0) == pid);
        CPPUNIT_ASSERT(WIFEXITED(status));
        CPPUNIT_ASSERT_EQUAL(0, WEXITSTATUS(status));
    }

    void pinnedPool() {
        if (child()) return;
        TENSO_CHECK_OK(tenso_gpu_pool_set_limit(0));
        tenso_gpu_pool_stats s0;
        TENSO_CHECK_OK(tenso_gpu_pool_stats_get(&s0));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), s0.buffers);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), s0.limit_bytes);
        TENSO_CHECK_OK(tenso_gpu_pool_set_limit(64ull << 20));
        const Bytes data = pattern(3 << 20, 3);
        const Bytes p = dumps(data, {3 << 20}, TENSO_DTYPE_UINT8);
        const tenso_gpu_options o = gopts(1 << 20, 2);
        tenso_gpu_value *raw = nullptr;
        TENSO_CHECK_OK(tenso_gpu_loads(&raw, p.data(), p.size(), &o));
        tenso_gpu_value_free(raw);
        tenso_gpu_pool_stats s1;
        TENSO_CHECK_OK(tenso_gpu_pool_stats_get(&s1));
        CPPUNIT_ASSERT_EQUAL(s0.misses + 2, s1.misses);  // two staging buffers pinned
        CPPUNIT_ASSERT_EQUAL(uint64_t(2), s1.buffers);
        CPPUNIT_ASSERT_EQUAL(uint64_t(2) << 20, s1.bytes);
        TENSO_CHECK_OK(tenso_gpu_loads(&raw, p.data(), p.size(), &o));
        tenso_gpu_value_free(raw);
        tenso_gpu_pool_stats s2;
        TENSO_CHECK_OK(tenso_gpu_pool_stats_get(&s2));
        CPPUNIT_ASSERT_EQUAL(s1.misses, s2.misses);  // the kept buffers served the second call
        CPPUNIT_ASSERT_EQUAL(s1.hits + 2, s2.hits);
        CPPUNIT_ASSERT_EQUAL(uint64_t(2), s2.buffers);
        // A limit of one chunk: the second buffer is unpinned when released.
        TENSO_CHECK_OK(tenso_gpu_pool_set_limit(1 << 20));
        tenso_gpu_pool_stats s3;
        TENSO_CHECK_OK(tenso_gpu_pool_stats_get(&s3));
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s3.buffers);
        CPPUNIT_ASSERT_EQUAL(uint64_t(1) << 20, s3.limit_bytes);
        TENSO_CHECK_OK(tenso_gpu_loads(&raw, p.data(), p.size(), &o));
        GpuValuePtr v(raw);
        check_dense(v.get(), data, {3 << 20}, TENSO_DTYPE_UINT8);
        tenso_gpu_pool_stats s4;
        TENSO_CHECK_OK(tenso_gpu_pool_stats_get(&s4));
        CPPUNIT_ASSERT_EQUAL(uint64_t(1), s4.buffers);
        CPPUNIT_ASSERT(s4.bytes <= s4.limit_bytes);
        TENSO_CHECK_OK(tenso_gpu_pool_set_limit(256ull << 20));
    }

    void dequantizeBitExact() {
        if (child()) return;
        const std::vector<uint64_t> shape = {6, 7, 5};
        const size_t n = 6 * 7 * 5;
        std::vector<float> x(n);
        for (size_t i = 0; i < n; ++i) x[i] = std::sin(float(i) * 0.37f) * 3.0f + float(i % 5) * 0.25f;
        const tenso_tensor in = tensor(x.data(), n * 4, shape, TENSO_DTYPE_FLOAT32);
        for (tenso_dtype qd : {TENSO_DTYPE_QINT8, TENSO_DTYPE_QUINT8, TENSO_DTYPE_QINT4, TENSO_DTYPE_QUINT4}) {
            for (int32_t scheme : {TENSO_QUANT_PER_TENSOR, TENSO_QUANT_PER_CHANNEL, TENSO_QUANT_PER_GROUP}) {
                tenso_value *qraw = nullptr;
                TENSO_CHECK_OK(tenso_quantize(&qraw, &in, qd, scheme, 1, 9));
                ValuePtr qv(qraw);
                Buffer qb;
                TENSO_CHECK_OK(tenso_value_dumps(&qb.b, qv.get(), nullptr));
                tenso_view *vr = nullptr;
                TENSO_CHECK_OK(tenso_loads(&vr, qb.b.data, qb.b.size, nullptr));
                ViewPtr view(vr);
                tenso_quantized q;
                TENSO_CHECK_OK(tenso_view_quantized(&q, view.get()));
                std::vector<float> ref(n);
                TENSO_CHECK_OK(tenso_dequantize(ref.data(), n, &q));
                for (tenso_dtype out : {TENSO_DTYPE_FLOAT32, TENSO_DTYPE_FLOAT16, TENSO_DTYPE_BFLOAT16}) {
                    Bytes want(n * (out == TENSO_DTYPE_FLOAT32 ? 4 : 2));
                    for (size_t i = 0; i < n; ++i) {
                        if (out == TENSO_DTYPE_FLOAT32) std::memcpy(&want[4 * i], &ref[i], 4);
                        else {
                            const uint16_t h = out == TENSO_DTYPE_FLOAT16 ? to_f16(ref[i]) : to_bf16(ref[i]);
                            std::memcpy(&want[2 * i], &h, 2);
                        }
                    }
                    const std::string what = std::string(tenso_dtype_name(qd)) + " scheme " + std::to_string(scheme) +
                                             " -> " + tenso_dtype_name(out);
                    tenso_gpu_tensor *raw = nullptr;
                    const tenso_gpu_options o = gopts(17, 2);  // odd chunks for the codes' upload
                    TENSO_CHECK_OK(tenso_gpu_dequantize(&raw, view.get(), out, &o));
                    GpuTensorPtr t(raw);
                    CPPUNIT_ASSERT_EQUAL(out, tenso_gpu_tensor_dtype(t.get()));
                    CPPUNIT_ASSERT_EQUAL(3u, tenso_gpu_tensor_ndim(t.get()));
                    CPPUNIT_ASSERT_MESSAGE(what, download(t.get()) == want);
                    // The same through tenso_gpu_loads with dequantize_to.
                    tenso_gpu_options lo = gopts();
                    lo.dequantize_to = out;
                    tenso_gpu_value *gv = nullptr;
                    TENSO_CHECK_OK(tenso_gpu_loads(&gv, qb.b.data, qb.b.size, &lo));
                    GpuValuePtr v(gv);
                    CPPUNIT_ASSERT_MESSAGE(what + " (loads)", download(tenso_gpu_value_tensor(v.get())) == want);
                }
            }
        }
        tenso_gpu_tensor *raw = nullptr;
        const Bytes p = dumps(Bytes(16), {4}, TENSO_DTYPE_FLOAT32);
        tenso_view *vr = nullptr;
        TENSO_CHECK_OK(tenso_loads(&vr, p.data(), p.size(), nullptr));
        ViewPtr dense(vr);
        TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND,
                           tenso_gpu_dequantize(&raw, dense.get(), TENSO_DTYPE_FLOAT32, nullptr));
    }

    // The CUDA backend in a fresh process (the backend is chosen once per process): this suite's
    // cudaChild, run with TENSO_GPU_BACKEND=cuda.
    // Runs one test of this suite in a fresh process of this program (nothing inherited from the
    // tests before it: pools, cached thread stacks, a chosen backend), with `env` added.
    static void run_in_fresh_process(const char *test, std::vector<std::string> env_s) {
        char self[4096];
        const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
        CPPUNIT_ASSERT(len > 0);
        self[len] = 0;
        for (char **e = environ; *e; ++e)
            if (std::strncmp(*e, "TENSO_GPU_", 10) != 0) env_s.push_back(*e);
        std::vector<char *> envp;
        for (auto &s : env_s) envp.push_back(&s[0]);
        envp.push_back(nullptr);
        std::string arg1 = test;
        char *argv[] = {self, &arg1[0], nullptr};
        pid_t pid = 0;
        CPPUNIT_ASSERT_EQUAL(0, ::posix_spawn(&pid, self, nullptr, nullptr, argv, envp.data()));
        int status = 0;
        CPPUNIT_ASSERT(::waitpid(pid, &status, 0) == pid);
        CPPUNIT_ASSERT_MESSAGE("the child crashed", WIFEXITED(status));
        CPPUNIT_ASSERT_EQUAL(0, WEXITSTATUS(status));
    }

    void cudaBackendUnavailable() {
        if (child()) return;
        run_in_fresh_process("CapiGpuTest::cudaChild", {"TENSO_GPU_TEST_CUDA_CHILD=1", "TENSO_GPU_BACKEND=cuda"});
    }

    void cudaChild() {
        if (!child()) return;  // runs only as cudaBackendUnavailable's child
        CPPUNIT_ASSERT_EQUAL(TENSO_GPU_BACKEND_NONE, tenso_gpu_backend());
        const tenso_status st = tenso_gpu_available();
        CPPUNIT_ASSERT_EQUAL(TENSO_GPU_BACKEND_CUDA, tenso_gpu_backend());
        if (st == TENSO_OK) return;  // a machine with a GPU: the GPU suites cover it
        TENSO_CHECK_STATUS(TENSO_E_GPU_UNAVAILABLE, st);
        const std::string why = tenso_last_error();
        std::fprintf(stderr, "CUDA backend: %s\n", why.c_str());
        // What happened and what to do first (no driver or device, or no plugin; the host
        // backend), then the runtime's or the loader's own words in parentheses.
        CPPUNIT_ASSERT_MESSAGE(why, why.rfind("no CUDA driver or GPU device was found. ", 0) == 0 ||
                                        why.rfind("the CUDA backend cannot be loaded. ", 0) == 0);
        CPPUNIT_ASSERT_MESSAGE(why, why.find("TENSO_GPU_BACKEND=host") != std::string::npos);
        CPPUNIT_ASSERT_MESSAGE(why, why.find("tenso_gpu_select_backend(TENSO_GPU_BACKEND_HOST)") != std::string::npos);
        const size_t open = why.find(" (");
        CPPUNIT_ASSERT_MESSAGE(why, open != std::string::npos && why.size() > open + 3 && why.back() == ')');
        CPPUNIT_ASSERT_MESSAGE(why,
                               why.rfind("the CUDA backend", 0) == 0 || why.find("cudaGetDeviceCount: ") == open + 2);
        // Every call answers the same, the reason repeated; nothing crashes.
        int32_t count = 5;
        TENSO_CHECK_STATUS(TENSO_E_GPU_UNAVAILABLE, tenso_gpu_device_count(&count));
        CPPUNIT_ASSERT_EQUAL(0, count);
        CPPUNIT_ASSERT_EQUAL(why, std::string(tenso_last_error()));
        const Bytes p = dumps(Bytes(16), {4}, TENSO_DTYPE_FLOAT32);
        tenso_gpu_value *v = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_GPU_UNAVAILABLE, tenso_gpu_loads(&v, p.data(), p.size(), nullptr));
        const uint64_t shape[1] = {4};
        tenso_gpu_tensor *t = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_GPU_UNAVAILABLE, tenso_gpu_tensor_new(&t, 0, TENSO_DTYPE_FLOAT32, 1, shape));
        void *s = nullptr;
        TENSO_CHECK_STATUS(TENSO_E_GPU_UNAVAILABLE, tenso_gpu_stream_new(&s, 0));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_gpu_select_backend(TENSO_GPU_BACKEND_HOST));
        tenso_gpu_pool_stats ps;
        TENSO_CHECK_OK(tenso_gpu_pool_stats_get(&ps));
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), ps.buffers);
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiGpuTest);
