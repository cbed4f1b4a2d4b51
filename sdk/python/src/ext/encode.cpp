// encode.cpp - numpy arrays and tenso_value trees to packets: in memory (one copy of each body,
// into a bytes object), to a file descriptor (vectored, bodies never copied) and to files
// (atomic save). Every body stays borrowed from its numpy array; the Python objects that own
// borrowed memory are kept alive by the Value that borrows it.
#include <sys/mman.h>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"

namespace tpy {

tenso_encode_options make_options(bool check_integrity, bool compress, int64_t alignment, uint32_t threads) {
    if (alignment <= 0 || (alignment & (alignment - 1)) != 0) raise_value_error("Alignment must be a power of two");
    if (alignment > int64_t(TENSO_MAX_ALIGNMENT))
        raise_value_error("Alignment " + std::to_string(alignment) + " exceeds the maximum of " +
                          std::to_string(TENSO_MAX_ALIGNMENT));
    tenso_encode_options o = TENSO_ENCODE_OPTIONS_INIT;
    if (check_integrity) o.flags |= TENSO_ENCODE_INTEGRITY;
    if (compress) o.flags |= TENSO_ENCODE_COMPRESS;
    o.alignment = uint32_t(alignment);
    o.threads = threads;
    return o;
}

BufferHold &Value::hold(py::handle obj) {
    buffers.push_back(std::make_unique<BufferHold>());
    buffers.back()->acquire(obj, PyBUF_C_CONTIGUOUS);
    return *buffers.back();
}

namespace {

std::string type_name(py::handle obj) { return py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>(); }

}  // namespace

// Upstream's checks, in upstream's order: every dimension fits the wire's u32, the element
// count is within 1e9 (before any contiguity copy, so a huge strided view is refused without
// being materialised), then C-contiguity (`strict` refuses, otherwise a contiguous copy), then
// the dtype.
void prepare_tensor(TensorArg &out, py::handle obj, bool strict) {
    if (!py::isinstance<py::array>(obj)) raise_type_error("Cannot serialize object of type '" + type_name(obj) + "'");
    py::array a = py::reinterpret_borrow<py::array>(obj);
    const ssize_t ndim = a.ndim();
    uint64_t count = 1;
    bool over = false;
    for (ssize_t i = 0; i < ndim; ++i) {
        const uint64_t d = uint64_t(a.shape(i));
        if (d > UINT32_MAX)
            raise_value_error("Dimension " + std::to_string(d) +
                              " exceeds the wire-format limit of 4294967295 (each dimension is stored "
                              "as a 32-bit integer)");
        if (d == 0) {
            count = 0;
            over = false;
            break;
        }
        if (!over) {
            // d <= 2^32 and count <= 1e9 before the product, so it cannot overflow 64 bits.
            count *= d;
            if (count > TENSO_MAX_ELEMENTS) over = true;
        }
    }
    if (over) {
        py::int_ exact(1);
        for (ssize_t i = 0; i < ndim; ++i)
            exact = py::reinterpret_steal<py::int_>(PyNumber_Multiply(exact.ptr(), py::int_(a.shape(i)).ptr()));
        raise_error(TENSO_E_TOO_MANY_ELEMENTS, "Packet exceeds maximum elements (" +
                                                   py::str(exact).cast<std::string>() + " > " +
                                                   std::to_string(TENSO_MAX_ELEMENTS) + ")");
    }
    if (ndim > TENSO_MAX_NDIM)
        raise_error(TENSO_E_TOO_MANY_DIMS, "Packet exceeds maximum dimensions (" + std::to_string(ndim) + " > " +
                                               std::to_string(TENSO_MAX_NDIM) + ")");
    if (!(a.flags() & py::array::c_style)) {
        if (strict) raise_value_error("Tensor is not C-Contiguous");
        a = py::reinterpret_steal<py::array>(py::detail::npy_api::get().PyArray_FromAny_(
            a.ptr(), nullptr, 0, 0, py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_, nullptr));
        if (!a) throw py::error_already_set();
    }
    out.t.dtype = dtype_code(a.dtype());
    out.t.ndim = uint32_t(ndim);
    for (ssize_t i = 0; i < ndim; ++i) out.shape[i] = uint64_t(a.shape(i));
    out.t.shape = ndim ? out.shape : nullptr;
    out.t.nbytes = uint64_t(a.nbytes());
    out.t.data = a.nbytes() ? a.data() : nullptr;
    out.arr = std::move(a);
}

namespace {

// Runs `fn` with the GIL released when `release` is set.
template <class Fn>
tenso_status maybe_released(bool release, Fn &&fn) {
    if (!release) return fn();
    py::gil_scoped_release nogil;
    return fn();
}

// A large bytes object is fresh, untouched memory: asking for transparent huge pages before
// the packet is written saves most of the page faults (numpy does the same for its arrays).
void advise_huge_pages(char *p, size_t n) {
    constexpr uintptr_t kHuge = uintptr_t(2) << 20;
    if (n < 2 * kHuge) return;
    uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
    uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n) & ~(kHuge - 1);
    if (hi > lo) ::madvise(reinterpret_cast<void *>(lo), hi - lo, MADV_HUGEPAGE);  // advisory only
}

// Encodes into a new bytes object (one copy of each body). With `pad`, the bytes object gets a
// little slack so the packet can start at a 64-byte (or `alignment`, up to a page) boundary in
// memory, and a memoryview of exactly the packet is returned: loads() of it is then zero-copy
// *and* aligned. Without `pad`, the bytes object is exactly the packet.
//
// Without compression the bound is exact. With compression it is an upper bound (about the
// uncompressed size): the frame is compressed straight into a bytes object of the bound (pages
// it never reaches are never touched) that is then shrunk to the packet (realloc: a large one
// gives its tail back in place).
// A packet in libtenso memory (tenso_dumps), exported read-only. Large buffers come from
// libtenso's pool, which keeps the pages of the last ones freed: when the last memoryview of
// a packet dies, its pages serve the next one instead of going back to the kernel.
struct PacketBuffer {
    tenso_buffer b = TENSO_BUFFER_INIT;
    PacketBuffer() = default;
    PacketBuffer(const PacketBuffer &) = delete;
    PacketBuffer &operator=(const PacketBuffer &) = delete;
    ~PacketBuffer() { tenso_buffer_dispose(&b); }
};

// From this size on (glibc maps each such bytes object afresh, with a page fault per page)
// a padded packet goes to a PacketBuffer instead of a bytes object.
constexpr size_t kPooledBytes = size_t(32) << 20;

template <class Bound, class Into, class Alloc>
py::object encode_bytes(Bound &&bound_fn, Into &&into_fn, Alloc &&alloc_fn, bool pad, uint32_t alignment) {
    size_t bound = 0;
    check(bound_fn(&bound));
    if (pad && bound >= kPooledBytes) {
        // 2 MiB aligned (alloc_bytes), so any alignment up to a page holds.
        auto owner = std::make_unique<PacketBuffer>();
        tenso_buffer *b = &owner->b;
        check(maybe_released(true, [&] { return alloc_fn(b); }));
        py::object obj = py::cast(std::move(owner));
        PyObject *mv = PyMemoryView_FromObject(obj.ptr());
        if (!mv) throw py::error_already_set();
        return py::reinterpret_steal<py::object>(mv);
    }
    const size_t a = pad ? std::max<size_t>(64, std::min<size_t>(alignment, 4096)) : 1;
    const size_t slack = pad ? a - 1 : 0;
    PyObject *raw = PyBytes_FromStringAndSize(nullptr, Py_ssize_t(bound + slack));
    if (!raw) throw py::error_already_set();
    char *base = PyBytes_AS_STRING(raw);
    advise_huge_pages(base, bound + slack);
    size_t off = pad ? (a - (reinterpret_cast<uintptr_t>(base) & (a - 1))) & (a - 1) : 0;
    size_t size = 0;
    tenso_status st = maybe_released(bound >= kReleaseGilBytes, [&] { return into_fn(base + off, bound, &size); });
    if (st != TENSO_OK) Py_DECREF(raw);
    check(st);
    if (size != bound) {
        // The packet starts at `off` of the old block; a moved block has it at the same offset
        // from its new base, where it may need moving to its alignment.
        if (_PyBytes_Resize(&raw, Py_ssize_t(size + slack)) != 0) throw py::error_already_set();
        base = PyBytes_AS_STRING(raw);
        const size_t now = pad ? (a - (reinterpret_cast<uintptr_t>(base) & (a - 1))) & (a - 1) : 0;
        if (now != off) std::memmove(base + now, base + off, size);
        off = now;
    }
    py::object bytes = py::reinterpret_steal<py::object>(raw);
    if (!pad) return bytes;
    // The slack is never part of the packet, but it is reachable through memoryview.obj: no stale
    // heap bytes there.
    std::memset(base, 0, off);
    std::memset(base + off + size, 0, slack - off);
    py::object mv = py::reinterpret_steal<py::object>(PyMemoryView_FromObject(raw));
    if (!mv) throw py::error_already_set();
    return mv[py::slice(py::int_(off), py::int_(off + size), py::none())];
}

}  // namespace

