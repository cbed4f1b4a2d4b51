// tenso.cpp - the extern "C" firewall for the core API (tenso.h). Every entry point is
// noexcept, checks its pointers, runs the engine between TENSO_API_BEGIN/TENSO_API_END
// (firewall.hpp) and never lets C++ types cross the boundary. shm.cpp and archive.cpp do the
// same for their headers; convert.* turns the public structs into the engine's types and back.
// Rules (limits, layouts, conventions) live in impl/, never here.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include <pthread.h>

#include "convert.hpp"
#include "firewall.hpp"

#include "format/composites.hpp"
#include "format/dlpack.hpp"
#include "format/spare_view.hpp"
#include "io/io.hpp"

namespace tenso::capi {

namespace {
// The calling thread's message. Every call clears it, so it is plain data in initial-exec TLS:
// one store. (A thread_local std::string needs a guard variable for its destructor, which the
// general TLS model reaches through __tls_get_addr on every call; a 24-byte slot fits the
// static TLS reserve a dlopen()ed library gets.) The text is on the heap, grown on failure, and
// freed at thread exit by the destructor of a pthread key that holds it.
struct ErrorSlot {
    char *text;  // null until this thread's first failure
    size_t len, cap;
};
thread_local ErrorSlot t_error __attribute__((tls_model("initial-exec")));
pthread_key_t g_error_key;
bool g_error_key_ok = false;

void free_error_text(void *text) {
    std::free(text);
    t_error = ErrorSlot{};  // runs on the exiting thread: a later failure allocates anew
}

// Room for n bytes and a NUL; false when there is none (the message is then dropped).
bool reserve_error(size_t n) {
    ErrorSlot &e = t_error;
    if (n < e.cap) return true;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    ::pthread_once(&once, [] { g_error_key_ok = ::pthread_key_create(&g_error_key, free_error_text) == 0; });
    const size_t cap = std::max<size_t>(n + 1, 256);
    char *p = static_cast<char *>(std::realloc(e.text, cap));
    if (!p) return false;
    e.text = p;
    e.cap = cap;
    if (g_error_key_ok) ::pthread_setspecific(g_error_key, p);
    return true;
}

// When the library is unloaded (dlclose), its key must not call back into unmapped code at a
// later thread exit: the key goes, and what threads still hold is left to the process.
__attribute__((destructor)) void drop_error_key() {
    if (g_error_key_ok) ::pthread_key_delete(g_error_key);
    g_error_key_ok = false;
}
}  // namespace

tenso_status set_error(tenso_status st, const char *msg) noexcept {
    const size_t n = std::strlen(msg);
    ErrorSlot &e = t_error;
    e.len = 0;
    if (reserve_error(n)) {
        std::memcpy(e.text, msg, n + 1);
        e.len = n;
    }
    return st;
}
void clear_error() noexcept { t_error.len = 0; }
const char *last_error() noexcept { return t_error.len ? t_error.text : ""; }

}  // namespace tenso::capi

using namespace tenso::capi;

/* ---------------------------------------------------------------- version, errors, dtypes */

namespace {
// A code looked up by name (0: unknown); *out is untouched on failure.
tenso_status code_from_name(int32_t *out, const char *name, int (*lookup)(const std::string &), tenso_status unknown,
                            const char *what) {
    CHECK_ARG(out);
    CHECK_ARG(name);
    TENSO_API_BEGIN
    const int code = lookup(name);
    if (!code) tenso::fail(unknown, std::string("unknown ") + what + " name '" + name + "'");
    *out = code;
    TENSO_API_END
}
}  // namespace

