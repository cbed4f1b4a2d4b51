// decode.cpp - packets to Python objects. A decoded packet is a Packet object (the tenso_view and
// the exported source buffer); every array handed out is a read-only numpy view whose base is
// that Packet, unless a copy was asked for.
#include <cstring>
#include <string>
#include <vector>

#include "common.hpp"

namespace tpy {

namespace {

void set_readonly(py::array &a) {
    py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
}

// A C-order array of `shape` over `data`, which `base` keeps alive: numpy's own constructor.
// py::array's would first copy the shape, compute strides into a vector and read the flags
// back, which on a 1 KiB packet costs about as much as the array itself.
py::array array_at(const py::dtype &dt, const std::vector<py::ssize_t> &shape, void *data, py::handle base,
                   bool writeable) {
    static_assert(sizeof(py::ssize_t) == sizeof(Py_intptr_t), "numpy dimensions are Py_intptr_t");
    auto &api = py::detail::npy_api::get();
    auto a = py::reinterpret_steal<py::array>(api.PyArray_NewFromDescr_(
        api.PyArray_Type_, dt.inc_ref().ptr(), int(shape.size()), reinterpret_cast<const Py_intptr_t *>(shape.data()),
        nullptr, data, writeable ? py::detail::npy_api::NPY_ARRAY_WRITEABLE_ : 0, nullptr));  // steals dt
    if (!a) throw py::error_already_set();
    if (api.PyArray_SetBaseObject_(a.ptr(), base.inc_ref().ptr()) != 0) throw py::error_already_set();  // steals base
    return a;
}

// A new array of `shape` whose data starts at an `align`-byte boundary (numpy only promises the
// item size), holding a copy of `nbytes` at `src`.
py::array aligned_copy(const py::dtype &dt, const std::vector<py::ssize_t> &shape, const void *src, size_t nbytes,
                       size_t align, bool writeable) {
    py::array_t<uint8_t> raw(py::ssize_t(nbytes + align));
    uint8_t *p = raw.mutable_data();
    const size_t off = (align - (reinterpret_cast<uintptr_t>(p) & (align - 1))) & (align - 1);
    if (nbytes) {
        if (nbytes >= kReleaseGilBytes) {
            py::gil_scoped_release nogil;
            std::memcpy(p + off, src, nbytes);
        } else {
            std::memcpy(p + off, src, nbytes);
        }
    }
    return array_at(dt, shape, p + off, raw, writeable);
}

// An array over `data` (owned by `owner`), or a copy per `mode`. `align` is the alignment the
// packet declares for this data (1 when unpadded).
py::array array_over(const py::dtype &dt, const std::vector<py::ssize_t> &shape, const void *data, size_t nbytes,
                     size_t align, py::handle owner, const DecodeMode &mode) {
    const size_t copy_align = std::max<size_t>(align, 64);
    try {
        if (mode.copy) return aligned_copy(dt, shape, data, nbytes, copy_align, true);
        if (mode.align && align > 1 && nbytes && (reinterpret_cast<uintptr_t>(data) % align) != 0)
            return aligned_copy(dt, shape, data, nbytes, copy_align, mode.writeable);
        if (nbytes) return array_at(dt, shape, const_cast<void *>(data), owner, mode.writeable);
        // Empty tensors have no data pointer: numpy allocates the (empty) array itself.
        py::array out(dt, shape, std::vector<py::ssize_t>{});
        if (!mode.writeable) set_readonly(out);
        return out;
    } catch (py::error_already_set &e) {
        // A valid packet numpy cannot represent: e.g. zero elements, but other dimensions whose
        // product overflows numpy's size type.
        if (!e.matches(PyExc_ValueError)) throw;
        raise_error(TENSO_E_LIMIT, std::string("numpy cannot hold this tensor's shape: ") + e.what());
    }
}

py::array dense_array(const tenso_view *v, py::handle owner, const DecodeMode &mode) {
    py::dtype dt = numpy_dtype(tenso_view_dtype(v));
    const uint32_t nd = tenso_view_ndim(v);
    const uint64_t *sh = tenso_view_shape(v);
    std::vector<py::ssize_t> shape(nd);
    for (uint32_t i = 0; i < nd; ++i) shape[i] = py::ssize_t(sh[i]);
    return array_over(dt, shape, tenso_view_data(v), size_t(tenso_view_nbytes(v)), tenso_view_alignment(v), owner,
                      mode);
}

py::object need_factory(const py::object &f, const char *what) {
    if (!f) raise_error(TENSO_E_INTERNAL, std::string("tenso: no Python constructor registered for ") + what);
    return f;
}

[[noreturn]] void unsupported_packet() {
    // Upstream's exact message (tenso 0.24 core.loads).
    raise_error(TENSO_E_UNSUPPORTED_KIND,
                "Unsupported tenso packet (e.g. a GPU IPC reference, which is decoded on the device rather "
                "than via loads())");
}

}  // namespace

py::object to_python(const tenso_view *v, py::handle owner, const DecodeMode &mode) {
    switch (tenso_view_kind(v)) {
    case TENSO_KIND_DENSE: return dense_array(v, owner, mode);
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
            // Duplicate keys are legal on the wire; as in a dict built entry by entry, the last wins.
            d[k] = to_python(child, owner, mode);
        }
        return std::move(d);
    }
    case TENSO_KIND_SPARSE_COO:
    case TENSO_KIND_SPARSE_CSR:
    case TENSO_KIND_SPARSE_CSC: {
        // mode.align is for dense tensors (top level and bundle members), as upstream aligns
        // those only; composite parts stay views.
        const DecodeMode parts_mode{mode.copy, false, mode.writeable};
        py::object parts[3];
        for (uint32_t i = 0; i < 3; ++i) {
            const tenso_view *c = nullptr;
            check(tenso_view_component(&c, v, i));
            parts[i] = dense_array(c, owner, parts_mode);
        }
        return need_factory(factories().sparse, "sparse matrices")(
            tenso_view_kind(v), shape_tuple(tenso_view_shape(v), tenso_view_ndim(v)), parts[0], parts[1], parts[2]);
    }
    case TENSO_KIND_QUANTIZED: {
        tenso_quantized q{};
        check(tenso_view_quantized(&q, v));
        // The packed body is aligned as the packet says; scales and zero points are the view's own
        // aligned float copies.
        py::array data = array_over(py::dtype::of<uint8_t>(), {py::ssize_t(q.nbytes)}, q.data, size_t(q.nbytes),
                                    tenso_view_alignment(v), owner, DecodeMode{mode.copy, false, mode.writeable});
        const size_t sbytes = size_t(q.num_scales) * sizeof(float);
        py::array scales =
            array_over(py::dtype::of<float>(), {py::ssize_t(q.num_scales)}, q.scales, sbytes, 1, owner, mode);
        py::array zps =
            array_over(py::dtype::of<float>(), {py::ssize_t(q.num_scales)}, q.zero_points, sbytes, 1, owner, mode);
        return need_factory(factories().quantized, "quantized tensors")(data, scales, zps, shape_tuple(q.shape, q.ndim),
                                                                        q.dtype, q.scheme, q.group_size, q.axis);
    }
    case TENSO_KIND_STRING: {
        const uint64_t *offs = nullptr;
        const char *payload = nullptr;
        check(tenso_view_string_offsets(&offs, &payload, v));
        const uint64_t count = tenso_view_ndim(v) ? tenso_view_shape(v)[0] : 0;
        const size_t plen = size_t(offs[count]);
        py::array offsets = array_over(py::dtype::of<uint64_t>(), {py::ssize_t(count + 1)}, offs, size_t(count + 1) * 8,
                                       1, owner, mode);
        py::object data;
        if (mode.copy) {
            data = py::bytes(payload, plen);
        } else {
            // A memoryview over a read-only uint8 view of the payload: str(data[a:b], "utf-8")
            // decodes a string without copying the payload first.
            py::array bytes_view =
                array_over(py::dtype::of<uint8_t>(), {py::ssize_t(plen)}, payload, plen, 1, owner, mode);
            data = py::reinterpret_steal<py::object>(PyMemoryView_FromObject(bytes_view.ptr()));
            if (!data) throw py::error_already_set();
        }
        return need_factory(factories().strings, "string tensors")(offsets, data, count);
    }
    default: unsupported_packet();  // GPU IPC references and direct ragged packets, as upstream
    }
}

