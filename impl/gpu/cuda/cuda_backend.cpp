// cuda_backend.cpp - the CUDA backend of the device interface (impl/gpu/backend.h), in the
// plugin libtenso_cuda.so, whose one export is tenso_cuda_backend_v1(). libtenso dlopen()s the
// plugin at the first GPU call, so libtenso itself never links CUDA. Host code only (the
// kernels are in impl/gpu/kernels/dequant.cu), so the host compiler builds it: one nvcc pass
// per architecture less.
//
// Every op is a thin C wrapper over the CUDA runtime: it sets the device, makes the call and
// turns a cudaError_t into a tenso status with a message naming the call and carrying
// cudaGetErrorString. Nothing here throws; no op keeps state except the lazily loaded
// libcufile (GPUDirect Storage), which is optional and found with dlopen at run time.
#include <cuda.h>  // driver API types only (cuMemGetAddressRange is fetched at run time)
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpu/backend.h"
#include "gpu/kernels/dequant.hpp"

namespace {

void put(char *msg, size_t cap, const char *fmt, const char *a, const char *b = "", const char *c = "") {
    if (msg && cap) std::snprintf(msg, cap, fmt, a, b, c);
}

// The tenso status for a CUDA error: no driver / device is "unavailable", not "failed".
tenso_status status_of(cudaError_t e) {
    switch (e) {
    case cudaErrorMemoryAllocation: return TENSO_E_NO_MEMORY;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorStubLibrary:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorSystemNotReady:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorNotSupported: return TENSO_E_GPU_UNAVAILABLE;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle: return TENSO_E_INVALID_ARGUMENT;
    default: return TENSO_E_GPU;
    }
}

// "cudaXxx: <cudaGetErrorString> (<cudaGetErrorName>)"; `call` is the call's source text,
// of which the function name is kept.
tenso_status fail(char *msg, size_t cap, const char *call, cudaError_t e) {
    if (msg && cap)
        std::snprintf(msg, cap, "%.*s: %s (%s)", int(std::strcspn(call, "(")), call, cudaGetErrorString(e),
                      cudaGetErrorName(e));
    (void)cudaGetLastError();  // clear a non-sticky error so it does not surface in a later call
    return status_of(e);
}

#define TENSO_CUDA_TRY(call)                                                     \
    do {                                                                         \
        const cudaError_t tenso_e_ = (call);                                     \
        if (tenso_e_ != cudaSuccess) return fail(msg, msg_cap, #call, tenso_e_); \
    } while (0)

// An op that is one CUDA call, its error turned into a status.
#define TENSO_CUDA_OP(name, params, call) \
    tenso_status name params {            \
        TENSO_CUDA_TRY(call);             \
        return TENSO_OK;                  \
    }

// ---- discovery ----

tenso_status device_count(int32_t *count, char *msg, size_t msg_cap) {
    int n = 0;
    TENSO_CUDA_TRY(cudaGetDeviceCount(&n));
    if (n <= 0) {
        put(msg, msg_cap, "cudaGetDeviceCount: %s", "no CUDA device");
        return TENSO_E_GPU_UNAVAILABLE;
    }
    *count = n;
    return TENSO_OK;
}

tenso_status init(char *msg, size_t msg_cap) {
    int32_t n = 0;
    return device_count(&n, msg, msg_cap);
}

bool gds_usable(int32_t device);

tenso_status device_info(tenso_gpu_device_info *out, int32_t device, char *msg, size_t msg_cap) {
    cudaDeviceProp p;
    TENSO_CUDA_TRY(cudaGetDeviceProperties(&p, device));
    static_assert(sizeof p.uuid.bytes == sizeof out->uuid, "a CUDA UUID is 16 bytes");
    out->device = device;
    std::snprintf(out->name, sizeof out->name, "%s", p.name);
    std::memcpy(out->uuid, p.uuid.bytes, sizeof out->uuid);
    out->total_memory = p.totalGlobalMem;
    out->compute_major = p.major;
    out->compute_minor = p.minor;
    out->multiprocessors = p.multiProcessorCount;
    out->pci_domain = p.pciDomainID;
    out->pci_bus = p.pciBusID;
    out->pci_device = p.pciDeviceID;
    out->backend = TENSO_GPU_BACKEND_CUDA;
    out->flags = 0;
    // CUDA IPC needs unified addressing (every 64-bit Linux device has it).
    if (p.unifiedAddressing) out->flags |= TENSO_GPU_DEVICE_IPC;
    if (gds_usable(device)) out->flags |= TENSO_GPU_DEVICE_GDS;
    return TENSO_OK;
}

// ---- memory ----

tenso_status malloc_device(void **ptr, size_t n, int32_t device, char *msg, size_t msg_cap) {
    TENSO_CUDA_TRY(cudaSetDevice(device));
    TENSO_CUDA_TRY(cudaMalloc(ptr, n ? n : 1));  // a zero-size tensor still has an address
    return TENSO_OK;
}

tenso_status free_device(void *ptr, int32_t device, char *msg, size_t msg_cap) {
    TENSO_CUDA_TRY(cudaSetDevice(device));
    TENSO_CUDA_TRY(cudaFree(ptr));
    return TENSO_OK;
}

// Portable: staging buffers from the pool serve every device.
TENSO_CUDA_OP(malloc_pinned, (void **ptr, size_t n, char *msg, size_t msg_cap),
              cudaHostAlloc(ptr, n ? n : 1, cudaHostAllocPortable))
TENSO_CUDA_OP(free_pinned, (void *ptr, char *msg, size_t msg_cap), cudaFreeHost(ptr))

// ---- streams and events ----

// A stream or an event on `device`: set the device, make it, hand it out opaque.
template <class Handle, class Make>
tenso_status create_on(void **out, int32_t device, const char *call, Make make, char *msg, size_t msg_cap) {
    TENSO_CUDA_TRY(cudaSetDevice(device));
    Handle h = nullptr;
    const cudaError_t e = make(&h);
    if (e != cudaSuccess) return fail(msg, msg_cap, call, e);
    *out = h;
    return TENSO_OK;
}

tenso_status stream_create(void **stream, int32_t device, char *msg, size_t msg_cap) {
    // Non-blocking: tenso's copies must not serialise against the legacy default stream.
    return create_on<cudaStream_t>(
        stream, device, "cudaStreamCreateWithFlags",
        [](cudaStream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); }, msg, msg_cap);
}

TENSO_CUDA_OP(stream_destroy, (void *stream, char *msg, size_t msg_cap),
              cudaStreamDestroy(static_cast<cudaStream_t>(stream)))

TENSO_CUDA_OP(stream_synchronize, (void *stream, char *msg, size_t msg_cap),
              cudaStreamSynchronize(static_cast<cudaStream_t>(stream)))

tenso_status event_create(void **event, int32_t device, char *msg, size_t msg_cap) {
    return create_on<cudaEvent_t>(
        event, device, "cudaEventCreateWithFlags",
        [](cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDisableTiming); }, msg, msg_cap);
}

