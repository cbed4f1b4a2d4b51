// CudaPluginTest - the CUDA plugin (libtenso_cuda.so) loaded the way libtenso loads it:
// dlopen, the one entry point, the ABI version. On a machine without a CUDA driver (the build
// machines and CI) every op that needs the runtime must answer TENSO_E_GPU_UNAVAILABLE with the
// runtime's own message, naming the call, never crash; argument checks still come first. On a
// machine with a driver and a device the same suite checks discovery answers instead.
#include <dlfcn.h>

#include <cstring>
#include <string>

#include <cppunit/extensions/HelperMacros.h>

#include "gpu/backend.h"

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

}  // namespace

class CudaPluginTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CudaPluginTest);
    CPPUNIT_TEST(testEntryPointAndTable);
    CPPUNIT_TEST(testDiscovery);
    CPPUNIT_TEST(testOpsWithoutDriverAreUnavailable);
    CPPUNIT_TEST(testDequantizeChecksArgumentsFirst);
    CPPUNIT_TEST(testGdsWithoutCuFile);
    CPPUNIT_TEST_SUITE_END();

public:
    void testEntryPointAndTable() {
        const tenso_gpu_backend_ops *ops = load_plugin();
        CPPUNIT_ASSERT_EQUAL(TENSO_GPU_BACKEND_ABI, ops->abi_version);
        CPPUNIT_ASSERT_EQUAL(TENSO_GPU_BACKEND_CUDA, ops->backend);
        const void *fns[] = {
            reinterpret_cast<const void *>(ops->init), reinterpret_cast<const void *>(ops->device_count),
            reinterpret_cast<const void *>(ops->device_info), reinterpret_cast<const void *>(ops->malloc_device),
            reinterpret_cast<const void *>(ops->free_device), reinterpret_cast<const void *>(ops->malloc_pinned),
            reinterpret_cast<const void *>(ops->free_pinned), reinterpret_cast<const void *>(ops->stream_create),
            reinterpret_cast<const void *>(ops->stream_destroy),
            reinterpret_cast<const void *>(ops->stream_synchronize),
            reinterpret_cast<const void *>(ops->event_create), reinterpret_cast<const void *>(ops->event_destroy),
            reinterpret_cast<const void *>(ops->event_record),
            reinterpret_cast<const void *>(ops->event_synchronize), reinterpret_cast<const void *>(ops->copy_h2d),
            reinterpret_cast<const void *>(ops->copy_d2h), reinterpret_cast<const void *>(ops->ipc_export),
            reinterpret_cast<const void *>(ops->ipc_open), reinterpret_cast<const void *>(ops->ipc_close),
            reinterpret_cast<const void *>(ops->dequantize), reinterpret_cast<const void *>(ops->gds_probe),
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
        msg[0] = 0;
        CPPUNIT_ASSERT_EQUAL(TENSO_E_GPU_UNAVAILABLE, ops->ipc_open(&p, handle, 0, msg, sizeof msg));
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

    // Without libcufile (or without a driver for it) GDS is "not available", with the reason.
    void testGdsWithoutCuFile() {
        const tenso_gpu_backend_ops *ops = load_plugin();
        void *cufile = dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
        if (cufile) {
            dlclose(cufile);
            if (have_driver()) return;
        }
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
};

CPPUNIT_TEST_SUITE_REGISTRATION(CudaPluginTest);