extern "C" {

uint32_t tenso_version_number(void) { return TENSO_VERSION_NUMBER; }
const char *tenso_version_string(void) { return TENSO_VERSION_STRING; }
uint32_t tenso_protocol_version(void) { return TENSO_PROTOCOL_VERSION; }

const char *tenso_last_error(void) { return last_error(); }
void tenso_error_clear(void) { clear_error(); }

const char *tenso_status_name(tenso_status s) {
    switch (s) {
    case TENSO_OK: return "TENSO_OK";
    case TENSO_E_INVALID_ARGUMENT: return "TENSO_E_INVALID_ARGUMENT";
    case TENSO_E_BUFFER_TOO_SMALL: return "TENSO_E_BUFFER_TOO_SMALL";
    case TENSO_E_TRUNCATED: return "TENSO_E_TRUNCATED";
    case TENSO_E_BAD_MAGIC: return "TENSO_E_BAD_MAGIC";
    case TENSO_E_UNSUPPORTED_VERSION: return "TENSO_E_UNSUPPORTED_VERSION";
    case TENSO_E_BAD_DTYPE: return "TENSO_E_BAD_DTYPE";
    case TENSO_E_TOO_MANY_DIMS: return "TENSO_E_TOO_MANY_DIMS";
    case TENSO_E_TOO_MANY_ELEMENTS: return "TENSO_E_TOO_MANY_ELEMENTS";
    case TENSO_E_CHECKSUM: return "TENSO_E_CHECKSUM";
    case TENSO_E_COMPRESSION: return "TENSO_E_COMPRESSION";
    case TENSO_E_BAD_BUNDLE: return "TENSO_E_BAD_BUNDLE";
    case TENSO_E_MALFORMED: return "TENSO_E_MALFORMED";
    case TENSO_E_LIMIT: return "TENSO_E_LIMIT";
    case TENSO_E_UNSUPPORTED_KIND: return "TENSO_E_UNSUPPORTED_KIND";
    case TENSO_E_NO_MEMORY: return "TENSO_E_NO_MEMORY";
    case TENSO_E_IO: return "TENSO_E_IO";
    case TENSO_E_END_OF_STREAM: return "TENSO_E_END_OF_STREAM";
    case TENSO_E_NOT_AVAILABLE: return "TENSO_E_NOT_AVAILABLE";
    case TENSO_E_USER: return "TENSO_E_USER";
    case TENSO_E_INTERNAL: return "TENSO_E_INTERNAL";
    case TENSO_E_NOT_FOUND: return "TENSO_E_NOT_FOUND";
    case TENSO_E_EXISTS: return "TENSO_E_EXISTS";
    case TENSO_E_FULL: return "TENSO_E_FULL";
    case TENSO_E_CORRUPT: return "TENSO_E_CORRUPT";
    case TENSO_E_TIMEOUT: return "TENSO_E_TIMEOUT";
    case TENSO_E_BAD_OFFSET: return "TENSO_E_BAD_OFFSET";
    case TENSO_E_DUPLICATE_KEY: return "TENSO_E_DUPLICATE_KEY";
    case TENSO_E_BAD_UTF8: return "TENSO_E_BAD_UTF8";
    case TENSO_E_GPU_UNAVAILABLE: return "TENSO_E_GPU_UNAVAILABLE";
    case TENSO_E_GPU: return "TENSO_E_GPU";
    case TENSO_E_SHUTDOWN: return "TENSO_E_SHUTDOWN";
    case TENSO_E_CONNECTION: return "TENSO_E_CONNECTION";
    case TENSO_E_AUTH: return "TENSO_E_AUTH";
    case TENSO_E_BAD_ADDRESS: return "TENSO_E_BAD_ADDRESS";
    case TENSO_E_CANCELLED: return "TENSO_E_CANCELLED";
    default: return "TENSO_E_UNKNOWN";
    }
}

size_t tenso_dtype_itemsize(tenso_dtype dtype) { return tenso::dtype_itemsize(dtype); }
const char *tenso_dtype_name(tenso_dtype dtype) { return tenso::dtype_name(dtype); }

tenso_status tenso_dtype_from_name(tenso_dtype *out, const char *name) {
    return code_from_name(out, name, tenso::dtype_from_name, TENSO_E_BAD_DTYPE, "dtype");
}

uint32_t tenso_dtype_count(void) { return tenso::dtype_count(); }
tenso_dtype tenso_dtype_at(uint32_t index) { return tenso::dtype_at(index); }
tenso_kind tenso_dtype_kind(tenso_dtype dtype) { return tenso::dtype_kind(dtype); }
uint32_t tenso_dtype_bits(tenso_dtype dtype) { return tenso::dtype_bits(dtype); }

uint32_t tenso_kind_count(void) { return tenso::kind_count(); }
tenso_kind tenso_kind_at(uint32_t index) { return tenso::kind_at(index); }
const char *tenso_kind_name(tenso_kind kind) { return tenso::kind_name(kind); }

tenso_status tenso_kind_from_name(tenso_kind *out, const char *name) {
    return code_from_name(out, name, tenso::kind_from_name, TENSO_E_INVALID_ARGUMENT, "kind");
}

/* ---------------------------------------------------------------- buffers and options */

void tenso_buffer_dispose(tenso_buffer *buf) {
    if (!buf) return;
    tenso::free_bytes(buf->data);
    buf->data = nullptr;
    buf->size = buf->reserved = 0;
}

tenso_status tenso_encode_options_init(tenso_encode_options *opts, uint32_t version) {
    clear_error();
    CHECK_ARG(opts);
    if (version < 1 || version > TENSO_ENCODE_OPTIONS_VERSION)
        return set_error(TENSO_E_INVALID_ARGUMENT, "unknown tenso_encode_options version");
    // An older caller's struct ends before the fields its version lacks: write only what it has.
    tenso_encode_options e = TENSO_ENCODE_OPTIONS_INIT;
    e.version = version;
    std::memcpy(opts, &e, version == 1 ? offsetof(tenso_encode_options, threads) : sizeof e);
    return TENSO_OK;
}

tenso_status tenso_decode_options_init(tenso_decode_options *opts, uint32_t version) {
    clear_error();
    CHECK_ARG(opts);
    if (version < 1 || version > TENSO_DECODE_OPTIONS_VERSION)
        return set_error(TENSO_E_INVALID_ARGUMENT, "unknown tenso_decode_options version");
    // An older caller's struct ends before the fields its version lacks: write only what it has.
    tenso_decode_options d = TENSO_DECODE_OPTIONS_INIT;
    d.version = version;
    std::memcpy(opts, &d,
                version == 1   ? offsetof(tenso_decode_options, max_decoded_bytes)
                : version == 2 ? offsetof(tenso_decode_options, timeout_ms)
                : version == 3 ? offsetof(tenso_decode_options, max_inflation)
                               : sizeof d);
    return TENSO_OK;
}

}  // extern "C"

