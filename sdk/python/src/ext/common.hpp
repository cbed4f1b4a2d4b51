// common.hpp - shared pieces of the tenso._tenso extension: status -> exception mapping, dtype
// mapping, RAII holders for tenso handles, and the owner object that numpy arrays point at.
//
// Only the public C header is included: the SDK sees libtenso exactly as any other consumer.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tenso/tenso.h"

// Compile-time gate (STYLE.md rule 12): the SDK is written against the 1.x ABI.
#if TENSO_VERSION_MAJOR != 1
#error "tenso's Python SDK is written for libtenso 1.x"
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tenso packets are little-endian; the zero-copy views assume a little-endian host"
#endif

namespace py = pybind11;

namespace tpy {

// Work on buffers at least this large runs with the GIL released; below it the release and
// re-acquire would cost more than the work.
constexpr size_t kReleaseGilBytes = 64 * 1024;

// ---- errors -------------------------------------------------------------------------------

// Raises the exception class registered for `status` (tenso.errors._BY_STATUS) with the
// calling thread's tenso_last_error() text, and sets its `status` attribute.
[[noreturn]] void raise_status(tenso_status status);
// As raise_status, with a message of our own.
[[noreturn]] void raise_error(tenso_status status, const std::string &message);
// TensoValueError (a ValueError) with `message`.
[[noreturn]] void raise_value_error(const std::string &message);
// TensoTypeError (a TypeError) with `message`.
[[noreturn]] void raise_type_error(const std::string &message);

inline void check(tenso_status status) {
    if (status != TENSO_OK) raise_status(status);
}

// Loads tenso.errors and remembers its status -> class table. Called once at import.
void init_errors();

// ---- dtypes -------------------------------------------------------------------------------

// The wire dtype for a numpy dtype; raises ValueError ("Unsupported dtype: <name>", as upstream)
// for dtypes tenso has no code for, and for non-native byte order.
tenso_dtype dtype_code(const py::dtype &dt);
// The numpy dtype for a dense wire dtype (bfloat16 comes from ml_dtypes, imported on first use).
py::dtype numpy_dtype(tenso_dtype code);

// A dense tensor described for libtenso: the (contiguous) array whose memory is borrowed and the
// tenso_tensor pointing into it. `arr` is a py::object, not a py::array: py::array's default
// constructor makes an empty numpy array, a cost on every encode (write_stream, post_tensor).
struct TensorArg {
    py::object arr;
    uint64_t shape[TENSO_MAX_NDIM] = {};
    tenso_tensor t{};
};
// Fills `out` from a numpy array with upstream's checks (encode.cpp); `strict` refuses a
// non-contiguous array instead of copying it.
void prepare_tensor(TensorArg &out, py::handle obj, bool strict);

// ---- RAII holders for tenso handles ---------------------------------------------------------

struct ViewFree {
    void operator()(tenso_view *v) const noexcept { tenso_view_free(v); }
};
struct ValueFree {
    void operator()(tenso_value *v) const noexcept { tenso_value_free(v); }
};
using ViewPtr = std::unique_ptr<tenso_view, ViewFree>;
using ValuePtr = std::unique_ptr<tenso_value, ValueFree>;

// A Py_buffer that is released when the holder goes away (the GIL is held then: holders live in
// Python objects, which are destroyed under the GIL).
class BufferHold {
public:
    BufferHold() = default;
    BufferHold(const BufferHold &) = delete;
    BufferHold &operator=(const BufferHold &) = delete;
    ~BufferHold() { release(); }
    // PyObject_GetBuffer with `flags`; raises the Python error (TypeError/BufferError) on failure.
    void acquire(py::handle obj, int flags);
    void release() noexcept {
        if (held_) {
            PyBuffer_Release(&buf_);
            held_ = false;
        }
    }
    const uint8_t *data() const { return static_cast<const uint8_t *>(buf_.buf); }
    uint8_t *mutable_data() const { return static_cast<uint8_t *>(buf_.buf); }
    size_t size() const { return size_t(buf_.len); }
    bool held() const { return held_; }
    PyObject *obj() const { return held_ ? buf_.obj : nullptr; }

private:
    Py_buffer buf_{};
    bool held_ = false;
};

// ---- Value: a tenso_value and what keeps its borrowed memory alive ---------------------------

// A libtenso handle (segment, cache, archive, writer) owned by a Python object. Calls that
// release the GIL hold a lease() for their duration, so close() on another thread cannot free
// the handle under them: close() drops the object's reference and the last lease frees it.
// get() is for calls that keep the GIL throughout (close cannot run meanwhile).
template <class T, void (*Free)(T *)>
class Handle {
public:
    Handle(T *h, const char *closed_message) : h_(h, Free), closed_(closed_message) {}
    T *get() const { return lease_ref().get(); }
    std::shared_ptr<T> lease() const { return lease_ref(); }
    bool closed() const { return !h_; }
    void close() {
        std::shared_ptr<T> last = std::move(h_);
        py::gil_scoped_release release;  // freeing may wait for a process-shared lock or fsync
        last.reset();
    }

private:
    const std::shared_ptr<T> &lease_ref() const {
        if (!h_) raise_value_error(closed_);
        return h_;
    }
    std::shared_ptr<T> h_;
    const char *closed_;
};

// Something to encode (the Python class tenso._tenso.Value). It borrows the memory of the
// objects it was built from and keeps them alive; shm.cpp and archive.cpp encode from it too.
class Value {
public:
    ValuePtr value;
    std::vector<py::object> keep;                      // arrays and child Values borrowed from
    std::vector<std::unique_ptr<BufferHold>> buffers;  // exported buffers borrowed from

