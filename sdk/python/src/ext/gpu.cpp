// gpu.cpp - the tenso_gpu_* family (tenso/gpu.h) for tenso.gpu: DeviceTensor (a tenso_gpu_tensor
// with DLPack export), packets to and from device memory, DLPack import, IPC references,
// device dequantize, discovery and the pinned pool. Every transfer is libtenso's; this file
// only converts arguments and results.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"

namespace tpy {

namespace {

struct GpuValueFree {
    void operator()(tenso_gpu_value *v) const noexcept { tenso_gpu_value_free(v); }
};
struct GpuTensorFree {
    void operator()(tenso_gpu_tensor *t) const noexcept { tenso_gpu_tensor_free(t); }
};
using GpuTensorPtr = std::unique_ptr<tenso_gpu_tensor, GpuTensorFree>;

const char *path_name(uint32_t path) {
    switch (path) {
    case TENSO_GPU_PATH_STAGED: return "staged";
    case TENSO_GPU_PATH_GDS: return "gds";
    case TENSO_GPU_PATH_GDS_COMPAT: return "gds_compat";
    case TENSO_GPU_PATH_IPC: return "ipc";
    default: return "none";
    }
}

// A device tensor: owned outright (`own`), or a member of a decoded value that `owner` keeps.
// Python objects are freed only when unreachable, so no call can be using the tensor then.
class DeviceTensor {
public:
    std::shared_ptr<tenso_gpu_value> owner;
    GpuTensorPtr own;
    const tenso_gpu_tensor *t = nullptr;
    uint32_t path = 0;

    py::tuple shape() const { return shape_tuple(tenso_gpu_tensor_shape(t), tenso_gpu_tensor_ndim(t)); }

    // A new host array with the tensor's contents (one device -> host copy through the pool).
    py::array to_numpy() const {
        py::dtype dt = numpy_dtype(tenso_gpu_tensor_dtype(t));
        std::vector<py::ssize_t> shp;
        const uint64_t *s = tenso_gpu_tensor_shape(t);
        for (uint32_t i = 0; i < tenso_gpu_tensor_ndim(t); ++i) shp.push_back(py::ssize_t(s[i]));
        py::array out(dt, shp);
        void *dst = out.mutable_data();
        const size_t n = size_t(tenso_gpu_tensor_nbytes(t));
        tenso_status st;
        {
            py::gil_scoped_release nogil;
            st = tenso_gpu_tensor_download(dst, n, t, nullptr);
        }
        check(st);
        return out;
    }

    // (device type, ordinal) as DLPack names it: kDLCUDA under the CUDA backend, kDLCPU for the
    // host backend's emulated device (its memory is host memory).
    py::tuple dlpack_device() const {
        if (tenso_gpu_backend() == TENSO_GPU_BACKEND_CUDA)
            return py::make_tuple(int(kDLCUDA), tenso_gpu_tensor_device(t));
        return py::make_tuple(int(kDLCPU), 0);
    }

    py::object dlpack(py::object stream, py::object max_version, py::object dl_device, py::object copy) const {
        // The stream is not waited on: every tenso call that filled this tensor synchronized
        // before it returned (or ran on the caller's own stream, which the caller orders).
        (void)stream;
        if (!dl_device.is_none() && !dl_device.equal(dlpack_device())) {
            PyErr_SetString(PyExc_BufferError, "a tenso DeviceTensor is exported on its own device only");
            throw py::error_already_set();
        }
        if (!copy.is_none() && copy.cast<bool>()) {
            PyErr_SetString(PyExc_BufferError, "a tenso DeviceTensor is exported without copying only");
            throw py::error_already_set();
        }
        bool legacy = true;
        if (!max_version.is_none()) {
            py::tuple mv = max_version.cast<py::tuple>();
            legacy = !(mv.size() >= 1 && mv[0].cast<int>() >= 1);
        }
        DLManagedTensorVersioned *m = nullptr;
        check(tenso_gpu_tensor_to_dlpack(&m, t));
        return dlpack_capsule(m, legacy);
    }
};

py::object wrap_tensor(GpuTensorPtr t, uint32_t path) {
    auto d = std::make_unique<DeviceTensor>();
    d->t = t.get();
    d->own = std::move(t);
    d->path = path;
    return py::cast(d.release(), py::return_value_policy::take_ownership);
}

// A decoded value as Python objects: a DeviceTensor, or a dict of them (bundles, recursively).
py::object from_value(const std::shared_ptr<tenso_gpu_value> &root, const tenso_gpu_value *v, uint32_t path) {
    if (const tenso_gpu_tensor *t = tenso_gpu_value_tensor(v)) {
        auto d = std::make_unique<DeviceTensor>();
        d->owner = root;
        d->t = t;
        d->path = path;
        return py::cast(d.release(), py::return_value_policy::take_ownership);
    }
    py::dict out;
    const uint32_t n = tenso_gpu_value_bundle_count(v);
    for (uint32_t i = 0; i < n; ++i) {
        const char *key = nullptr;
        size_t key_len = 0;
        const tenso_gpu_value *child = nullptr;
        check(tenso_gpu_value_bundle_entry(&key, &key_len, &child, v, i));
        py::object k = py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(key, Py_ssize_t(key_len), "strict"));
        if (!k) throw py::error_already_set();
        out[k] = from_value(root, child, path);
    }
    return std::move(out);
}

// tenso_gpu_options from tenso.gpu's keyword arguments (`decode` storage must outlive them).
struct Options {
    tenso_gpu_options o = TENSO_GPU_OPTIONS_INIT;
    tenso_decode_options decode = TENSO_DECODE_OPTIONS_INIT;