/* ---------------------------------------------------------------- encoding (shared sinks) */

namespace {

template <class Input>
tenso::Plan plan_for(const Input &in, const tenso_encode_options *opts, tenso::Plan::Mode mode) {
    tenso::Plan p(encode_options(opts), mode);
    p.add(in);
    return p;
}

template <class Input>
tenso::Plan plan_for(const Input &in, const tenso_encode_options *opts, bool measure) {
    return plan_for(in, opts, measure ? tenso::Plan::Mode::kMeasure : tenso::Plan::Mode::kCompress);
}

template <class Input>
tenso_status bound_of(size_t *bound_out, const Input &in, const tenso_encode_options *opts) {
    *bound_out = plan_for(in, opts, true).size();
    return TENSO_OK;
}

template <class Input>
void into(void *dst, size_t cap, size_t *written_out, const Input &in, const tenso_encode_options *opts) {
    tenso::encode_into(in, encode_options(opts), static_cast<uint8_t *>(dst), cap, written_out);
}

// Written at its bound; a packet that came out under half of it moves to memory of its own size
// (a copy of the compressed bytes only), so a small packet does not hold a large allocation.
template <class Input>
void alloc(tenso_buffer *out, const Input &in, const tenso_encode_options *opts) {
    tenso::Plan p = plan_for(in, opts, tenso::Plan::Mode::kInPlace);
    std::unique_ptr<uint8_t, decltype(&tenso::free_bytes)> mem(tenso::alloc_bytes(p.size()), &tenso::free_bytes);
    const size_t n = p.write_to(mem.get());
    size_t held = p.size();
    if (n < held / 2) {
        std::unique_ptr<uint8_t, decltype(&tenso::free_bytes)> tight(tenso::alloc_bytes(n), &tenso::free_bytes);
        std::memcpy(tight.get(), mem.get(), n);
        mem = std::move(tight);
        held = n;
    }
    tenso_buffer_dispose(out);
    out->size = n;
    out->reserved = held;
    out->data = mem.release();
}

template <class Input>
void to_fd(uint64_t *written_out, int fd, const Input &in, const tenso_encode_options *opts) {
    uint64_t w = 0;
    struct Report {
        uint64_t *out, &w;
        ~Report() {
            if (out) *out = w;
        }
    } report{written_out, w};
    tenso::encode_to_fd(in, encode_options(opts), fd, &w);
}

template <class Input>
void to_file(const char *path, const Input &in, const tenso_encode_options *opts) {
    tenso::Plan p = plan_for(in, opts, false);  // fails before the temporary is created
    tenso::save_atomic(path, [&](int fd) { p.write_fd(fd, nullptr); });
}

}  // namespace

