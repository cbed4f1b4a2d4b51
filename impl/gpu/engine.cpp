// engine.cpp - the GPU transfer engine over the backend table (see engine.hpp). Every wire
// rule comes from impl/format (decode, inspect, the encode Plan) and every fd read from the
// stream decoder through impl/io; this file only moves bytes between host and device.
#include "gpu/engine.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "error.hpp"
#include "format/composites.hpp"
#include "format/decoder.hpp"
#include "format/dlpack.hpp"
#include "io/io.hpp"

namespace tenso::gpu {

namespace {

std::string num(uint64_t v) { return std::to_string(v); }

constexpr size_t kMsg = 512;
constexpr uint64_t kDefaultPoolLimit = 256ull << 20;
// The device memory read_fd allocates for a body before any of it arrived (see read_fd).
constexpr uint64_t kDeviceUpfront = 64ull << 20;

// Runs one backend op; a failure becomes an Error with the backend's own message.
template <class F, class... A>
void call(const char *what, F f, A... a) {
    char msg[kMsg] = "";
    const tenso_status st = f(a..., msg, sizeof msg);
    if (st != TENSO_OK) fail(st, msg[0] ? std::string(msg) : std::string(what) + " failed");
}

// ------------------------------------------------------------------------------------------
// Backend selection and loading
// ------------------------------------------------------------------------------------------

struct State {
    std::mutex mu;
    uint32_t chosen = TENSO_GPU_BACKEND_NONE;
    bool loaded = false;
    tenso_status status = TENSO_OK;
    std::string why;
    const tenso_gpu_backend_ops *ops = nullptr;
};
// Leaked on purpose: device memory may be freed by destructors that run at exit.
State &state() {
    static State *s = new State;
    return *s;
}

// The plugin beside this libtenso first (an install or a build tree keeps them together), then
// the loader's search path.
const tenso_gpu_backend_ops *load_cuda(std::string *why) {
    std::string tried;
    void *h = nullptr;
    Dl_info info;
    if (::dladdr(reinterpret_cast<void *>(&load_cuda), &info) && info.dli_fname) {
        std::string dir = info.dli_fname;
        const size_t slash = dir.rfind('/');
        dir = slash == std::string::npos ? "." : dir.substr(0, slash);
        const std::string path = dir + "/libtenso_cuda.so";
        h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!h) tried = ::dlerror();
    }
    if (!h) {
        h = ::dlopen("libtenso_cuda.so", RTLD_NOW | RTLD_LOCAL);
        if (!h) tried += std::string(tried.empty() ? "" : "; ") + ::dlerror();
    }
    if (!h) {
        *why = "the CUDA backend plugin libtenso_cuda.so could not be loaded: " + tried;
        return nullptr;
    }
    auto entry = reinterpret_cast<tenso_cuda_backend_entry_fn>(::dlsym(h, TENSO_CUDA_BACKEND_ENTRY));
    const tenso_gpu_backend_ops *o = entry ? entry() : nullptr;
    if (!o || o->abi_version != TENSO_GPU_BACKEND_ABI || o->backend != TENSO_GPU_BACKEND_CUDA) {
        *why = "libtenso_cuda.so is not the plugin this libtenso was built with (backend ABI " +
               num(o ? o->abi_version : 0) + ", expected " + num(TENSO_GPU_BACKEND_ABI) + ")";
        ::dlclose(h);
        return nullptr;
    }
    return o;  // kept loaded for the life of the process
}

const tenso_gpu_backend_ops &loaded_ops() {
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.chosen == TENSO_GPU_BACKEND_NONE) {
        const char *env = std::getenv("TENSO_GPU_BACKEND");
        const std::string e = env ? env : "";
        if (e.empty() || e == "cuda") s.chosen = TENSO_GPU_BACKEND_CUDA;
        else if (e == "host") s.chosen = TENSO_GPU_BACKEND_HOST;
        else fail(TENSO_E_GPU_UNAVAILABLE, "TENSO_GPU_BACKEND is '" + e + "': expected cuda or host");
    }
    if (!s.loaded) {
        s.loaded = true;
        std::string detail;
        s.ops = s.chosen == TENSO_GPU_BACKEND_HOST ? host_backend() : load_cuda(&detail);
        const bool plugin = s.ops != nullptr;
        if (!s.ops) {
            s.status = TENSO_E_GPU_UNAVAILABLE;
        } else {
            char msg[kMsg] = "";
            s.status = s.ops->init(msg, sizeof msg);
            if (s.status != TENSO_OK) {
                detail = msg[0] ? msg : "the GPU backend failed to initialise";
                s.ops = nullptr;
            }
        }
        // What the user can do comes first; the loader's or the runtime's own words follow.
        if (s.status == TENSO_E_GPU_UNAVAILABLE && s.chosen == TENSO_GPU_BACKEND_CUDA)
            s.why =
                std::string(plugin ? "no CUDA driver or GPU device was found" : "the CUDA backend cannot be loaded") +
                ". To run without a GPU, use the host backend: set TENSO_GPU_BACKEND=host, or call "
                "tenso_gpu_select_backend(TENSO_GPU_BACKEND_HOST) before the first GPU call. (" +
                detail + ")";
        else s.why = detail;
    }
    if (!s.ops) fail(s.status, s.why);
    return *s.ops;
}

int32_t checked_device(int32_t device) {
    const int32_t n = device_count();
    if (device < 0 || device >= n)
        fail(TENSO_E_INVALID_ARGUMENT,
             "device " + std::to_string(device) + " out of range (" + num(uint64_t(n)) + " devices)");
    return device;
}

// ------------------------------------------------------------------------------------------
// The pinned pool
// ------------------------------------------------------------------------------------------

