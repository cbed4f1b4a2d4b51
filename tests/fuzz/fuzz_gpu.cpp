// fuzz_gpu.cpp - packets to device memory on the host backend (tenso_gpu_loads, _read_fd).
//
// The whole input is the packet; its LAST byte also picks the transfer options (chunk size,
// staging buffers, dequantize_to), so the loads corpus serves as seeds. Invariants:
//   - tenso_gpu_loads fails exactly when tenso_loads does, with the same status, unless the
//     packet decodes to something with no device form (sparse, strings, ragged; quantized
//     without dequantize_to): then UNSUPPORTED_KIND; or an IPC reference that does not open
//     here (INVALID_ARGUMENT / GPU);
//   - a dense result holds the view's bytes, dtype and shape; a bundle has its entries in order;
//   - tenso_gpu_read_fd of the same bytes from a memfd answers as tenso_read_fd does, and gives
//     the same device bytes (the dense body is streamed up while it is read);
//   - tenso_gpu_tensor_from_dlpack of a DLPack tensor whose ndim, dtype, shape, strides and
//     byte_offset come from the input's bytes (any int64, as a producer may hand over): a
//     status from the documented set, no undefined behaviour (UBSan) whatever the products;
//     when it takes the tensor, the shape is within the element limit, the strides compact
//     row-major, and freeing it runs the deleter once; when it refuses, the deleter never runs.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_common.hpp"

namespace {

bool device_form(const tenso_view *v, tenso_dtype deq) {
    switch (tenso_view_kind(v)) {
    case TENSO_KIND_DENSE: return true;
    case TENSO_KIND_QUANTIZED: return deq != 0;
    case TENSO_KIND_BUNDLE:
        for (uint32_t i = 0; i < tenso_view_bundle_count(v); ++i) {
            const tenso_view *c = nullptr;
            const char *k = nullptr;
            size_t kl = 0;
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_bundle_entry(&k, &kl, &c, v, i));
            if (!device_form(c, deq)) return false;
        }
        return true;
    case TENSO_KIND_GPU_IPC_REF: return true;
    default: return false;
    }
}

bool has_ipc(const tenso_view *v) {
    if (tenso_view_kind(v) == TENSO_KIND_GPU_IPC_REF) return true;
    if (tenso_view_kind(v) != TENSO_KIND_BUNDLE) return false;
    for (uint32_t i = 0; i < tenso_view_bundle_count(v); ++i) {
        const tenso_view *c = nullptr;
        const char *k = nullptr;
        size_t kl = 0;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_bundle_entry(&k, &kl, &c, v, i));
        if (has_ipc(c)) return true;
    }
    return false;
}

// The device value against the host view it came from.
void compare(const tenso_gpu_value *g, const tenso_view *v) {
    if (tenso_view_kind(v) == TENSO_KIND_BUNDLE) {
        FUZZ_CHECK(tenso_gpu_value_bundle_count(g) == tenso_view_bundle_count(v), "bundle counts differ");
        for (uint32_t i = 0; i < tenso_view_bundle_count(v); ++i) {
            const tenso_view *c = nullptr;
            const char *k1 = nullptr, *k2 = nullptr;
            size_t l1 = 0, l2 = 0;
            const tenso_gpu_value *gc = nullptr;
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_bundle_entry(&k1, &l1, &c, v, i));
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_gpu_value_bundle_entry(&k2, &l2, &gc, g, i));
            FUZZ_CHECK(l1 == l2 && std::memcmp(k1, k2, l1) == 0, "bundle key %u differs", i);
            compare(gc, c);
        }
        return;
    }
    const tenso_gpu_tensor *t = tenso_gpu_value_tensor(g);
    FUZZ_CHECK(t != nullptr, "no tensor for a non-bundle");
    if (tenso_view_kind(v) != TENSO_KIND_DENSE) return;  // dequantized / IPC: other suites check bytes
    FUZZ_CHECK(tenso_gpu_tensor_dtype(t) == tenso_view_dtype(v), "dtype differs");
    FUZZ_CHECK(tenso_gpu_tensor_ndim(t) == tenso_view_ndim(v), "ndim differs");
    for (uint32_t i = 0; i < tenso_view_ndim(v); ++i)
        FUZZ_CHECK(tenso_gpu_tensor_shape(t)[i] == tenso_view_shape(v)[i], "shape differs");
    const uint64_t n = tenso_view_nbytes(v);
    FUZZ_CHECK(tenso_gpu_tensor_nbytes(t) == n, "nbytes differs");
    std::vector<uint8_t> got(static_cast<size_t>(n));
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_gpu_tensor_download(got.data(), got.size(), t, nullptr));
    FUZZ_CHECK(n == 0 || std::memcmp(got.data(), tenso_view_data(v), size_t(n)) == 0, "device bytes differ");
}