extern "C" {

/* ---------------------------------------------------------------- dense encoding */

tenso_status tenso_dumps_bound(size_t *bound_out, const tenso_tensor *t, const tenso_encode_options *opts) {
    CHECK_ARG(bound_out);
    CHECK_ARG(t);
    TENSO_API_BEGIN
    return bound_of(bound_out, tensor(t), opts);
    TENSO_API_END
}

tenso_status tenso_dumps_into(void *dst, size_t dst_capacity, size_t *written_out, const tenso_tensor *t,
                              const tenso_encode_options *opts) {
    CHECK_ARG(dst || !dst_capacity);
    CHECK_ARG(written_out);
    CHECK_ARG(t);
    TENSO_API_BEGIN
    into(dst, dst_capacity, written_out, tensor(t), opts);
    TENSO_API_END
}

tenso_status tenso_dumps(tenso_buffer *out, const tenso_tensor *t, const tenso_encode_options *opts) {
    CHECK_ARG(out);
    CHECK_ARG(t);
    TENSO_API_BEGIN
    alloc(out, tensor(t), opts);
    TENSO_API_END
}

tenso_status tenso_write_fd(uint64_t *written_out, int fd, const tenso_tensor *t, const tenso_encode_options *opts) {
    if (written_out) *written_out = 0;
    CHECK_ARG(t);
    TENSO_API_BEGIN
    to_fd(written_out, fd, tensor(t), opts);
    TENSO_API_END
}

tenso_status tenso_save_file(const char *path, const tenso_tensor *t, const tenso_encode_options *opts) {
    CHECK_ARG(path);
    CHECK_ARG(t);
    TENSO_API_BEGIN
    to_file(path, tensor(t), opts);
    TENSO_API_END
}

/* ---------------------------------------------------------------- values */

tenso_status tenso_value_new_tensor(tenso_value **out, const tenso_tensor *t) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(t);
    TENSO_API_BEGIN
    auto *v = new tenso_value();
    v->v.type = tenso::Value::kTensor;
    try {
        v->v.tensor = tensor(t);
    } catch (...) {
        delete v;
        throw;
    }
    *out = v;
    TENSO_API_END
}

tenso_status tenso_value_new_packet(tenso_value **out, const void *packet, size_t len) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(packet);
    TENSO_API_BEGIN
    *out = new tenso_value{tenso::packet_value(static_cast<const uint8_t *>(packet), len)};
    TENSO_API_END
}

tenso_status tenso_value_new_bundle(tenso_value **out) {
    CHECK_ARG(out);
    TENSO_API_BEGIN
    *out = new tenso_value();
    (*out)->v.type = tenso::Value::kBundle;
    TENSO_API_END
}

tenso_status tenso_bundle_insert(tenso_value *bundle, const char *key, size_t key_len, const tenso_value *child) {
    CHECK_ARG(bundle);
    CHECK_ARG(key || !key_len);
    CHECK_ARG(child);
    TENSO_API_BEGIN
    tenso::bundle_insert(bundle->v, std::string(key ? key : "", key_len), child->v);
    TENSO_API_END
}

uint32_t tenso_bundle_count(const tenso_value *bundle) {
    return bundle && bundle->v.type == tenso::Value::kBundle ? uint32_t(bundle->v.entries.size()) : 0;
}

void tenso_value_free(tenso_value *v) { delete v; }

tenso_status tenso_value_dumps_bound(size_t *bound_out, const tenso_value *v, const tenso_encode_options *opts) {
    CHECK_ARG(bound_out);
    CHECK_ARG(v);
    TENSO_API_BEGIN
    return bound_of(bound_out, v->v, opts);
    TENSO_API_END
}