struct Pool {
    std::mutex mu;
    std::multimap<size_t, void *> idle;  // by size: a request takes the smallest that fits
    uint64_t idle_bytes = 0, buffers = 0, bytes = 0, hits = 0, misses = 0;
    uint64_t limit = kDefaultPoolLimit;
};
Pool &pool() {
    static Pool *p = new Pool;  // leaked like State: buffers may come back during exit
    return *p;
}

struct Pinned {
    uint8_t *p = nullptr;
    size_t n = 0;
};

// Sizes are rounded up to powers of two so that calls with nearby sizes share buffers.
size_t pinned_size(size_t n) {
    size_t s = 4096;
    while (s < n) s <<= 1;
    return s;
}

Pinned pool_take(size_t want) {
    const size_t n = pinned_size(want);
    Pool &pl = pool();
    {
        std::lock_guard<std::mutex> lock(pl.mu);
        auto it = pl.idle.lower_bound(n);
        if (it != pl.idle.end()) {
            Pinned b{static_cast<uint8_t *>(it->second), it->first};
            pl.idle_bytes -= it->first;
            pl.idle.erase(it);
            ++pl.hits;
            return b;
        }
        ++pl.misses;
    }
    void *p = nullptr;
    call("malloc_pinned", ops().malloc_pinned, &p, n);
    std::lock_guard<std::mutex> lock(pl.mu);
    ++pl.buffers;
    pl.bytes += n;
    return {static_cast<uint8_t *>(p), n};
}

void unpin(const std::vector<Pinned> &gone) noexcept {
    const tenso_gpu_backend_ops &o = *state().ops;
    char msg[kMsg];
    for (const Pinned &b : gone) o.free_pinned(b.p, msg, sizeof msg);  // nothing to report it to
}

void pool_give(Pinned b) noexcept {
    Pool &pl = pool();
    {
        std::lock_guard<std::mutex> lock(pl.mu);
        if (pl.idle_bytes + b.n <= pl.limit) {
            pl.idle.emplace(b.n, b.p);
            pl.idle_bytes += b.n;
            return;
        }
        --pl.buffers;
        pl.bytes -= b.n;
    }
    unpin({b});
}

// ------------------------------------------------------------------------------------------
// Streams: the caller's, or one of tenso's own, kept for reuse (creating one is not free)
// ------------------------------------------------------------------------------------------

std::mutex g_streams_mu;
// Streams do not survive fork() (CUDA's don't, nor the host backend's worker threads): a child
// forgets the ones it inherited and makes its own.
std::vector<std::pair<int32_t, void *>> &spare_streams() {
    static auto *v = new std::vector<std::pair<int32_t, void *>>;
    static pid_t owner = ::getpid();
    if (owner != ::getpid()) {
        owner = ::getpid();
        v->clear();
    }
    return *v;
}

class StreamUse {
public:
    StreamUse(void *caller, int32_t device) : device_(device), stream_(caller) {
        if (stream_) return;
        own_ = true;
        {
            std::lock_guard<std::mutex> lock(g_streams_mu);
            auto &v = spare_streams();
            auto it = std::find_if(v.begin(), v.end(), [&](const auto &e) { return e.first == device; });
            if (it != v.end()) {
                stream_ = it->second;
                v.erase(it);
                return;
            }
        }
        call("stream_create", ops().stream_create, &stream_, device);
    }
    ~StreamUse() {
        if (!own_) return;
        char msg[kMsg];
        // A stream with a failed copy is dropped, not reused: its error would surface later.
        if (ops().stream_synchronize(stream_, msg, sizeof msg) != TENSO_OK) {
            ops().stream_destroy(stream_, msg, sizeof msg);
            return;
        }
        std::lock_guard<std::mutex> lock(g_streams_mu);
        try {
            spare_streams().emplace_back(device_, stream_);
        } catch (...) {
            ops().stream_destroy(stream_, msg, sizeof msg);
        }
    }
    StreamUse(const StreamUse &) = delete;
    StreamUse &operator=(const StreamUse &) = delete;
    void *get() const { return stream_; }
    // Our own stream is synchronized before the call returns (errors reported here).
    void finish() {
        if (own_) call("stream_synchronize", ops().stream_synchronize, stream_);
    }

private:
    int32_t device_;
    void *stream_ = nullptr;
    bool own_ = false;
};

// ------------------------------------------------------------------------------------------
// Staging: `count` pinned chunks used round-robin, each guarded by an event recorded after the
// copy that uses it, so filling one chunk overlaps the copies of the others.
// ------------------------------------------------------------------------------------------

class Staging {
public:
    Staging(void *stream, int32_t device, const Options &o, uint64_t total) : ops_(ops()), stream_(stream) {
        chunk_ = size_t(std::max<uint64_t>(1, std::min<uint64_t>(o.chunk_bytes, total)));
        const size_t count = std::max<uint32_t>(1, o.staging_buffers);
        slots_.reserve(count);
        // A chunk that cannot be pinned (or an event not made) gives back what was taken.
        try {
            for (size_t i = 0; i < count; ++i) {
                Slot s;
                s.buf = pool_take(chunk_);
                slots_.push_back(s);
                call("event_create", ops().event_create, &slots_.back().event, device);
            }
        } catch (...) {
            release();
            throw;
        }
    }
    ~Staging() { release(); }
    Staging(const Staging &) = delete;
    Staging &operator=(const Staging &) = delete;

