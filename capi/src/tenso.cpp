// tenso.cpp - the extern "C" firewall. Every entry point is noexcept, checks its pointers,
// runs the engine between TENSO_API_BEGIN/TENSO_API_END (which turn any exception into a
// status and a thread-local message) and never lets C++ types cross the boundary.
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "tenso/tenso.h"

#include "codec.hpp"
#include "dlpack.hpp"
#include "error.hpp"
#include "io.hpp"

struct tenso_value {
    tenso::Value v;
};
// tenso_view is never defined: a tenso_view* is a tenso::View*, so child views can be handed
// out as pointers into their parent.

namespace {

thread_local std::string t_error;

tenso_status set_error(tenso_status st, const char *msg) {
    try {
        t_error = msg;
    } catch (...) {
        t_error.clear();  // out of memory for the message itself: the status still says it
    }
    return st;
}

const tenso::View *V(const tenso_view *v) { return reinterpret_cast<const tenso::View *>(v); }
const tenso_view *H(const tenso::View *v) { return reinterpret_cast<const tenso_view *>(v); }

}  // namespace

#define TENSO_API_BEGIN                                                                        \
    t_error.clear();                                                                           \
    try {
#define TENSO_API_END                                                                          \
    }                                                                                          \
    catch (const tenso::Error &e) {                                                            \
        return set_error(e.status(), e.what());                                                \
    }                                                                                          \
    catch (const std::bad_alloc &) {                                                           \
        return set_error(TENSO_E_NO_MEMORY, "out of memory");                                  \
    }                                                                                          \
    catch (const std::exception &e) {                                                          \
        return set_error(TENSO_E_INTERNAL, e.what());                                          \
    }                                                                                          \
    catch (...) {                                                                              \
        return set_error(TENSO_E_INTERNAL, "unknown internal error");                          \
    }                                                                                          \
    return TENSO_OK;

#define CHECK_ARG(p)                                                                           \
    if (!(p)) return set_error(TENSO_E_INVALID_ARGUMENT, #p " is NULL")

/* ---------------------------------------------------------------- version, errors, dtypes */

extern "C" {

uint32_t tenso_version_number(void) { return TENSO_VERSION_NUMBER; }
const char *tenso_version_string(void) { return TENSO_VERSION_STRING; }
uint32_t tenso_protocol_version(void) { return TENSO_PROTOCOL_VERSION; }

const char *tenso_last_error(void) { return t_error.c_str(); }
void tenso_error_clear(void) { t_error.clear(); }

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
    default: return "TENSO_E_UNKNOWN";
    }
}

size_t tenso_dtype_itemsize(tenso_dtype dtype) { return tenso::dtype_itemsize(dtype); }
const char *tenso_dtype_name(tenso_dtype dtype) { return tenso::dtype_name(dtype); }

tenso_status tenso_dtype_from_name(tenso_dtype *out, const char *name) {
    CHECK_ARG(out);
    CHECK_ARG(name);
    TENSO_API_BEGIN
    int d = tenso::dtype_from_name(name);
    if (!d) tenso::fail(TENSO_E_BAD_DTYPE, std::string("unknown dtype name '") + name + "'");
    *out = d;
    TENSO_API_END
}

/* ---------------------------------------------------------------- buffers and options */

void tenso_buffer_dispose(tenso_buffer *buf) {
    if (!buf) return;
    std::free(buf->data);
    buf->data = nullptr;
    buf->size = buf->reserved = 0;
}

tenso_status tenso_encode_options_init(tenso_encode_options *opts, uint32_t version) {
    CHECK_ARG(opts);
    if (version != TENSO_ENCODE_OPTIONS_VERSION)
        return set_error(TENSO_E_INVALID_ARGUMENT, "unknown tenso_encode_options version");
    *opts = tenso_encode_options TENSO_ENCODE_OPTIONS_INIT;
    return TENSO_OK;
}

tenso_status tenso_decode_options_init(tenso_decode_options *opts, uint32_t version) {
    CHECK_ARG(opts);
    if (version != TENSO_DECODE_OPTIONS_VERSION)
        return set_error(TENSO_E_INVALID_ARGUMENT, "unknown tenso_decode_options version");
    *opts = tenso_decode_options TENSO_DECODE_OPTIONS_INIT;
    return TENSO_OK;
}

}  // extern "C"

/* ---------------------------------------------------------------- encoding (shared sinks) */