tenso_status tenso_value_dumps_into(void *dst, size_t dst_capacity, size_t *written_out, const tenso_value *v,
                                    const tenso_encode_options *opts) {
    CHECK_ARG(dst || !dst_capacity);
    CHECK_ARG(written_out);
    CHECK_ARG(v);
    TENSO_API_BEGIN
    into(dst, dst_capacity, written_out, v->v, opts);
    TENSO_API_END
}

tenso_status tenso_value_dumps(tenso_buffer *out, const tenso_value *v, const tenso_encode_options *opts) {
    CHECK_ARG(out);
    CHECK_ARG(v);
    TENSO_API_BEGIN
    alloc(out, v->v, opts);
    TENSO_API_END
}

tenso_status tenso_value_write_fd(uint64_t *written_out, int fd, const tenso_value *v,
                                  const tenso_encode_options *opts) {
    if (written_out) *written_out = 0;
    CHECK_ARG(v);
    TENSO_API_BEGIN
    to_fd(written_out, fd, v->v, opts);
    TENSO_API_END
}

tenso_status tenso_value_write_cb(uint64_t *written_out, const tenso_value *v, const tenso_encode_options *opts,
                                  tenso_write_fn write, void *user) {
    if (written_out) *written_out = 0;
    CHECK_ARG(v);
    CHECK_ARG(write);
    TENSO_API_BEGIN
    struct Cb {
        tenso_write_fn write;
        void *user;
    } cb{write, user};
    plan_for(v->v, opts, false)
        .write_each(
            [](const uint8_t *p, size_t n, bool borrowed, void *ctx) {
                auto *c = static_cast<Cb *>(ctx);
                return c->write(p, n, borrowed ? 1 : 0, c->user) == 0;
            },
            &cb, written_out);
    TENSO_API_END
}

tenso_status tenso_value_save_file(const char *path, const tenso_value *v, const tenso_encode_options *opts) {
    CHECK_ARG(path);
    CHECK_ARG(v);
    TENSO_API_BEGIN
    to_file(path, v->v, opts);
    TENSO_API_END
}

}  // extern "C"

/* ---------------------------------------------------------------- composite kinds */

namespace {

tenso_value *new_value(tenso::Value v) { return new tenso_value{std::move(v)}; }

tenso_quantized describe(const tenso::QuantDesc &q, const uint64_t *shape, uint32_t ndim) {
    tenso_quantized out;
    out.data = q.data;
    out.nbytes = q.nbytes;
    out.shape = ndim ? shape : nullptr;
    out.scales = q.scales;
    out.zero_points = q.zero_points;
    out.ndim = ndim;
    out.dtype = q.dtype;
    out.scheme = q.scheme;
    out.axis = int32_t(q.axis);
    out.group_size = q.group_size;
    out.num_scales = q.num_scales;
    return out;
}

// The caller's description, read once: the shape is copied into `shape` and used from there.
tenso::QuantDesc from_public(const tenso_quantized *qp, uint64_t (&shape)[TENSO_MAX_NDIM]) {
    const tenso_quantized q = *qp;
    if (q.ndim > TENSO_MAX_NDIM) tenso::fail(TENSO_E_TOO_MANY_DIMS, "ndim exceeds 32");
    if (q.ndim && !q.shape) tenso::fail(TENSO_E_INVALID_ARGUMENT, "shape is NULL");
    std::copy(q.shape, q.shape + q.ndim, shape);
    tenso::QuantDesc d;
    d.dtype = q.dtype;
    d.scheme = q.scheme;
    d.group_size = q.group_size;
    d.num_scales = q.num_scales;
    d.ndim = q.ndim;
    d.shape = shape;
    d.scales = q.scales;
    d.zero_points = q.zero_points;
    d.data = static_cast<const uint8_t *>(q.data);
    d.nbytes = q.nbytes;
    tenso::check_described(d, q.axis, TENSO_E_INVALID_ARGUMENT);
    return d;
}

}  // namespace

extern "C" {

tenso_status tenso_value_new_sparse(tenso_value **out, tenso_kind format, uint32_t ndim, const uint64_t *shape,
                                    const tenso_tensor *a, const tenso_tensor *b, const tenso_tensor *c) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(shape);
    CHECK_ARG(a);
    CHECK_ARG(b);
    CHECK_ARG(c);
    if (format != TENSO_KIND_SPARSE_COO && format != TENSO_KIND_SPARSE_CSR && format != TENSO_KIND_SPARSE_CSC)
        return set_error(TENSO_E_INVALID_ARGUMENT, "format must be TENSO_KIND_SPARSE_COO, _CSR or _CSC");
    TENSO_API_BEGIN
    const tenso::Tensor parts[3] = {tensor(a), tensor(b), tensor(c)};
    *out = new_value(tenso::sparse_value(format, ndim, shape, parts));
    TENSO_API_END
}