    size_t chunk() const { return chunk_; }
    // The next chunk, once the copy that last used it has finished; *pending gets what that
    // copy left there (a download's bytes, to be consumed before the chunk is reused).
    uint8_t *next(size_t *pending) {
        Slot &s = slots_[cur_];
        wait(s);
        *pending = s.len;
        s.len = 0;
        return s.buf.p;
    }
    void h2d(void *dst, size_t len) {
        submit(len, [&](Slot &s) { call("copy_h2d", ops().copy_h2d, dst, s.buf.p, len, stream_); });
    }
    void d2h(const void *src, size_t len) {
        submit(len, [&](Slot &s) { call("copy_d2h", ops().copy_d2h, s.buf.p, src, len, stream_); });
    }
    // Downloads still held, oldest first (after every copy finished).
    template <class Sink>
    void drain(Sink sink) {
        for (size_t i = 0; i < slots_.size(); ++i) {
            Slot &s = slots_[(cur_ + i) % slots_.size()];
            wait(s);
            if (s.len) sink(s.buf.p, s.len);
            s.len = 0;
        }
    }
    void wait_all() {
        for (Slot &s : slots_) wait(s);
    }

private:
    struct Slot {
        Pinned buf;
        void *event = nullptr;
        bool busy = false;
        size_t len = 0;
    };
    // Looked up once here, where a failure may throw: release() runs in the destructor.
    const tenso_gpu_backend_ops &ops_;
    void *stream_;
    size_t chunk_ = 0, cur_ = 0;
    std::vector<Slot> slots_;

    void wait(Slot &s) {
        if (!s.busy) return;
        s.busy = false;
        call("event_synchronize", ops().event_synchronize, s.event);
    }
    template <class Copy>
    void submit(size_t len, Copy copy) {
        Slot &s = slots_[cur_];
        copy(s);
        s.busy = true;
        s.len = len;
        call("event_record", ops().event_record, s.event, stream_);
        cur_ = (cur_ + 1) % slots_.size();
    }
    // Buffers go back to the pool only once no copy can touch them.
    void release() noexcept {
        const tenso_gpu_backend_ops &o = ops_;
        char msg[kMsg];
        bool clean = true;
        for (Slot &s : slots_) {
            if (s.busy && o.event_synchronize(s.event, msg, sizeof msg) != TENSO_OK) clean = false;
            if (s.event) o.event_destroy(s.event, msg, sizeof msg);
        }
        if (!clean) o.stream_synchronize(stream_, msg, sizeof msg);
        for (Slot &s : slots_) pool_give(s.buf);
        slots_.clear();
    }
};

// Bytes pushed in order (all at once, or as an fd delivers them) to device memory at dst.
class Uploader {
public:
    Uploader(uint8_t *dst, uint64_t total, void *stream, int32_t device, const Options &o)
        : st_(stream, device, o, total), dst_(dst), total_(total) {}
    void push(const uint8_t *p, size_t n) {
        if (n > total_ - done_ - fill_) fail(TENSO_E_INTERNAL, "upload past the end of the tensor");
        while (n) {
            if (!cur_) {
                size_t unused;
                cur_ = st_.next(&unused);
            }
            const size_t k = std::min(n, st_.chunk() - fill_);
            std::memcpy(cur_ + fill_, p, k);
            fill_ += k;
            p += k;
            n -= k;
            if (fill_ == st_.chunk()) flush();
        }
    }
    void finish() {
        if (fill_) flush();
        if (done_ != total_) fail(TENSO_E_INTERNAL, "upload ended early");
        st_.wait_all();
    }

private:
    Staging st_;
    uint8_t *dst_;
    uint64_t total_, done_ = 0;
    uint8_t *cur_ = nullptr;
    size_t fill_ = 0;
    void flush() {
        st_.h2d(dst_ + done_, fill_);
        done_ += fill_;
        fill_ = 0;
        cur_ = nullptr;
    }
};

void upload_bytes(uint8_t *dst, const uint8_t *src, uint64_t n, void *stream, int32_t device, const Options &o) {
    if (!n) return;
    Uploader up(dst, n, stream, device, o);
    up.push(src, size_t(n));
    up.finish();
}

// Device bytes to `sink(p, n)` in order, chunk by chunk: the copy of one chunk overlaps the
// sink's work on the previous one.
template <class Sink>
void download_bytes(const uint8_t *src, uint64_t n, void *stream, int32_t device, const Options &o, Sink sink) {
    if (!n) return;
    Staging st(stream, device, o, n);
    for (uint64_t off = 0; off < n;) {
        size_t pending = 0;
        uint8_t *buf = st.next(&pending);
        if (pending) sink(buf, pending);
        const size_t len = size_t(std::min<uint64_t>(st.chunk(), n - off));
        st.d2h(src + off, len);
        off += len;
    }
    st.drain(sink);
}

uint64_t nbytes_of(int dtype, uint32_t ndim, const uint64_t *shape) {
    const size_t item = dtype_itemsize(dtype);
    if (!item) fail(TENSO_E_BAD_DTYPE, "dtype " + num(uint64_t(uint32_t(dtype))) + " is not a dense dtype");
    if (ndim > TENSO_MAX_NDIM) fail(TENSO_E_TOO_MANY_DIMS, "ndim exceeds 32");
    if (ndim && !shape) fail(TENSO_E_INVALID_ARGUMENT, "shape is NULL");
    const uint64_t n = checked_numel(shape, ndim, TENSO_MAX_ELEMENTS);
    if (n > UINT64_MAX / item) fail(TENSO_E_TOO_MANY_ELEMENTS, "tensor size overflows");
    return n * item;
}

void describe(DeviceTensor &t, int32_t device, int dtype, uint32_t ndim, const uint64_t *shape) {
    t.nbytes = nbytes_of(dtype, ndim, shape);
    t.dtype = dtype;
    t.ndim = ndim;
    std::copy(shape, shape + ndim, t.shape);
    t.device = device;
}

// ------------------------------------------------------------------------------------------
// Packets to device values
// ------------------------------------------------------------------------------------------

// The bytes from fd's offset to its end when it is a regular file, else 0 (a pipe or socket:
// what a peer will send is only a claim).
uint64_t regular_file_left(int fd) {
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    const off_t pos = ::lseek(fd, 0, SEEK_CUR);
    return pos >= 0 && pos <= st.st_size ? uint64_t(st.st_size - pos) : 0;
}

