// module.cpp - tenso._tenso: the load-time version check, the status -> exception mapping, the
// dtype mapping and the module's constants. The codec functions live in encode.cpp/decode.cpp.
#include <dlfcn.h>

#include <array>

#include <vector>

#include "common.hpp"

namespace tpy {

// ---- errors -------------------------------------------------------------------------------

namespace {

// tenso.errors._BY_STATUS and the fallback classes; set once at import, never released (they
// live as long as the process, like the module).
PyObject *g_by_status = nullptr;
PyObject *g_base_error = nullptr;
PyObject *g_value_error = nullptr;
PyObject *g_type_error = nullptr;

[[noreturn]] void raise_with_class(PyObject *cls, tenso_status status, const std::string &message) {
    // libtenso's messages may quote bytes from the packet: never fail on invalid UTF-8 here.
    py::object text =
        py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(message.data(), Py_ssize_t(message.size()), "replace"));
    if (!text) throw py::error_already_set();
    py::object exc = py::reinterpret_borrow<py::object>(cls)(text);
    exc.attr("status") = py::int_(status);
    PyErr_SetObject(cls, exc.ptr());
    throw py::error_already_set();
}

PyObject *class_for(tenso_status status) {
    if (g_by_status) {
        py::int_ key(status);
        PyObject *cls = PyDict_GetItemWithError(g_by_status, key.ptr());  // borrowed
        if (cls) return cls;
        PyErr_Clear();
    }
    return g_base_error ? g_base_error : PyExc_RuntimeError;
}

}  // namespace

void init_errors() {
    py::module_ errors = py::module_::import("tenso.errors");
    g_by_status = py::object(errors.attr("_BY_STATUS")).release().ptr();
    g_base_error = py::object(errors.attr("TensoError")).release().ptr();
    g_value_error = py::object(errors.attr("TensoValueError")).release().ptr();
    g_type_error = py::object(errors.attr("TensoTypeError")).release().ptr();
}

void raise_error(tenso_status status, const std::string &message) {
    raise_with_class(class_for(status), status, message);
}

void raise_status(tenso_status status) {
    std::string message = tenso_last_error();
    if (message.empty()) message = tenso_status_name(status);
    raise_error(status, message);
}

void raise_value_error(const std::string &message) {
    raise_with_class(g_value_error ? g_value_error : PyExc_ValueError, TENSO_E_INVALID_ARGUMENT, message);
}

void raise_type_error(const std::string &message) {
    raise_with_class(g_type_error ? g_type_error : PyExc_TypeError, TENSO_E_INVALID_ARGUMENT, message);
}

void BufferHold::acquire(py::handle obj, int flags) {
    release();
    if (PyObject_GetBuffer(obj.ptr(), &buf_, flags) != 0) throw py::error_already_set();
    held_ = true;
}

// ---- dtypes -------------------------------------------------------------------------------

tenso_dtype dtype_code(const py::dtype &dt) {
    // numpy's built-in dtypes are singletons (np.dtype("float32") is every float32 array's
    // dtype): those we have answered for are known by address, so that a small array costs no
    // attribute lookups and name strings. Kept referenced (never freed, so never reused).
    static std::vector<std::pair<PyObject *, tenso_dtype>> known;
    for (const auto &k : known)
        if (k.first == dt.ptr()) return k.second;
    if (dt.byteorder() == '>') {
        raise_value_error("Unsupported byte order: dtype " + py::str(dt).cast<std::string>() +
                          " is big-endian; tenso packets are little-endian (convert with "
                          "arr.astype(arr.dtype.newbyteorder('<')))");
    }
    // libtenso's dtype names are numpy's ("float32", "bool", ml_dtypes' "bfloat16"): the ABI
    // answers, no table of our own. A dense code must also agree on the item size.
    const std::string name = py::str(dt.attr("name")).cast<std::string>();
    tenso_dtype code = 0;
    if (!dt.has_fields() && dt.attr("subdtype").ptr() == Py_None &&
        tenso_dtype_from_name(&code, name.c_str()) == TENSO_OK && tenso_dtype_itemsize(code) == size_t(dt.itemsize())) {
        // Only the canonical object of its name is remembered (a dtype made otherwise, with
        // metadata say, may be freed and its address reused).
        try {
            const py::object canonical = py::module_::import("numpy").attr("dtype")(name);
            if (canonical.ptr() == dt.ptr() && known.size() < 64) known.emplace_back(canonical.inc_ref().ptr(), code);
        } catch (py::error_already_set &) {
            // A name numpy itself lacks (ml_dtypes' bfloat16): not remembered.
        }
        return code;
    }
    raise_value_error("Unsupported dtype: " + name);
}