tenso_status tenso_view_component(const tenso_view **child_out, const tenso_view *v, uint32_t index) {
    clear_error();
    CHECK_ARG(child_out);
    *child_out = nullptr;
    CHECK_ARG(v);
    int k = V(v)->kind;
    if (k != TENSO_KIND_SPARSE_COO && k != TENSO_KIND_SPARSE_CSR && k != TENSO_KIND_SPARSE_CSC)
        return set_error(TENSO_E_UNSUPPORTED_KIND, "view is not a sparse matrix");
    if (index >= 3) return set_error(TENSO_E_INVALID_ARGUMENT, "a sparse view has components 0, 1 and 2");
    *child_out = H(&V(v)->entries[index].view);
    return TENSO_OK;
}

tenso_status tenso_quantize(tenso_value **out, const tenso_tensor *input, tenso_dtype qdtype, int32_t scheme,
                            int32_t axis, uint32_t group_size) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(input);
    TENSO_API_BEGIN
    *out = new_value(tenso::quantize_value(tensor(input), qdtype, scheme, axis, group_size));
    TENSO_API_END
}

tenso_status tenso_value_new_quantized(tenso_value **out, const tenso_quantized *q) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(q);
    TENSO_API_BEGIN
    uint64_t shape[TENSO_MAX_NDIM];
    *out = new_value(tenso::quantized_value(from_public(q, shape)));
    TENSO_API_END
}

tenso_status tenso_value_quantized(tenso_quantized *out, const tenso_value *v) {
    clear_error();
    CHECK_ARG(out);
    CHECK_ARG(v);
    if (v->v.type != tenso::Value::kQuantized) return set_error(TENSO_E_UNSUPPORTED_KIND, "value is not quantized");
    *out = describe(v->v.quant, v->v.tensor.shape, v->v.tensor.ndim);
    return TENSO_OK;
}

tenso_status tenso_view_quantized(tenso_quantized *out, const tenso_view *v) {
    clear_error();
    CHECK_ARG(out);
    CHECK_ARG(v);
    const tenso::View &w = *V(v);
    if (w.kind != TENSO_KIND_QUANTIZED) return set_error(TENSO_E_UNSUPPORTED_KIND, "view is not quantized");
    *out = describe(tenso::quant_of(w), w.shape.data(), w.ndim);
    return TENSO_OK;
}

tenso_status tenso_dequantize(float *dst, uint64_t dst_count, const tenso_quantized *q) {
    CHECK_ARG(q);
    CHECK_ARG(dst || !dst_count);
    TENSO_API_BEGIN
    uint64_t shape[TENSO_MAX_NDIM];
    tenso::dequantize_into(dst, dst_count, from_public(q, shape));
    TENSO_API_END
}

tenso_status tenso_value_new_strings(tenso_value **out, uint64_t count, const uint64_t *offsets, const void *payload,
                                     uint64_t payload_len) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(offsets);
    TENSO_API_BEGIN
    *out = new_value(tenso::strings_value(count, offsets, static_cast<const uint8_t *>(payload), payload_len));
    TENSO_API_END
}

tenso_status tenso_view_string_offsets(const uint64_t **offsets_out, const char **payload_out, const tenso_view *v) {
    clear_error();
    CHECK_ARG(offsets_out);
    CHECK_ARG(payload_out);
    CHECK_ARG(v);
    const tenso::View &w = *V(v);
    if (w.kind != TENSO_KIND_STRING && w.kind != TENSO_KIND_RAGGED)
        return set_error(TENSO_E_UNSUPPORTED_KIND, "view is not a string or ragged packet");
    *offsets_out = w.extra->offsets.data();
    *payload_out = reinterpret_cast<const char *>(w.data);
    return TENSO_OK;
}