int fd_of(py::handle fd) {
    int v = fd.cast<int>();
    if (v < 0) raise_value_error("file descriptor must be >= 0");
    return v;
}

std::vector<uint64_t> shape_from(py::handle seq) {
    std::vector<uint64_t> shape;
    for (py::handle d : seq) {
        py::int_ i = py::reinterpret_borrow<py::object>(d).cast<py::int_>();
        long long v = i.cast<long long>();
        if (v < 0) raise_value_error("negative dimension in shape");
        shape.push_back(uint64_t(v));
    }
    if (shape.size() > TENSO_MAX_NDIM)
        raise_error(TENSO_E_TOO_MANY_DIMS,
                    "Packet exceeds maximum dimensions (" + std::to_string(shape.size()) + " > 32)");
    return shape;
}

namespace {

py::array contiguous(py::handle obj, py::dtype dt) {
    py::object r = py::reinterpret_steal<py::object>(py::detail::npy_api::get().PyArray_FromAny_(
        obj.ptr(), dt.release().ptr(), 0, 0,
        py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | py::detail::npy_api::NPY_ARRAY_ALIGNED_, nullptr));
    if (!r) throw py::error_already_set();
    return py::reinterpret_steal<py::array>(r.release());
}

std::unique_ptr<Value> value_tensor(py::handle arr, bool strict) {
    TensorArg ta;
    prepare_tensor(ta, arr, strict);
    auto v = std::make_unique<Value>();
    tenso_value *raw = nullptr;
    check(tenso_value_new_tensor(&raw, &ta.t));
    v->value.reset(raw);
    v->keep.push_back(std::move(ta.arr));
    return v;
}

std::unique_ptr<Value> value_sparse(int32_t kind, py::handle shape_seq, py::handle a, py::handle b, py::handle c) {
    std::vector<uint64_t> shape = shape_from(shape_seq);
    TensorArg parts[3];
    py::handle objs[3] = {a, b, c};
    for (int i = 0; i < 3; ++i) prepare_tensor(parts[i], objs[i], false);
    auto v = std::make_unique<Value>();
    tenso_value *raw = nullptr;
    check(tenso_value_new_sparse(&raw, kind, uint32_t(shape.size()), shape.data(), &parts[0].t, &parts[1].t,
                                 &parts[2].t));
    v->value.reset(raw);
    for (auto &p : parts) v->keep.push_back(std::move(p.arr));
    return v;
}

std::unique_ptr<Value> value_quantized(py::handle data, py::handle scales_obj, py::handle zps_obj, py::handle shape_seq,
                                       int32_t dtype, int32_t scheme, int32_t axis, int64_t group_size) {
    std::vector<uint64_t> shape = shape_from(shape_seq);
    auto v = std::make_unique<Value>();
    BufferHold &body = v->hold(data);
    py::array scales = contiguous(scales_obj, py::dtype::of<float>());
    py::array zps = contiguous(zps_obj, py::dtype::of<float>());
    if (scales.size() != zps.size())
        raise_value_error("scales and zero_points differ in length (" + std::to_string(scales.size()) + " vs " +
                          std::to_string(zps.size()) + ")");
    if (group_size < 0 || group_size > int64_t(UINT32_MAX)) raise_value_error("group_size is out of range");
    if (scales.size() > ssize_t(UINT32_MAX)) raise_value_error("too many scales");
    tenso_quantized q{};
    q.data = body.data();
    q.nbytes = body.size();
    q.shape = shape.empty() ? nullptr : shape.data();
    q.scales = static_cast<const float *>(scales.data());
    q.zero_points = static_cast<const float *>(zps.data());
    q.ndim = uint32_t(shape.size());
    q.dtype = dtype;
    q.scheme = scheme;
    q.axis = axis;
    q.group_size = uint32_t(group_size);
    q.num_scales = uint32_t(scales.size());
    tenso_value *raw = nullptr;
    check(tenso_value_new_quantized(&raw, &q));
    v->value.reset(raw);
    v->keep.push_back(std::move(scales));
    v->keep.push_back(std::move(zps));
    return v;
}

std::unique_ptr<Value> value_quantize(py::handle arr, int32_t qdtype, int32_t scheme, int32_t axis,
                                      int64_t group_size) {
    TensorArg ta;
    prepare_tensor(ta, arr, false);
    if (group_size < 0 || group_size > int64_t(UINT32_MAX)) raise_value_error("group_size is out of range");
    tenso_value *raw = nullptr;
    check(maybe_released(ta.t.nbytes >= kReleaseGilBytes,
                         [&] { return tenso_quantize(&raw, &ta.t, qdtype, scheme, axis, uint32_t(group_size)); }));
    auto v = std::make_unique<Value>();
    v->value.reset(raw);  // owns its packed data and scales: nothing borrowed
    return v;
}

// (data, scales, zero_points, shape, dtype, scheme, axis, group_size) of a quantized value, as
// new numpy arrays (the value's memory is not exposed, so nothing can write into it).
py::tuple quantized_parts(const Value &self) {
    tenso_quantized q{};
    check(tenso_value_quantized(&q, self.get()));
    py::array_t<uint8_t> data(py::ssize_t(q.nbytes));
    if (q.nbytes) std::memcpy(data.mutable_data(), q.data, size_t(q.nbytes));
    py::array_t<float> scales(py::ssize_t(q.num_scales)), zps(py::ssize_t(q.num_scales));
    if (q.num_scales) {
        std::memcpy(scales.mutable_data(), q.scales, q.num_scales * sizeof(float));
        std::memcpy(zps.mutable_data(), q.zero_points, q.num_scales * sizeof(float));
    }
    py::tuple shape(q.ndim);
    for (uint32_t i = 0; i < q.ndim; ++i) shape[i] = py::int_(q.shape[i]);
    return py::make_tuple(data, scales, zps, shape, q.dtype, q.scheme, q.axis, q.group_size);
}

// tenso_dequantize over parts given from Python (a QuantizedTensor's attributes); returns a new
// float32 array of `shape`.
py::array dequantize(py::handle data, py::handle scales_obj, py::handle zps_obj, py::handle shape_seq, int32_t dtype,
                     int32_t scheme, int32_t axis, int64_t group_size) {
    std::vector<uint64_t> shape = shape_from(shape_seq);
    BufferHold body;
    body.acquire(data, PyBUF_C_CONTIGUOUS);
    py::array scales = contiguous(scales_obj, py::dtype::of<float>());
    py::array zps = contiguous(zps_obj, py::dtype::of<float>());
    if (scales.size() != zps.size()) raise_value_error("scales and zero_points differ in length");
    if (group_size < 0 || group_size > int64_t(UINT32_MAX)) raise_value_error("group_size is out of range");
    tenso_quantized q{};
    q.data = body.data();
    q.nbytes = body.size();
    q.shape = shape.empty() ? nullptr : shape.data();
    q.scales = static_cast<const float *>(scales.data());
    q.zero_points = static_cast<const float *>(zps.data());
    q.ndim = uint32_t(shape.size());
    q.dtype = dtype;
    q.scheme = scheme;
    q.axis = axis;
    q.group_size = uint32_t(group_size);
    q.num_scales = uint32_t(scales.size());
    std::vector<py::ssize_t> out_shape(shape.begin(), shape.end());
    py::array_t<float> out(out_shape);
    const uint64_t count = uint64_t(out.size());
    float *dst = out.mutable_data();
    check(maybe_released(count * 4 >= kReleaseGilBytes, [&] { return tenso_dequantize(dst, count, &q); }));
    return std::move(out);
}

std::unique_ptr<Value> value_strings(py::handle offsets_obj, py::handle payload) {
    py::array offsets = contiguous(offsets_obj, py::dtype::of<uint64_t>());
    if (offsets.ndim() != 1 || offsets.size() < 1)
        raise_value_error("string offsets must be 1-D with count + 1 entries");
    auto v = std::make_unique<Value>();
    BufferHold &body = v->hold(payload);
    const auto *offs = static_cast<const uint64_t *>(offsets.data());
    const uint64_t count = uint64_t(offsets.size()) - 1;
    tenso_value *raw = nullptr;
    check(tenso_value_new_strings(&raw, count, offs, body.data(), body.size()));
    v->value.reset(raw);
    v->keep.push_back(std::move(offsets));
    return v;
}

std::unique_ptr<Value> value_ragged(py::handle flat, uint64_t count, py::handle offsets_obj) {
    TensorArg ta;
    prepare_tensor(ta, flat, false);
    py::array offsets = contiguous(offsets_obj, py::dtype::of<uint64_t>());
    // libtenso reads count + 1 offsets: check the array holds them.
    if (offsets.ndim() != 1 || uint64_t(offsets.size()) != count + 1)
        raise_value_error("Offsets length " + std::to_string(offsets.size()) + " != count+1 (" +
                          std::to_string(count + 1) + ")");
    tenso_value *raw = nullptr;
    check(tenso_value_new_ragged(&raw, &ta.t, count, static_cast<const uint64_t *>(offsets.data())));
    auto v = std::make_unique<Value>();
    v->value.reset(raw);
    v->keep.push_back(std::move(ta.arr));
    v->keep.push_back(std::move(offsets));
    return v;
}

std::unique_ptr<Value> value_packet(py::handle data) {
    auto v = std::make_unique<Value>();
    BufferHold &b = v->hold(data);
    tenso_value *raw = nullptr;
    check(tenso_value_new_packet(&raw, b.data(), b.size()));
    v->value.reset(raw);
    return v;
}

void bundle_insert(Value &self, py::handle key, py::object child) {
    if (!PyUnicode_Check(key.ptr())) raise_type_error("bundle keys must be str, not " + type_name(key));
    Py_ssize_t len = 0;
    const char *utf8 = PyUnicode_AsUTF8AndSize(key.ptr(), &len);
    if (!utf8) throw py::error_already_set();
    Value &c = child.cast<Value &>();
    check(tenso_bundle_insert(self.value.get(), utf8, size_t(len), c.get()));
    // The bundle copied the child's description; the memory it borrows is the child's to keep.
    self.keep.push_back(std::move(child));
}

py::object value_dumps(const Value &self, bool check_integrity, bool compress, int64_t alignment, bool pad,
                       uint32_t threads) {
    tenso_encode_options o = make_options(check_integrity, compress, alignment, threads);
    const tenso_value *v = self.get();
    return encode_bytes([&](size_t *b) { return tenso_value_dumps_bound(b, v, &o); },
                        [&](void *dst, size_t cap, size_t *w) { return tenso_value_dumps_into(dst, cap, w, v, &o); },
                        [&](tenso_buffer *b) { return tenso_value_dumps(b, v, &o); }, pad, o.alignment);
}

uint64_t value_write_fd(const Value &self, py::handle fd_obj, bool check_integrity, bool compress, int64_t alignment) {
    tenso_encode_options o = make_options(check_integrity, compress, alignment);
    const int fd = fd_of(fd_obj);
    uint64_t written = 0;
    check(maybe_released(true, [&] { return tenso_value_write_fd(&written, fd, self.get(), &o); }));
    return written;
}

// A piece of a packet that is the caller's own memory (tenso_value_write_cb's borrowed pieces),
// exported through the buffer protocol. It holds the Value, which holds the arrays it borrows,
// so a memoryview of it stays valid however long the sender queues it.
struct Piece {
    py::object owner;
    const uint8_t *data;
    size_t len;
};

// The packet as pieces, in order: bytes for what libtenso builds (headers, padding, footers,
// compressed bodies), read-only memoryviews of the arrays themselves for the bodies.
py::list value_pieces(py::object self_obj, bool check_integrity, bool compress, int64_t alignment) {
    const Value &self = self_obj.cast<const Value &>();
    tenso_encode_options o = make_options(check_integrity, compress, alignment);
    struct Collected {
        const uint8_t *borrowed;  // nullptr: the bytes are in `copy`
        size_t len;
        std::string copy;
    };
    std::vector<Collected> got;
    auto take = [](const void *data, size_t len, int borrowed, void *user) -> int {
        auto *out = static_cast<std::vector<Collected> *>(user);
        const auto *b = static_cast<const uint8_t *>(data);
        if (borrowed) out->push_back({b, len, {}});
        else out->push_back({nullptr, len, std::string(reinterpret_cast<const char *>(b), len)});
        return 0;
    };
    const tenso_value *v = self.get();
    check(maybe_released(true, [&] { return tenso_value_write_cb(nullptr, v, &o, take, &got); }));
    py::list pieces;
    for (Collected &c : got) {
        if (c.borrowed) pieces.append(py::memoryview(py::cast(Piece{self_obj, c.borrowed, c.len})));
        else pieces.append(py::bytes(c.copy));
    }
    return pieces;
}

void value_save_file(const Value &self, const std::string &path, bool check_integrity, bool compress,
                     int64_t alignment) {
    tenso_encode_options o = make_options(check_integrity, compress, alignment);
    check(maybe_released(true, [&] { return tenso_value_save_file(path.c_str(), self.get(), &o); }));
}

}  // namespace