py::dtype numpy_dtype(tenso_dtype code) {
    // One cached dtype per wire code (codes are one byte on the wire); never released (process
    // lifetime).
    static std::array<PyObject *, 256> cache{};
    if (code < 0 || code > 255 || tenso_dtype_itemsize(code) == 0)
        raise_error(TENSO_E_BAD_DTYPE, "Unsupported dtype code: " + std::to_string(code));
    PyObject *&slot = cache[size_t(code)];
    if (!slot) {
        const std::string name = tenso_dtype_name(code);
        py::object dt;
        try {
            dt = py::dtype(name);
        } catch (py::error_already_set &e) {
            // numpy itself lacks the extension dtypes (bfloat16): ml_dtypes has them by name.
            if (!e.matches(PyExc_TypeError)) throw;
            try {
                dt = py::dtype::from_args(py::module_::import("ml_dtypes").attr(name.c_str()));
            } catch (py::error_already_set &e2) {
                if (!e2.matches(PyExc_ImportError) && !e2.matches(PyExc_AttributeError)) throw;
                raise_error(TENSO_E_BAD_DTYPE, name + " packets need the ml_dtypes package (pip install ml_dtypes)");
            }
        }
        slot = dt.release().ptr();
    }
    return py::reinterpret_borrow<py::dtype>(slot);
}

Factories &factories() {
    // Leaked on purpose: destroying Python objects after the interpreter is gone would crash.
    static Factories *f = new Factories();
    return *f;
}

namespace {

// The file the loaded libtenso came from, for messages that must say which library was loaded.
std::string library_path() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void *>(&tenso_version_number), &info) && info.dli_fname) return info.dli_fname;
    return "<unknown path>";
}

}  // namespace

}  // namespace tpy

PYBIND11_MODULE(_tenso, m) {
    using namespace tpy;
    m.doc() = "tenso's native core: pybind11 bindings over libtenso's C ABI (tenso/tenso.h).";

    // Load-time check (STYLE.md rule 12): same ABI major, and at least the version whose header
    // this extension was compiled with (a newer minor only adds functions).
    const uint32_t loaded = tenso_version_number();
    const std::string path = library_path();
    if (loaded / 10000 != TENSO_VERSION_MAJOR || loaded < TENSO_VERSION_NUMBER) {
        throw py::import_error("tenso: this extension was built for libtenso " TENSO_VERSION_STRING
                               " (ABI " TENSO_STRINGIFY(TENSO_VERSION_MAJOR) ".x) but loaded libtenso " +
                               std::string(tenso_version_string()) + " from " + path +
                               "; reinstall the tenso package or fix the library search path");
    }

    init_errors();

    m.attr("library_path") = path;
    m.attr("library_version") = std::string(tenso_version_string());
    m.attr("library_version_number") = loaded;
    m.attr("compiled_version") = TENSO_VERSION_STRING;
    m.attr("compiled_version_number") = uint32_t(TENSO_VERSION_NUMBER);
    m.attr("protocol_version") = tenso_protocol_version();

    m.def(
        "status_name", [](int32_t status) { return std::string(tenso_status_name(status)); }, py::arg("status"),
        "The symbolic name of a tenso_status value (\"TENSO_E_CHECKSUM\").");
    m.def(
        "dtype_code", [](py::object dt) { return dtype_code(py::dtype::from_args(dt)); }, py::arg("dtype"),
        "The wire dtype code for a numpy dtype; ValueError when tenso cannot carry it.");
    m.def("numpy_dtype", &numpy_dtype, py::arg("code"), "The numpy dtype for a dense wire dtype code.");
    m.def(
        "dtype_name", [](int32_t code) { return std::string(tenso_dtype_name(code)); }, py::arg("code"),
        "libtenso's name for a wire dtype code (\"float32\", \"qint4\", \"string\", \"unknown\").");
    m.def(
        "dtype_itemsize", [](int32_t code) { return tenso_dtype_itemsize(code); }, py::arg("code"),
        "Bytes per element of a dense wire dtype code; 0 for the others (quantized, string, unknown).");
    m.def(
        "dtype_from_name",
        [](const std::string &name) {
            tenso_dtype code = 0;
            check(tenso_dtype_from_name(&code, name.c_str()));
            return code;
        },
        py::arg("name"), "The wire dtype code for a libtenso dtype name; TensoUnsupportedError for unknown names.");
    m.def(
        "_set_factories",
        [](py::object quantized, py::object strings, py::object sparse) {
            Factories &f = factories();
            f.quantized = std::move(quantized);
            f.strings = std::move(strings);
            f.sparse = std::move(sparse);
        },
        py::arg("quantized"), py::arg("strings"), py::arg("sparse"),
        "Registers the Python constructors used for quantized, string and sparse packets.");

    init_encode(m);
    init_decode(m);
    init_dlpack(m);
    init_shm(m);
    init_archive(m);
    init_stream(m);
    init_gpu(m);
    init_net(m);
}
