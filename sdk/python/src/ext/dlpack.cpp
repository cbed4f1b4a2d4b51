// dlpack.cpp - TensorView: a decoded dense tensor that speaks the DLPack Python protocol
// (__dlpack__ / __dlpack_device__), exporting libtenso's DLManagedTensorVersioned (capsule
// "dltensor_versioned") or the legacy DLManagedTensor (capsule "dltensor").
//
// libtenso's export keeps memory the view owns alive by itself, but memory the view borrows (the
// caller's bytes) must outlive the DLPack tensor too. So the exported struct is wrapped: our
// manager_ctx holds libtenso's managed tensor plus a reference to the Packet (which holds the
// source buffer), and our deleter calls libtenso's deleter, then drops that reference under the
// GIL. Consumers may call the deleter from any thread.
#include <vector>

#include "common.hpp"

namespace tpy {

namespace {

constexpr const char *kVersionedName = "dltensor_versioned";
constexpr const char *kLegacyName = "dltensor";

bool interpreter_alive() {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsInitialized() && !Py_IsFinalizing();
#else
    return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

void drop_owner(PyObject *owner) {
    if (!owner || !interpreter_alive()) return;  // at shutdown the reference is simply leaked
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF(owner);
    PyGILState_Release(g);
}

template <class Managed>
struct Wrapped {
    Managed outer;
    Managed *inner;
    PyObject *owner;  // strong reference, or null when libtenso's own context keeps the data
};

template <class Managed>
void wrapped_deleter(Managed *self) {
    if (!self) return;
    auto *w = static_cast<Wrapped<Managed> *>(self->manager_ctx);
    if (w->inner && w->inner->deleter) w->inner->deleter(w->inner);
    drop_owner(w->owner);
    delete w;
}

template <class Managed>
Managed *wrap(Managed *inner, PyObject *owner) {
    auto *w = new Wrapped<Managed>();
    w->inner = inner;
    w->owner = owner;
    Py_XINCREF(owner);
    w->outer = *inner;  // dl_tensor (shape points into inner's context, alive until its deleter)
    w->outer.manager_ctx = w;
    w->outer.deleter = &wrapped_deleter<Managed>;
    return &w->outer;
}

// A capsule whose destructor calls the deleter only when no consumer took the tensor (a consumer
// renames the capsule to "used_dltensor[_versioned]").
template <class Managed>
void capsule_destructor(PyObject *cap) {
    const char *name = std::is_same<Managed, DLManagedTensorVersioned>::value ? kVersionedName : kLegacyName;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    if (PyCapsule_IsValid(cap, name)) {
        auto *m = static_cast<Managed *>(PyCapsule_GetPointer(cap, name));
        if (m && m->deleter) m->deleter(m);
    }
    PyErr_Restore(t, v, tb);
}

template <class Managed>
py::capsule make_capsule(Managed *m) {
    const char *name = std::is_same<Managed, DLManagedTensorVersioned>::value ? kVersionedName : kLegacyName;
    PyObject *cap = PyCapsule_New(m, name, &capsule_destructor<Managed>);
    if (!cap) {
        m->deleter(m);
        throw py::error_already_set();
    }
    return py::reinterpret_steal<py::capsule>(cap);
}

// A legacy DLManagedTensor over a versioned one (for consumers that pass no max_version).
struct LegacyOver {
    DLManagedTensor outer;
    DLManagedTensorVersioned *inner;
};

void legacy_over_deleter(DLManagedTensor *self) {
    if (!self) return;
    auto *w = static_cast<LegacyOver *>(self->manager_ctx);
    if (w->inner && w->inner->deleter) w->inner->deleter(w->inner);
    delete w;
}

class TensorView {
public:
    py::object owner;  // the Packet
    const tenso_view *view = nullptr;

    py::array numpy() const {
        // A read-only zero-copy array, exactly what loads() returns for this tensor.
        return py::reinterpret_steal<py::array>(to_python(view, owner, DecodeMode{}).release());
    }

    PyObject *owner_for_export() const {
        // Memory the view owns is kept by libtenso's context; borrowed memory needs the Packet.
        return tenso_view_owns_data(view) ? nullptr : owner.ptr();
    }

    py::object dlpack(py::object stream, py::object max_version, py::object dl_device, py::object copy) const {
        if (!stream.is_none()) {
            // CPU tensors have no stream; -1 ("no synchronisation") is also accepted.
            if (!py::isinstance<py::int_>(stream) || stream.cast<long long>() != -1)
                throw py::value_error("stream must be None for CPU tensors");
        }
        if (!dl_device.is_none()) {
            py::tuple dev = dl_device.cast<py::tuple>();
            if (dev.size() != 2 || dev[0].cast<int>() != kDLCPU || dev[1].cast<int>() != 0) {
                PyErr_SetString(PyExc_BufferError, "tenso tensors live on the CPU (device (1, 0)) only");
                throw py::error_already_set();
            }
        }
        if (!copy.is_none() && copy.cast<bool>()) {
            // libtenso never copies on export; a copy is numpy's job.
            py::array c = numpy().attr("copy")();
            return c.attr("__dlpack__")(py::arg("max_version") = max_version);
        }
        bool versioned = false;
        if (!max_version.is_none()) {
            py::tuple mv = max_version.cast<py::tuple>();
            versioned = mv.size() >= 1 && mv[0].cast<int>() >= 1;
        }
        if (versioned) {
            DLManagedTensorVersioned *inner = nullptr;
            check(tenso_view_to_dlpack(&inner, view));
            return make_capsule(wrap(inner, owner_for_export()));
        }
        DLManagedTensor *inner = nullptr;
        check(tenso_view_to_dlpack_legacy(&inner, view));
        return make_capsule(wrap(inner, owner_for_export()));
    }
};

py::object view_of(const tenso_view *v, const py::object &owner) {
    switch (tenso_view_kind(v)) {
    case TENSO_KIND_DENSE: {
        auto tv = std::make_unique<TensorView>();
        tv->owner = owner;
        tv->view = v;
        return py::cast(tv.release(), py::return_value_policy::take_ownership);
    }
    case TENSO_KIND_BUNDLE: {
        py::dict d;
        const uint32_t n = tenso_view_bundle_count(v);
        for (uint32_t i = 0; i < n; ++i) {
            const char *key = nullptr;
            size_t key_len = 0;
            const tenso_view *child = nullptr;
            check(tenso_view_bundle_entry(&key, &key_len, &child, v, i));
            py::object k = py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(key, Py_ssize_t(key_len), "strict"));
            if (!k) throw py::error_already_set();
            d[k] = view_of(child, owner);
        }
        return std::move(d);
    }
    default: return to_python(v, owner, DecodeMode{});  // other kinds decode as loads() does
    }
}

}  // namespace

py::capsule dlpack_capsule(DLManagedTensorVersioned *m, bool legacy) {
    if (!legacy) return make_capsule(m);
    auto *w = new LegacyOver();
    w->inner = m;
    w->outer.dl_tensor = m->dl_tensor;
    w->outer.manager_ctx = w;
    w->outer.deleter = &legacy_over_deleter;
    return make_capsule(&w->outer);
}

void init_dlpack(py::module_ &m) {
    py::class_<TensorView>(m, "TensorView",
                           "A decoded dense tensor, zero-copy and read-only, exportable through DLPack "
                           "(numpy.from_dlpack, torch.from_dlpack, ...).")
        .def_property_readonly("shape",
                               [](const TensorView &t) {
                                   const uint32_t nd = tenso_view_ndim(t.view);
                                   const uint64_t *sh = tenso_view_shape(t.view);
                                   py::tuple s(nd);
                                   for (uint32_t i = 0; i < nd; ++i) s[i] = py::int_(sh[i]);
                                   return s;
                               })
        .def_property_readonly("dtype", [](const TensorView &t) { return numpy_dtype(tenso_view_dtype(t.view)); })
        .def_property_readonly("ndim", [](const TensorView &t) { return tenso_view_ndim(t.view); })
        .def_property_readonly("nbytes", [](const TensorView &t) { return tenso_view_nbytes(t.view); })
        .def_property_readonly("owns_data", [](const TensorView &t) { return tenso_view_owns_data(t.view) != 0; })
        .def_property_readonly(
            "packet", [](const TensorView &t) { return t.owner; }, "The Packet this tensor was decoded from.")
        .def("numpy", &TensorView::numpy, "The tensor as a read-only numpy array (no copy).")
        .def(
            "__array__",
            [](const TensorView &t, py::object dtype, py::object copy) -> py::object {
                py::object a = t.numpy();
                if (!dtype.is_none()) a = a.attr("astype")(dtype, py::arg("copy") = false);
                if (!copy.is_none() && copy.cast<bool>()) a = a.attr("copy")();
                return a;
            },
            py::arg("dtype") = py::none(), py::arg("copy") = py::none())
        .def("__dlpack__", &TensorView::dlpack, py::kw_only(), py::arg("stream") = py::none(),
             py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
             "DLPack export: a 'dltensor_versioned' capsule (DLPack 1.x, READ_ONLY flag) when the consumer "
             "passes max_version >= (1, 0), else a legacy 'dltensor' capsule. Never copies unless copy=True.")
        .def("__dlpack_device__", [](const TensorView &) { return py::make_tuple(int(kDLCPU), 0); })
        .def("__repr__", [](const TensorView &t) {
            std::string s = "TensorView(shape=(";
            const uint32_t nd = tenso_view_ndim(t.view);
            for (uint32_t i = 0; i < nd; ++i)
                s += std::to_string(tenso_view_shape(t.view)[i]) + (nd == 1 || i + 1 < nd ? "," : "");
            return s + "), dtype=" + tenso_dtype_name(tenso_view_dtype(t.view)) + ")";
        });

    m.def(
        "view",
        [](py::handle data) {
            py::object owner = decode_packet(data);
            return view_of(owner.cast<Packet &>().root(), owner);
        },
        py::arg("data"), "Decodes a packet into TensorView objects (a dict of them for bundles) for DLPack export.");
}

}  // namespace tpy