    Options(int32_t device, int32_t dequantize_to, bool no_gds, uint64_t chunk_bytes, uint32_t staging_buffers,
            uintptr_t stream, py::handle decode_fields) {
        o.device = device;
        o.dequantize_to = dequantize_to;
        if (no_gds) o.flags |= TENSO_GPU_NO_GDS;
        o.chunk_bytes = chunk_bytes;
        o.staging_buffers = staging_buffers;
        o.stream = reinterpret_cast<void *>(stream);
        if (decode_options_from(decode_fields, decode)) o.decode = &decode;
    }
};

// Runs a call that produces a tenso_gpu_value with the GIL released, and converts the result
// (None at a clean end of stream).
template <class Fn>
py::object decoded(Fn &&fn) {
    tenso_gpu_value *raw = nullptr;
    tenso_status st;
    {
        py::gil_scoped_release nogil;
        st = fn(&raw);
    }
    if (st == TENSO_E_END_OF_STREAM) return py::none();  // a stream that ended before a packet
    check(st);
    std::shared_ptr<tenso_gpu_value> root(raw, GpuValueFree());
    return from_value(root, raw, tenso_gpu_value_path(raw));
}

#define TPY_GPU_OPTION_ARGS                                                                           \
    py::kw_only(), py::arg("device") = 0, py::arg("dequantize_to") = 0, py::arg("no_gds") = false,    \
                   py::arg("chunk_bytes") = 0, py::arg("staging_buffers") = 0, py::arg("stream") = 0, \
                   py::arg("options") = py::none()

const DeviceTensor &device_tensor(py::handle obj) { return obj.cast<const DeviceTensor &>(); }

// Imports any object with __dlpack__ (DLPack 1.x capsules, or legacy ones wrapped) without
// copying. The producer's capsule is marked used only once tenso owns the tensor.
py::object from_dlpack(py::object obj) {
    py::object cap;
    try {
        cap = obj.attr("__dlpack__")(py::arg("max_version") = py::make_tuple(1, 0));
    } catch (py::error_already_set &e) {
        if (!e.matches(PyExc_TypeError)) throw;  // a producer that predates max_version
        cap = obj.attr("__dlpack__")();
    }
    PyObject *c = cap.ptr();
    tenso_gpu_tensor *t = nullptr;
    if (PyCapsule_IsValid(c, "dltensor_versioned")) {
        auto *m = static_cast<DLManagedTensorVersioned *>(PyCapsule_GetPointer(c, "dltensor_versioned"));
        check(tenso_gpu_tensor_from_dlpack(&t, m));
        PyCapsule_SetName(c, "used_dltensor_versioned");
        return wrap_tensor(GpuTensorPtr(t), 0);
    }
    if (PyCapsule_IsValid(c, "dltensor")) {
        // A legacy tensor behind a versioned header whose deleter calls the legacy one.
        struct Over {
            DLManagedTensorVersioned v;
            DLManagedTensor *legacy;
        };
        auto *legacy = static_cast<DLManagedTensor *>(PyCapsule_GetPointer(c, "dltensor"));
        auto over = std::make_unique<Over>();
        over->legacy = legacy;
        over->v.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
        over->v.manager_ctx = over.get();
        over->v.deleter = [](DLManagedTensorVersioned *self) {
            auto *o = static_cast<Over *>(self->manager_ctx);
            if (o->legacy->deleter) o->legacy->deleter(o->legacy);
            delete o;
        };
        over->v.flags = 0;
        over->v.dl_tensor = legacy->dl_tensor;
        check(tenso_gpu_tensor_from_dlpack(&t, &over->v));  // on failure the capsule still owns it
        over.release();
        PyCapsule_SetName(c, "used_dltensor");
        return wrap_tensor(GpuTensorPtr(t), 0);
    }
    raise_type_error("__dlpack__ returned no DLPack capsule");
}

py::dict device_info(int32_t device) {
    tenso_gpu_device_info info{};
    info.version = TENSO_GPU_DEVICE_INFO_VERSION;
    check(tenso_gpu_device_info_get(&info, device));
    py::dict d;
    d["device"] = info.device;
    d["name"] = std::string(info.name, strnlen(info.name, sizeof info.name));
    d["uuid"] = py::bytes(reinterpret_cast<const char *>(info.uuid), sizeof info.uuid);
    d["total_memory"] = info.total_memory;
    d["compute_capability"] = py::make_tuple(info.compute_major, info.compute_minor);
    d["multiprocessors"] = info.multiprocessors;
    d["pci"] = py::make_tuple(info.pci_domain, info.pci_bus, info.pci_device);
    d["backend"] = std::string(tenso_gpu_backend_name(info.backend));
    d["gds"] = (info.flags & TENSO_GPU_DEVICE_GDS) != 0;
    d["ipc"] = (info.flags & TENSO_GPU_DEVICE_IPC) != 0;
    return d;
}

py::bytes buffer_bytes(tenso_buffer &b) {
    py::bytes out(reinterpret_cast<const char *>(b.data), b.size);
    tenso_buffer_dispose(&b);
    return out;
}

}  // namespace