TENSO_CUDA_OP(event_destroy, (void *event, char *msg, size_t msg_cap),
              cudaEventDestroy(static_cast<cudaEvent_t>(event)))

TENSO_CUDA_OP(event_record, (void *event, void *stream, char *msg, size_t msg_cap),
              cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)))

TENSO_CUDA_OP(event_synchronize, (void *event, char *msg, size_t msg_cap),
              cudaEventSynchronize(static_cast<cudaEvent_t>(event)))

// ---- copies ----

TENSO_CUDA_OP(copy_h2d, (void *dst, const void *src, size_t n, void *stream, char *msg, size_t msg_cap),
              cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)))

TENSO_CUDA_OP(copy_d2h, (void *dst, const void *src, size_t n, void *stream, char *msg, size_t msg_cap),
              cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream)))

// ---- IPC ----

static_assert(sizeof(cudaIpcMemHandle_t) == 64, "the wire's GPU IPC handle is 64 bytes");

// cuMemGetAddressRange from the driver, through the runtime (no link against libcuda).
using AddressRangeFn = CUresult (*)(CUdeviceptr *base, size_t *size, CUdeviceptr ptr);

// The allocation holding ptr (its base and length), for `what` (ipc_export, ipc_open).
tenso_status address_range(CUdeviceptr *base, size_t *size, const void *ptr, const char *what, char *msg,
                           size_t msg_cap) {
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    TENSO_CUDA_TRY(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !fn) {
        put(msg, msg_cap, "%s: the driver has no cuMemGetAddressRange", what);
        return TENSO_E_GPU;
    }
    const CUresult r = reinterpret_cast<AddressRangeFn>(fn)(base, size, reinterpret_cast<CUdeviceptr>(ptr));
    if (r != CUDA_SUCCESS) {
        char code[32];
        std::snprintf(code, sizeof code, "%d", int(r));
        put(msg, msg_cap, "cuMemGetAddressRange: CUresult %s (%s)", code,
            r == CUDA_ERROR_NOT_FOUND ? "not memory from cudaMalloc" : "driver error");
        return r == CUDA_ERROR_NOT_FOUND || r == CUDA_ERROR_INVALID_VALUE ? TENSO_E_INVALID_ARGUMENT : TENSO_E_GPU;
    }
    return TENSO_OK;
}