std::unique_ptr<DeviceValue> to_device(const View &v, const Options &o, StreamUse &s);

std::unique_ptr<DeviceValue> dense_to_device(const View &v, const Options &o, StreamUse &s) {
    auto out = std::make_unique<DeviceValue>();
    out->tensor = tensor_new(o.device, v.dtype, v.ndim, v.shape.data());
    if (out->tensor->nbytes != v.nbytes) fail(TENSO_E_INTERNAL, "dense view size disagrees with its shape");
    upload_bytes(static_cast<uint8_t *>(out->tensor->data), v.data, v.nbytes, s.get(), o.device, o);
    return out;
}

std::unique_ptr<DeviceTensor> dequantize_on(const View &q, int out_dtype, const Options &o, StreamUse &s);

std::unique_ptr<DeviceValue> to_device(const View &v, const Options &o, StreamUse &s) {
    switch (v.kind) {
    case TENSO_KIND_DENSE: return dense_to_device(v, o, s);
    case TENSO_KIND_BUNDLE: {
        auto out = std::make_unique<DeviceValue>();
        out->entries.reserve(v.entries.size());
        for (const View::Entry &e : v.entries)
            out->entries.push_back({std::string(e.key, e.key_len), to_device(e.view, o, s)});
        return out;
    }
    case TENSO_KIND_QUANTIZED: {
        if (!o.dequantize_to)
            fail(TENSO_E_UNSUPPORTED_KIND, "a quantized packet needs dequantize_to (float32, float16 or bfloat16)");
        auto out = std::make_unique<DeviceValue>();
        out->tensor = dequantize_on(v, o.dequantize_to, o, s);
        return out;
    }
    case TENSO_KIND_GPU_IPC_REF: {
        const IpcRef ref = read_ipc_ref(v.data);
        auto out = std::make_unique<DeviceValue>();
        const uint64_t shape[1] = {ref.nbytes};
        out->tensor = ipc_open(v, TENSO_DTYPE_UINT8, 1, shape);
        out->path = TENSO_GPU_PATH_IPC;
        return out;
    }
    default: fail(TENSO_E_UNSUPPORTED_KIND, std::string("a ") + kind_name(v.kind) + " packet has no device form");
    }
}

std::unique_ptr<DeviceValue> view_to_device(const View &v, const Options &o) {
    StreamUse s(o.stream, o.device);
    auto out = to_device(v, o, s);
    s.finish();
    return out;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Public engine calls
// ------------------------------------------------------------------------------------------

void select_backend(uint32_t backend) {
    if (backend != TENSO_GPU_BACKEND_CUDA && backend != TENSO_GPU_BACKEND_HOST)
        fail(TENSO_E_INVALID_ARGUMENT, "unknown GPU backend " + num(backend));
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.chosen != TENSO_GPU_BACKEND_NONE && s.chosen != backend)
        fail(TENSO_E_INVALID_ARGUMENT, std::string("the GPU backend is already ") + backend_name(s.chosen));
    s.chosen = backend;
}

uint32_t backend_id() {
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    return s.chosen;
}

const char *backend_name(uint32_t backend) {
    switch (backend) {
    case TENSO_GPU_BACKEND_CUDA: return "cuda";
    case TENSO_GPU_BACKEND_HOST: return "host";
    default: return "none";
    }
}

const tenso_gpu_backend_ops &ops() { return loaded_ops(); }

int32_t device_count() {
    int32_t n = 0;
    call("device_count", ops().device_count, &n);
    if (n <= 0) fail(TENSO_E_GPU_UNAVAILABLE, "no GPU device");
    return n;
}

tenso_gpu_device_info device_info(int32_t device) {
    tenso_gpu_device_info info;
    std::memset(&info, 0, sizeof info);
    call("device_info", ops().device_info, &info, checked_device(device));
    info.version = TENSO_GPU_DEVICE_INFO_VERSION;
    info.device = device;
    info.name[sizeof info.name - 1] = 0;
    return info;
}

void *stream_new(int32_t device) {
    void *s = nullptr;
    call("stream_create", ops().stream_create, &s, checked_device(device));
    return s;
}

void stream_synchronize(void *stream) { call("stream_synchronize", ops().stream_synchronize, stream); }

void stream_free(void *stream) noexcept {
    const State &s = state();
    if (!stream || !s.ops) return;
    char msg[kMsg];
    s.ops->stream_destroy(stream, msg, sizeof msg);
}

std::unique_ptr<DeviceTensor> tensor_new(int32_t device, int dtype, uint32_t ndim, const uint64_t *shape) {
    const tenso_gpu_backend_ops &o = ops();
    auto t = std::make_unique<DeviceTensor>();
    describe(*t, checked_device(device), dtype, ndim, shape);
    if (t->nbytes > SIZE_MAX) fail(TENSO_E_NO_MEMORY, "tensor larger than the address space");
    void *p = nullptr;
    call("malloc_device", o.malloc_device, &p, size_t(std::max<uint64_t>(t->nbytes, 1)), device);
    t->data = p;
    t->exportable = true;
    const tenso_gpu_backend_ops *op = &o;
    t->keep = std::shared_ptr<void>(p, [op, device](void *q) {
        char msg[kMsg];
        op->free_device(q, device, msg, sizeof msg);
    });
    return t;
}

std::unique_ptr<DeviceTensor> tensor_wrap(void *ptr, int32_t device, int dtype, uint32_t ndim, const uint64_t *shape,
                                          tenso_gpu_release_fn release, void *user) {
    auto t = std::make_unique<DeviceTensor>();
    describe(*t, checked_device(device), dtype, ndim, shape);
    if (!ptr && t->nbytes) fail(TENSO_E_INVALID_ARGUMENT, "device_ptr is NULL");
    t->data = ptr;
    t->keep = std::shared_ptr<void>(ptr, [release, user](void *q) {
        if (release) release(user, q);
    });
    return t;
}

