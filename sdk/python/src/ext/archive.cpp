// archive.cpp - tenso/archive.h for Python: tenso._tenso.Archive (a reader over a mapped tenso
// archive, safetensors or bintensors file) and tenso._tenso.ArchiveWriter. tenso.save_file,
// tenso.load_file, tenso.safe_open and tenso.ArchiveWriter (src/tenso/archive.py) are built on
// them. Arrays from get() are views into the mapping; their numpy base (a Packet holding the
// tenso_view) keeps the mapping alive after the archive is closed.
#include <string>

#include "common.hpp"

namespace tpy {

namespace {

py::str utf8_str(const char *s, size_t n) {
    PyObject *o = PyUnicode_DecodeUTF8(s, Py_ssize_t(n), "strict");
    if (!o) throw py::error_already_set();
    return py::reinterpret_steal<py::str>(o);
}

// The UTF-8 bytes of a str (names and metadata are UTF-8 strings in every format).
std::string utf8_of(const py::handle &s, const char *what) {
    if (!PyUnicode_Check(s.ptr()))
        raise_type_error(std::string(what) + " must be str, not " +
                         py::str(py::type::handle_of(s).attr("__name__")).cast<std::string>());
    Py_ssize_t len = 0;
    const char *utf8 = PyUnicode_AsUTF8AndSize(s.ptr(), &len);
    if (!utf8) throw py::error_already_set();
    return std::string(utf8, size_t(len));
}

struct Archive : Handle<tenso_archive, tenso_archive_close> {
    explicit Archive(tenso_archive *a) : Handle(a, "the archive is closed") {}
};

std::unique_ptr<Archive> archive_open(const std::string &path, int32_t format, bool verify_all, bool no_verify) {
    tenso_archive_options o = TENSO_ARCHIVE_OPTIONS_INIT;
    o.format = format;
    if (verify_all) o.flags |= TENSO_ARCHIVE_VERIFY_ALL;
    if (no_verify) o.flags |= TENSO_ARCHIVE_NO_VERIFY;
    tenso_archive *a = nullptr;
    tenso_status st;
    {
        py::gil_scoped_release release;  // reads the index (or, with verify_all, every byte)
        st = tenso_archive_open(&a, path.c_str(), &o);
    }
    check(st);
    return std::make_unique<Archive>(a);
}

tenso_archive_entry entry_of(const Archive &self, uint64_t index) {
    tenso_archive_entry e{};
    check(tenso_archive_entry_at(&e, self.get(), index));
    return e;
}

py::dict archive_entry(const Archive &self, uint64_t index) {
    const tenso_archive_entry e = entry_of(self, index);
    py::dict d;
    d["name"] = utf8_str(e.name, e.name_len);
    d["kind"] = e.kind;
    d["dtype_code"] = e.dtype;
    py::tuple shape(std::min<uint32_t>(e.ndim, TENSO_MAX_NDIM));
    for (size_t i = 0; i < shape.size(); ++i) shape[i] = py::int_(e.shape[i]);
    d["ndim"] = e.ndim;
    d["shape"] = shape;
    d["offset"] = e.offset;
    d["stored_bytes"] = e.stored_bytes;
    d["nbytes"] = e.nbytes;
    d["data_offset"] = e.data_offset;
    d["hashed"] = (e.flags & TENSO_ENTRY_HASHED) != 0;
    d["xxh3"] = e.xxh3;
    return d;
}

py::list archive_names(const Archive &self) {
    const uint64_t n = tenso_archive_count(self.get());
    py::list out;
    for (uint64_t i = 0; i < n; ++i) {
        const tenso_archive_entry e = entry_of(self, i);
        out.append(utf8_str(e.name, e.name_len));
    }
    return out;
}

uint64_t archive_find(const Archive &self, const py::handle &name) {
    const std::string n = utf8_of(name, "tensor names");
    uint64_t index = 0;
    check(tenso_archive_find(&index, self.get(), n.data(), n.size()));
    return index;
}

py::object archive_get(const Archive &self, uint64_t index, bool copy) {
    const auto held = self.lease();
    tenso_archive *a = held.get();
    tenso_view *v = nullptr;
    tenso_status st;
    {
        py::gil_scoped_release release;  // the first get of a hashed tensor hashes it
        st = tenso_archive_get(&v, a, index, nullptr);
    }
    check(st);
    return view_to_python(v, copy);
}

// Fills the writable buffer `dst` with body bytes [offset, offset + len(dst)) of tensor `index`.
void archive_read(const Archive &self, uint64_t index, uint64_t offset, const py::handle &dst) {
    const auto held = self.lease();
    tenso_archive *a = held.get();
    BufferHold b;
    b.acquire(dst, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS);
    tenso_status st;
    {
        py::gil_scoped_release release;
        st = tenso_archive_read(b.mutable_data(), a, index, offset, b.size());
    }
    check(st);
}

py::dict archive_metadata(const Archive &self) {
    const auto held = self.lease();
    tenso_archive *a = held.get();
    const uint64_t n = tenso_archive_metadata_count(a);
    py::dict d;
    for (uint64_t i = 0; i < n; ++i) {
        const char *k = nullptr, *v = nullptr;
        size_t kl = 0, vl = 0;
        check(tenso_archive_metadata_at(&k, &kl, &v, &vl, a, i));
        d[utf8_str(k, kl)] = utf8_str(v, vl);
    }
    return d;
}

void archive_verify(const Archive &self) {
    const auto held = self.lease();
    tenso_archive *a = held.get();
    uint64_t bad = 0;
    tenso_status st;
    {
        py::gil_scoped_release release;  // hashes every tensor
        st = tenso_archive_verify(&bad, a, nullptr, nullptr);
    }
    if (st == TENSO_OK) return;
    std::string message = tenso_last_error();
    // Name the tensor: the caller can then re-save or re-download just that one.
    tenso_archive_entry e{};
    if (tenso_archive_entry_at(&e, a, bad) == TENSO_OK)
        message = "tensor '" + std::string(e.name, e.name_len) + "': " + message;
    raise_error(st, message);
}

struct Writer : Handle<tenso_archive_writer, tenso_archive_writer_free> {
    explicit Writer(tenso_archive_writer *w) : Handle(w, "the archive writer is finished or aborted") {}
};

std::unique_ptr<Writer> writer_open(const std::string &path, int32_t format, int64_t alignment, bool hash,
                                    bool check_integrity, bool compress) {
    tenso_archive_write_options o = TENSO_ARCHIVE_WRITE_OPTIONS_INIT;
    o.format = format;
    if (!hash) o.flags |= TENSO_ARCHIVE_NO_HASH;
    o.encode = make_options(check_integrity, compress, alignment);
    o.alignment = uint32_t(alignment);
    tenso_archive_writer *w = nullptr;
    tenso_status st;
    {
        py::gil_scoped_release release;
        st = tenso_archive_writer_open(&w, path.c_str(), &o);
    }
    check(st);
    return std::make_unique<Writer>(w);
}

void writer_add(const Writer &self, const py::handle &name, const Value &value) {
    const std::string n = utf8_of(name, "tensor names");
    const auto held = self.lease();
    tenso_archive_writer *w = held.get();
    tenso_status st;
    {
        py::gil_scoped_release release;  // writes the tensor's bytes
        st = tenso_archive_writer_add(w, n.data(), n.size(), value.get());
    }
    check(st);
}

void writer_set_metadata(const Writer &self, const py::handle &key, const py::handle &value) {
    const std::string k = utf8_of(key, "metadata keys");
    const std::string v = utf8_of(value, "metadata values");
    check(tenso_archive_writer_set_metadata(self.get(), k.data(), k.size(), v.data(), v.size()));
}

void writer_finish(Writer &self) {
    const auto held = self.lease();
    tenso_archive_writer *w = held.get();
    tenso_status st;
    {
        py::gil_scoped_release release;  // index, fsync, rename (and, for safetensors, placement)
        st = tenso_archive_writer_finish(w);
    }
    self.close();  // finished or failed, the writer is done (a failure leaves the target untouched)
    check(st);
}

}  // namespace

void init_archive(py::module_ &m) {
    m.def(
        "format_name", [](int32_t f) { return std::string(tenso_format_name(f)); }, py::arg("format"));

    py::class_<Archive>(m, "Archive", "An open tenso archive, safetensors or bintensors file (tenso_archive).")
        .def_static("open", &archive_open, py::arg("path"), py::arg("format") = 0, py::arg("verify_all") = false,
                    py::arg("no_verify") = false)
        .def_property_readonly("format", [](const Archive &a) { return tenso_archive_format(a.get()); })
        .def_property_readonly("alignment", [](const Archive &a) { return tenso_archive_alignment(a.get()); })
        .def("__len__", [](const Archive &a) { return tenso_archive_count(a.get()); })
        .def("entry", &archive_entry, py::arg("index"))
        .def("names", &archive_names)
        .def("find", &archive_find, py::arg("name"))
        .def("get", &archive_get, py::arg("index"), py::arg("copy") = false)
        .def("read", &archive_read, py::arg("index"), py::arg("offset"), py::arg("dst"))
        .def("metadata", &archive_metadata)
        .def("verify", &archive_verify)
        .def("close", &Archive::close);

    py::class_<Writer>(m, "ArchiveWriter", "An archive being written (tenso_archive_writer).")
        .def_static("open", &writer_open, py::arg("path"), py::arg("format") = 0, py::arg("alignment") = 64,
                    py::arg("hash") = true, py::arg("check_integrity") = false, py::arg("compress") = false)
        .def("add", &writer_add, py::arg("name"), py::arg("value"))
        .def("set_metadata", &writer_set_metadata, py::arg("key"), py::arg("value"))
        .def("finish", &writer_finish)
        .def("abort", &Writer::close);
}

}  // namespace tpy