// What tenso_gpu_* must answer for a packet tenso_loads answered `st` for (view v when OK).
void check_against(tenso_status gst, const tenso_gpu_value *g, tenso_status st, const tenso_view *v, tenso_dtype deq) {
    if (st != TENSO_OK) {
        FUZZ_CHECK(gst == st, "gpu answered %s, loads %s", tenso_status_name(gst), tenso_status_name(st));
        return;
    }
    if (!device_form(v, deq)) {
        FUZZ_CHECK(gst == TENSO_E_UNSUPPORTED_KIND, "no device form, yet gpu answered %s", tenso_status_name(gst));
        return;
    }
    if (gst != TENSO_OK && has_ipc(v)) {
        // The reference is opened as a device tensor, whose shape meets the tensor limits that
        // a reference without a body does not (loads only reads its metadata).
        FUZZ_CHECK(gst == TENSO_E_INVALID_ARGUMENT || gst == TENSO_E_GPU || gst == TENSO_E_TOO_MANY_ELEMENTS,
                   "IPC reference: %s", tenso_status_name(gst));
        return;
    }
    FUZZ_CHECK(gst == TENSO_OK, "loads OK, gpu answered %s", tenso_status_name(gst));
    compare(g, v);
}

// Reads the input's bytes as fields, from the front, wrapping around (zeros when empty).
class Fields {
public:
    Fields(const uint8_t *p, size_t n) : p_(p), n_(n) {}
    uint8_t u8() { return n_ ? p_[i_++ % n_] : 0; }
    int64_t i64() {
        uint64_t v = 0;
        for (int k = 0; k < 8; ++k) v |= uint64_t(u8()) << (8 * k);
        return int64_t(v);
    }

private:
    const uint8_t *p_;
    size_t n_, i_ = 0;
};

int g_deleted = 0;
void count_deleter(DLManagedTensorVersioned *) { ++g_deleted; }