tenso_status tenso_value_new_ragged(tenso_value **out, const tenso_tensor *flat, uint64_t count,
                                    const uint64_t *row_offsets) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(flat);
    CHECK_ARG(row_offsets);
    TENSO_API_BEGIN
    *out = new_value(tenso::ragged_value(tensor(flat), count, row_offsets));
    TENSO_API_END
}

tenso_status tenso_view_ragged(const tenso_view **flat_out, const tenso_view **offsets_out, const tenso_view *v) {
    CHECK_ARG(flat_out);
    CHECK_ARG(offsets_out);
    *flat_out = *offsets_out = nullptr;
    CHECK_ARG(v);
    TENSO_API_BEGIN
    const tenso::RaggedParts p = tenso::ragged_parts(*V(v));
    *flat_out = H(p.flat);
    *offsets_out = H(p.offsets);
    TENSO_API_END
}

tenso_status tenso_value_new_ipc_ref(tenso_value **out, const tenso_ipc_ref *ref) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(ref);
    TENSO_API_BEGIN
    tenso::IpcRef r;
    std::memcpy(r.handle, ref->handle, sizeof r.handle);
    r.byte_offset = ref->byte_offset;
    r.nbytes = ref->nbytes;
    std::memcpy(r.device_uuid, ref->device_uuid, sizeof r.device_uuid);
    *out = new_value(tenso::ipc_ref_value(r));
    TENSO_API_END
}

tenso_status tenso_view_ipc_ref(tenso_ipc_ref *out, const tenso_view *v) {
    clear_error();
    CHECK_ARG(out);
    CHECK_ARG(v);
    const tenso::View &w = *V(v);
    if (w.kind != TENSO_KIND_GPU_IPC_REF) return set_error(TENSO_E_UNSUPPORTED_KIND, "view is not a GPU IPC reference");
    const tenso::IpcRef r = tenso::read_ipc_ref(w.data);
    std::memcpy(out->handle, r.handle, sizeof out->handle);
    out->byte_offset = r.byte_offset;
    out->nbytes = r.nbytes;
    std::memcpy(out->device_uuid, r.device_uuid, sizeof out->device_uuid);
    return TENSO_OK;
}

}  // extern "C"