namespace {

tenso_status loads_view(tenso_view **out, const BufferHold &b, const tenso_decode_options *opts) {
    if (b.size() >= kReleaseGilBytes) {
        py::gil_scoped_release nogil;
        return tenso_loads(out, b.data(), b.size(), opts);
    }
    return tenso_loads(out, b.data(), b.size(), opts);
}

}  // namespace

bool decode_options_from(py::handle fields, tenso_decode_options &o) {
    if (fields.is_none()) return false;
    const auto t = fields.cast<py::tuple>();
    if (t.size() != 10) raise_type_error("decode options: expected DecodeOptions._fields(), a 10-tuple");
    o.flags = t[0].cast<uint32_t>();
    o.max_ndim = t[1].cast<uint32_t>();
    o.max_depth = t[2].cast<uint32_t>();
    o.max_elements = t[3].cast<uint64_t>();
    o.max_packet_bytes = t[4].cast<uint64_t>();
    o.max_decoded_bytes = t[5].cast<uint64_t>();
    o.max_entries = t[6].cast<uint64_t>();
    o.timeout_ms = t[7].cast<uint64_t>();
    o.threads = t[8].cast<uint32_t>();
    o.max_inflation = t[9].cast<uint32_t>();
    return true;
}

py::object decode_packet(py::handle data, const tenso_decode_options *opts) {
    auto pkt = std::make_unique<Packet>();
    pkt->source.acquire(data, PyBUF_SIMPLE);
    tenso_view *v = nullptr;
    check(loads_view(&v, pkt->source, opts));
    pkt->view.reset(v);
    return py::cast(pkt.release(), py::return_value_policy::take_ownership);
}

