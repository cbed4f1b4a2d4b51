// CapiDlpackTest - DLPack export of dense views: the versioned (1.1) and legacy structs, dtype
// mapping for all 15 dense dtypes, flags, and lifetimes: an exported tensor keeps what its view
// owned (a decompressed body, a stream buffer, a file buffer or mapping) alive after
// tenso_view_free. Meant to run under ASan too, where a use-after-free or leak fails it.
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <cppunit/Exception.h>
#include <cppunit/extensions/HelperMacros.h>

#include "check.hpp"
#include "isolated.hpp"
#include "tenso/tenso.h"

namespace {

using Bytes = std::vector<uint8_t>;

Bytes encode(const tenso_tensor &t, uint32_t flags = 0, uint32_t alignment = 0) {
    tenso_encode_options o = TENSO_ENCODE_OPTIONS_INIT;
    o.flags = flags;
    o.alignment = alignment;
    tenso_buffer b = TENSO_BUFFER_INIT;
    TENSO_CHECK_OK(tenso_dumps(&b, &t, &o));
    Bytes out(b.data, b.data + b.size);
    tenso_buffer_dispose(&b);
    return out;
}

Bytes golden(const std::string &name) {
    std::string path = std::string(TENSO_VECTORS_DIR) + "/" + name + ".tenso";
    std::ifstream f(path, std::ios::binary);
    if (!f) CPPUNIT_FAIL("cannot open golden vector " + path);
    return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string tmp_path(const char *tag) {
    std::string dir = TENSO_TEST_TMPDIR;
    if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) CPPUNIT_FAIL("cannot create " + dir);
    return dir + "/CapiDlpackTest_" + tag + "_" + std::to_string(::getpid()) + ".tenso";
}

// 4 x 256 float32 values that compress well and are easy to check.
std::vector<float> ramp() {
    std::vector<float> v(1024);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 16) * 0.5f;
    return v;
}

void check_ramp(const std::string &what, const DLTensor &t) {
    CPPUNIT_ASSERT_EQUAL_MESSAGE(what, int32_t(2), t.ndim);
    CPPUNIT_ASSERT_EQUAL_MESSAGE(what, int64_t(4), t.shape[0]);
    CPPUNIT_ASSERT_EQUAL_MESSAGE(what, int64_t(256), t.shape[1]);
    CPPUNIT_ASSERT_EQUAL_MESSAGE(what, uint8_t(kDLFloat), t.dtype.code);
    CPPUNIT_ASSERT_EQUAL_MESSAGE(what, uint8_t(32), t.dtype.bits);
    // memcpy: bodies nested in bundles are not aligned to the element size.
    std::vector<float> f(1024);
    std::memcpy(f.data(), t.data, 4096);
    for (size_t i = 0; i < 1024; ++i)
        if (f[i] != float(i % 16) * 0.5f) CPPUNIT_FAIL(what + ": wrong value at " + std::to_string(i));
}

const uint64_t kRampShape[2] = {4, 256};

}  // namespace