namespace {

template <class Input>
tenso::Plan plan_for(const Input &in, const tenso_encode_options *opts, bool measure) {
    tenso::Plan p(tenso::EncodeOptions::from(opts), measure);
    p.add(in);
    return p;
}

template <class Input>
tenso_status bound_of(size_t *bound_out, const Input &in, const tenso_encode_options *opts) {
    *bound_out = plan_for(in, opts, true).size();
    return TENSO_OK;
}

template <class Input>
void into(void *dst, size_t cap, size_t *written_out, const Input &in, const tenso_encode_options *opts) {
    tenso::Plan p = plan_for(in, opts, false);
    *written_out = p.size();
    if (p.size() > cap)
        tenso::fail(TENSO_E_BUFFER_TOO_SMALL, "destination holds " + std::to_string(cap) +
                                                  " bytes, the packet needs " + std::to_string(p.size()));
    p.write_to(static_cast<uint8_t *>(dst));
}

template <class Input>
void alloc(tenso_buffer *out, const Input &in, const tenso_encode_options *opts) {
    tenso::Plan p = plan_for(in, opts, false);
    auto *mem = static_cast<uint8_t *>(std::aligned_alloc(64, (p.size() + 64) & ~size_t(63)));
    if (!mem) throw std::bad_alloc();
    p.write_to(mem);
    tenso_buffer_dispose(out);
    out->data = mem;
    out->size = p.size();
    out->reserved = (p.size() + 64) & ~size_t(63);
}

template <class Input>
void to_fd(uint64_t *written_out, int fd, const Input &in, const tenso_encode_options *opts) {
    uint64_t w = 0;
    struct Report {
        uint64_t *out, &w;
        ~Report() { if (out) *out = w; }
    } report{written_out, w};
    plan_for(in, opts, false).write_fd(fd, &w);
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
    return bound_of(bound_out, tenso::Tensor::from(t), opts);
    TENSO_API_END
}

tenso_status tenso_dumps_into(void *dst, size_t dst_capacity, size_t *written_out, const tenso_tensor *t,
                              const tenso_encode_options *opts) {
    CHECK_ARG(dst || !dst_capacity);
    CHECK_ARG(written_out);
    CHECK_ARG(t);
    TENSO_API_BEGIN
    into(dst, dst_capacity, written_out, tenso::Tensor::from(t), opts);
    TENSO_API_END
}

tenso_status tenso_dumps(tenso_buffer *out, const tenso_tensor *t, const tenso_encode_options *opts) {
    CHECK_ARG(out);
    CHECK_ARG(t);
    TENSO_API_BEGIN
    alloc(out, tenso::Tensor::from(t), opts);
    TENSO_API_END
}

tenso_status tenso_write_fd(uint64_t *written_out, int fd, const tenso_tensor *t,
                            const tenso_encode_options *opts) {
    if (written_out) *written_out = 0;
    CHECK_ARG(t);
    TENSO_API_BEGIN
    to_fd(written_out, fd, tenso::Tensor::from(t), opts);
    TENSO_API_END
}

tenso_status tenso_save_file(const char *path, const tenso_tensor *t, const tenso_encode_options *opts) {
    CHECK_ARG(path);
    CHECK_ARG(t);
    TENSO_API_BEGIN
    to_file(path, tenso::Tensor::from(t), opts);
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
        v->v.tensor = tenso::Tensor::from(t);
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
    const auto *p = static_cast<const uint8_t *>(packet);
    size_t exact;
    try {
        exact = tenso::scan(p, len, tenso::Limits()).end;
    } catch (const tenso::NeedMore &) {
        tenso::fail(TENSO_E_TRUNCATED, "packet is truncated");
    }
    if (exact != len)
        tenso::fail(TENSO_E_INVALID_ARGUMENT, "bytes are not exactly one packet (" + std::to_string(exact) +
                                                  " of " + std::to_string(len) + ")");
    auto *v = new tenso_value();
    v->v.type = tenso::Value::kPacket;
    v->v.packet = p;
    v->v.packet_len = len;
    *out = v;
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
    tenso::Value &b = bundle->v;
    if (b.type != tenso::Value::kBundle) tenso::fail(TENSO_E_INVALID_ARGUMENT, "value is not a bundle");
    if (b.entries.size() >= TENSO_MAX_BUNDLE_ENTRIES)
        tenso::fail(TENSO_E_INVALID_ARGUMENT, "a bundle holds at most 255 entries");
    if (key_len > UINT32_MAX) tenso::fail(TENSO_E_INVALID_ARGUMENT, "key is longer than 2^32-1 bytes");
    std::string k(key ? key : "", key_len);
    if (!tenso::valid_utf8(reinterpret_cast<const uint8_t *>(k.data()), k.size()))
        tenso::fail(TENSO_E_INVALID_ARGUMENT, "bundle key is not valid UTF-8");
    if (child->v.depth() + 1 > TENSO_MAX_DEPTH)
        tenso::fail(TENSO_E_INVALID_ARGUMENT, "bundles would nest deeper than 64");
    b.entries.push_back(tenso::Value::Entry{std::move(k), child->v});
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

tenso_status tenso_value_save_file(const char *path, const tenso_value *v, const tenso_encode_options *opts) {
    CHECK_ARG(path);
    CHECK_ARG(v);
    TENSO_API_BEGIN
    to_file(path, v->v, opts);
    TENSO_API_END
}

/* ---------------------------------------------------------------- inspecting */

tenso_status tenso_inspect(tenso_packet_info *out, const void *data, size_t len) {
    CHECK_ARG(out);
    CHECK_ARG(data || !len);
    TENSO_API_BEGIN
    tenso::inspect(out, static_cast<const uint8_t *>(data), len);
    TENSO_API_END
}

tenso_status tenso_packet_length(size_t *length_out, const void *data, size_t len) {
    CHECK_ARG(length_out);
    *length_out = 0;
    CHECK_ARG(data || !len);
    TENSO_API_BEGIN
    try {
        *length_out = tenso::scan(static_cast<const uint8_t *>(data), len, tenso::Limits()).end;
    } catch (const tenso::NeedMore &m) {
        *length_out = m.need;
        tenso::fail(TENSO_E_TRUNCATED, "packet continues past the given bytes: " + std::to_string(m.need) +
                                           " bytes needed to go on");
    }
    TENSO_API_END
}

/* ---------------------------------------------------------------- views */

tenso_status tenso_loads(tenso_view **out, const void *data, size_t len, const tenso_decode_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(data || !len);
    TENSO_API_BEGIN
    auto v = tenso::decode(static_cast<const uint8_t *>(data), len, tenso::Limits::from(opts), nullptr);
    *out = const_cast<tenso_view *>(H(v.release()));
    TENSO_API_END
}

void tenso_view_free(tenso_view *v) { delete V(v); }

tenso_kind tenso_view_kind(const tenso_view *v) { return v ? V(v)->kind : 0; }
tenso_dtype tenso_view_dtype(const tenso_view *v) { return v ? V(v)->dtype : 0; }
uint32_t tenso_view_ndim(const tenso_view *v) { return v ? V(v)->ndim : 0; }
const uint64_t *tenso_view_shape(const tenso_view *v) { return v && V(v)->ndim ? V(v)->shape : nullptr; }
const void *tenso_view_data(const tenso_view *v) { return v ? V(v)->data : nullptr; }
uint64_t tenso_view_nbytes(const tenso_view *v) { return v ? V(v)->nbytes : 0; }
uint32_t tenso_view_flags(const tenso_view *v) { return v ? V(v)->flags : 0; }
uint32_t tenso_view_version(const tenso_view *v) { return v ? V(v)->version : 0; }
uint32_t tenso_view_alignment(const tenso_view *v) { return v ? V(v)->alignment : 0; }
uint64_t tenso_view_packet_size(const tenso_view *v) { return v ? V(v)->packet_size : 0; }
int tenso_view_owns_data(const tenso_view *v) { return v && V(v)->owns_data ? 1 : 0; }
uint32_t tenso_view_bundle_count(const tenso_view *v) { return v ? uint32_t(V(v)->entries.size()) : 0; }

tenso_status tenso_view_bundle_entry(const char **key_out, size_t *key_len_out, const tenso_view **child_out,
                                     const tenso_view *v, uint32_t index) {
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
    *out = const_cast<tenso_view *>(H(tenso::read_packet(fd, tenso::Limits::from(opts)).release()));
    TENSO_API_END
}

tenso_status tenso_load_file(tenso_view **out, const char *path, uint32_t mode, const tenso_decode_options *opts) {
    CHECK_ARG(out);
    *out = nullptr;
    CHECK_ARG(path);
    if (mode != TENSO_LOAD_READ && mode != TENSO_LOAD_MMAP)
        return set_error(TENSO_E_INVALID_ARGUMENT, "mode must be TENSO_LOAD_READ or TENSO_LOAD_MMAP");
    TENSO_API_BEGIN
    auto v = tenso::load_file(path, mode == TENSO_LOAD_MMAP, tenso::Limits::from(opts));
    *out = const_cast<tenso_view *>(H(v.release()));
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