extern "C" {

/* ---------------------------------------------------------------- inspecting */

tenso_status tenso_inspect(tenso_packet_info *out, const void *data, size_t len) {
    CHECK_ARG(out);
    CHECK_ARG(data || !len);
    TENSO_API_BEGIN
    fill(out, tenso::inspect(static_cast<const uint8_t *>(data), len));
    TENSO_API_END
}

tenso_status tenso_packet_length(size_t *length_out, const void *data, size_t len, const tenso_decode_options *opts) {
    CHECK_ARG(length_out);
    *length_out = 0;
    CHECK_ARG(data || !len);
    TENSO_API_BEGIN
    const tenso::Limits lim = limits(opts);
    try {
        *length_out = tenso::packet_length(static_cast<const uint8_t *>(data), len, lim);
    } catch (const tenso::NeedMore &m) {
        *length_out = m.need;
        tenso::fail(TENSO_E_TRUNCATED,
                    "packet continues past the given bytes: " + std::to_string(m.need) + " bytes needed to go on");
    }
    TENSO_API_END
}

/* ---------------------------------------------------------------- views */

tenso_status tenso_loads(tenso_view **out, const void *data, size_t len, const tenso_decode_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(data || !len);
    TENSO_API_BEGIN
    std::unique_ptr<tenso::View, tenso::GiveView> v(tenso::take_view());  // a failed decode gives it back
    tenso::decode_into(*v, static_cast<const uint8_t *>(data), len, limits(opts));
    *out = const_cast<tenso_view *>(H(v.release()));
    TENSO_API_END
}

tenso_status tenso_loads_tensor(tenso_tensor_view *out, const void *data, size_t len,
                                const tenso_decode_options *opts) {
    CHECK_ARG(out);
    CHECK_ARG(data || !len);
    TENSO_API_BEGIN
    tenso::decode_dense(out, static_cast<const uint8_t *>(data), len, limits(opts));
    TENSO_API_END
}

void tenso_view_free(tenso_view *v) { tenso::give_view(const_cast<tenso::View *>(V(v))); }

tenso_kind tenso_view_kind(const tenso_view *v) { return v ? V(v)->kind : 0; }
tenso_dtype tenso_view_dtype(const tenso_view *v) { return v ? V(v)->dtype : 0; }
uint32_t tenso_view_ndim(const tenso_view *v) { return v ? V(v)->ndim : 0; }
const uint64_t *tenso_view_shape(const tenso_view *v) { return v && V(v)->ndim ? V(v)->shape.data() : nullptr; }
const void *tenso_view_data(const tenso_view *v) { return v ? V(v)->data : nullptr; }
uint64_t tenso_view_nbytes(const tenso_view *v) { return v ? V(v)->nbytes : 0; }
uint32_t tenso_view_flags(const tenso_view *v) { return v ? V(v)->flags : 0; }
uint32_t tenso_view_version(const tenso_view *v) { return v ? V(v)->version : 0; }
uint32_t tenso_view_alignment(const tenso_view *v) { return v ? V(v)->alignment : 0; }
uint64_t tenso_view_packet_size(const tenso_view *v) { return v ? V(v)->packet_size : 0; }
int tenso_view_owns_data(const tenso_view *v) { return v && V(v)->owns_data ? 1 : 0; }
uint32_t tenso_view_bundle_count(const tenso_view *v) {
    return v && V(v)->kind == TENSO_KIND_BUNDLE ? uint32_t(V(v)->entries.size()) : 0;
}

tenso_status tenso_view_bundle_entry(const char **key_out, size_t *key_len_out, const tenso_view **child_out,
                                     const tenso_view *v, uint32_t index) {
    clear_error();
    CHECK_ARG(key_out);
    CHECK_ARG(key_len_out);
    CHECK_ARG(child_out);
    CHECK_ARG(v);
    if (V(v)->kind != TENSO_KIND_BUNDLE) return set_error(TENSO_E_UNSUPPORTED_KIND, "view is not a bundle");
    if (index >= V(v)->entries.size()) return set_error(TENSO_E_INVALID_ARGUMENT, "bundle index out of range");
    const auto &e = V(v)->entries[index];
    *key_out = e.key;
    *key_len_out = e.key_len;
    *child_out = H(&e.view);
    return TENSO_OK;
}

tenso_status tenso_view_bundle_find(const tenso_view **child_out, const tenso_view *v, const char *key,
                                    size_t key_len) {
    clear_error();
    CHECK_ARG(child_out);
    *child_out = nullptr;
    CHECK_ARG(v);
    CHECK_ARG(key || !key_len);
    if (V(v)->kind != TENSO_KIND_BUNDLE) return set_error(TENSO_E_UNSUPPORTED_KIND, "view is not a bundle");
    for (const auto &e : V(v)->entries) {
        if (e.key_len == key_len && std::memcmp(e.key, key, key_len) == 0) {
            *child_out = H(&e.view);
            return TENSO_OK;
        }
    }
    return set_error(TENSO_E_INVALID_ARGUMENT, "key not found");
}

/* ---------------------------------------------------------------- streams and files */

tenso_status tenso_read_fd(tenso_view **out, int fd, const tenso_decode_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    TENSO_API_BEGIN
    *out = const_cast<tenso_view *>(H(tenso::read_packet(fd, limits(opts)).release()));
    TENSO_API_END
}

tenso_status tenso_load_file(tenso_view **out, const char *path, uint32_t mode, const tenso_decode_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(path);
    if (mode != TENSO_LOAD_READ && mode != TENSO_LOAD_MMAP)
        return set_error(TENSO_E_INVALID_ARGUMENT, "mode must be TENSO_LOAD_READ or TENSO_LOAD_MMAP");
    TENSO_API_BEGIN
    auto v = tenso::load_file(path, mode == TENSO_LOAD_MMAP, limits(opts));
    *out = release_view(std::move(v));
    TENSO_API_END
}

/* ---------------------------------------------------------------- DLPack */

tenso_status tenso_view_to_dlpack(DLManagedTensorVersioned **out, const tenso_view *v) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(v);
    TENSO_API_BEGIN
    *out = tenso::to_dlpack(*V(v));
    TENSO_API_END
}

tenso_status tenso_view_to_dlpack_legacy(DLManagedTensor **out, const tenso_view *v) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(v);
    TENSO_API_BEGIN
    *out = tenso::to_dlpack_legacy(*V(v));
    TENSO_API_END
}

}  // extern "C"