py::tuple shape_tuple(const uint64_t *shape, uint32_t ndim) {
    py::tuple t(ndim);
    for (uint32_t i = 0; i < ndim; ++i) t[i] = py::int_(shape[i]);
    return t;
}

py::dict packet_info_dict(const tenso_packet_info &info) {
    py::dict d;
    d["version"] = info.version;
    d["flags"] = info.flags;
    d["kind"] = info.kind;
    d["dtype_code"] = info.dtype;
    d["ndim"] = info.ndim;
    d["entry_count"] = info.entry_count;
    d["alignment"] = info.alignment;
    d["shape"] = shape_tuple(info.shape, std::min<uint32_t>(info.ndim, TENSO_MAX_NDIM));
    d["body_offset"] = info.body_offset;
    d["body_size"] = info.body_size;
    d["packet_size"] = info.packet_size;
    return d;
}

namespace {

py::object packet_from_view(tenso_view *v) {
    ViewPtr owned(v);  // freed if the Packet cannot be made
    auto pkt = std::make_unique<Packet>();
    pkt->view = std::move(owned);
    return py::cast(pkt.release(), py::return_value_policy::take_ownership);
}

}  // namespace

py::object view_to_python(tenso_view *v, bool copy, bool align) { return view_to_python(v, DecodeMode{copy, align}); }

py::object view_to_python(tenso_view *v, const DecodeMode &mode) {
    py::object owner = packet_from_view(v);
    return to_python(v, owner, mode);
}