void dlpack_import(const uint8_t *data, size_t size) {
    static uint8_t cells[64];
    Fields f(data, size);
    const uint8_t mode = f.u8();
    int64_t shape[34], strides[34];
    DLManagedTensorVersioned m;
    std::memset(&m, 0, sizeof m);
    m.version = {mode & 1 ? DLPACK_MAJOR_VERSION + 1u : DLPACK_MAJOR_VERSION, 1};
    m.flags = mode & 2 ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
    m.deleter = count_deleter;
    m.dl_tensor.data = cells;
    m.dl_tensor.device = {mode & 4 ? kDLCUDA : kDLCPU, 0};
    m.dl_tensor.ndim = int32_t(f.u8() % 35) - 1;  // -1 .. 33
    m.dl_tensor.dtype = {uint8_t(f.u8() % 8), uint8_t(mode & 8 ? f.u8() : 32), uint16_t(mode & 16 ? f.u8() : 1)};
    m.dl_tensor.shape = shape;
    m.dl_tensor.strides = mode & 32 ? strides : nullptr;
    m.dl_tensor.byte_offset = mode & 64 ? uint64_t(f.i64()) : f.u8();
    // Extents: small ones (so some tensors are taken) or any int64; strides: compact row-major
    // as far as they go, or any int64.
    const int32_t n = std::max<int32_t>(0, std::min<int32_t>(m.dl_tensor.ndim, 34));
    for (int32_t i = 0; i < n; ++i) shape[i] = f.u8() & 1 ? f.i64() : f.u8() % 5;
    __int128 run = 1;
    for (int32_t i = n; i-- > 0;) {
        strides[i] = f.u8() & 1 || run > INT64_MAX ? f.i64() : int64_t(run);
        if (run <= INT64_MAX) run *= shape[i] > 1 ? shape[i] : 1;
    }
    g_deleted = 0;
    tenso_gpu_tensor *t = nullptr;
    const tenso_status st = tenso_gpu_tensor_from_dlpack(&t, &m);
    FUZZ_CHECK((st == TENSO_OK) == (t != nullptr), "tensor set on failure or missing on success");
    FUZZ_CHECK(g_deleted == 0, "deleter ran during the import");
    if (st != TENSO_OK) {
        FUZZ_CHECK(st == TENSO_E_INVALID_ARGUMENT || st == TENSO_E_TOO_MANY_DIMS || st == TENSO_E_TOO_MANY_ELEMENTS ||
                       st == TENSO_E_UNSUPPORTED_KIND || st == TENSO_E_BAD_DTYPE || st == TENSO_E_UNSUPPORTED_VERSION,
                   "from_dlpack answered %s", tenso_status_name(st));
        return;
    }
    bool empty = false;
    for (int32_t i = 0; i < n; ++i) {
        FUZZ_CHECK(shape[i] >= 0, "a negative extent was taken");
        empty = empty || shape[i] == 0;
    }
    __int128 count = 1;
    for (int32_t i = 0; i < n && !empty; ++i) {
        count *= shape[i];
        FUZZ_CHECK(count <= 1000000000, "more than 10^9 elements were taken");
    }
    if (m.dl_tensor.strides) {
        __int128 expect = 1;
        for (int32_t i = n; i-- > 0;) {
            FUZZ_CHECK(shape[i] == 1 || strides[i] == expect, "a strided tensor was taken");
            expect *= shape[i] > 1 ? shape[i] : 1;
        }
    }
    FUZZ_CHECK(uint32_t(tenso_gpu_tensor_ndim(t)) == uint32_t(n), "ndim differs");
    tenso_gpu_tensor_free(t);
    FUZZ_CHECK(g_deleted == 1, "the deleter ran %d times", g_deleted);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const bool selected = tenso_gpu_select_backend(TENSO_GPU_BACKEND_HOST) == TENSO_OK;
    FUZZ_CHECK(selected, "host backend");
    const uint8_t pick = size ? data[size - 1] : 0;
    static const uint64_t chunks[4] = {1, 7, 4096, 0};
    static const tenso_dtype deqs[4] = {0, TENSO_DTYPE_FLOAT32, TENSO_DTYPE_FLOAT16, TENSO_DTYPE_BFLOAT16};
    tenso_gpu_options o = TENSO_GPU_OPTIONS_INIT;
    o.chunk_bytes = chunks[pick & 3];
    if (o.chunk_bytes == 1 && size > 4096) o.chunk_bytes = 5;  // byte-sized chunks only for small packets
    o.staging_buffers = 1 + ((pick >> 2) % 3);
    o.dequantize_to = deqs[(pick >> 4) & 3];
    tenso_decode_options dec = TENSO_DECODE_OPTIONS_INIT;
    dec.max_packet_bytes = 64u << 20;  // keep the fuzzer's allocations small
    o.decode = &dec;

    tenso_view *v = nullptr;
    const tenso_status st = tenso_loads(&v, data, size, &dec);
    tenso_gpu_value *g = nullptr;
    const tenso_status gst = tenso_gpu_loads(&g, data, size, &o);
    FUZZ_CHECK((gst == TENSO_OK) == (g != nullptr), "value set on failure or missing on success");
    check_against(gst, g, st, v, o.dequantize_to);
    tenso_gpu_value_free(g);
    tenso_view_free(v);

    // The same bytes from an fd.
    const int fd = ::memfd_create("fuzz_gpu", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0, "memfd_create");
    FUZZ_CHECK(size == 0 || ::write(fd, data, size) == ssize_t(size), "write");
    ::lseek(fd, 0, SEEK_SET);
    const tenso_status rst = tenso_read_fd(&v, fd, &dec);
    ::lseek(fd, 0, SEEK_SET);
    const tenso_status grst = tenso_gpu_read_fd(&g, fd, &o);
    check_against(grst, g, rst, v, o.dequantize_to);
    tenso_gpu_value_free(g);
    tenso_view_free(v);
    ::close(fd);

    dlpack_import(data, size);
    return 0;
}
