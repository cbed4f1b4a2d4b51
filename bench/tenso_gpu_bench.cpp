// tenso_gpu_bench.cpp - GPU transfer rows, each set against the bound that limits it, measured
// side by side in one run on one device (tests/gpu/run-device-suite.sh runs it on a GPU):
//
//   h2d.pinned_memcpy     cudaMemcpyAsync from pinned memory: the PCIe bound (the reference)
//   loads.device          tenso_gpu_loads of a host packet (pageable bytes, staged through the
//                         pinned pool, double-buffered); ratio to h2d.pinned_memcpy, goal >= 0.8
//   loads_into.device     the same into the caller's device buffer (no allocation per call)
//   read.disk_cold        read() of the packet file with its pages evicted: the disk bound
//   read_fd.device        tenso_gpu_read_fd of that file, pages evicted; ratio to the slower of
//                         read.disk_cold and h2d.pinned_memcpy, goal >= 0.8
//   load_file.device      tenso_gpu_load_file (GPUDirect Storage where cuFile serves it); the
//                         path it took is printed
//   dequant.kernel_1GiB   the dequantize kernel over 1 GiB of device-resident qint8 codes into
//                         float32 (5 GiB of device traffic per run)
//   dequant.end_to_end    tenso_gpu_dequantize of a 512 Mi-element qint8 view (upload + kernel)
//
// The reference copy and the kernel row call the CUDA plugin's backend table directly (the
// plugin is dlopen()ed like libtenso does), so the bench itself links no CUDA. Every tenso call
// is checked once for correct output before it is timed. Sizes scale with --mib (the kernel
// row runs 16x that in codes, the end-to-end row 8x). Usage:
//   tenso_gpu_bench [--plugin PATH] [--dir DIR] [--mib N] [--reps N] [--backend cuda|host]
// --backend host runs the tenso rows on the host backend (no GPU: a check of the bench itself;
// the reference is then memcpy into ordinary memory, and the bare-kernel row is left out).
#include <tenso/tenso.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/backend.h"

namespace {

constexpr uint64_t MiB = 1u << 20, GiB = 1u << 30;

[[noreturn]] void die(const std::string &what) {
    std::fprintf(stderr, "tenso_gpu_bench: %s\n", what.c_str());
    std::exit(1);
}

void check(tenso_status st, const char *what) {
    if (st != TENSO_OK) die(std::string(what) + ": " + tenso_status_name(st) + ": " + tenso_last_error());
}

char g_msg[512];
void check_op(tenso_status st, const char *what) {
    if (st != TENSO_OK) die(std::string(what) + ": " + g_msg);
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Best of `reps` timed runs (seconds): the bound each row is compared with is also a best.
template <class F>
double best(int reps, F &&run) {
    double b = 1e300;
    for (int i = 0; i < reps; ++i) {
        const double t0 = now();
        run();
        b = std::min(b, now() - t0);
    }
    return b;
}

void row(const char *name, uint64_t bytes, double secs, double ref_gbs = 0, const char *note = "") {
    const double gbs = double(bytes) / secs / 1e9;
    if (ref_gbs > 0)
        std::printf("%-22s %9.1f MiB %8.2f GB/s  ratio %.2f %s\n", name, double(bytes) / MiB, gbs, gbs / ref_gbs, note);
    else std::printf("%-22s %9.1f MiB %8.2f GB/s  %s\n", name, double(bytes) / MiB, gbs, note);
    std::fflush(stdout);
}

// Evicts the file's pages, so the next read comes from the disk.
void evict(int fd) {
    if (::fdatasync(fd) != 0 || ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) die("evicting the page cache");
}

}  // namespace

int main(int argc, char **argv) {
    std::string plugin = TENSO_CUDA_PLUGIN_PATH, dir = "/tmp";
    uint64_t mib = 64;
    int reps = 5;
    bool host = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--plugin" && v) plugin = argv[++i];
        else if (a == "--dir" && v) dir = argv[++i];
        else if (a == "--mib" && v) mib = std::strtoull(argv[++i], nullptr, 10);
        else if (a == "--reps" && v) reps = std::atoi(argv[++i]);
        else if (a == "--backend" && v) host = std::string(argv[++i]) == "host";
        else die("usage: tenso_gpu_bench [--plugin PATH] [--dir DIR] [--mib N] [--reps N] [--backend cuda|host]");
    }
    if (!mib || reps < 1) die("--mib and --reps must be positive");