class CapiDlpackTest : public CppUnit::TestFixture {
    CPPUNIT_TEST_SUITE(CapiDlpackTest);
    CPPUNIT_TEST(testVersionedExport);
    CPPUNIT_TEST(testDtypeMapping);
    CPPUNIT_TEST(testCompressedIsCopiedAndOutlivesView);
    CPPUNIT_TEST(testOutlivesViewFromFile);
    CPPUNIT_TEST(testOutlivesViewFromMmap);
    CPPUNIT_TEST(testOutlivesViewFromFd);
    CPPUNIT_TEST(testBundleChildren);
    CPPUNIT_TEST(testLegacyExport);
    CPPUNIT_TEST(testNonDenseAndArguments);
    CPPUNIT_TEST(testEmptyAndScalar);
    CPPUNIT_TEST(testStructMayBeMoved);
    CPPUNIT_TEST_SUITE_END();

public:
    void testVersionedExport() {
        int16_t d[6] = {-3, -2, -1, 0, 1, 2};
        uint64_t shape[2] = {2, 3};
        tenso_tensor t = {d, sizeof d, shape, 2, TENSO_DTYPE_INT16};
        Bytes p = encode(t);
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_loads(&v, p.data(), p.size(), nullptr));
        DLManagedTensorVersioned *m = nullptr;
        TENSO_CHECK_OK(tenso_view_to_dlpack(&m, v));
        CPPUNIT_ASSERT(m != nullptr);
        CPPUNIT_ASSERT_EQUAL(uint32_t(1), m->version.major);
        CPPUNIT_ASSERT_EQUAL(uint32_t(1), m->version.minor);
        CPPUNIT_ASSERT_EQUAL(uint64_t(DLPACK_FLAG_BITMASK_READ_ONLY), m->flags);  // borrowed: not copied
        CPPUNIT_ASSERT(m->deleter != nullptr);
        const DLTensor &dl = m->dl_tensor;
        CPPUNIT_ASSERT(dl.data == tenso_view_data(v));
        CPPUNIT_ASSERT(dl.data == static_cast<void *>(p.data() + 64));
        CPPUNIT_ASSERT_EQUAL(int(kDLCPU), int(dl.device.device_type));
        CPPUNIT_ASSERT_EQUAL(int32_t(0), dl.device.device_id);
        CPPUNIT_ASSERT_EQUAL(int32_t(2), dl.ndim);
        CPPUNIT_ASSERT_EQUAL(uint8_t(kDLInt), dl.dtype.code);
        CPPUNIT_ASSERT_EQUAL(uint8_t(16), dl.dtype.bits);
        CPPUNIT_ASSERT_EQUAL(uint16_t(1), dl.dtype.lanes);
        CPPUNIT_ASSERT(dl.shape != nullptr);
        CPPUNIT_ASSERT_EQUAL(int64_t(2), dl.shape[0]);
        CPPUNIT_ASSERT_EQUAL(int64_t(3), dl.shape[1]);
        CPPUNIT_ASSERT(dl.strides != nullptr);  // compact row-major, in elements
        CPPUNIT_ASSERT_EQUAL(int64_t(3), dl.strides[0]);
        CPPUNIT_ASSERT_EQUAL(int64_t(1), dl.strides[1]);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), dl.byte_offset);
        // The view borrows the caller's bytes, so the export stays valid after the view is
        // freed as long as those bytes live.
        tenso_view_free(v);
        CPPUNIT_ASSERT_EQUAL(int16_t(2), static_cast<const int16_t *>(m->dl_tensor.data)[5]);
        CPPUNIT_ASSERT_EQUAL(int64_t(3), m->dl_tensor.shape[1]);
        m->deleter(m);
    }

    void testDtypeMapping() {
        struct {
            tenso_dtype dtype;
            uint8_t code, bits;
        } const table[] = {
            {TENSO_DTYPE_FLOAT32, kDLFloat, 32},     {TENSO_DTYPE_INT32, kDLInt, 32},
            {TENSO_DTYPE_FLOAT64, kDLFloat, 64},     {TENSO_DTYPE_INT64, kDLInt, 64},
            {TENSO_DTYPE_UINT8, kDLUInt, 8},         {TENSO_DTYPE_UINT16, kDLUInt, 16},
            {TENSO_DTYPE_BOOL, kDLBool, 8},          {TENSO_DTYPE_FLOAT16, kDLFloat, 16},
            {TENSO_DTYPE_INT8, kDLInt, 8},           {TENSO_DTYPE_INT16, kDLInt, 16},
            {TENSO_DTYPE_UINT32, kDLUInt, 32},       {TENSO_DTYPE_UINT64, kDLUInt, 64},
            {TENSO_DTYPE_COMPLEX64, kDLComplex, 64}, {TENSO_DTYPE_COMPLEX128, kDLComplex, 128},
            {TENSO_DTYPE_BFLOAT16, kDLBfloat, 16},
        };
        uint8_t data[3 * 16] = {};
        for (size_t i = 0; i < sizeof data; ++i) data[i] = uint8_t(i & 1);  // valid bools too
        uint64_t shape[1] = {3};
        for (const auto &e : table) {
            const std::string name = tenso_dtype_name(e.dtype);
            size_t item = tenso_dtype_itemsize(e.dtype);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, size_t(e.bits / 8), item);  // bits/8 == itemsize
            tenso_tensor t = {data, 3 * item, shape, 1, e.dtype};
            Bytes p = encode(t);
            tenso_view *v = nullptr;
            TENSO_CHECK_OK(tenso_loads(&v, p.data(), p.size(), nullptr));
            DLManagedTensorVersioned *m = nullptr;
            TENSO_CHECK_OK(tenso_view_to_dlpack(&m, v));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, e.code, m->dl_tensor.dtype.code);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, e.bits, m->dl_tensor.dtype.bits);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, uint16_t(1), m->dl_tensor.dtype.lanes);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, int64_t(3), m->dl_tensor.shape[0]);
            DLManagedTensor *l = nullptr;
            TENSO_CHECK_OK(tenso_view_to_dlpack_legacy(&l, v));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, e.code, l->dl_tensor.dtype.code);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, e.bits, l->dl_tensor.dtype.bits);
            CPPUNIT_ASSERT_EQUAL_MESSAGE(name, uint16_t(1), l->dl_tensor.dtype.lanes);
            tenso_view_free(v);
            m->deleter(m);
            l->deleter(l);
        }
    }

    void testCompressedIsCopiedAndOutlivesView() {
        std::vector<float> r = ramp();
        tenso_tensor t = {r.data(), r.size() * 4, kRampShape, 2, TENSO_DTYPE_FLOAT32};
        Bytes p = encode(t, TENSO_ENCODE_COMPRESS | TENSO_ENCODE_INTEGRITY);
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_loads(&v, p.data(), p.size(), nullptr));
        CPPUNIT_ASSERT_EQUAL(1, tenso_view_owns_data(v));
        DLManagedTensorVersioned *m = nullptr;
        TENSO_CHECK_OK(tenso_view_to_dlpack(&m, v));
        CPPUNIT_ASSERT_EQUAL(uint64_t(DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED), m->flags);
        CPPUNIT_ASSERT(m->dl_tensor.data == tenso_view_data(v));
        DLManagedTensor *l = nullptr;
        TENSO_CHECK_OK(tenso_view_to_dlpack_legacy(&l, v));
        CPPUNIT_ASSERT(l->dl_tensor.data == tenso_view_data(v));
        // Free the view and the packet bytes: the exports hold the decompressed body.
        tenso_view_free(v);
        Bytes().swap(p);
        check_ramp("versioned after view free", m->dl_tensor);
        check_ramp("legacy after view free", l->dl_tensor);
        m->deleter(m);
        check_ramp("legacy after the versioned deleter", l->dl_tensor);
        l->deleter(l);
    }

    void testOutlivesViewFromFile() {
        std::vector<float> r = ramp();
        tenso_tensor t = {r.data(), r.size() * 4, kRampShape, 2, TENSO_DTYPE_FLOAT32};
        const std::string path = tmp_path("file");
        TENSO_CHECK_OK(tenso_save_file(path.c_str(), &t, nullptr));
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_load_file(&v, path.c_str(), TENSO_LOAD_READ, nullptr));
        ::unlink(path.c_str());
        CPPUNIT_ASSERT_EQUAL(1, tenso_view_owns_data(v));
        DLManagedTensorVersioned *m = nullptr;
        TENSO_CHECK_OK(tenso_view_to_dlpack(&m, v));
        CPPUNIT_ASSERT_EQUAL(uint64_t(DLPACK_FLAG_BITMASK_READ_ONLY), m->flags);
        DLManagedTensor *l = nullptr;
        TENSO_CHECK_OK(tenso_view_to_dlpack_legacy(&l, v));
        tenso_view_free(v);
        check_ramp("versioned after view free", m->dl_tensor);
        check_ramp("legacy after view free", l->dl_tensor);
        l->deleter(l);
        check_ramp("versioned after legacy deleter", m->dl_tensor);
        m->deleter(m);
    }

    // TENSO_LOAD_MMAP: the export keeps the mapping. Run in a child process, so that a crash
    // in the mapping path fails this test only instead of killing the whole suite.
    void testOutlivesViewFromMmap() {
        std::vector<float> r = ramp();
        tenso_tensor t = {r.data(), r.size() * 4, kRampShape, 2, TENSO_DTYPE_FLOAT32};
        const std::string path = tmp_path("mmap");
        TENSO_CHECK_OK(tenso_save_file(path.c_str(), &t, nullptr));
        const std::string cpath = tmp_path("mmap_lz4");
        tenso_encode_options oc = TENSO_ENCODE_OPTIONS_INIT;
        oc.flags = TENSO_ENCODE_COMPRESS;
        TENSO_CHECK_OK(tenso_save_file(cpath.c_str(), &t, &oc));
        std::string failure = run_isolated([&] {
            for (const std::string &f : {path, cpath}) {
                const bool compressed = f == cpath;
                tenso_view *v = nullptr;
                TENSO_CHECK_OK(tenso_load_file(&v, f.c_str(), TENSO_LOAD_MMAP, nullptr));
                CPPUNIT_ASSERT_EQUAL(1, tenso_view_owns_data(v));
                DLManagedTensorVersioned *m = nullptr;
                TENSO_CHECK_OK(tenso_view_to_dlpack(&m, v));
                CPPUNIT_ASSERT_EQUAL(compressed, (m->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0);
                DLManagedTensor *l = nullptr;
                TENSO_CHECK_OK(tenso_view_to_dlpack_legacy(&l, v));
                tenso_view_free(v);
                check_ramp(f + " versioned after view free", m->dl_tensor);
                check_ramp(f + " legacy after view free", l->dl_tensor);
                l->deleter(l);
                check_ramp(f + " versioned after legacy deleter", m->dl_tensor);
                m->deleter(m);
            }
        });
        ::unlink(path.c_str());
        ::unlink(cpath.c_str());
        CPPUNIT_ASSERT_MESSAGE(failure, failure.empty());
    }

    void testOutlivesViewFromFd() {
        std::vector<float> r = ramp();
        tenso_tensor t = {r.data(), r.size() * 4, kRampShape, 2, TENSO_DTYPE_FLOAT32};
        int fds[2];
        CPPUNIT_ASSERT_EQUAL(0, ::pipe(fds));
        uint64_t written = 0;
        TENSO_CHECK_OK(tenso_write_fd(&written, fds[1], &t, nullptr));  // 4160 B: fits a pipe
        CPPUNIT_ASSERT_EQUAL(uint64_t(64 + 4096), written);
        ::close(fds[1]);
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_read_fd(&v, fds[0], nullptr));
        ::close(fds[0]);
        CPPUNIT_ASSERT_EQUAL(1, tenso_view_owns_data(v));
        DLManagedTensorVersioned *m = nullptr;
        TENSO_CHECK_OK(tenso_view_to_dlpack(&m, v));
        CPPUNIT_ASSERT_EQUAL(uint64_t(DLPACK_FLAG_BITMASK_READ_ONLY), m->flags);
        CPPUNIT_ASSERT_EQUAL(uintptr_t(0), reinterpret_cast<uintptr_t>(m->dl_tensor.data) % 64);
        tenso_view_free(v);
        check_ramp("read_fd", m->dl_tensor);
        m->deleter(m);
    }

    void testBundleChildren() {
        // A child of a bundle read from a stream: its data lives in the stream buffer, which
        // the export must keep after the parent view is freed.
        std::vector<float> r = ramp();
        tenso_tensor t = {r.data(), r.size() * 4, kRampShape, 2, TENSO_DTYPE_FLOAT32};
        tenso_value *leaf = nullptr, *bundle = nullptr;
        TENSO_CHECK_OK(tenso_value_new_tensor(&leaf, &t));
        TENSO_CHECK_OK(tenso_value_new_bundle(&bundle));
        TENSO_CHECK_OK(tenso_bundle_insert(bundle, "r", 1, leaf));
        tenso_value_free(leaf);
        for (uint32_t flags : {0u, unsigned(TENSO_ENCODE_COMPRESS)}) {
            const std::string what = flags ? "compressed child" : "plain child";
            tenso_encode_options o = TENSO_ENCODE_OPTIONS_INIT;
            o.flags = flags;
            int fds[2];
            CPPUNIT_ASSERT_EQUAL(0, ::pipe(fds));
            TENSO_CHECK_OK(tenso_value_write_fd(nullptr, fds[1], bundle, &o));
            ::close(fds[1]);
            tenso_view *v = nullptr;
            TENSO_CHECK_OK(tenso_read_fd(&v, fds[0], nullptr));
            ::close(fds[0]);
            const tenso_view *child = nullptr;
            TENSO_CHECK_OK(tenso_view_bundle_find(&child, v, "r", 1));
            DLManagedTensorVersioned *m = nullptr;
            TENSO_CHECK_OK(tenso_view_to_dlpack(&m, child));
            CPPUNIT_ASSERT(m->dl_tensor.data == tenso_view_data(child));
            CPPUNIT_ASSERT_EQUAL_MESSAGE(what, flags ? 1 : 0, int((m->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0));
            tenso_view_free(v);
            check_ramp(what + " after parent free", m->dl_tensor);
            m->deleter(m);
        }
        tenso_value_free(bundle);
    }

    void testLegacyExport() {
        double d[4] = {1.5, -2.5, 3.5, -4.5};
        uint64_t shape[2] = {2, 2};
        tenso_tensor t = {d, sizeof d, shape, 2, TENSO_DTYPE_FLOAT64};
        Bytes p = encode(t, 0, 128);
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_loads(&v, p.data(), p.size(), nullptr));
        DLManagedTensor *l = nullptr;
        TENSO_CHECK_OK(tenso_view_to_dlpack_legacy(&l, v));
        CPPUNIT_ASSERT(l != nullptr && l->deleter != nullptr);
        const DLTensor &dl = l->dl_tensor;
        CPPUNIT_ASSERT(dl.data == static_cast<void *>(p.data() + 128));
        CPPUNIT_ASSERT_EQUAL(int(kDLCPU), int(dl.device.device_type));
        CPPUNIT_ASSERT_EQUAL(int32_t(2), dl.ndim);
        CPPUNIT_ASSERT_EQUAL(uint8_t(kDLFloat), dl.dtype.code);
        CPPUNIT_ASSERT_EQUAL(uint8_t(64), dl.dtype.bits);
        CPPUNIT_ASSERT_EQUAL(int64_t(2), dl.shape[0]);
        CPPUNIT_ASSERT_EQUAL(int64_t(2), dl.shape[1]);
        CPPUNIT_ASSERT(dl.strides != nullptr && dl.strides[0] == 2 && dl.strides[1] == 1);
        CPPUNIT_ASSERT_EQUAL(uint64_t(0), dl.byte_offset);
        CPPUNIT_ASSERT_EQUAL(-4.5, static_cast<const double *>(dl.data)[3]);
        tenso_view_free(v);
        l->deleter(l);
    }

    void testNonDenseAndArguments() {
        tenso_value *b = nullptr;
        TENSO_CHECK_OK(tenso_value_new_bundle(&b));
        tenso_buffer buf = TENSO_BUFFER_INIT;
        TENSO_CHECK_OK(tenso_value_dumps(&buf, b, nullptr));
        tenso_value_free(b);
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_loads(&v, buf.data, buf.size, nullptr));
        DLManagedTensorVersioned *m = reinterpret_cast<DLManagedTensorVersioned *>(&buf);
        TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_view_to_dlpack(&m, v));
        CPPUNIT_ASSERT(m == nullptr);
        DLManagedTensor *l = reinterpret_cast<DLManagedTensor *>(&buf);
        TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_view_to_dlpack_legacy(&l, v));
        CPPUNIT_ASSERT(l == nullptr);
        tenso_view_free(v);
        tenso_buffer_dispose(&buf);

        // Every other kind of view: sparse, quantized, string, GPU IPC reference.
        for (const char *name :
             {"sparse_coo_f32", "sparse_csr_f32", "quantized_qint8_per_tensor", "string_mixed_utf8", "gpu_ipc_ref"}) {
            Bytes p = golden(name);
            tenso_view *cv = nullptr;
            TENSO_CHECK_OK(tenso_loads(&cv, p.data(), p.size(), nullptr));
            CPPUNIT_ASSERT_MESSAGE(name, tenso_view_kind(cv) != TENSO_KIND_DENSE);
            TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_view_to_dlpack(&m, cv));
            CPPUNIT_ASSERT(m == nullptr);
            TENSO_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_view_to_dlpack_legacy(&l, cv));
            CPPUNIT_ASSERT(l == nullptr);
            tenso_view_free(cv);
        }

        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_to_dlpack(&m, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_to_dlpack(nullptr, nullptr));
        TENSO_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_to_dlpack_legacy(&l, nullptr));
    }

    void testEmptyAndScalar() {
        uint64_t shape[2] = {3, 0};
        tenso_tensor t = {nullptr, 0, shape, 2, TENSO_DTYPE_UINT16};
        for (uint32_t flags : {0u, unsigned(TENSO_ENCODE_COMPRESS)}) {
            Bytes p = encode(t, flags);
            tenso_view *v = nullptr;
            TENSO_CHECK_OK(tenso_loads(&v, p.data(), p.size(), nullptr));
            CPPUNIT_ASSERT(tenso_view_data(v) == nullptr);
            DLManagedTensorVersioned *m = nullptr;
            TENSO_CHECK_OK(tenso_view_to_dlpack(&m, v));
            CPPUNIT_ASSERT_MESSAGE("empty tensors still get a non-NULL data pointer", m->dl_tensor.data != nullptr);
            CPPUNIT_ASSERT_EQUAL(int64_t(3), m->dl_tensor.shape[0]);
            CPPUNIT_ASSERT_EQUAL(int64_t(0), m->dl_tensor.shape[1]);
            DLManagedTensor *l = nullptr;
            TENSO_CHECK_OK(tenso_view_to_dlpack_legacy(&l, v));
            CPPUNIT_ASSERT(l->dl_tensor.data != nullptr);
            tenso_view_free(v);
            m->deleter(m);
            l->deleter(l);
        }
        // A scalar: ndim 0, one element.
        float x = -1.25f;
        tenso_tensor ts = {&x, sizeof x, nullptr, 0, TENSO_DTYPE_FLOAT32};
        Bytes ps = encode(ts);
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_loads(&v, ps.data(), ps.size(), nullptr));
        DLManagedTensorVersioned *m = nullptr;
        TENSO_CHECK_OK(tenso_view_to_dlpack(&m, v));
        CPPUNIT_ASSERT_EQUAL(int32_t(0), m->dl_tensor.ndim);
        CPPUNIT_ASSERT(m->dl_tensor.shape == nullptr && m->dl_tensor.strides == nullptr);
        CPPUNIT_ASSERT_EQUAL(-1.25f, *static_cast<const float *>(m->dl_tensor.data));
        tenso_view_free(v);
        m->deleter(m);
    }

    void testStructMayBeMoved() {
        // The bookkeeping lives in manager_ctx, so a consumer may copy the struct elsewhere
        // and call the deleter on the copy.
        std::vector<float> r = ramp();
        tenso_tensor t = {r.data(), r.size() * 4, kRampShape, 2, TENSO_DTYPE_FLOAT32};
        Bytes p = encode(t, TENSO_ENCODE_COMPRESS);
        tenso_view *v = nullptr;
        TENSO_CHECK_OK(tenso_loads(&v, p.data(), p.size(), nullptr));
        DLManagedTensorVersioned *m = nullptr;
        TENSO_CHECK_OK(tenso_view_to_dlpack(&m, v));
        DLManagedTensorVersioned moved;
        std::memcpy(&moved, m, sizeof moved);
        // Several exports of one view are independent.
        DLManagedTensorVersioned *m2 = nullptr;
        TENSO_CHECK_OK(tenso_view_to_dlpack(&m2, v));
        CPPUNIT_ASSERT(m2 != m);
        CPPUNIT_ASSERT(m2->dl_tensor.data == m->dl_tensor.data);
        tenso_view_free(v);
        moved.deleter(&moved);
        check_ramp("second export after the first was deleted", m2->dl_tensor);
        m2->deleter(m2);
    }
};

CPPUNIT_TEST_SUITE_REGISTRATION(CapiDlpackTest);