tenso_status ipc_export(uint8_t handle[64], uint64_t *offset, const void *ptr, int32_t device, char *msg,
                        size_t msg_cap) {
    TENSO_CUDA_TRY(cudaSetDevice(device));
    CUdeviceptr base = 0;
    size_t size = 0;
    if (const tenso_status st = address_range(&base, &size, ptr, "ipc_export", msg, msg_cap)) return st;
    cudaIpcMemHandle_t h;
    TENSO_CUDA_TRY(cudaIpcGetMemHandle(&h, reinterpret_cast<void *>(base)));
    std::memcpy(handle, &h, 64);
    *offset = uint64_t(reinterpret_cast<CUdeviceptr>(ptr) - base);
    return TENSO_OK;
}

tenso_status ipc_open(void **ptr, uint64_t *size, const uint8_t handle[64], int32_t device, char *msg, size_t msg_cap) {
    TENSO_CUDA_TRY(cudaSetDevice(device));
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle, 64);
    void *p = nullptr;
    TENSO_CUDA_TRY(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
    // The opened allocation's length, as ipc_export finds its base: the engine checks the
    // reference's offset + nbytes against it.
    CUdeviceptr base = 0;
    size_t len = 0;
    const tenso_status st = address_range(&base, &len, p, "ipc_open", msg, msg_cap);
    if (st != TENSO_OK) {
        cudaIpcCloseMemHandle(p);
        return st;
    }
    *ptr = p;
    *size = uint64_t(len) - uint64_t(reinterpret_cast<CUdeviceptr>(p) - base);
    return TENSO_OK;
}

tenso_status ipc_close(void *ptr, int32_t device, char *msg, size_t msg_cap) {
    TENSO_CUDA_TRY(cudaSetDevice(device));
    TENSO_CUDA_TRY(cudaIpcCloseMemHandle(ptr));
    return TENSO_OK;
}

// ---- kernels ----

tenso_status dequantize(const tenso_gpu_dequant_args *args, void *stream, char *msg, size_t msg_cap) {
    const tenso_status st = tenso::gpu::check_dequant_args(*args, msg, msg_cap);
    if (st != TENSO_OK) return st;
    TENSO_CUDA_TRY(cudaSetDevice(args->device));
    TENSO_CUDA_TRY(tenso::gpu::dequantize_launch(*args, static_cast<cudaStream_t>(stream)));
    return TENSO_OK;
}

// ---- GPUDirect Storage: libcufile, loaded on first use ----
// The few cuFile types used, declared here with cufile.h's layout: the header ships with the
// GDS package, not with the toolkit wheels this plugin is built from.

struct CUfileError {
    int err;     // CUfileOpError: 0 is success, 5000+ cuFile's own codes
    int cu_err;  // CUresult
};
struct CUfileDescr {
    int type;  // CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1
    union {
        int fd;
        void *handle;
    } handle;
    const void *fs_ops;
};
using CUfileHandle = void *;
constexpr int kCuFileHandleTypeFd = 1;
constexpr int kCuFileParamForceCompatMode = 2;  // CUFileBoolConfigParameter_t
constexpr int kCuFileParamEnvLogfilePath = 1;   // CUFileStringConfigParameter_t