    check(tenso_gpu_select_backend(host ? TENSO_GPU_BACKEND_HOST : TENSO_GPU_BACKEND_CUDA), "tenso_gpu_select_backend");
    check(tenso_gpu_available(), "tenso_gpu_available");
    tenso_gpu_device_info info{};
    info.version = TENSO_GPU_DEVICE_INFO_VERSION;
    check(tenso_gpu_device_info_get(&info, 0), "tenso_gpu_device_info_get");
    std::printf("device 0: %s, sm_%d%d, %.1f GiB, PCI %04x:%02x:%02x\n", info.name, info.compute_major,
                info.compute_minor, double(info.total_memory) / GiB, unsigned(info.pci_domain), unsigned(info.pci_bus),
                unsigned(info.pci_device));

    const tenso_gpu_backend_ops *ops = nullptr;
    if (!host) {
        void *lib = dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!lib) die(std::string("dlopen: ") + dlerror());
        auto entry = reinterpret_cast<tenso_cuda_backend_entry_fn>(dlsym(lib, TENSO_CUDA_BACKEND_ENTRY));
        if (!entry) die("no " TENSO_CUDA_BACKEND_ENTRY " in the plugin");
        ops = entry();
    }

    // ---- the reference: pinned cudaMemcpy (host backend: memcpy) ----
    const uint64_t n = mib * MiB;
    void *pinned = nullptr, *dev = nullptr, *stream = nullptr;
    std::vector<uint8_t> host_src, host_dst;
    tenso_gpu_tensor *host_dev = nullptr;  // the host backend's "device" buffer for loads_into
    double t_ref = 0;
    if (ops) {
        check_op(ops->malloc_pinned(&pinned, n, g_msg, sizeof g_msg), "malloc_pinned");
        check_op(ops->malloc_device(&dev, n, 0, g_msg, sizeof g_msg), "malloc_device");
        check_op(ops->stream_create(&stream, 0, g_msg, sizeof g_msg), "stream_create");
        std::memset(pinned, 0x5A, n);
        t_ref = best(reps, [&] {
            check_op(ops->copy_h2d(dev, pinned, n, stream, g_msg, sizeof g_msg), "copy_h2d");
            check_op(ops->stream_synchronize(stream, g_msg, sizeof g_msg), "stream_synchronize");
        });
    } else {
        host_src.assign(n, 0x5A);
        host_dst.assign(n, 0);
        t_ref = best(reps, [&] { std::memcpy(host_dst.data(), host_src.data(), n); });
        const uint64_t bytes_shape[1] = {n};
        check(tenso_gpu_tensor_new(&host_dev, 0, TENSO_DTYPE_UINT8, 1, bytes_shape), "tenso_gpu_tensor_new");
        dev = tenso_gpu_tensor_data(host_dev);
    }
    const double ref_gbs = double(n) / t_ref / 1e9;
    row(ops ? "h2d.pinned_memcpy" : "h2d.memcpy(host)", n, t_ref);

    // ---- packet -> device ----
    const uint64_t shape[1] = {n / 4};
    std::vector<float> body(n / 4);
    for (size_t i = 0; i < body.size(); ++i) body[i] = float(i % 1000003);
    const tenso_tensor t = {body.data(), n, shape, 1, TENSO_DTYPE_FLOAT32};
    tenso_buffer packet = TENSO_BUFFER_INIT;
    check(tenso_dumps(&packet, &t, nullptr), "tenso_dumps");
    std::vector<uint8_t> pageable(packet.data, packet.data + packet.size);  // ordinary memory
    tenso_gpu_options opts = TENSO_GPU_OPTIONS_INIT;
    {
        tenso_gpu_value *v = nullptr;
        check(tenso_gpu_loads(&v, pageable.data(), pageable.size(), &opts), "tenso_gpu_loads");
        std::vector<float> back(body.size());
        check(tenso_gpu_tensor_download(back.data(), n, tenso_gpu_value_tensor(v), nullptr), "download");
        if (std::memcmp(back.data(), body.data(), n) != 0) die("tenso_gpu_loads: wrong bytes on the device");
        tenso_gpu_value_free(v);
    }
    row("loads.device", n,
        best(reps,
             [&] {
                 tenso_gpu_value *v = nullptr;
                 check(tenso_gpu_loads(&v, pageable.data(), pageable.size(), &opts), "tenso_gpu_loads");
                 tenso_gpu_value_free(v);
             }),
        ref_gbs, "(goal >= 0.80)");
    row("loads_into.device", n,
        best(reps,
             [&] {
                 uint64_t got = 0;
                 check(tenso_gpu_loads_into(dev, n, &got, pageable.data(), pageable.size(), &opts),
                       "tenso_gpu_loads_into");
             }),
        ref_gbs);

    // ---- fd -> device ----
    const std::string path = dir + "/tenso_gpu_bench." + std::to_string(::getpid()) + ".tenso";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) die("cannot create " + path);
    if (::write(fd, pageable.data(), pageable.size()) != ssize_t(pageable.size())) die("writing " + path);
    std::vector<uint8_t> sink(pageable.size());
    const double t_disk = best(reps, [&] {
        evict(fd);
        size_t done = 0;
        while (done < sink.size()) {
            const ssize_t r = ::pread(fd, sink.data() + done, sink.size() - done, off_t(done));
            if (r <= 0) die("reading " + path);
            done += size_t(r);
        }
    });
    const double disk_gbs = double(pageable.size()) / t_disk / 1e9;
    row("read.disk_cold", pageable.size(), t_disk);
    row("read_fd.device", n,
        best(reps,
             [&] {
                 evict(fd);
                 if (::lseek(fd, 0, SEEK_SET) != 0) die("lseek");
                 tenso_gpu_value *v = nullptr;
                 check(tenso_gpu_read_fd(&v, fd, &opts), "tenso_gpu_read_fd");
                 tenso_gpu_value_free(v);
             }),
        std::min(disk_gbs, ref_gbs), "(vs the slower of disk and PCIe; goal >= 0.80)");
    uint32_t path_taken = 0;
    const double t_file = best(reps, [&] {
        evict(fd);
        tenso_gpu_value *v = nullptr;
        check(tenso_gpu_load_file(&v, path.c_str(), &opts), "tenso_gpu_load_file");
        path_taken = tenso_gpu_value_path(v);
        tenso_gpu_value_free(v);
    });
    row("load_file.device", n, t_file, std::min(disk_gbs, ref_gbs),
        path_taken == TENSO_GPU_PATH_GDS          ? "[path: GDS]"
        : path_taken == TENSO_GPU_PATH_GDS_COMPAT ? "[path: GDS compat]"
                                                  : "[path: staged]");
    ::close(fd);
    ::unlink(path.c_str());
    tenso_buffer_dispose(&packet);

    // ---- dequantize: the kernel over 1 GiB (16 x --mib) of qint8 already on the device ----
    if (ops) {
        const tenso_gpu_backend_ops &o = *ops;
        const uint64_t count = 16 * n;
        void *codes = nullptr, *out = nullptr, *sz = nullptr;
        check_op(o.malloc_device(&codes, count, 0, g_msg, sizeof g_msg), "malloc_device codes");
        check_op(o.malloc_device(&out, count * 4, 0, g_msg, sizeof g_msg), "malloc_device out");
        check_op(o.malloc_device(&sz, 8, 0, g_msg, sizeof g_msg), "malloc_device scales");
        const float scale_zp[2] = {0.5f, 3.0f};
        check_op(o.copy_h2d(sz, scale_zp, 8, stream, g_msg, sizeof g_msg), "copy scales");
        for (uint64_t off = 0; off < count; off += n) {  // codes: the pinned buffer's bytes, 0x5A
            const uint64_t len = std::min(n, count - off);
            check_op(o.copy_h2d(static_cast<uint8_t *>(codes) + off, pinned, len, stream, g_msg, sizeof g_msg),
                     "copy codes");
        }
        tenso_gpu_dequant_args a{};
        a.codes = codes;
        a.scales = static_cast<const float *>(sz);
        a.zero_points = static_cast<const float *>(sz) + 1;
        a.out = out;
        a.count = count;
        a.qdtype = TENSO_DTYPE_QINT8;
        a.scheme = TENSO_QUANT_PER_TENSOR;
        a.out_dtype = TENSO_DTYPE_FLOAT32;
        check_op(o.stream_synchronize(stream, g_msg, sizeof g_msg), "stream_synchronize");
        const double t_k = best(reps, [&] {
            check_op(o.dequantize(&a, stream, g_msg, sizeof g_msg), "dequantize");
            check_op(o.stream_synchronize(stream, g_msg, sizeof g_msg), "stream_synchronize");
        });
        float tail[4];
        check_op(o.copy_d2h(tail, static_cast<float *>(out) + count - 4, sizeof tail, stream, g_msg, sizeof g_msg),
                 "copy_d2h");
        check_op(o.stream_synchronize(stream, g_msg, sizeof g_msg), "stream_synchronize");
        if (tail[3] != (float(0x5A) - 3.0f) * 0.5f) die("dequantize kernel: wrong value");
        std::printf("%-22s %9.1f MiB %8.2f GB/s  (%.2f ms; %.1f Gelem/s; bytes = codes + float32 out)\n",
                    count == GiB ? "dequant.kernel_1GiB" : "dequant.kernel", double(5 * count) / MiB,
                    double(5 * count) / t_k / 1e9, t_k * 1e3, double(count) / t_k / 1e9);
        o.free_device(codes, 0, g_msg, sizeof g_msg);
        o.free_device(out, 0, g_msg, sizeof g_msg);
        o.free_device(sz, 0, g_msg, sizeof g_msg);
    }

    // ---- dequantize end to end: a quantized view in host memory -> float32 on the device ----
    {
        const uint64_t count = 8 * n;  // 512 Mi elements at the default 64 MiB
        const uint64_t qshape[1] = {count};
        std::vector<uint8_t> qcodes(count, 0x5A);
        const float scale = 0.5f, zp = 3.0f;
        tenso_quantized q{};
        q.data = qcodes.data();
        q.nbytes = count;
        q.shape = qshape;
        q.scales = &scale;
        q.zero_points = &zp;
        q.ndim = 1;
        q.dtype = TENSO_DTYPE_QINT8;
        q.scheme = TENSO_QUANT_PER_TENSOR;
        q.num_scales = 1;
        tenso_value *qv = nullptr;
        check(tenso_value_new_quantized(&qv, &q), "tenso_value_new_quantized");
        tenso_buffer qp = TENSO_BUFFER_INIT;
        check(tenso_value_dumps(&qp, qv, nullptr), "tenso_value_dumps");
        tenso_view *view = nullptr;
        check(tenso_loads(&view, qp.data, qp.size, nullptr), "tenso_loads");
        tenso_gpu_tensor *probe = nullptr;
        check(tenso_gpu_dequantize(&probe, view, TENSO_DTYPE_FLOAT32, &opts), "tenso_gpu_dequantize");
        std::vector<float> all(count);
        check(tenso_gpu_tensor_download(all.data(), count * 4, probe, nullptr), "download");
        for (uint64_t i = 0; i < count; i += 4099)
            if (all[i] != (float(0x5A) - 3.0f) * 0.5f) die("tenso_gpu_dequantize: wrong value");
        tenso_gpu_tensor_free(probe);
        row("dequant.end_to_end", count,
            best(reps,
                 [&] {
                     tenso_gpu_tensor *o = nullptr;
                     check(tenso_gpu_dequantize(&o, view, TENSO_DTYPE_FLOAT32, &opts), "tenso_gpu_dequantize");
                     tenso_gpu_tensor_free(o);
                 }),
            ref_gbs, "(codes bytes / s, vs pinned memcpy)");
        tenso_view_free(view);
        tenso_buffer_dispose(&qp);
        tenso_value_free(qv);
    }

    if (ops) {
        ops->stream_destroy(stream, g_msg, sizeof g_msg);
        ops->free_device(dev, 0, g_msg, sizeof g_msg);
        ops->free_pinned(pinned, g_msg, sizeof g_msg);
    }
    tenso_gpu_tensor_free(host_dev);
    return 0;
}