void upload(DeviceTensor &dst, const void *src, size_t len, void *stream) {
    if (len != dst.nbytes)
        fail(TENSO_E_INVALID_ARGUMENT, "len " + num(len) + " is not the tensor's " + num(dst.nbytes) + " bytes");
    if (len && !src) fail(TENSO_E_INVALID_ARGUMENT, "src is NULL");
    Options o;
    StreamUse s(stream, dst.device);
    upload_bytes(static_cast<uint8_t *>(dst.data), static_cast<const uint8_t *>(src), len, s.get(), dst.device, o);
    s.finish();
}

void download(void *dst, size_t len, const DeviceTensor &src, void *stream) {
    if (len != src.nbytes)
        fail(TENSO_E_INVALID_ARGUMENT, "len " + num(len) + " is not the tensor's " + num(src.nbytes) + " bytes");
    if (len && !dst) fail(TENSO_E_INVALID_ARGUMENT, "dst is NULL");
    Options o;
    StreamUse s(stream, src.device);
    auto *out = static_cast<uint8_t *>(dst);
    download_bytes(static_cast<const uint8_t *>(src.data), len, s.get(), src.device, o,
                   [&](const uint8_t *p, size_t n) {
                       std::memcpy(out, p, n);
                       out += n;
                   });
    s.finish();
}

std::unique_ptr<DeviceValue> loads(const uint8_t *packet, size_t len, const Options &o) {
    ops();  // an unavailable backend is reported before the packet is looked at
    auto v = decode(packet, len, o.limits, nullptr);
    return view_to_device(*v, o);
}

std::unique_ptr<DeviceValue> read_fd(int fd, const Options &o) {
    ops();
    checked_device(o.device);
    DecoderConfig cfg;
    cfg.limits = o.limits;
    Decoder d(cfg);
    StreamUse s(o.stream, o.device);
    // An uncompressed dense body goes up chunk by chunk while the rest is still being read; the
    // decode at the end checks the whole packet (footer included) before the tensor is handed
    // out, and a failure frees it.
    //
    // Device memory follows the bytes that arrived, as the decoder's host buffer does (it is
    // committed page by page): the header's claim alone allocates nothing. The tensor is
    // allocated once the body that arrived is half of it (or at once for a body of at most
    // kDeviceUpfront, or when fd is a regular file that holds the whole packet: bytes on disk,
    // not a peer's promise). So a peer holds at most max(kDeviceUpfront, 2 x what it sent) of
    // device memory, and a header claiming 8 GB followed by 64 bytes costs none.
    const uint64_t file_left = regular_file_left(fd);
    std::unique_ptr<DeviceTensor> t;
    std::unique_ptr<Uploader> up;
    PacketInfo info;
    bool decided = false, streamed = false;
    uint64_t nbytes = 0, pushed = 0;
    auto progress = [&](const Decoder &dec) {
        size_t have = 0;
        const uint8_t *base = dec.received(&have);
        if (!base) return;
        if (!decided) {
            decided = true;
            info = inspect(base, have);
            if (info.kind != TENSO_KIND_DENSE || (info.flags & TENSO_FLAG_COMPRESSION)) return;
            // The decoder sized the packet (have + needed bytes) within the limits; a body inside
            // it bounds the device allocation by what was checked.
            nbytes = nbytes_of(info.dtype, info.ndim, info.shape);
            if (nbytes != info.body_size || info.body_offset + nbytes > have + dec.needed())
                fail(TENSO_E_MALFORMED, "dense body size disagrees with its shape");
            streamed = true;
        }
        if (!streamed) return;
        const uint64_t arrived = have > info.body_offset ? std::min<uint64_t>(have - info.body_offset, nbytes) : 0;
        if (!up) {
            const bool backed = have + dec.needed() <= file_left;
            if (nbytes > kDeviceUpfront && !backed && arrived < nbytes / 2) return;
            t = tensor_new(o.device, info.dtype, info.ndim, info.shape);
            up = std::make_unique<Uploader>(static_cast<uint8_t *>(t->data), t->nbytes, s.get(), o.device, o);
        }
        up->push(base + info.body_offset + pushed, size_t(arrived - pushed));
        pushed = arrived;
    };
    auto v = read_packet(d, fd, size_t(o.chunk_bytes), progress);
    if (!up) {  // not streamed, or the body arrived before its allocation was due
        auto out = to_device(*v, o, s);
        s.finish();
        return out;
    }
    if (v->kind != TENSO_KIND_DENSE || v->nbytes != t->nbytes) fail(TENSO_E_INTERNAL, "streamed packet changed kind");
    up->push(v->data + pushed, size_t(t->nbytes - pushed));
    up->finish();
    s.finish();
    auto out = std::make_unique<DeviceValue>();
    out->tensor = std::move(t);
    return out;
}