// cuFile writes cufile.log into the working directory unless its configuration names another
// place (logging.dir in the cufile.json that CUFILE_ENV_PATH_JSON names, or CUFILE_LOGFILE_PATH):
// a library must leave no file where its user runs. Unless the user set one of those two, the
// log goes to /dev/null, in the two ways cuFile takes it: cuFileSetParameterString(
// CUFILE_PARAM_ENV_LOGFILE_PATH) (cuFile >= 1.14; it outranks the environment and cufile.json)
// for what cuFile logs once configured, and CUFILE_LOGFILE_PATH while the library loads and
// cuFileDriverOpen runs, for what it logs before it has read its configuration (libcufile 1.15
// logs a failed start to ./cufile.log whatever the parameter says). The variable is removed
// right after, so the process's environment is left as it was.
class QuietCuFileLog {
public:
    QuietCuFileLog() : quiet_(!std::getenv("CUFILE_LOGFILE_PATH") && !std::getenv("CUFILE_ENV_PATH_JSON")) {
        if (quiet_) setenv("CUFILE_LOGFILE_PATH", kNowhere, 0);
    }
    ~QuietCuFileLog() {
        if (quiet_) unsetenv("CUFILE_LOGFILE_PATH");
    }
    QuietCuFileLog(const QuietCuFileLog &) = delete;
    QuietCuFileLog &operator=(const QuietCuFileLog &) = delete;
    // Before cuFileDriverOpen (the parameter is staged until then).
    void configure(void *lib) const {
        using SetString = CUfileError (*)(int, const char *);
        auto set = reinterpret_cast<SetString>(dlsym(lib, "cuFileSetParameterString"));
        if (quiet_ && set) (void)set(kCuFileParamEnvLogfilePath, kNowhere);  // best effort: the variable covers it
    }

private:
    static constexpr const char *kNowhere = "/dev/null";
    bool quiet_;
};

struct CuFile {
    void *lib = nullptr;
    CUfileError (*driver_open)() = nullptr;
    CUfileError (*handle_register)(CUfileHandle *, CUfileDescr *) = nullptr;
    void (*handle_deregister)(CUfileHandle) = nullptr;
    ssize_t (*read)(CUfileHandle, void *, size_t, off_t, off_t) = nullptr;
    CUfileError (*get_bool)(int, bool *) = nullptr;  // optional (cuFile >= 1.7)
    bool open = false;
    bool compat = false;  // everything goes through cuFile's compatibility mode
    char why[256] = "";
};

// Loaded once, on the first GDS question; never unloaded (the driver stays open).
const CuFile &cufile() {
    static const CuFile state = [] {
        CuFile c;
        // cuFile only where the runtime sees a device: without a driver, cuFileDriverOpen
        // (libcufile 1.19) was seen to spin forever after falling back to compatibility mode.
        int devices = 0;
        const cudaError_t ce = cudaGetDeviceCount(&devices);
        if (ce != cudaSuccess || devices <= 0) {
            std::snprintf(c.why, sizeof c.why, "GPUDirect Storage: no CUDA device (%s)",
                          ce != cudaSuccess ? cudaGetErrorString(ce) : "none found");
            (void)cudaGetLastError();
            return c;
        }
        const QuietCuFileLog quiet;
        c.lib = dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
        if (!c.lib) c.lib = dlopen("libcufile.so", RTLD_NOW | RTLD_LOCAL);
        if (!c.lib) {
            std::snprintf(c.why, sizeof c.why, "GPUDirect Storage: libcufile not found (%s)", dlerror());
            return c;
        }
        c.driver_open = reinterpret_cast<CUfileError (*)()>(dlsym(c.lib, "cuFileDriverOpen"));
        c.handle_register =
            reinterpret_cast<CUfileError (*)(CUfileHandle *, CUfileDescr *)>(dlsym(c.lib, "cuFileHandleRegister"));
        c.handle_deregister = reinterpret_cast<void (*)(CUfileHandle)>(dlsym(c.lib, "cuFileHandleDeregister"));
        c.read = reinterpret_cast<ssize_t (*)(CUfileHandle, void *, size_t, off_t, off_t)>(dlsym(c.lib, "cuFileRead"));
        c.get_bool = reinterpret_cast<CUfileError (*)(int, bool *)>(dlsym(c.lib, "cuFileGetParameterBool"));
        if (!c.driver_open || !c.handle_register || !c.handle_deregister || !c.read) {
            std::snprintf(c.why, sizeof c.why,
                          "GPUDirect Storage: libcufile lacks cuFileDriverOpen/HandleRegister/Read");
            return c;
        }
        quiet.configure(c.lib);
        const CUfileError e = c.driver_open();
        if (e.err != 0) {
            std::snprintf(c.why, sizeof c.why,
                          "GPUDirect Storage: cuFileDriverOpen failed (cuFile error %d, CUresult %d)", e.err, e.cu_err);
            return c;
        }
        c.open = true;
        // Without the nvidia-fs kernel module cuFile can only run in compatibility mode (it
        // stages through its own buffers); a configuration may also force that mode.
        struct stat st;
        bool forced = false;
        if (c.get_bool && c.get_bool(kCuFileParamForceCompatMode, &forced).err != 0) forced = false;
        c.compat = forced || stat("/proc/driver/nvidia-fs", &st) != 0;
        return c;
    }();
    return state;
}

