// CudaPluginTest - the CUDA plugin (libtenso_cuda.so) loaded the way libtenso loads it:
// dlopen, the one entry point, the ABI version. On a machine without a CUDA driver (the build
// machines and CI) every op that needs the runtime must answer TENSO_E_GPU_UNAVAILABLE with the
// runtime's own message, naming the call, never crash; argument checks still come first. On a
// machine with a driver and a device the same suite checks discovery answers instead.
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <cppunit/extensions/HelperMacros.h>

#include "gpu/backend.h"
#include "gpu/kernels/dequant.hpp"

#ifndef TENSO_CUDA_PLUGIN_PATH
#error "TENSO_CUDA_PLUGIN_PATH must name the built plugin"
#endif

namespace {

const tenso_gpu_backend_ops *load_plugin() {
    void *lib = dlopen(TENSO_CUDA_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    CPPUNIT_ASSERT_MESSAGE(std::string("dlopen: ") + (lib ? "" : dlerror()), lib != nullptr);
    auto entry = reinterpret_cast<tenso_cuda_backend_entry_fn>(dlsym(lib, TENSO_CUDA_BACKEND_ENTRY));
    CPPUNIT_ASSERT(entry != nullptr);
    const tenso_gpu_backend_ops *ops = entry();
    CPPUNIT_ASSERT(ops != nullptr);
    return ops;  // never dlclose'd: the CUDA runtime does not support unloading mid-process
}

// Whether this machine has a CUDA driver at all (libcuda is what the runtime loads).
bool have_driver() {
    void *d = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (d) dlclose(d);
    return d != nullptr;
}

// "cudaXxx(...): <cudaGetErrorString> (cudaError...)" - the call and the runtime's words.
void assert_runtime_message(const char *msg, const char *call) {
    const std::string m(msg);
    CPPUNIT_ASSERT_MESSAGE(m, m.rfind(call, 0) == 0);
    CPPUNIT_ASSERT_MESSAGE(m, m.find(": ") != std::string::npos);
    CPPUNIT_ASSERT_MESSAGE(m, m.find("(cudaError") != std::string::npos);
    CPPUNIT_ASSERT_MESSAGE(m, m.size() > std::strlen(call) + std::strlen(": (cudaError)") + 8);
}

// The device count, 0 where there is no driver or no device.
int32_t devices(const tenso_gpu_backend_ops *ops) {
    char msg[512];
    int32_t n = 0;
    return ops->device_count(&n, msg, sizeof msg) == TENSO_OK ? n : 0;
}

// Runs `call` (a lambda taking the message buffer) and asserts TENSO_OK, showing the message.
#define OK_OR_FAIL(call)                                              \
    do {                                                              \
        char m_[512] = "";                                            \
        const tenso_status st_ = (call)(m_);                          \
        CPPUNIT_ASSERT_EQUAL_MESSAGE(std::string(m_), TENSO_OK, st_); \
    } while (0)

}  // namespace

class CudaPluginTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CudaPluginTest);
    CPPUNIT_TEST(testEntryPointAndTable);
    CPPUNIT_TEST(testDiscovery);
    CPPUNIT_TEST(testOpsWithoutDriverAreUnavailable);
    CPPUNIT_TEST(testDequantizeChecksArgumentsFirst);
    CPPUNIT_TEST(testGdsWithoutCuFile);
    CPPUNIT_TEST(testDeviceCopiesStreamsEvents);
    CPPUNIT_TEST(testDeviceDequantizeMatchesHost);
    CPPUNIT_TEST(testDeviceIpcExportOffset);
    CPPUNIT_TEST(testDeviceGdsLeavesNoLog);
    CPPUNIT_TEST_SUITE_END();

    std::mt19937 rng{15};