std::unique_ptr<DeviceValue> load_file(const char *path, const Options &o) {
    const tenso_gpu_backend_ops &op = ops();
    checked_device(o.device);
    struct Fd {
        int fd;
        ~Fd() { ::close(fd); }
    } f{open_read(path)};
    uint32_t mode = 0;
    char msg[kMsg];
    const bool gds = !(o.flags & TENSO_GPU_NO_GDS) && op.gds_probe && op.gds_read &&
                     op.gds_probe(&mode, f.fd, o.device, msg, sizeof msg) == TENSO_OK;
    if (gds) {
        // Direct DMA only for what needs no host pass: an uncompressed dense body without a
        // footer to verify, the whole file one packet. The header is checked as loads checks it.
        uint8_t head[4096];
        const uint64_t size = fd_size(f.fd);
        const size_t n = size_t(std::min<uint64_t>(size, sizeof head));
        pread_all(f.fd, head, n, 0);
        PacketInfo info;
        bool direct = false;
        try {
            info = inspect(head, n);
            direct = info.kind == TENSO_KIND_DENSE && !(info.flags & TENSO_FLAG_COMPRESSION) &&
                     (!(info.flags & TENSO_FLAG_INTEGRITY) || !o.limits.verify_checksums) && info.packet_size == size &&
                     frame_length(head, n, o.limits) == size;
        } catch (const Error &) {
            direct = false;  // the staged path reports the packet's own error
        } catch (const NeedMore &) {
            direct = false;
        }
        if (direct) {
            auto out = std::make_unique<DeviceValue>();
            out->tensor = tensor_new(o.device, info.dtype, info.ndim, info.shape);
            if (out->tensor->nbytes != info.body_size)
                fail(TENSO_E_MALFORMED, "dense body size disagrees with its shape");
            if (out->tensor->nbytes)
                call("gds_read", op.gds_read, out->tensor->data, size_t(info.body_size), f.fd, info.body_offset,
                     o.device);
            out->path = mode;
            return out;
        }
        if (::lseek(f.fd, 0, SEEK_SET) != 0) fail(TENSO_E_IO, std::string("lseek: ") + std::strerror(errno));
    }
    return read_fd(f.fd, o);
}

uint64_t loads_into(void *dst, uint64_t capacity, const uint8_t *packet, size_t len, const Options &o) {
    ops();
    checked_device(o.device);
    auto v = decode(packet, len, o.limits, nullptr);
    if (v->kind != TENSO_KIND_DENSE)
        fail(TENSO_E_UNSUPPORTED_KIND, std::string("loads_into takes dense packets, not a ") + kind_name(v->kind));
    if (v->nbytes > capacity)
        fail(TENSO_E_BUFFER_TOO_SMALL, "the body is " + num(v->nbytes) + " bytes, the destination " + num(capacity));
    if (v->nbytes && !dst) fail(TENSO_E_INVALID_ARGUMENT, "device_ptr is NULL");
    StreamUse s(o.stream, o.device);
    upload_bytes(static_cast<uint8_t *>(dst), v->data, v->nbytes, s.get(), o.device, o);
    s.finish();
    return v->nbytes;
}

namespace {
// The tensor's bytes on the host (through staging), for the encoder's Plan.
std::shared_ptr<uint8_t> host_copy(const DeviceTensor &t, const Options &o) {
    std::shared_ptr<uint8_t> host = alloc_aligned(size_t(std::max<uint64_t>(t.nbytes, 1)));
    StreamUse s(o.stream, t.device);
    uint8_t *out = host.get();
    download_bytes(static_cast<const uint8_t *>(t.data), t.nbytes, s.get(), t.device, o,
                   [&](const uint8_t *p, size_t n) {
                       std::memcpy(out, p, n);
                       out += n;
                   });
    s.finish();
    return host;
}
}  // namespace

namespace {
const uint8_t kStandIn = 0;  // a device body's place in a Plan; never read

// Encodes t through `out(p, n)`, its body downloaded chunk by chunk: impl/format's Plan writes
// header and footer and hashes the pieces as they pass, and the device->host copy of one
// chunk overlaps out's work on the previous one. A compressed body needs all of it at once.
void encode_from_device(const DeviceTensor &t, const EncodeOptions &enc, const Options &o, const Plan::Piece &out) {
    if (enc.compress) {
        const auto host = host_copy(t, o);
        Plan p(enc, false);
        p.add(make_tensor(t.dtype, t.ndim, t.shape, host.get(), t.nbytes));
        p.write_pulled(nullptr, nullptr, out);
        return;
    }
    Plan p(enc, false);
    p.add(make_tensor(t.dtype, t.ndim, t.shape, &kStandIn, t.nbytes));
    StreamUse s(o.stream, t.device);
    p.write_pulled(
        &kStandIn,
        [&](const Plan::Piece &emit) {
            download_bytes(static_cast<const uint8_t *>(t.data), t.nbytes, s.get(), t.device, o, emit);
        },
        out);
    s.finish();
}
}  // namespace

std::pair<uint8_t *, size_t> dumps(const DeviceTensor &t, const EncodeOptions &enc, const Options &o) {
    ops();
    Plan sized(enc, true);
    sized.add(make_tensor(t.dtype, t.ndim, t.shape, &kStandIn, t.nbytes));
    std::unique_ptr<uint8_t, void (*)(void *)> mem(alloc_bytes(sized.size()), free_bytes);
    size_t len = 0;
    encode_from_device(t, enc, o, [&](const uint8_t *p, size_t n) {
        if (n > sized.size() - len) fail(TENSO_E_INTERNAL, "the packet outgrew its measure");
        std::memcpy(mem.get() + len, p, n);
        len += n;
    });
    return {mem.release(), len};
}

void write_fd(int fd, const DeviceTensor &t, const EncodeOptions &enc, const Options &o, uint64_t *written) {
    ops();
    encode_from_device(t, enc, o, [&](const uint8_t *p, size_t n) { write_all(fd, p, n, written); });
}

// ------------------------------------------------------------------------------------------
// Dequantize
// ------------------------------------------------------------------------------------------

