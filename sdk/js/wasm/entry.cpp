// entry.cpp - the WebAssembly module's own extern "C" layer (sdk/js).
//
// The module exports libtenso's C ABI functions as they are (capi/src compiled for wasm32)
// wherever their arguments are scalars and pointers. What the C ABI passes as structs - options,
// tensor descriptions, quantized parts, packet info - is taken and given here as scalars or as
// flat uint64 records, so JavaScript never restates a struct's wasm32 layout; every rule stays in
// capi/src and impl/. Errors go through the same firewall as capi/src (status + tenso_last_error).
//
// The module is single-threaded: the option structs below are one static copy each, valid until
// the next call that fills them.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "convert.hpp"
#include "firewall.hpp"
#include "format/hash.hpp"

namespace {

// The one JavaScript import: tenso_value_write_cb's pieces (sdk/js/src/engine.js, `piece`).
extern "C" __attribute__((import_module("tenso"), import_name("piece"))) int tenso_js_piece(const void *p, size_t n,
                                                                                            int borrowed);

int forward_piece(const void *data, size_t len, int borrowed, void *) { return tenso_js_piece(data, len, borrowed); }

tenso_decode_options g_decode = TENSO_DECODE_OPTIONS_INIT;
tenso_encode_options g_encode = TENSO_ENCODE_OPTIONS_INIT;

// The C ABI's structs from scalars, in their field order (tenso.h).
tenso_tensor make(const void *data, uint64_t nbytes, const uint64_t *shape, uint32_t ndim, tenso_dtype dtype) {
    return tenso_tensor{data, nbytes, shape, ndim, dtype};
}

tenso_quantized parts(const void *data, uint64_t nbytes, const uint64_t *shape, uint32_t ndim, const float *scales,
                      const float *zero_points, uint32_t num_scales, tenso_dtype dtype, int32_t scheme, int32_t axis,
                      uint32_t group_size) {
    return tenso_quantized{data, nbytes, shape, scales, zero_points, ndim, dtype, scheme, axis, group_size, num_scales};
}

// rec: data, nbytes, scales, zero_points, ndim, dtype, scheme, axis, group_size, num_scales.
void flatten(uint64_t *rec, const tenso_quantized &q) {
    rec[0] = uintptr_t(q.data);
    rec[1] = q.nbytes;
    rec[2] = uintptr_t(q.scales);
    rec[3] = uintptr_t(q.zero_points);
    rec[4] = q.ndim;
    rec[5] = uint32_t(q.dtype);
    rec[6] = uint32_t(q.scheme);
    rec[7] = uint32_t(q.axis);
    rec[8] = q.group_size;
    rec[9] = q.num_scales;
}

struct Constant {
    const char *name;
    uint64_t value;
};
#define TENSO_JS_CONSTANT(name) \
    { #name, uint64_t(name) }
const Constant kConstants[] = {
    TENSO_JS_CONSTANT(TENSO_MAX_NDIM),
    TENSO_JS_CONSTANT(TENSO_MAX_ELEMENTS),
    TENSO_JS_CONSTANT(TENSO_MAX_DEPTH),
    TENSO_JS_CONSTANT(TENSO_MAX_BUNDLE_ENTRIES),
    TENSO_JS_CONSTANT(TENSO_MAX_KEY_BYTES),
    TENSO_JS_CONSTANT(TENSO_DEFAULT_ALIGNMENT),
    TENSO_JS_CONSTANT(TENSO_MAX_ALIGNMENT),
    TENSO_JS_CONSTANT(TENSO_ENCODE_INTEGRITY),
    TENSO_JS_CONSTANT(TENSO_ENCODE_COMPRESS),
    TENSO_JS_CONSTANT(TENSO_DECODE_SKIP_CHECKSUM),
    TENSO_JS_CONSTANT(TENSO_DECODE_VALIDATE_UTF8),
    TENSO_JS_CONSTANT(TENSO_QUANT_PER_TENSOR),
    TENSO_JS_CONSTANT(TENSO_QUANT_PER_CHANNEL),
    TENSO_JS_CONSTANT(TENSO_QUANT_PER_GROUP),
    TENSO_JS_CONSTANT(TENSO_FLAG_INTEGRITY),
    TENSO_JS_CONSTANT(TENSO_FLAG_COMPRESSION),
};
#undef TENSO_JS_CONSTANT

}  // namespace

extern "C" {

/* ---------------------------------------------------------------- memory and constants */

/** Memory for JavaScript to write inputs into: 64-byte aligned (a packet copied here keeps its
 *  bodies aligned), released with tenso_js_free. NULL when out of memory (or when n rounded up
 *  to 64 does not fit a size_t: it would wrap to a tiny block). */
__attribute__((used)) void *tenso_js_malloc(size_t n) {
    if (n > SIZE_MAX - 63) return nullptr;
    return std::aligned_alloc(64, (std::max<size_t>(n, 1) + 63) & ~size_t(63));
}
__attribute__((used)) void tenso_js_free(void *p) { std::free(p); }

/** The value of a tenso.h macro by its name ("TENSO_MAX_NDIM"); *found_out = 0 for names not
 *  listed. */
__attribute__((used)) uint64_t tenso_js_constant(const char *name, int *found_out) {
    for (const Constant &c : kConstants) {
        if (std::strcmp(c.name, name) == 0) {
            *found_out = 1;
            return c.value;
        }
    }
    *found_out = 0;
    return 0;
}

/* ---------------------------------------------------------------- options */

/** tenso_decode_options with these fields (static storage; the next call overwrites it). */
__attribute__((used)) const tenso_decode_options *tenso_js_decode_options(uint32_t flags, uint32_t max_ndim,
                                                                          uint32_t max_depth, uint64_t max_elements,
                                                                          uint64_t max_packet_bytes,
                                                                          uint64_t max_decoded_bytes,
                                                                          uint64_t max_entries) {
    g_decode = tenso_decode_options TENSO_DECODE_OPTIONS_INIT;
    g_decode.flags = flags;
    g_decode.max_ndim = max_ndim;
    g_decode.max_depth = max_depth;
    g_decode.max_elements = max_elements;
    g_decode.max_packet_bytes = max_packet_bytes;
    g_decode.max_decoded_bytes = max_decoded_bytes;
    g_decode.max_entries = max_entries;
    g_decode.threads = 1;  // one thread in a WebAssembly instance
    return &g_decode;
}

/** tenso_encode_options with these fields (static storage; the next call overwrites it). */
__attribute__((used)) const tenso_encode_options *tenso_js_encode_options(uint32_t flags, uint32_t alignment,
                                                                          int32_t level) {
    g_encode = tenso_encode_options TENSO_ENCODE_OPTIONS_INIT;
    g_encode.flags = flags;
    g_encode.alignment = alignment;
    g_encode.compression_level = level;
    g_encode.threads = 1;
    return &g_encode;
}

/* ---------------------------------------------------------------- decoding */

/**
 * tenso_loads for a dense packet whose body stays in JavaScript memory: `head` holds the first
 * `have` of its `len` bytes (tenso::scan_detached). rec, with *found_out = 1: dtype, ndim,
 * flags, version, alignment, body offset, nbytes, packet size, footer (where the integrity
 * footer starts, from the packet start, when the caller must check the body's XXH3 against it
 * - it runs to the packet's end; 0: nothing to check), then ndim dims. *found_out = 0: not
 * such a packet, decode it whole with tenso_loads.
 */
__attribute__((used)) tenso_status tenso_js_loads_dense(int *found_out, uint64_t *rec, const void *head, size_t have,
                                                        size_t len, const tenso_decode_options *opts) {
    CHECK_ARG(found_out);
    *found_out = 0;
    CHECK_ARG(rec);
    CHECK_ARG(head);
    TENSO_API_BEGIN
    const tenso::Limits lim = tenso::capi::limits(opts);
    tenso::Node n;
    if (!tenso::scan_detached(&n, static_cast<const uint8_t *>(head), have, len, lim)) return TENSO_OK;
    rec[0] = uint32_t(n.dtype);
    rec[1] = n.ndim;
    rec[2] = n.flags;
    rec[3] = n.version;
    rec[4] = n.alignment;
    rec[5] = n.body_off;
    rec[6] = n.nbytes;
    rec[7] = n.end;
    rec[8] = n.footer && lim.verify_checksums ? n.body_off + n.body_len : 0;
    for (uint32_t i = 0; i < n.ndim; ++i) rec[9 + i] = n.shape[i];
    *found_out = 1;
    TENSO_API_END
}

/** A streaming XXH3-64 (the integrity footer's hash) for a body hashed piece by piece. */
__attribute__((used)) tenso::Hasher *tenso_js_hasher_new(void) { return new (std::nothrow) tenso::Hasher(); }
__attribute__((used)) void tenso_js_hasher_update(tenso::Hasher *h, const void *p, size_t n) { h->update(p, n); }
__attribute__((used)) void tenso_js_hasher_free(tenso::Hasher *h) { delete h; }
/** TENSO_E_CHECKSUM unless the hash of what was given matches the 8-byte footer at `footer`. */
__attribute__((used)) tenso_status tenso_js_hasher_check(const tenso::Hasher *h, const void *footer) {
    CHECK_ARG(h);
    CHECK_ARG(footer);
    TENSO_API_BEGIN
    tenso::check_digest(static_cast<const uint8_t *>(footer), h->digest());
    TENSO_API_END
}

/** tenso_view_quantized as a flat record (see flatten). */
__attribute__((used)) tenso_status tenso_js_view_quantized(uint64_t *rec, const tenso_view *v) {
    tenso_quantized q;
    const tenso_status st = tenso_view_quantized(&q, v);
    if (st == TENSO_OK) flatten(rec, q);
    return st;
}

/** tenso_view_ipc_ref as a flat record: byte_offset, nbytes, the handle's length and the
 *  uuid's, then the handle's bytes and the uuid's (from rec + 32). */
__attribute__((used)) tenso_status tenso_js_view_ipc_ref(uint64_t *rec, const tenso_view *v) {
    tenso_ipc_ref r;
    const tenso_status st = tenso_view_ipc_ref(&r, v);
    if (st != TENSO_OK) return st;
    const uint64_t head[] = {r.byte_offset, r.nbytes, sizeof r.handle, sizeof r.device_uuid};
    std::memcpy(rec, head, sizeof head);
    uint8_t *bytes = reinterpret_cast<uint8_t *>(rec + 4);
    std::memcpy(bytes, r.handle, sizeof r.handle);
    std::memcpy(bytes + sizeof r.handle, r.device_uuid, sizeof r.device_uuid);
    return TENSO_OK;
}

/** tenso_inspect as a flat record: version, flags, kind, dtype, ndim, entry_count, alignment,
 *  body_offset, body_size, packet_size, then ndim dims. */
__attribute__((used)) tenso_status tenso_js_inspect(uint64_t *rec, const void *data, size_t len) {
    tenso_packet_info info;
    const tenso_status st = tenso_inspect(&info, data, len);
    if (st != TENSO_OK) return st;
    const uint64_t head[] = {info.version,   info.flags,       uint32_t(info.kind), uint32_t(info.dtype),
                             info.ndim,      info.entry_count, info.alignment,      info.body_offset,
                             info.body_size, info.packet_size};
    std::memcpy(rec, head, sizeof head);
    for (uint32_t i = 0; i < info.ndim && i < TENSO_MAX_NDIM; ++i) rec[10 + i] = info.shape[i];
    return TENSO_OK;
}

/** tenso_decoder_new with these decode limits and tenso's own allocator. */
__attribute__((used)) tenso_status tenso_js_decoder_new(tenso_decoder **out, const tenso_decode_options *decode) {
    tenso_decoder_options o = TENSO_DECODER_OPTIONS_INIT;
    o.decode = decode;
    return tenso_decoder_new(out, &o);
}

/* ---------------------------------------------------------------- values */

__attribute__((used)) tenso_status tenso_js_value_tensor(tenso_value **out, const void *data, uint64_t nbytes,
                                                         const uint64_t *shape, uint32_t ndim, tenso_dtype dtype) {
    const tenso_tensor t = make(data, nbytes, shape, ndim, dtype);
    return tenso_value_new_tensor(out, &t);
}

/** A sparse matrix of 2-D `shape` from three 1-D components (data, nbytes, length, dtype). */
__attribute__((used)) tenso_status tenso_js_value_sparse(tenso_value **out, tenso_kind format, const uint64_t *shape,
                                                         const void *a, uint64_t a_nbytes, const uint64_t *a_len,
                                                         tenso_dtype a_dtype, const void *b, uint64_t b_nbytes,
                                                         const uint64_t *b_len, tenso_dtype b_dtype, const void *c,
                                                         uint64_t c_nbytes, const uint64_t *c_len,
                                                         tenso_dtype c_dtype) {
    const tenso_tensor ta = make(a, a_nbytes, a_len, 1, a_dtype);
    const tenso_tensor tb = make(b, b_nbytes, b_len, 1, b_dtype);
    const tenso_tensor tc = make(c, c_nbytes, c_len, 1, c_dtype);
    return tenso_value_new_sparse(out, format, 2, shape, &ta, &tb, &tc);
}

__attribute__((used)) tenso_status tenso_js_value_quantized(tenso_value **out, const void *data, uint64_t nbytes,
                                                            const uint64_t *shape, uint32_t ndim, const float *scales,
                                                            const float *zero_points, uint32_t num_scales,
                                                            tenso_dtype dtype, int32_t scheme, int32_t axis,
                                                            uint32_t group_size) {
    const tenso_quantized q =
        parts(data, nbytes, shape, ndim, scales, zero_points, num_scales, dtype, scheme, axis, group_size);
    return tenso_value_new_quantized(out, &q);
}

/** tenso_quantize of a dense tensor; read the result with tenso_js_value_quantized_record. */
__attribute__((used)) tenso_status tenso_js_quantize(tenso_value **out, const void *data, uint64_t nbytes,
                                                     const uint64_t *shape, uint32_t ndim, tenso_dtype dtype,
                                                     tenso_dtype qdtype, int32_t scheme, int32_t axis,
                                                     uint32_t group_size) {
    const tenso_tensor t = make(data, nbytes, shape, ndim, dtype);
    return tenso_quantize(out, &t, qdtype, scheme, axis, group_size);
}

/** tenso_value_quantized as a flat record (see flatten). */
__attribute__((used)) tenso_status tenso_js_value_quantized_record(uint64_t *rec, const tenso_value *v) {
    tenso_quantized q;
    const tenso_status st = tenso_value_quantized(&q, v);
    if (st == TENSO_OK) flatten(rec, q);
    return st;
}

__attribute__((used)) tenso_status tenso_js_dequantize(float *dst, uint64_t count, const void *data, uint64_t nbytes,
                                                       const uint64_t *shape, uint32_t ndim, const float *scales,
                                                       const float *zero_points, uint32_t num_scales, tenso_dtype dtype,
                                                       int32_t scheme, int32_t axis, uint32_t group_size) {
    const tenso_quantized q =
        parts(data, nbytes, shape, ndim, scales, zero_points, num_scales, dtype, scheme, axis, group_size);
    return tenso_dequantize(dst, count, &q);
}

__attribute__((used)) tenso_status tenso_js_value_ragged(tenso_value **out, const void *flat, uint64_t flat_nbytes,
                                                         const uint64_t *flat_len, tenso_dtype flat_dtype,
                                                         uint64_t count, const uint64_t *row_offsets) {
    const tenso_tensor t = make(flat, flat_nbytes, flat_len, 1, flat_dtype);
    return tenso_value_new_ragged(out, &t, count, row_offsets);
}

/** tenso_value_new_ipc_ref from its parts: the handle and the uuid must have the lengths of
 *  tenso_ipc_ref's fields (a shorter one would be read past its end, a longer one cut). */
__attribute__((used)) tenso_status tenso_js_value_ipc_ref(tenso_value **out, const uint8_t *handle, size_t handle_len,
                                                          const uint8_t *uuid, size_t uuid_len, uint64_t byte_offset,
                                                          uint64_t nbytes) {
    tenso_ipc_ref r;
    if (handle_len != sizeof r.handle || uuid_len != sizeof r.device_uuid) {
        const std::string msg = "a GPU IPC reference has a handle of " + std::to_string(sizeof r.handle) +
                                " bytes and a device uuid of " + std::to_string(sizeof r.device_uuid) + ", got " +
                                std::to_string(handle_len) + " and " + std::to_string(uuid_len);
        return tenso::capi::set_error(TENSO_E_INVALID_ARGUMENT, msg.c_str());
    }
    CHECK_ARG(handle);
    CHECK_ARG(uuid);
    std::memcpy(r.handle, handle, sizeof r.handle);
    std::memcpy(r.device_uuid, uuid, sizeof r.device_uuid);
    r.byte_offset = byte_offset;
    r.nbytes = nbytes;
    return tenso_value_new_ipc_ref(out, &r);
}

/** tenso_value_write_cb with the JavaScript import `piece` as the callback. */
__attribute__((used)) tenso_status tenso_js_write(uint64_t *written_out, const tenso_value *v,
                                                  const tenso_encode_options *opts) {
    return tenso_value_write_cb(written_out, v, opts, forward_piece, nullptr);
}

}  // extern "C"