public:
    void testEntryPointAndTable() {
        const tenso_gpu_backend_ops *ops = load_plugin();
        CPPUNIT_ASSERT_EQUAL(TENSO_GPU_BACKEND_ABI, ops->abi_version);
        CPPUNIT_ASSERT_EQUAL(TENSO_GPU_BACKEND_CUDA, ops->backend);
        const void *fns[] = {reinterpret_cast<const void *>(ops->init),
                             reinterpret_cast<const void *>(ops->device_count),
                             reinterpret_cast<const void *>(ops->device_info),
                             reinterpret_cast<const void *>(ops->malloc_device),
                             reinterpret_cast<const void *>(ops->free_device),
                             reinterpret_cast<const void *>(ops->malloc_pinned),
                             reinterpret_cast<const void *>(ops->free_pinned),
                             reinterpret_cast<const void *>(ops->stream_create),
                             reinterpret_cast<const void *>(ops->stream_destroy),
                             reinterpret_cast<const void *>(ops->stream_synchronize),
                             reinterpret_cast<const void *>(ops->event_create),
                             reinterpret_cast<const void *>(ops->event_destroy),
                             reinterpret_cast<const void *>(ops->event_record),
                             reinterpret_cast<const void *>(ops->event_synchronize),
                             reinterpret_cast<const void *>(ops->copy_h2d),
                             reinterpret_cast<const void *>(ops->copy_d2h),
                             reinterpret_cast<const void *>(ops->ipc_export),
                             reinterpret_cast<const void *>(ops->ipc_open),
                             reinterpret_cast<const void *>(ops->ipc_close),
                             reinterpret_cast<const void *>(ops->dequantize),
                             reinterpret_cast<const void *>(ops->gds_probe),
                             reinterpret_cast<const void *>(ops->gds_read)};
        for (const void *f : fns) CPPUNIT_ASSERT(f != nullptr);
    }

    void testDiscovery() {
        const tenso_gpu_backend_ops *ops = load_plugin();
        char msg[512] = "";
        int32_t count = -1;
        if (!have_driver()) {
            CPPUNIT_ASSERT_EQUAL(TENSO_E_GPU_UNAVAILABLE, ops->init(msg, sizeof msg));
            assert_runtime_message(msg, "cudaGetDeviceCount");
            msg[0] = 0;
            CPPUNIT_ASSERT_EQUAL(TENSO_E_GPU_UNAVAILABLE, ops->device_count(&count, msg, sizeof msg));
            assert_runtime_message(msg, "cudaGetDeviceCount");
            CPPUNIT_ASSERT_EQUAL(int32_t(-1), count);  // untouched on failure
            return;
        }
        const tenso_status st = ops->init(msg, sizeof msg);
        if (st == TENSO_E_GPU_UNAVAILABLE) {  // a driver without a usable device
            CPPUNIT_ASSERT_MESSAGE(msg, std::strncmp(msg, "cudaGetDeviceCount", 18) == 0);
            return;
        }
        CPPUNIT_ASSERT_EQUAL_MESSAGE(msg, TENSO_OK, st);
        CPPUNIT_ASSERT_EQUAL_MESSAGE(msg, TENSO_OK, ops->device_count(&count, msg, sizeof msg));
        CPPUNIT_ASSERT(count > 0);
        tenso_gpu_device_info info{};
        info.version = TENSO_GPU_DEVICE_INFO_VERSION;
        CPPUNIT_ASSERT_EQUAL_MESSAGE(msg, TENSO_OK, ops->device_info(&info, 0, msg, sizeof msg));
        CPPUNIT_ASSERT(info.name[0] != 0);
        CPPUNIT_ASSERT(info.total_memory > 0);
        CPPUNIT_ASSERT(info.compute_major >= 5);
        CPPUNIT_ASSERT_EQUAL(TENSO_GPU_BACKEND_CUDA, info.backend);
        CPPUNIT_ASSERT_EQUAL(TENSO_E_INVALID_ARGUMENT, ops->device_info(&info, count, msg, sizeof msg));
        assert_runtime_message(msg, "cudaGetDeviceProperties");
    }

    void testOpsWithoutDriverAreUnavailable() {
        if (have_driver()) return;  // the device suite (tests/gpu/run-device-suite.sh) covers these
        const tenso_gpu_backend_ops *ops = load_plugin();
        char msg[512];
        void *p = nullptr;
        tenso_gpu_device_info info{};
        info.version = TENSO_GPU_DEVICE_INFO_VERSION;
        msg[0] = 0;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_GPU_UNAVAILABLE, ops->device_info(&info, 0, msg, sizeof msg));
        assert_runtime_message(msg, "cudaGetDeviceProperties");
        msg[0] = 0;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_GPU_UNAVAILABLE, ops->malloc_device(&p, 64, 0, msg, sizeof msg));
        assert_runtime_message(msg, "cudaSetDevice");
        CPPUNIT_ASSERT(p == nullptr);
        msg[0] = 0;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_GPU_UNAVAILABLE, ops->malloc_pinned(&p, 64, msg, sizeof msg));
        assert_runtime_message(msg, "cudaHostAlloc");
        msg[0] = 0;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_GPU_UNAVAILABLE, ops->stream_create(&p, 0, msg, sizeof msg));
        assert_runtime_message(msg, "cudaSetDevice");
        msg[0] = 0;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_GPU_UNAVAILABLE, ops->event_create(&p, 0, msg, sizeof msg));
        assert_runtime_message(msg, "cudaSetDevice");
        uint8_t buf[16] = {};
        msg[0] = 0;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_GPU_UNAVAILABLE, ops->copy_h2d(buf + 8, buf, 8, nullptr, msg, sizeof msg));
        assert_runtime_message(msg, "cudaMemcpyAsync");
        uint8_t handle[64] = {};
        uint64_t size = 0;
        msg[0] = 0;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_GPU_UNAVAILABLE, ops->ipc_open(&p, &size, handle, 0, msg, sizeof msg));
        assert_runtime_message(msg, "cudaSetDevice");
        // A second round answers the same: the failure is not cached into a crash or a hang.
        int32_t count = 0;
        msg[0] = 0;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_GPU_UNAVAILABLE, ops->device_count(&count, msg, sizeof msg));
        assert_runtime_message(msg, "cudaGetDeviceCount");
    }

    void testDequantizeChecksArgumentsFirst() {
        const tenso_gpu_backend_ops *ops = load_plugin();
        tenso_gpu_dequant_args a{};
        a.count = 10;
        a.qdtype = TENSO_DTYPE_QINT8;
        a.scheme = TENSO_QUANT_PER_GROUP;  // group_size 0
        a.out_dtype = TENSO_DTYPE_FLOAT32;
        char msg[256] = "";
        CPPUNIT_ASSERT_EQUAL(TENSO_E_INVALID_ARGUMENT, ops->dequantize(&a, nullptr, msg, sizeof msg));
        CPPUNIT_ASSERT_MESSAGE(msg, std::strstr(msg, "group_size") != nullptr);
        if (have_driver()) return;
        a.scheme = TENSO_QUANT_PER_TENSOR;
        a.count = 0;  // valid and empty: reaches the runtime, which has no driver
        msg[0] = 0;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_GPU_UNAVAILABLE, ops->dequantize(&a, nullptr, msg, sizeof msg));
        assert_runtime_message(msg, "cudaSetDevice");
    }

    // Without a driver GDS is "not available", with the reason, whether or not libcufile is
    // installed (the plugin does not even load it then: see cufile() in cuda_backend.cpp).
    void testGdsWithoutCuFile() {
        if (have_driver()) return;
        const tenso_gpu_backend_ops *ops = load_plugin();
        char msg[512] = "";
        uint32_t mode = 0;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_NOT_AVAILABLE, ops->gds_probe(&mode, 0, 0, msg, sizeof msg));
        CPPUNIT_ASSERT_MESSAGE(msg, std::strncmp(msg, "GPUDirect Storage: ", 19) == 0);
        CPPUNIT_ASSERT_EQUAL(uint32_t(0), mode);
        uint8_t dst[4];
        msg[0] = 0;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_NOT_AVAILABLE, ops->gds_read(dst, sizeof dst, 0, 0, 0, msg, sizeof msg));
        CPPUNIT_ASSERT_MESSAGE(msg, std::strncmp(msg, "GPUDirect Storage: ", 19) == 0);
    }

    // ---- with a device (tests/gpu/run-device-suite.sh); nothing to do without one ----

    // Loading cuFile (the first GDS question) writes no cufile.log into the working directory
    // and leaves the environment as it was (cuda_backend.cpp's QuietCuFileLog).
    void testDeviceGdsLeavesNoLog() {
        const tenso_gpu_backend_ops *ops = load_plugin();
        if (!devices(ops) || std::getenv("CUFILE_LOGFILE_PATH") || std::getenv("CUFILE_ENV_PATH_JSON")) return;
        char dir[] = "/tmp/tenso-cufile-XXXXXX";
        CPPUNIT_ASSERT(::mkdtemp(dir));
        char here[4096];
        CPPUNIT_ASSERT(::getcwd(here, sizeof here));
        CPPUNIT_ASSERT_EQUAL(0, ::chdir(dir));
        const int fd = ::open("probe", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        CPPUNIT_ASSERT(fd >= 0);
        CPPUNIT_ASSERT_EQUAL(ssize_t(4096), ::write(fd, std::string(4096, 'x').data(), 4096));
        char msg[512] = "";
        uint32_t mode = 0;
        const tenso_status st = ops->gds_probe(&mode, fd, 0, msg, sizeof msg);
        ::close(fd);
        const bool log_written = ::access("cufile.log", F_OK) == 0;
        ::unlink("cufile.log");
        ::unlink("probe");
        CPPUNIT_ASSERT_EQUAL(0, ::chdir(here));
        ::rmdir(dir);
        CPPUNIT_ASSERT_MESSAGE(std::string("gds_probe: ") + msg, st == TENSO_OK || st == TENSO_E_NOT_AVAILABLE);
        CPPUNIT_ASSERT_MESSAGE("cuFile wrote cufile.log into the working directory", !log_written);
        CPPUNIT_ASSERT(std::getenv("CUFILE_LOGFILE_PATH") == nullptr);
    }

    void testDeviceCopiesStreamsEvents() {
        const tenso_gpu_backend_ops *ops = load_plugin();
        if (!devices(ops)) return;
        const size_t n = (8u << 20) + 13;  // not a multiple of anything the copy engine likes
        void *d = nullptr, *up = nullptr, *down = nullptr, *stream = nullptr, *event = nullptr;
        OK_OR_FAIL([&](char *m) { return ops->malloc_device(&d, n, 0, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->malloc_pinned(&up, n, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->malloc_pinned(&down, n, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->stream_create(&stream, 0, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->event_create(&event, 0, m, 512); });
        for (size_t i = 0; i < n; ++i) static_cast<uint8_t *>(up)[i] = uint8_t(i * 131u + 7u);
        std::memset(down, 0, n);
        OK_OR_FAIL([&](char *m) { return ops->copy_h2d(d, up, n, stream, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->event_record(event, stream, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->event_synchronize(event, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->copy_d2h(down, d, n, stream, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->stream_synchronize(stream, m, 512); });
        CPPUNIT_ASSERT(std::memcmp(up, down, n) == 0);
        OK_OR_FAIL([&](char *m) { return ops->event_destroy(event, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->stream_destroy(stream, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->free_pinned(up, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->free_pinned(down, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->free_device(d, 0, m, 512); });
    }

    // The kernel against the host run of the same element code (itself checked bit for bit
    // against tenso_dequantize by GpuDequantHostTest): equal bits, except that a NaN need only
    // be a NaN (the GPU's arithmetic returns its canonical NaN, see dequant.hpp).
    void testDeviceDequantizeMatchesHost() {
        const tenso_gpu_backend_ops *ops = load_plugin();
        if (!devices(ops)) return;
        struct Shape {
            uint64_t count, inner, channels, group;
            int32_t scheme;
        };
        const Shape shapes[] = {{(1u << 21) + 3, 0, 0, 0, TENSO_QUANT_PER_TENSOR},  // grid-stride loop
                                {3 * 5 * 7, 7, 5, 0, TENSO_QUANT_PER_CHANNEL},
                                {100003, 1, 13, 0, TENSO_QUANT_PER_CHANNEL},
                                {1001, 0, 0, 64, TENSO_QUANT_PER_GROUP}};
        void *stream = nullptr;
        OK_OR_FAIL([&](char *m) { return ops->stream_create(&stream, 0, m, 512); });
        for (int32_t qd : {TENSO_DTYPE_QINT8, TENSO_DTYPE_QUINT8, TENSO_DTYPE_QINT4, TENSO_DTYPE_QUINT4})
            for (const Shape &sh : shapes)
                for (int32_t out : {TENSO_DTYPE_FLOAT32, TENSO_DTYPE_FLOAT16, TENSO_DTYPE_BFLOAT16})
                    dequantize_case(ops, stream, qd, sh.count, sh.inner, sh.channels, sh.group, sh.scheme, out);
        OK_OR_FAIL([&](char *m) { return ops->stream_destroy(stream, m, 512); });
    }

    void dequantize_case(const tenso_gpu_backend_ops *ops, void *stream, int32_t qd, uint64_t count, uint64_t inner,
                         uint64_t channels, uint64_t group, int32_t scheme, int32_t out) {
        const bool four = qd == TENSO_DTYPE_QINT4 || qd == TENSO_DTYPE_QUINT4;
        const size_t code_bytes = size_t(four ? (count + 1) / 2 : count);
        const size_t nscales = size_t(scheme == TENSO_QUANT_PER_CHANNEL ? channels
                                      : scheme == TENSO_QUANT_PER_GROUP ? (count + group - 1) / group
                                                                        : 1);
        const size_t item = out == TENSO_DTYPE_FLOAT32 ? 4 : 2, out_bytes = size_t(count) * item;
        std::vector<uint8_t> codes(code_bytes);
        for (auto &b : codes) b = uint8_t(rng());
        std::vector<float> sz(2 * nscales);
        std::uniform_real_distribution<float> u(-4.0f, 4.0f);
        for (auto &f : sz) f = u(rng);
        sz[0] = std::nanf("");  // a NaN scale (per tensor: all)
        if (nscales > 2) sz[1] = std::numeric_limits<float>::infinity();
        tenso_gpu_dequant_args h{};
        h.count = count;
        h.inner = inner;
        h.channels = channels;
        h.group_size = group;
        h.qdtype = qd;
        h.scheme = scheme;
        h.out_dtype = out;
        std::vector<uint8_t> want(out_bytes), got(out_bytes);
        h.codes = codes.data();
        h.scales = sz.data();
        h.zero_points = sz.data() + nscales;
        h.out = want.data();
        char msg[512] = "";
        CPPUNIT_ASSERT_EQUAL_MESSAGE(msg, TENSO_OK, tenso::gpu::dequantize_host(h, msg, sizeof msg));

        void *dcodes = nullptr, *dsz = nullptr, *dout = nullptr;
        OK_OR_FAIL([&](char *m) { return ops->malloc_device(&dcodes, code_bytes, 0, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->malloc_device(&dsz, sz.size() * 4, 0, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->malloc_device(&dout, out_bytes, 0, m, 512); });
        // Pageable host memory works with cudaMemcpyAsync too (synchronously).
        OK_OR_FAIL([&](char *m) { return ops->copy_h2d(dcodes, codes.data(), code_bytes, stream, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->copy_h2d(dsz, sz.data(), sz.size() * 4, stream, m, 512); });
        tenso_gpu_dequant_args d = h;
        d.codes = dcodes;
        d.scales = static_cast<const float *>(dsz);
        d.zero_points = static_cast<const float *>(dsz) + nscales;
        d.out = dout;
        d.device = 0;
        OK_OR_FAIL([&](char *m) { return ops->dequantize(&d, stream, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->copy_d2h(got.data(), dout, out_bytes, stream, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->stream_synchronize(stream, m, 512); });
        for (uint64_t i = 0; i < count; ++i) {
            uint32_t w = 0, g = 0;
            std::memcpy(&w, want.data() + i * item, item);
            std::memcpy(&g, got.data() + i * item, item);
            if (w == g) continue;
            const bool wn = item == 4                    ? (w & 0x7FFFFFFFu) > 0x7F800000u
                            : out == TENSO_DTYPE_FLOAT16 ? (w & 0x7FFFu) > 0x7C00u
                                                         : (w & 0x7FFFu) > 0x7F80u;
            const bool gn = item == 4                    ? (g & 0x7FFFFFFFu) > 0x7F800000u
                            : out == TENSO_DTYPE_FLOAT16 ? (g & 0x7FFFu) > 0x7C00u
                                                         : (g & 0x7FFFu) > 0x7F80u;
            CPPUNIT_ASSERT_MESSAGE("qdtype " + std::to_string(qd) + " scheme " + std::to_string(scheme) + " out " +
                                       std::to_string(out) + " element " + std::to_string(i) + ": host " +
                                       std::to_string(w) + " device " + std::to_string(g),
                                   wn && gn);
        }
        OK_OR_FAIL([&](char *m) { return ops->free_device(dcodes, 0, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->free_device(dsz, 0, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->free_device(dout, 0, m, 512); });
    }

    // The handle names the whole allocation; the offset says where the pointer is inside it.
    void testDeviceIpcExportOffset() {
        const tenso_gpu_backend_ops *ops = load_plugin();
        if (!devices(ops)) return;
        void *d = nullptr;
        OK_OR_FAIL([&](char *m) { return ops->malloc_device(&d, 1 << 20, 0, m, 512); });
        uint8_t h0[64] = {}, h1[64] = {};
        uint64_t off0 = 99, off1 = 0;
        OK_OR_FAIL([&](char *m) { return ops->ipc_export(h0, &off0, d, 0, m, 512); });
        OK_OR_FAIL([&](char *m) { return ops->ipc_export(h1, &off1, static_cast<uint8_t *>(d) + 4096, 0, m, 512); });
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), off0);
        CPPUNIT_ASSERT_EQUAL(uint64_t(4096), off1);
        CPPUNIT_ASSERT(std::memcmp(h0, h1, 64) == 0);
        const uint8_t zero[64] = {};
        CPPUNIT_ASSERT(std::memcmp(h0, zero, 64) != 0);
        // Host memory is no device allocation: a clean refusal.
        int host = 0;
        char msg[512] = "";
        CPPUNIT_ASSERT(ops->ipc_export(h0, &off0, &host, 0, msg, sizeof msg) != TENSO_OK);
        CPPUNIT_ASSERT(msg[0] != 0);
        OK_OR_FAIL([&](char *m) { return ops->free_device(d, 0, m, 512); });
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CudaPluginTest);