void init_encode(py::module_ &m) {
    py::class_<PacketBuffer>(m, "PacketBuffer", py::buffer_protocol(),
                             "A large packet in libtenso's memory, exported read-only (what dumps' memoryview "
                             "points into); its pages are kept for the next packet when it goes.")
        .def_buffer([](PacketBuffer &p) {
            return py::buffer_info(p.b.data, 1, "B", 1, {py::ssize_t(p.b.size)}, {py::ssize_t(1)}, true);
        })
        .def("__len__", [](const PacketBuffer &p) { return p.b.size; });
    m.def(
        "dumps_array",
        [](py::handle arr, bool strict, bool check_integrity, bool compress, int64_t alignment, bool pad,
           uint32_t threads) {
            tenso_encode_options o = make_options(check_integrity, compress, alignment, threads);
            TensorArg ta;
            prepare_tensor(ta, arr, strict);
            return encode_bytes(
                [&](size_t *b) { return tenso_dumps_bound(b, &ta.t, &o); },
                [&](void *dst, size_t cap, size_t *w) { return tenso_dumps_into(dst, cap, w, &ta.t, &o); },
                [&](tenso_buffer *b) { return tenso_dumps(b, &ta.t, &o); }, pad, o.alignment);
        },
        py::arg("array"), py::arg("strict") = false, py::arg("check_integrity") = false, py::arg("compress") = false,
        py::arg("alignment") = 64, py::arg("pad") = true, py::arg("threads") = 0,
        "Encodes one numpy array. pad=True: a memoryview of exactly the packet, which starts 64-byte "
        "aligned in its bytes object; pad=False: bytes holding exactly the packet.");
    m.def(
        "write_array_fd",
        [](py::handle arr, py::handle fd_obj, bool strict, bool check_integrity, bool compress, int64_t alignment) {
            tenso_encode_options o = make_options(check_integrity, compress, alignment);
            TensorArg ta;
            prepare_tensor(ta, arr, strict);
            const int fd = fd_of(fd_obj);
            uint64_t written = 0;
            check(maybe_released(true, [&] { return tenso_write_fd(&written, fd, &ta.t, &o); }));
            return written;
        },
        py::arg("array"), py::arg("fd"), py::arg("strict") = false, py::arg("check_integrity") = false,
        py::arg("compress") = false, py::arg("alignment") = 64,
        "Writes one array's packet to a file descriptor with vectored I/O (the body is never copied); "
        "returns the bytes written.");
    m.def(
        "save_array_file",
        [](const std::string &path, py::handle arr, bool strict, bool check_integrity, bool compress,
           int64_t alignment) {
            tenso_encode_options o = make_options(check_integrity, compress, alignment);
            TensorArg ta;
            prepare_tensor(ta, arr, strict);
            check(maybe_released(true, [&] { return tenso_save_file(path.c_str(), &ta.t, &o); }));
        },
        py::arg("path"), py::arg("array"), py::arg("strict") = false, py::arg("check_integrity") = false,
        py::arg("compress") = false, py::arg("alignment") = 64, "Saves one array's packet atomically at path.");

    m.def("dequantize", &dequantize, py::arg("data"), py::arg("scales"), py::arg("zero_points"), py::arg("shape"),
          py::arg("dtype_code"), py::arg("scheme"), py::arg("axis"), py::arg("group_size"),
          "tenso_dequantize: float32 values of a quantized tensor given by its parts.");

    py::class_<Piece>(m, "Piece", py::buffer_protocol(),
                      "A body piece of Value.pieces(): the array memory, kept alive while exported.")
        .def_buffer([](Piece &p) {
            return py::buffer_info(const_cast<uint8_t *>(p.data), 1, py::format_descriptor<uint8_t>::format(), 1,
                                   {py::ssize_t(p.len)}, {py::ssize_t(1)}, true);
        });

    py::class_<Value>(m, "Value",
                      "A tenso_value: something to encode (tensor, bundle, sparse, quantized, strings, ragged, "
                      "packet). It borrows the memory of the objects it was built from and keeps them alive.")
        .def_static("tensor", &value_tensor, py::arg("array"), py::arg("strict") = false)
        .def_static("bundle",
                    [] {
                        auto v = std::make_unique<Value>();
                        tenso_value *raw = nullptr;
                        check(tenso_value_new_bundle(&raw));
                        v->value.reset(raw);
                        return v;
                    })
        .def_static("sparse", &value_sparse, py::arg("kind"), py::arg("shape"), py::arg("a"), py::arg("b"),
                    py::arg("c"))
        .def_static("quantized", &value_quantized, py::arg("data"), py::arg("scales"), py::arg("zero_points"),
                    py::arg("shape"), py::arg("dtype_code"), py::arg("scheme"), py::arg("axis"), py::arg("group_size"))
        .def_static("quantize", &value_quantize, py::arg("array"), py::arg("qdtype"), py::arg("scheme"),
                    py::arg("axis"), py::arg("group_size"))
        .def_static("strings", &value_strings, py::arg("offsets"), py::arg("payload"))
        .def_static("ragged", &value_ragged, py::arg("flat"), py::arg("count"), py::arg("offsets"))
        .def_static("packet", &value_packet, py::arg("data"))
        .def("insert", &bundle_insert, py::arg("key"), py::arg("child"))
        .def("__len__", [](const Value &self) { return tenso_bundle_count(self.get()); })
        .def("quantized_parts", &quantized_parts)
        .def("dumps", &value_dumps, py::arg("check_integrity") = false, py::arg("compress") = false,
             py::arg("alignment") = 64, py::arg("pad") = true, py::arg("threads") = 0)
        .def("write_fd", &value_write_fd, py::arg("fd"), py::arg("check_integrity") = false,
             py::arg("compress") = false, py::arg("alignment") = 64)
        .def("pieces", &value_pieces, py::arg("check_integrity") = false, py::arg("compress") = false,
             py::arg("alignment") = 64,
             "The packet as a list of pieces (tenso_value_write_cb): bytes objects for what libtenso builds, "
             "read-only memoryviews of the arrays' own memory for their bodies (never copied).")
        .def("save_file", &value_save_file, py::arg("path"), py::arg("check_integrity") = false,
             py::arg("compress") = false, py::arg("alignment") = 64);
}

}  // namespace tpy