bool gds_usable(int32_t) { return cufile().open; }

// Registers `fd` with cuFile on `device` (the caller deregisters *h). A file cuFile cannot
// serve, or no cuFile at all, is TENSO_E_NOT_AVAILABLE with the reason.
tenso_status gds_register(CUfileHandle *h, const CuFile &c, int fd, int32_t device, char *msg, size_t msg_cap) {
    if (!c.open) {
        put(msg, msg_cap, "%s", c.why);
        return TENSO_E_NOT_AVAILABLE;
    }
    TENSO_CUDA_TRY(cudaSetDevice(device));
    CUfileDescr d{};
    d.type = kCuFileHandleTypeFd;
    d.handle.fd = fd;
    const CUfileError e = c.handle_register(h, &d);
    if (e.err != 0) {
        char code[48];
        std::snprintf(code, sizeof code, "%d, CUresult %d", e.err, e.cu_err);
        put(msg, msg_cap, "GPUDirect Storage: cuFileHandleRegister refused the file (cuFile error %s)", code);
        return TENSO_E_NOT_AVAILABLE;
    }
    return TENSO_OK;
}

tenso_status gds_probe(uint32_t *mode, int fd, int32_t device, char *msg, size_t msg_cap) {
    const CuFile &c = cufile();
    CUfileHandle h = nullptr;
    const tenso_status st = gds_register(&h, c, fd, device, msg, msg_cap);
    if (st != TENSO_OK) return st;
    c.handle_deregister(h);
    *mode = c.compat ? TENSO_GPU_PATH_GDS_COMPAT : TENSO_GPU_PATH_GDS;
    return TENSO_OK;
}

tenso_status gds_read(void *dst, size_t n, int fd, uint64_t file_offset, int32_t device, char *msg, size_t msg_cap) {
    const CuFile &c = cufile();
    CUfileHandle h = nullptr;
    tenso_status st = gds_register(&h, c, fd, device, msg, msg_cap);
    if (st != TENSO_OK) return st;
    size_t done = 0;
    while (done < n) {  // cuFileRead may return short counts, like read(2)
        const ssize_t r = c.read(h, dst, n - done, off_t(file_offset + done), off_t(done));
        if (r > 0) {
            done += size_t(r);
            continue;
        }
        char code[96];
        if (r == 0) std::snprintf(code, sizeof code, "end of file after %zu of %zu bytes", done, n);
        else if (r == -1) std::snprintf(code, sizeof code, "%s", std::strerror(errno));
        else std::snprintf(code, sizeof code, "error %zd", -r);
        put(msg, msg_cap, "cuFileRead: %s", code);
        st = r == 0 ? TENSO_E_TRUNCATED : TENSO_E_IO;
        break;
    }
    c.handle_deregister(h);
    return st;
}

const tenso_gpu_backend_ops kOps = {
    TENSO_GPU_BACKEND_ABI,
    TENSO_GPU_BACKEND_CUDA,
    init,
    device_count,
    device_info,
    malloc_device,
    free_device,
    malloc_pinned,
    free_pinned,
    stream_create,
    stream_destroy,
    stream_synchronize,
    event_create,
    event_destroy,
    event_record,
    event_synchronize,
    copy_h2d,
    copy_d2h,
    ipc_export,
    ipc_open,
    ipc_close,
    dequantize,
    gds_probe,
    gds_read,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const tenso_gpu_backend_ops *tenso_cuda_backend_v1(void) {
    return &kOps;
}
