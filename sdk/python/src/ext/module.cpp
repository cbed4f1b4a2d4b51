// module.cpp - tenso._tenso: the load-time version check, the status -> exception mapping, the
// dtype mapping and the module's constants. The codec functions live in encode.cpp/decode.cpp.
#include <dlfcn.h>

#include <array>

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
    py::object text = py::reinterpret_steal<py::object>(
        PyUnicode_DecodeUTF8(message.data(), Py_ssize_t(message.size()), "replace"));
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
    const char kind = dt.kind();
    const ssize_t size = dt.itemsize();
    auto unsupported = [&]() -> tenso_dtype {
        raise_value_error("Unsupported dtype: " + py::str(dt.attr("name")).cast<std::string>());
    };
    if (dt.byteorder() == '>') {
        raise_value_error("Unsupported byte order: dtype " + py::str(dt).cast<std::string>() +
                          " is big-endian; tenso packets are little-endian (convert with "
                          "arr.astype(arr.dtype.newbyteorder('<')))");
    }
    if (dt.has_fields() || dt.attr("subdtype").ptr() != Py_None) return unsupported();
    switch (kind) {
    case 'b':
        if (size == 1) return TENSO_DTYPE_BOOL;
        break;
    case 'i':
        switch (size) {
        case 1: return TENSO_DTYPE_INT8;
        case 2: return TENSO_DTYPE_INT16;
        case 4: return TENSO_DTYPE_INT32;
        case 8: return TENSO_DTYPE_INT64;
        }
        break;
    case 'u':
        switch (size) {
        case 1: return TENSO_DTYPE_UINT8;
        case 2: return TENSO_DTYPE_UINT16;
        case 4: return TENSO_DTYPE_UINT32;
        case 8: return TENSO_DTYPE_UINT64;
        }
        break;
    case 'f':
        switch (size) {
        case 2: return TENSO_DTYPE_FLOAT16;
        case 4: return TENSO_DTYPE_FLOAT32;
        case 8: return TENSO_DTYPE_FLOAT64;
        }
        break;
    case 'c':
        switch (size) {
        case 8: return TENSO_DTYPE_COMPLEX64;
        case 16: return TENSO_DTYPE_COMPLEX128;
        }
        break;
    case 'V':
        // ml_dtypes' bfloat16 is a 2-byte user dtype of kind 'V' named "bfloat16".
        if (size == 2 && py::str(dt.attr("name")).cast<std::string>() == "bfloat16") return TENSO_DTYPE_BFLOAT16;
        break;
    }
    return unsupported();
}

py::dtype numpy_dtype(tenso_dtype code) {
    // One cached dtype per wire code; never released (process lifetime).
    static std::array<PyObject *, 16> cache{};
    if (code < 1 || code > 15) raise_error(TENSO_E_BAD_DTYPE, "Unsupported dtype code: " + std::to_string(code));
    PyObject *&slot = cache[size_t(code)];
    if (!slot) {
        py::object dt;
        if (code == TENSO_DTYPE_BFLOAT16) {
            try {
                dt = py::dtype::from_args(py::module_::import("ml_dtypes").attr("bfloat16"));
            } catch (py::error_already_set &e) {
                if (!e.matches(PyExc_ImportError)) throw;
                raise_error(TENSO_E_BAD_DTYPE,
                            "bfloat16 packets need the ml_dtypes package (pip install ml_dtypes)");
            }
        } else {
            dt = py::dtype(std::string(tenso_dtype_name(code)));
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
    if (dladdr(reinterpret_cast<void *>(&tenso_version_number), &info) && info.dli_fname)
        return info.dli_fname;
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

    m.def("status_name", [](int32_t status) { return std::string(tenso_status_name(status)); },
          py::arg("status"), "The symbolic name of a tenso_status value (\"TENSO_E_CHECKSUM\").");
    m.def("dtype_code", [](py::object dt) { return dtype_code(py::dtype::from_args(dt)); }, py::arg("dtype"),
          "The wire dtype code for a numpy dtype; ValueError when tenso cannot carry it.");
    m.def("numpy_dtype", &numpy_dtype, py::arg("code"), "The numpy dtype for a dense wire dtype code.");
    m.def("dtype_name", [](int32_t code) { return std::string(tenso_dtype_name(code)); }, py::arg("code"),
          "libtenso's name for a wire dtype code (\"float32\", \"qint4\", \"string\", \"unknown\").");
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
}