namespace {

py::object loads(py::handle data, bool copy, bool align, py::handle options) {
    tenso_decode_options o = TENSO_DECODE_OPTIONS_INIT;
    const bool limited = decode_options_from(options, o);
    py::object owner = decode_packet(data, limited ? &o : nullptr);
    return to_python(owner.cast<Packet &>().root(), owner, DecodeMode{copy, align});
}

py::object read_fd(py::handle fd_obj, bool copy, py::handle options, bool align) {
    const int fd = fd_obj.cast<int>();
    tenso_decode_options o = TENSO_DECODE_OPTIONS_INIT;
    const bool limited = decode_options_from(options, o);
    tenso_view *v = nullptr;
    tenso_status st;
    {
        py::gil_scoped_release nogil;
        st = tenso_read_fd(&v, fd, limited ? &o : nullptr);
    }
    if (st == TENSO_E_END_OF_STREAM) return py::none();
    check(st);
    return view_to_python(v, copy, align);
}

py::object load_file(const std::string &path, bool mmap, bool copy) {
    tenso_view *v = nullptr;
    tenso_status st;
    {
        py::gil_scoped_release nogil;
        st = tenso_load_file(&v, path.c_str(), mmap ? TENSO_LOAD_MMAP : TENSO_LOAD_READ, nullptr);
    }
    check(st);
    py::object owner = packet_from_view(v);
    return to_python(v, owner, DecodeMode{copy, false});
}

// (flat, offsets) of a ragged-array bundle, checked by tenso_view_ragged (the three keys, uint64
// offsets from 0 to the flat length, never decreasing, matching the count).
py::tuple loads_ragged(py::handle data, bool copy) {
    py::object owner = decode_packet(data);
    const tenso_view *flat = nullptr, *offsets = nullptr;
    check(tenso_view_ragged(&flat, &offsets, owner.cast<Packet &>().root()));
    const DecodeMode mode{copy, false};
    return py::make_tuple(dense_array(flat, owner, mode), dense_array(offsets, owner, mode));
}

py::dict inspect(py::handle data) {
    BufferHold b;
    b.acquire(data, PyBUF_SIMPLE);
    tenso_packet_info info{};
    check(tenso_inspect(&info, b.data(), b.size()));
    return packet_info_dict(info);
}

// (True, length) for a complete packet at the start of `data`; (False, needed) when more bytes
// are needed first (needed > len(data)). Any other problem raises.
py::tuple packet_length(py::handle data) {
    BufferHold b;
    b.acquire(data, PyBUF_SIMPLE);
    size_t n = 0;
    tenso_status st = tenso_packet_length(&n, b.data(), b.size(), nullptr);
    if (st == TENSO_E_TRUNCATED) return py::make_tuple(false, n);
    check(st);
    return py::make_tuple(true, n);
}

}  // namespace

void init_decode(py::module_ &m) {
    py::class_<Packet>(m, "Packet",
                       "A decoded packet: the owner (numpy base) of every array loads() returns from it. "
                       "It holds the source buffer exported while any of those arrays is alive.")
        .def_property_readonly(
            "source",
            [](const Packet &p) -> py::object {
                PyObject *o = p.source.obj();
                return o ? py::reinterpret_borrow<py::object>(o) : py::none();
            },
            "The object whose bytes the views point into (None when the packet owns "
            "its memory: streams, files, decompressed bodies).")
        .def_property_readonly("owns_data", [](const Packet &p) { return tenso_view_owns_data(p.root()) != 0; })
        .def_property_readonly("packet_size", [](const Packet &p) { return tenso_view_packet_size(p.root()); })
        .def_property_readonly("kind", [](const Packet &p) { return tenso_view_kind(p.root()); })
        .def_property_readonly("version", [](const Packet &p) { return tenso_view_version(p.root()); })
        .def_property_readonly("flags", [](const Packet &p) { return tenso_view_flags(p.root()); })
        .def("__repr__", [](const Packet &p) {
            return "<tenso Packet kind=" + std::to_string(tenso_view_kind(p.root())) +
                   " size=" + std::to_string(tenso_view_packet_size(p.root())) + ">";
        });

    m.def("loads", &loads, py::arg("data"), py::arg("copy") = false, py::arg("align") = false,
          py::arg("options") = py::none(),
          "Decodes the packet at the start of a C-contiguous buffer (options: DecodeOptions._fields() or None).");
    m.def("read_fd", &read_fd, py::arg("fd"), py::arg("copy") = false, py::arg("options") = py::none(),
          py::arg("align") = false, "Reads exactly one packet from a file descriptor; None at a clean end of stream.");
    m.def("load_file", &load_file, py::arg("path"), py::arg("mmap") = true, py::arg("copy") = false,
          "Loads the first packet of a file, mapped (zero-copy) or read.");
    m.def("loads_ragged", &loads_ragged, py::arg("data"), py::arg("copy") = false,
          "(flat, offsets) of a ragged-array packet, checked; TensoUnsupportedError for other packets.");
    m.def("inspect", &inspect, py::arg("data"), "tenso_inspect: the header fields, without decoding the body.");
    m.def("packet_length", &packet_length, py::arg("data"),
          "(True, length) for a complete packet, (False, bytes_needed) for a truncated one.");
}

}  // namespace tpy