namespace {
std::unique_ptr<DeviceTensor> dequantize_on(const View &v, int out_dtype, const Options &o, StreamUse &s) {
    if (v.kind != TENSO_KIND_QUANTIZED) fail(TENSO_E_UNSUPPORTED_KIND, "view is not quantized");
    if (out_dtype != TENSO_DTYPE_FLOAT32 && out_dtype != TENSO_DTYPE_FLOAT16 && out_dtype != TENSO_DTYPE_BFLOAT16)
        fail(TENSO_E_INVALID_ARGUMENT, "dequantize_to must be float32, float16 or bfloat16");
    QuantDesc q = quant_of(v);
    q.shape = v.shape.data();
    q.ndim = v.ndim;
    check_quant(q, TENSO_E_MALFORMED);
    auto out = tensor_new(o.device, out_dtype, v.ndim, v.shape.data());
    const uint64_t count = checked_numel(v.shape.data(), v.ndim, TENSO_MAX_ELEMENTS);
    if (!count) return out;
    // Codes and parameters go up through staging; the kernel reads them on the device.
    const uint64_t codes_shape[1] = {q.nbytes}, params_shape[1] = {q.num_scales};
    auto codes = tensor_new(o.device, TENSO_DTYPE_UINT8, 1, codes_shape);
    auto scales = tensor_new(o.device, TENSO_DTYPE_FLOAT32, 1, params_shape);
    auto zps = tensor_new(o.device, TENSO_DTYPE_FLOAT32, 1, params_shape);
    upload_bytes(static_cast<uint8_t *>(codes->data), q.data, q.nbytes, s.get(), o.device, o);
    upload_bytes(static_cast<uint8_t *>(scales->data), reinterpret_cast<const uint8_t *>(q.scales), 4ull * q.num_scales,
                 s.get(), o.device, o);
    upload_bytes(static_cast<uint8_t *>(zps->data), reinterpret_cast<const uint8_t *>(q.zero_points),
                 4ull * q.num_scales, s.get(), o.device, o);
    tenso_gpu_dequant_args a;
    std::memset(&a, 0, sizeof a);
    a.codes = codes->data;
    a.scales = static_cast<const float *>(scales->data);
    a.zero_points = static_cast<const float *>(zps->data);
    a.out = out->data;
    a.count = count;
    if (q.scheme == TENSO_QUANT_PER_CHANNEL) {
        a.channels = v.shape[q.axis];
        a.inner = 1;
        for (uint32_t i = q.axis + 1; i < v.ndim; ++i) a.inner *= v.shape[i];
    }
    a.group_size = q.group_size;
    a.qdtype = q.dtype;
    a.scheme = q.scheme;
    a.out_dtype = out_dtype;
    a.device = o.device;
    const tenso_gpu_backend_ops &op = ops();
    call("dequantize", op.dequantize, &a, s.get());
    // The inputs are freed once the kernel is done with them: wait for it through an event.
    void *ev = nullptr;
    call("event_create", op.event_create, &ev, o.device);
    std::shared_ptr<void> ev_keep(ev, [&op](void *e) {
        char msg[kMsg];
        op.event_destroy(e, msg, sizeof msg);
    });
    call("event_record", op.event_record, ev, s.get());
    call("event_synchronize", op.event_synchronize, ev);
    return out;
}
}  // namespace

std::unique_ptr<DeviceTensor> dequantize(const View &quantized, int out_dtype, const Options &o) {
    ops();
    StreamUse s(o.stream, o.device);
    auto out = dequantize_on(quantized, out_dtype, o, s);
    s.finish();
    return out;
}

// ------------------------------------------------------------------------------------------
// IPC and DLPack
// ------------------------------------------------------------------------------------------

Value ipc_export(const DeviceTensor &t) {
    const tenso_gpu_backend_ops &o = ops();
    if (!t.exportable) fail(TENSO_E_INVALID_ARGUMENT, "only memory tenso allocated can be exported over IPC");
    IpcRef ref;
    call("ipc_export", o.ipc_export, ref.handle, &ref.byte_offset, static_cast<const void *>(t.data), t.device);
    ref.nbytes = t.nbytes;
    const tenso_gpu_device_info info = device_info(t.device);
    std::memcpy(ref.device_uuid, info.uuid, sizeof ref.device_uuid);
    return ipc_ref_value(ref);
}

std::unique_ptr<DeviceTensor> ipc_open(const View &v, int dtype, uint32_t ndim, const uint64_t *shape) {
    const tenso_gpu_backend_ops &o = ops();
    if (v.kind != TENSO_KIND_GPU_IPC_REF) fail(TENSO_E_UNSUPPORTED_KIND, "view is not a GPU IPC reference");
    const IpcRef ref = read_ipc_ref(v.data);
    auto t = std::make_unique<DeviceTensor>();
    // The device whose UUID the reference names. The host backend's one device has a UUID per
    // process, so its references open on device 0.
    int32_t device = -1;
    const int32_t n = device_count();
    for (int32_t i = 0; i < n && device < 0; ++i)
        if (std::memcmp(device_info(i).uuid, ref.device_uuid, sizeof ref.device_uuid) == 0) device = i;
    if (device < 0) {
        if (o.backend != TENSO_GPU_BACKEND_HOST)
            fail(TENSO_E_GPU_UNAVAILABLE, "no device here has the reference's UUID");
        device = 0;
    }
    describe(*t, device, dtype, ndim, shape);
    if (t->nbytes != ref.nbytes)
        fail(TENSO_E_INVALID_ARGUMENT,
             "dtype and shape make " + num(t->nbytes) + " bytes, the reference has " + num(ref.nbytes));
    if (ref.byte_offset > UINT64_MAX - ref.nbytes || ref.byte_offset > UINTPTR_MAX - ref.nbytes)
        fail(TENSO_E_INVALID_ARGUMENT, "IPC reference offset + nbytes overflows");
    void *base = nullptr;
    uint64_t size = 0;
    call("ipc_open", o.ipc_open, &base, &size, static_cast<const uint8_t *>(ref.handle), device);
    const tenso_gpu_backend_ops *op = &o;
    t->keep = std::shared_ptr<void>(base, [op, device](void *p) {
        char msg[kMsg];
        op->ipc_close(p, device, msg, sizeof msg);
    });
    // The reference's range must lie inside what was opened: a hostile offset or nbytes would
    // otherwise hand out memory past the allocation. (t->keep closes the handle on the throw.)
    if (ref.byte_offset + ref.nbytes > size)
        fail(TENSO_E_BAD_OFFSET, "IPC reference bytes [" + num(ref.byte_offset) + ", +" + num(ref.nbytes) +
                                     ") lie outside the opened allocation of " + num(size) + " bytes");
    t->data = static_cast<uint8_t *>(base) + ref.byte_offset;
    return t;
}