void init_gpu(py::module_ &m) {
    py::class_<DeviceTensor>(m, "DeviceTensor",
                             "Dense tensor memory on a device, owned by libtenso: what tenso.gpu returns when no "
                             "torch/cupy/jax is installed. Exported without a copy through DLPack; to_numpy() copies "
                             "it to the host. Freed when the last reference (and every DLPack export) goes.")
        .def_property_readonly("shape", &DeviceTensor::shape)
        .def_property_readonly("dtype", [](const DeviceTensor &d) { return numpy_dtype(tenso_gpu_tensor_dtype(d.t)); })
        .def_property_readonly("ndim", [](const DeviceTensor &d) { return tenso_gpu_tensor_ndim(d.t); })
        .def_property_readonly("nbytes", [](const DeviceTensor &d) { return tenso_gpu_tensor_nbytes(d.t); })
        .def_property_readonly(
            "device", [](const DeviceTensor &d) { return tenso_gpu_tensor_device(d.t); }, "The device ordinal.")
        .def_property_readonly(
            "data_ptr", [](const DeviceTensor &d) { return reinterpret_cast<uintptr_t>(tenso_gpu_tensor_data(d.t)); },
            "The device address (valid while this object lives).")
        .def_property_readonly(
            "transfer_path", [](const DeviceTensor &d) { return std::string(path_name(d.path)); },
            "How the packet reached the device: 'staged', 'gds', 'gds_compat', 'ipc', or "
            "'none' for tensors not read from a packet.")
        .def("to_numpy", &DeviceTensor::to_numpy, "A host copy as a new writeable numpy array.")
        .def(
            "__array__",
            [](const DeviceTensor &d, py::object dtype, py::object) -> py::object {
                py::object a = d.to_numpy();
                if (!dtype.is_none()) a = a.attr("astype")(dtype, py::arg("copy") = false);
                return a;
            },
            py::arg("dtype") = py::none(), py::arg("copy") = py::none())
        .def("__dlpack__", &DeviceTensor::dlpack, py::kw_only(), py::arg("stream") = py::none(),
             py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
             "DLPack export without a copy: 'dltensor_versioned' for max_version >= (1, 0), else legacy "
             "'dltensor'. The export keeps the memory alive after this object goes.")
        .def("__dlpack_device__", &DeviceTensor::dlpack_device)
        .def("__repr__", [](const DeviceTensor &d) {
            return "DeviceTensor(shape=" + py::repr(d.shape()).cast<std::string>() +
                   ", dtype=" + tenso_dtype_name(tenso_gpu_tensor_dtype(d.t)) +
                   ", device=" + std::to_string(tenso_gpu_tensor_device(d.t)) +
                   ", backend=" + tenso_gpu_backend_name(tenso_gpu_backend()) + ")";
        });

    m.def(
        "gpu_select_backend",
        [](const std::string &name) {
            uint32_t b = name == "cuda" ? TENSO_GPU_BACKEND_CUDA : name == "host" ? TENSO_GPU_BACKEND_HOST : 0u;
            if (b == 0) raise_value_error("unknown GPU backend '" + name + "' (expected 'cuda' or 'host')");
            check(tenso_gpu_select_backend(b));
        },
        py::arg("name"), "tenso_gpu_select_backend: 'cuda' or 'host', before the first GPU call.");
    m.def(
        "gpu_backend", [] { return std::string(tenso_gpu_backend_name(tenso_gpu_backend())); },
        "The backend in use: 'cuda', 'host', or 'none' before the first GPU call.");
    m.def(
        "gpu_check", [] { check(tenso_gpu_available()); },
        "Raises TensoNotAvailableError (with the reason) unless a device is usable.");
    m.def(
        "gpu_device_count",
        [] {
            int32_t n = 0;
            check(tenso_gpu_device_count(&n));
            return n;
        },
        "The number of devices.");
    m.def("gpu_device_info", &device_info, py::arg("device") = 0, "tenso_gpu_device_info_get as a dict.");

    m.def(
        "gpu_loads",
        [](py::handle data, int32_t device, int32_t dq, bool no_gds, uint64_t chunk, uint32_t bufs, uintptr_t stream,
           py::handle options) {
            Options o(device, dq, no_gds, chunk, bufs, stream, options);
            BufferHold b;
            b.acquire(data, PyBUF_SIMPLE);
            return decoded([&](tenso_gpu_value **out) { return tenso_gpu_loads(out, b.data(), b.size(), &o.o); });
        },
        py::arg("data"), TPY_GPU_OPTION_ARGS,
        "tenso_gpu_loads: a packet in host memory -> a DeviceTensor (a dict of them for bundles).");
    m.def(
        "gpu_read_fd",
        [](py::handle fd, int32_t device, int32_t dq, bool no_gds, uint64_t chunk, uint32_t bufs, uintptr_t stream,
           py::handle options) {
            Options o(device, dq, no_gds, chunk, bufs, stream, options);
            const int f = fd_of(fd);
            return decoded([&](tenso_gpu_value **out) { return tenso_gpu_read_fd(out, f, &o.o); });
        },
        py::arg("fd"), TPY_GPU_OPTION_ARGS, "tenso_gpu_read_fd: one packet from a file descriptor to the device.");
    m.def(
        "gpu_load_file",
        [](const std::string &path, int32_t device, int32_t dq, bool no_gds, uint64_t chunk, uint32_t bufs,
           uintptr_t stream, py::handle options) {
            Options o(device, dq, no_gds, chunk, bufs, stream, options);
            return decoded([&](tenso_gpu_value **out) { return tenso_gpu_load_file(out, path.c_str(), &o.o); });
        },
        py::arg("path"), TPY_GPU_OPTION_ARGS,
        "tenso_gpu_load_file: a packet file to the device (GPUDirect Storage where possible).");
    m.def(
        "gpu_dumps",
        [](py::handle tensor, bool check_integrity, bool compress, int64_t alignment) {
            const DeviceTensor &d = device_tensor(tensor);
            tenso_encode_options enc = make_options(check_integrity, compress, alignment);
            tenso_buffer b = TENSO_BUFFER_INIT;
            tenso_status st;
            {
                py::gil_scoped_release nogil;
                st = tenso_gpu_dumps(&b, d.t, &enc, nullptr);
            }
            if (st != TENSO_OK) {
                tenso_buffer_dispose(&b);
                raise_status(st);
            }
            return buffer_bytes(b);
        },
        py::arg("tensor"), py::arg("check_integrity") = false, py::arg("compress") = false, py::arg("alignment") = 64,
        "tenso_gpu_dumps: a DeviceTensor's packet as bytes.");
    m.def(
        "gpu_write_fd",
        [](py::handle tensor, py::handle fd, bool check_integrity, bool compress, int64_t alignment) {
            const DeviceTensor &d = device_tensor(tensor);
            tenso_encode_options enc = make_options(check_integrity, compress, alignment);
            const int f = fd_of(fd);
            uint64_t written = 0;
            tenso_status st;
            {
                py::gil_scoped_release nogil;
                st = tenso_gpu_write_fd(&written, f, d.t, &enc, nullptr);
            }
            check(st);
            return written;
        },
        py::arg("tensor"), py::arg("fd"), py::arg("check_integrity") = false, py::arg("compress") = false,
        py::arg("alignment") = 64, "tenso_gpu_write_fd: a DeviceTensor's packet to a file descriptor.");
    m.def(
        "gpu_upload",
        [](py::array arr, int32_t device) {
            py::array c = py::array::ensure(arr, py::array::c_style);
            if (!c) throw py::error_already_set();
            const tenso_dtype code = dtype_code(c.dtype());
            std::vector<uint64_t> shape(c.shape(), c.shape() + c.ndim());
            tenso_gpu_tensor *t = nullptr;
            check(tenso_gpu_tensor_new(&t, device, code, uint32_t(shape.size()), shape.data()));
            GpuTensorPtr owned(t);
            const void *src = c.data();
            const size_t n = size_t(c.nbytes());
            tenso_status st;
            {
                py::gil_scoped_release nogil;
                st = tenso_gpu_tensor_upload(t, src, n, nullptr);
            }
            check(st);
            return wrap_tensor(std::move(owned), 0);
        },
        py::arg("array"), py::arg("device") = 0,
        "A new DeviceTensor holding a copy of a host array (tenso_gpu_tensor_new + upload).");
    m.def("gpu_from_dlpack", &from_dlpack, py::arg("obj"),
          "tenso_gpu_tensor_from_dlpack: any __dlpack__ object as a DeviceTensor, without copying.");
    m.def(
        "gpu_ipc_export",
        [](py::handle tensor) {
            tenso_value *v = nullptr;
            check(tenso_gpu_ipc_export(&v, device_tensor(tensor).t));
            ValuePtr held(v);
            tenso_buffer b = TENSO_BUFFER_INIT;
            tenso_status st = tenso_value_dumps(&b, v, nullptr);
            if (st != TENSO_OK) {
                tenso_buffer_dispose(&b);
                raise_status(st);
            }
            return buffer_bytes(b);
        },
        py::arg("tensor"), "tenso_gpu_ipc_export: the 106-byte GPU IPC reference packet for a DeviceTensor.");
    m.def(
        "gpu_ipc_open",
        [](py::handle packet, py::object dtype, py::handle shape) {
            const tenso_dtype code = dtype_code(py::dtype::from_args(dtype));
            std::vector<uint64_t> shp = shape_from(shape);
            py::object pkt = decode_packet(packet);
            tenso_gpu_tensor *t = nullptr;
            check(tenso_gpu_ipc_open(&t, pkt.cast<Packet &>().root(), code, uint32_t(shp.size()), shp.data()));
            return wrap_tensor(GpuTensorPtr(t), TENSO_GPU_PATH_IPC);
        },
        py::arg("packet"), py::arg("dtype"), py::arg("shape"),
        "tenso_gpu_ipc_open: another process's device memory, from its IPC reference packet.");
    m.def(
        "gpu_dequantize",
        [](py::handle packet, py::object dtype, int32_t device) {
            const tenso_dtype code = dtype_code(py::dtype::from_args(dtype));
            py::object pkt = decode_packet(packet);
            const tenso_view *v = pkt.cast<Packet &>().root();
            tenso_gpu_options o = TENSO_GPU_OPTIONS_INIT;
            o.device = device;
            tenso_gpu_tensor *t = nullptr;
            tenso_status st;
            {
                py::gil_scoped_release nogil;
                st = tenso_gpu_dequantize(&t, v, code, &o);
            }
            check(st);
            return wrap_tensor(GpuTensorPtr(t), 0);
        },
        py::arg("packet"), py::arg("dtype"), py::arg("device") = 0,
        "tenso_gpu_dequantize: a quantized packet -> a float32/float16/bfloat16 DeviceTensor.");
    m.def(
        "gpu_pool_stats",
        [] {
            tenso_gpu_pool_stats s{};
            check(tenso_gpu_pool_stats_get(&s));
            py::dict d;
            d["buffers"] = s.buffers;
            d["bytes"] = s.bytes;
            d["hits"] = s.hits;
            d["misses"] = s.misses;
            d["limit_bytes"] = s.limit_bytes;
            return d;
        },
        "tenso_gpu_pool_stats_get as a dict.");
    m.def(
        "gpu_pool_set_limit", [](uint64_t limit) { check(tenso_gpu_pool_set_limit(limit)); }, py::arg("limit_bytes"),
        "tenso_gpu_pool_set_limit (0 unpins every idle buffer now).");
}

}  // namespace tpy
