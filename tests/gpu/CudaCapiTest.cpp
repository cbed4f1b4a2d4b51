// CudaCapiTest - the public tenso_gpu_* calls on the CUDA backend, through libtenso's plugin
// loader, on a machine without a CUDA driver (the build machines and CI): the plugin loads
// (it was built beside libtenso), and every call answers TENSO_E_GPU_UNAVAILABLE with the CUDA
// runtime's own message in tenso_last_error(), never a crash; the answer is the same on every
// call. With a driver present the suite has nothing to check (run-device-suite.sh does that).
// The backend is chosen once per process, so this suite must run in its own process (CTest
// runs each suite of tenso_gpu_tests as one).
#include <dlfcn.h>

#include <string>

#include <cppunit/extensions/HelperMacros.h>

#include "tenso/tenso.h"

namespace {

bool have_driver() {
    void *d = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (d) dlclose(d);
    return d != nullptr;
}

void assert_unavailable(tenso_status st, const char *what) {
    const std::string m = tenso_last_error();
    CPPUNIT_ASSERT_EQUAL_MESSAGE(std::string(what) + ": " + m, TENSO_E_GPU_UNAVAILABLE, st);
    // What happened and what to do first, then the runtime's words, from the plugin's init
    // (not "cannot be loaded").
    CPPUNIT_ASSERT_MESSAGE(m, m.rfind("no CUDA driver or GPU device was found. ", 0) == 0);
    CPPUNIT_ASSERT_MESSAGE(m, m.find("TENSO_GPU_BACKEND=host") != std::string::npos);
    CPPUNIT_ASSERT_MESSAGE(m, m.find("(cudaGetDeviceCount: ") != std::string::npos);
    CPPUNIT_ASSERT_MESSAGE(m, m.find("(cudaError") != std::string::npos);
}

}  // namespace

class CudaCapiTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CudaCapiTest);
    CPPUNIT_TEST(testEveryCallAnswersUnavailable);
    CPPUNIT_TEST_SUITE_END();

public:
    void testEveryCallAnswersUnavailable() {
        if (have_driver()) return;
        CPPUNIT_ASSERT_EQUAL(TENSO_OK, tenso_gpu_select_backend(TENSO_GPU_BACKEND_CUDA));
        assert_unavailable(tenso_gpu_available(), "tenso_gpu_available");
        CPPUNIT_ASSERT_EQUAL(TENSO_GPU_BACKEND_CUDA, tenso_gpu_backend());
        int32_t count = -1;
        assert_unavailable(tenso_gpu_device_count(&count), "tenso_gpu_device_count");
        tenso_gpu_device_info info{};
        info.version = TENSO_GPU_DEVICE_INFO_VERSION;
        assert_unavailable(tenso_gpu_device_info_get(&info, 0), "tenso_gpu_device_info_get");
        const uint64_t shape[1] = {4};
        tenso_gpu_tensor *t = nullptr;
        assert_unavailable(tenso_gpu_tensor_new(&t, 0, TENSO_DTYPE_FLOAT32, 1, shape), "tenso_gpu_tensor_new");
        CPPUNIT_ASSERT(t == nullptr);
        float x[4] = {1, 2, 3, 4};
        const tenso_tensor host = {x, sizeof x, shape, 1, TENSO_DTYPE_FLOAT32};
        tenso_buffer packet = TENSO_BUFFER_INIT;
        CPPUNIT_ASSERT_EQUAL(TENSO_OK, tenso_dumps(&packet, &host, nullptr));
        tenso_gpu_value *v = nullptr;
        assert_unavailable(tenso_gpu_loads(&v, packet.data, packet.size, nullptr), "tenso_gpu_loads");
        CPPUNIT_ASSERT(v == nullptr);
        tenso_buffer_dispose(&packet);
        void *stream = nullptr;
        assert_unavailable(tenso_gpu_stream_new(&stream, 0), "tenso_gpu_stream_new");
        // Asked again: the same answer, from the cached first attempt.
        assert_unavailable(tenso_gpu_available(), "tenso_gpu_available (again)");
        // The backend stays chosen: another one is refused.
        CPPUNIT_ASSERT_EQUAL(TENSO_E_INVALID_ARGUMENT, tenso_gpu_select_backend(TENSO_GPU_BACKEND_HOST));
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CudaCapiTest);