DLManagedTensorVersioned *to_dlpack(const DeviceTensor &t) {
    const tenso_gpu_backend_ops &o = ops();
    const DLDevice dev = o.backend == TENSO_GPU_BACKEND_HOST ? DLDevice{kDLCPU, 0} : DLDevice{kDLCUDA, t.device};
    return tenso::to_dlpack(t.dtype, t.ndim, t.shape, t.data, dev, t.keep, 0);
}

std::unique_ptr<DeviceTensor> from_dlpack(DLManagedTensorVersioned *m) {
    const tenso_gpu_backend_ops &o = ops();
    if (m->version.major != DLPACK_MAJOR_VERSION)
        fail(TENSO_E_UNSUPPORTED_VERSION,
             "DLPack major version " + num(m->version.major) + ", expected " + num(DLPACK_MAJOR_VERSION));
    if (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY)
        fail(TENSO_E_INVALID_ARGUMENT, "a read-only DLPack tensor cannot be a device tensor");
    const DLTensor &d = m->dl_tensor;
    const DLDeviceType want = o.backend == TENSO_GPU_BACKEND_HOST ? kDLCPU : kDLCUDA;
    if (d.device.device_type != want)
        fail(TENSO_E_INVALID_ARGUMENT,
             std::string("DLPack tensor is not on a ") + (want == kDLCPU ? "kDLCPU" : "kDLCUDA") + " device");
    const int dtype = from_dl_dtype(d.dtype);
    if (d.ndim < 0 || d.ndim > int32_t(TENSO_MAX_NDIM)) fail(TENSO_E_TOO_MANY_DIMS, "DLPack ndim out of range");
    if (d.ndim && !d.shape) fail(TENSO_E_INVALID_ARGUMENT, "DLPack shape is NULL");
    uint64_t shape[TENSO_MAX_NDIM];
    for (int32_t i = 0; i < d.ndim; ++i) {
        if (d.shape[i] < 0) fail(TENSO_E_INVALID_ARGUMENT, "negative DLPack dimension");
        shape[i] = uint64_t(d.shape[i]);
    }
    // Every count below comes from the producer: the element count and byte size are checked
    // (describe) before anything is multiplied, and each product after that is checked too.
    auto t = std::make_unique<DeviceTensor>();
    describe(*t, want == kDLCPU ? 0 : checked_device(d.device.device_id), dtype, uint32_t(d.ndim), shape);
    if (d.strides) {
        // Compact row-major only; dimensions of extent 1 may carry any stride. (An empty tensor
        // passes describe whatever its other extents, so the running product is checked.)
        uint64_t expect = 1;
        for (int32_t i = d.ndim; i-- > 0;) {
            if (shape[i] != 1 && (expect > uint64_t(INT64_MAX) || d.strides[i] != int64_t(expect)))
                fail(TENSO_E_INVALID_ARGUMENT, "DLPack tensor is not C-contiguous");
            if (__builtin_mul_overflow(expect, std::max<uint64_t>(shape[i], 1), &expect))
                fail(TENSO_E_INVALID_ARGUMENT, "DLPack strides overflow");
        }
    }
    if (!d.data && t->nbytes) fail(TENSO_E_INVALID_ARGUMENT, "DLPack data is NULL");
    // data + byte_offset + nbytes must not wrap the address space (pointer overflow is UB).
    const uintptr_t base = reinterpret_cast<uintptr_t>(d.data);
    if (d.byte_offset > UINTPTR_MAX - base || t->nbytes > UINTPTR_MAX - base - d.byte_offset)
        fail(TENSO_E_INVALID_ARGUMENT, "DLPack data + byte_offset + size overflows the address space");
    t->data = static_cast<uint8_t *>(d.data) + d.byte_offset;
    // Owned from here on: nothing below can fail.
    t->keep = std::shared_ptr<void>(m, [](void *p) {
        auto *mm = static_cast<DLManagedTensorVersioned *>(p);
        if (mm->deleter) mm->deleter(mm);
    });
    return t;
}

// ------------------------------------------------------------------------------------------
// Pool
// ------------------------------------------------------------------------------------------

tenso_gpu_pool_stats pool_stats() {
    Pool &pl = pool();
    std::lock_guard<std::mutex> lock(pl.mu);
    tenso_gpu_pool_stats s;
    std::memset(&s, 0, sizeof s);
    s.buffers = pl.buffers;
    s.bytes = pl.bytes;
    s.hits = pl.hits;
    s.misses = pl.misses;
    s.limit_bytes = pl.limit;
    return s;
}

void pool_set_limit(uint64_t limit) {
    Pool &pl = pool();
    std::vector<Pinned> gone;
    {
        std::lock_guard<std::mutex> lock(pl.mu);
        pl.limit = limit;
        while (pl.idle_bytes > pl.limit) {
            auto it = std::prev(pl.idle.end());  // the largest first
            gone.push_back({static_cast<uint8_t *>(it->second), it->first});
            pl.idle_bytes -= it->first;
            pl.bytes -= it->first;
            --pl.buffers;
            pl.idle.erase(it);
        }
    }
    if (!gone.empty()) unpin(gone);
}

}  // namespace tenso::gpu