    const tenso_value *get() const { return value.get(); }
    // Exports `obj`'s buffer (C-contiguous) and keeps it for the Value's lifetime.
    BufferHold &hold(py::handle obj);
};

// An fd argument (ValueError when negative).
int fd_of(py::handle fd);
// A shape from a sequence of ints (ValueError for negative dimensions, too many dimensions).
std::vector<uint64_t> shape_from(py::handle seq);
// A shape as a tuple of ints.
py::tuple shape_tuple(const uint64_t *shape, uint32_t ndim);

// Encode options from upstream's keyword arguments; ValueError for a bad alignment.
tenso_encode_options make_options(bool check_integrity, bool compress, int64_t alignment, uint32_t threads = 0);

// ---- the owner of decoded memory -------------------------------------------------------------

// A decoded packet: the tenso_view and, when the view borrows the caller's bytes, the exported
// buffer that keeps those bytes alive and unchanged in size. Every array that loads() returns
// has this object as its numpy `base`, so the source lives exactly as long as any view of it.
class Packet {
public:
    ViewPtr view;
    BufferHold source;
    const tenso_view *root() const { return view.get(); }
};

// Options of a decode walk.
struct DecodeMode {
    bool copy = false;       // writeable copies instead of views
    bool align = false;      // copy dense views whose data is not aligned to the packet's alignment
    bool writeable = false;  // writeable views: for memory no one else sees (a stream decoder's)
};

// Converts a decoded view (and its children) into Python objects; arrays are views owned by
// `owner` (a Packet) unless mode.copy.
py::object to_python(const tenso_view *v, py::handle owner, const DecodeMode &mode);

// tenso_decode_options from tenso.DecodeOptions._fields() (a tuple of ten integers: flags,
// max_ndim, max_depth, max_elements, max_packet_bytes, max_decoded_bytes, max_entries,
// timeout_ms, threads, max_inflation); false (and `o` untouched) for None, the library's defaults.
bool decode_options_from(py::handle fields, tenso_decode_options &o);

// Decodes the packet at the start of `data` (any C-contiguous buffer) into a new Packet object
// that borrows it; `opts` NULL for the defaults.
py::object decode_packet(py::handle data, const tenso_decode_options *opts = nullptr);

// Takes ownership of `v` (a view that owns or pins its memory: a file mapping, a shared-memory
// segment, a cache entry) and converts it. The arrays' numpy base is a Packet holding the view,
// so the memory (and a cache pin) is released when the last array and every view of it is
// garbage collected; with `copy` the Packet goes at once.
py::object view_to_python(tenso_view *v, bool copy, bool align = false);
py::object view_to_python(tenso_view *v, const DecodeMode &mode);

// tenso_inspect's fields as a dict: inspect() and the cache's info() report the same keys.
py::dict packet_info_dict(const tenso_packet_info &info);

// Factories the Python layer registers for composite kinds (QuantizedTensor, StringTensor,
// scipy.sparse matrices).
struct Factories {
    py::object quantized, strings, sparse;
};
Factories &factories();

// A DLPack capsule owning `m`: "dltensor_versioned", or with `legacy` a "dltensor" whose
// deleter releases `m` (for consumers that ask for no max_version). Raises (after releasing `m`)
// when the capsule cannot be made.
py::capsule dlpack_capsule(DLManagedTensorVersioned *m, bool legacy);

// ---- module parts -----------------------------------------------------------------------------

void init_encode(py::module_ &m);
void init_decode(py::module_ &m);
void init_dlpack(py::module_ &m);
void init_shm(py::module_ &m);
void init_archive(py::module_ &m);
void init_stream(py::module_ &m);
void init_gpu(py::module_ &m);
void init_net(py::module_ &m);

}  // namespace tpy
