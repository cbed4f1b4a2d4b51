/*
 * tgo.h - the C half of the Go SDK: small static helpers that the cgo files include.
 *
 * Why they exist (STYLE.md rule 19):
 *   - tenso_last_error() is thread-local. A goroutine may move to another OS thread between
 *     two cgo calls, so every fallible call goes through a helper that calls tenso and, on
 *     failure, copies the message (strdup) within the same cgo call. Go frees it with C.free.
 *   - Structs that hold pointers (tenso_tensor, tenso_quantized, tenso_ipc_ref) are built here,
 *     on the C stack, from pointer arguments: Go never builds a struct that contains a Go
 *     pointer, and every Go pointer is a plain argument of the call that uses it.
 *   - Results come back by value (tgo_res, tgo_info, ...), so the success path allocates
 *     nothing on the Go heap (an out-parameter would escape).
 *   - Addresses inside the caller's input are returned as offsets (tgo_ref), never as pointers:
 *     C never hands a Go pointer back, and Go slices the input itself.
 */
#ifndef TENSO_SDK_GO_TGO_H
#define TENSO_SDK_GO_TGO_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <poll.h>

#include <tenso/tenso.h>

/* Compile-time gate: the Go declarations below mirror the 1.x ABI. */
#if !defined(TENSO_VERSION_MAJOR) || TENSO_VERSION_MAJOR != 1
#error "sdk/go is written for libtenso 1.x (tenso/version.h: TENSO_VERSION_MAJOR must be 1)"
#endif

/* ---- status + message, captured in the failing cgo call ---- */

typedef struct {
    int32_t status;
    char *msg; /* strdup'ed tenso_last_error() on failure, else NULL; Go frees it */
    uint64_t n; /* a size: written, needed, bound, packet length */
} tgo_res;

static inline tgo_res tgo_res_of(tenso_status st, uint64_t n) {
    tgo_res r;
    r.status = st;
    r.n = n;
    r.msg = st == TENSO_OK ? NULL : strdup(tenso_last_error());
    return r;
}

/* ---- a byte range: an offset into the caller's input, or a pointer to C memory ---- */

typedef struct {
    uint64_t off;    /* in_input: offset from the input's start */
    uint64_t n;      /* length in bytes */
    const void *ptr; /* !in_input: C memory owned by the view (or NULL when n == 0) */
    int32_t in_input;
} tgo_ref;

static inline tgo_ref tgo_ref_of(const void *p, uint64_t n, const void *base, size_t len) {
    tgo_ref r;
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)base;
    r.n = n;
    if (base && p && a >= b && a - b <= len && n <= len - (a - b)) {
        r.in_input = 1;
        r.off = a - b;
        r.ptr = NULL;
    } else {
        r.in_input = 0;
        r.off = 0;
        r.ptr = p;
    }
    return r;
}

/* ---- what one view node says ---- */

typedef struct {
    tgo_res res;
    tenso_view *view; /* tgo_loads_view / tgo_read_fd / tgo_load_file: the root; entries: the child */
    int32_t slow;     /* tgo_loads_fast: not a borrowed dense packet, take the pinned path */
    int32_t kind;
    int32_t dtype;
    uint32_t ndim;
    uint32_t flags;
    uint32_t version;
    uint32_t alignment;
    uint32_t count; /* bundle entries */
    uint64_t packet_size;
    tgo_ref data;
    tgo_ref key; /* bundle entries: the key */
    uint64_t shape[TENSO_MAX_NDIM];
} tgo_info;

static inline void tgo_fill(tgo_info *i, const tenso_view *v, const void *base, size_t len) {
    uint32_t d;
    const uint64_t *shape;
    i->view = (tenso_view *)v;
    i->kind = tenso_view_kind(v);
    i->dtype = tenso_view_dtype(v);
    i->ndim = tenso_view_ndim(v);
    i->flags = tenso_view_flags(v);
    i->version = tenso_view_version(v);
    i->alignment = tenso_view_alignment(v);
    i->count = tenso_view_bundle_count(v);
    i->packet_size = tenso_view_packet_size(v);
    i->data = tgo_ref_of(tenso_view_data(v), tenso_view_nbytes(v), base, len);
    shape = tenso_view_shape(v);
    for (d = 0; d < i->ndim && d < TENSO_MAX_NDIM; ++d) i->shape[d] = shape[d];
}

/* Loads without pinning. A dense packet is decoded here: when its body stays in the input the
 * view is freed before returning, so C keeps no Go pointer; when the view owns its body (an
 * LZ4 body it decompressed; tenso.h: the data then does not point into the input) it is
 * returned, Go copies the body and frees it. Any other kind answers slow = 1 and Go decodes
 * again with the input pinned. Above TGO_INSPECT_FIRST bytes tenso_inspect decides first, so
 * a large bundle is never hashed or decompressed twice; below it a wasted decode is cheaper
 * than the inspection. */
#define TGO_INSPECT_FIRST (64u << 10)

static inline tgo_info tgo_loads_fast(const void *data, size_t len, tenso_decode_options o) {
    tgo_info i;
    tenso_packet_info pi;
    tenso_view *v = NULL;
    tenso_status st;
    memset(&i, 0, sizeof i);
    /* A failed inspect falls through: tenso_loads reports the canonical status and message. */
    if (len > TGO_INSPECT_FIRST && tenso_inspect(&pi, data, len) == TENSO_OK && pi.kind != TENSO_KIND_DENSE) {
        i.slow = 1;
        return i;
    }
    st = tenso_loads(&v, data, len, &o);
    if (st != TENSO_OK) {
        i.res = tgo_res_of(st, 0);
        return i;
    }
    if (tenso_view_kind(v) != TENSO_KIND_DENSE) {
        tenso_view_free(v);
        i.slow = 1;
        return i;
    }
    tgo_fill(&i, v, data, len);
    if (tenso_view_owns_data(v)) return i; /* i.view = v: Go copies the body, then frees v */
    i.view = NULL;
    tenso_view_free(v);
    return i;
}

/* Loads keeping the view: the caller has pinned the input and frees the view (tgo_view_free)
 * before unpinning. */
static inline tgo_info tgo_loads_view(const void *data, size_t len, tenso_decode_options o) {
    tgo_info i;
    tenso_view *v = NULL;
    tenso_status st = tenso_loads(&v, data, len, &o);
    memset(&i, 0, sizeof i);
    if (st != TENSO_OK) {
        i.res = tgo_res_of(st, 0);
        return i;
    }
    tgo_fill(&i, v, data, len);
    return i;
}

static inline tgo_info tgo_view_info(const tenso_view *v, const void *base, size_t len) {
    tgo_info i;
    memset(&i, 0, sizeof i);
    tgo_fill(&i, v, base, len);
    return i;
}

static inline tgo_info tgo_view_entry(const tenso_view *v, uint32_t index, const void *base, size_t len) {
    tgo_info i;
    const char *key = NULL;
    size_t key_len = 0;
    const tenso_view *child = NULL;
    tenso_status st = tenso_view_bundle_entry(&key, &key_len, &child, v, index);
    memset(&i, 0, sizeof i);
    if (st != TENSO_OK) {
        i.res = tgo_res_of(st, 0);
        return i;
    }
    tgo_fill(&i, child, base, len);
    i.key = tgo_ref_of(key, key_len, base, len);
    return i;
}

static inline tgo_info tgo_view_component(const tenso_view *v, uint32_t index, const void *base, size_t len) {
    tgo_info i;
    const tenso_view *child = NULL;
    tenso_status st = tenso_view_component(&child, v, index);
    memset(&i, 0, sizeof i);
    if (st != TENSO_OK) {
        i.res = tgo_res_of(st, 0);
        return i;
    }
    tgo_fill(&i, child, base, len);
    return i;
}

/* Which entries of a bundle form a ragged array: res.status TENSO_OK and the indices, or the
 * status tenso_view_ragged gives (TENSO_E_UNSUPPORTED_KIND: not in ragged form). */
typedef struct {
    tgo_res res;
    int32_t flat_index;
    int32_t offsets_index;
} tgo_ragged;

static inline tgo_ragged tgo_view_ragged(const tenso_view *v) {
    tgo_ragged r;
    const tenso_view *flat = NULL, *offs = NULL, *child = NULL;
    const char *key;
    size_t key_len;
    uint32_t i, n;
    tenso_status st = tenso_view_ragged(&flat, &offs, v);
    r.res = tgo_res_of(st, 0);
    r.flat_index = r.offsets_index = -1;
    if (st != TENSO_OK) return r;
    n = tenso_view_bundle_count(v);
    for (i = 0; i < n; ++i) {
        if (tenso_view_bundle_entry(&key, &key_len, &child, v, i) != TENSO_OK) break;
        if (child == flat && r.flat_index < 0) r.flat_index = (int32_t)i;
        if (child == offs && r.offsets_index < 0) r.offsets_index = (int32_t)i;
    }
    tenso_error_clear();
    return r;
}

typedef struct {
    tgo_res res;
    tgo_ref data;
    const float *scales;      /* C memory owned by the view or value */
    const float *zero_points; /* idem */
    int32_t dtype;
    int32_t scheme;
    int32_t axis;
    uint32_t group_size;
    uint32_t num_scales;
    uint32_t ndim;
    uint64_t shape[TENSO_MAX_NDIM];
} tgo_quant;

static inline tgo_quant tgo_quant_of(tenso_status st, const tenso_quantized *q, const void *base, size_t len) {
    tgo_quant r;
    uint32_t d;
    memset(&r, 0, sizeof r);
    r.res = tgo_res_of(st, 0);
    if (st != TENSO_OK) return r;
    r.data = tgo_ref_of(q->data, q->nbytes, base, len);
    r.scales = q->scales;
    r.zero_points = q->zero_points;
    r.dtype = q->dtype;
    r.scheme = q->scheme;
    r.axis = q->axis;
    r.group_size = q->group_size;
    r.num_scales = q->num_scales;
    r.ndim = q->ndim;
    for (d = 0; d < q->ndim && d < TENSO_MAX_NDIM; ++d) r.shape[d] = q->shape[d];
    return r;
}

static inline tgo_quant tgo_view_quantized(const tenso_view *v, const void *base, size_t len) {
    tenso_quantized q;
    tenso_status st = tenso_view_quantized(&q, v);
    return tgo_quant_of(st, &q, base, len);
}

typedef struct {
    tgo_res res;
    const uint64_t *offsets; /* count + 1 entries, C memory owned by the view */
    tgo_ref payload;
} tgo_strings;

static inline tgo_strings tgo_view_strings(const tenso_view *v, const void *base, size_t len) {
    tgo_strings r;
    const uint64_t *offs = NULL;
    const char *payload = NULL;
    tenso_status st = tenso_view_string_offsets(&offs, &payload, v);
    memset(&r, 0, sizeof r);
    r.res = tgo_res_of(st, 0);
    if (st != TENSO_OK) return r;
    r.offsets = offs;
    r.payload = tgo_ref_of(payload, tenso_view_nbytes(v), base, len);
    return r;
}

typedef struct {
    tgo_res res;
    tenso_ipc_ref ref;
} tgo_ipc;

static inline tgo_ipc tgo_view_ipc(const tenso_view *v) {
    tgo_ipc r;
    tenso_status st;
    memset(&r, 0, sizeof r);
    st = tenso_view_ipc_ref(&r.ref, v);
    r.res = tgo_res_of(st, 0);
    return r;
}

/* Streams and files: the view owns every byte it points at (no Go memory involved). */
static inline tgo_info tgo_read_fd(int fd, tenso_decode_options o) {
    tgo_info i;
    tenso_view *v = NULL;
    tenso_status st = tenso_read_fd(&v, fd, &o);
    memset(&i, 0, sizeof i);
    if (st != TENSO_OK) {
        i.res = tgo_res_of(st, 0);
        return i;
    }
    tgo_fill(&i, v, NULL, 0);
    return i;
}

static inline tgo_info tgo_load_file(const char *path, uint32_t mode, tenso_decode_options o) {
    tgo_info i;
    tenso_view *v = NULL;
    tenso_status st = tenso_load_file(&v, path, mode, &o);
    memset(&i, 0, sizeof i);
    if (st != TENSO_OK) {
        i.res = tgo_res_of(st, 0);
        return i;
    }
    tgo_fill(&i, v, NULL, 0);
    return i;
}

/* 1 when fd is ready for reading (events POLLIN) or writing (POLLOUT) now, or has an error or
 * hang-up to report; 0 when an operation would wait. Lets Go's poller do the waiting before a
 * packet starts, where deadlines and Close apply (libtenso's own waits ignore them). */
static inline int tgo_ready(int fd, int writing) {
    struct pollfd p;
    p.fd = fd;
    p.events = writing ? POLLOUT : POLLIN;
    p.revents = 0;
    return poll(&p, 1, 0) != 0;
}

/* ---- inspection ---- */

static inline tgo_res tgo_packet_length(const void *data, size_t len) {
    size_t n = 0;
    tenso_status st = tenso_packet_length(&n, data, len, NULL);
    return tgo_res_of(st, n);
}

typedef struct {
    tgo_res res;
    tenso_packet_info info;
} tgo_inspect_res;

static inline tgo_inspect_res tgo_inspect(const void *data, size_t len) {
    tgo_inspect_res r;
    tenso_status st;
    memset(&r, 0, sizeof r);
    st = tenso_inspect(&r.info, data, len);
    r.res = tgo_res_of(st, 0);
    return r;
}

/* ---- dense encoding, straight from arguments ---- */

static inline tenso_tensor tgo_tensor(const void *data, uint64_t nbytes, const uint64_t *shape, uint32_t ndim,
                                      int32_t dtype) {
    tenso_tensor t;
    t.data = data;
    t.nbytes = nbytes;
    t.shape = shape;
    t.ndim = ndim;
    t.dtype = dtype;
    return t;
}

static inline tgo_res tgo_dumps_bound(const void *data, uint64_t nbytes, const uint64_t *shape, uint32_t ndim,
                                      int32_t dtype, tenso_encode_options o) {
    size_t n = 0;
    tenso_tensor t = tgo_tensor(data, nbytes, shape, ndim, dtype);
    tenso_status st = tenso_dumps_bound(&n, &t, &o);
    return tgo_res_of(st, n);
}

/* n: the packet length, or with TENSO_E_BUFFER_TOO_SMALL the size needed. */
static inline tgo_res tgo_dumps_into(void *dst, size_t cap, const void *data, uint64_t nbytes, const uint64_t *shape,
                                     uint32_t ndim, int32_t dtype, tenso_encode_options o) {
    size_t n = 0;
    tenso_tensor t = tgo_tensor(data, nbytes, shape, ndim, dtype);
    tenso_status st = tenso_dumps_into(dst, cap, &n, &t, &o);
    return tgo_res_of(st, n);
}

static inline tgo_res tgo_write_fd(int fd, const void *data, uint64_t nbytes, const uint64_t *shape, uint32_t ndim,
                                   int32_t dtype, tenso_encode_options o) {
    uint64_t n = 0;
    tenso_tensor t = tgo_tensor(data, nbytes, shape, ndim, dtype);
    tenso_status st = tenso_write_fd(&n, fd, &t, &o);
    return tgo_res_of(st, n);
}

static inline tgo_res tgo_save_file(const char *path, const void *data, uint64_t nbytes, const uint64_t *shape,
                                    uint32_t ndim, int32_t dtype, tenso_encode_options o) {
    tenso_tensor t = tgo_tensor(data, nbytes, shape, ndim, dtype);
    tenso_status st = tenso_save_file(path, &t, &o);
    return tgo_res_of(st, 0);
}

/* ---- values. They borrow data; the Go side pins every borrowed slice until the value is
 * freed (runtime.Pinner), which is what lets C memory hold those pointers across calls. ---- */

typedef struct {
    tgo_res res;
    tenso_value *v;
} tgo_val;

static inline tgo_val tgo_val_of(tenso_status st, tenso_value *v) {
    tgo_val r;
    r.res = tgo_res_of(st, 0);
    r.v = v;
    return r;
}

static inline tgo_val tgo_value_tensor(const void *data, uint64_t nbytes, const uint64_t *shape, uint32_t ndim,
                                       int32_t dtype) {
    tenso_value *v = NULL;
    tenso_tensor t = tgo_tensor(data, nbytes, shape, ndim, dtype);
    tenso_status st = tenso_value_new_tensor(&v, &t);
    return tgo_val_of(st, v);
}

static inline tgo_val tgo_value_packet(const void *p, size_t len) {
    tenso_value *v = NULL;
    tenso_status st = tenso_value_new_packet(&v, p, len);
    return tgo_val_of(st, v);
}

static inline tgo_val tgo_value_bundle(void) {
    tenso_value *v = NULL;
    tenso_status st = tenso_value_new_bundle(&v);
    return tgo_val_of(st, v);
}

static inline tgo_res tgo_bundle_insert(tenso_value *b, const char *key, size_t key_len, const tenso_value *child) {
    return tgo_res_of(tenso_bundle_insert(b, key, key_len, child), 0);
}

static inline tgo_val tgo_value_sparse(int32_t kind, uint64_t rows, uint64_t cols,
                                       const void *ad, uint64_t an, const uint64_t *as, uint32_t andim, int32_t at,
                                       const void *bd, uint64_t bn, const uint64_t *bs, uint32_t bndim, int32_t bt,
                                       const void *cd, uint64_t cn, const uint64_t *cs, uint32_t cndim, int32_t ct) {
    tenso_value *v = NULL;
    uint64_t shape[2];
    tenso_tensor a = tgo_tensor(ad, an, as, andim, at);
    tenso_tensor b = tgo_tensor(bd, bn, bs, bndim, bt);
    tenso_tensor c = tgo_tensor(cd, cn, cs, cndim, ct);
    tenso_status st;
    shape[0] = rows;
    shape[1] = cols;
    st = tenso_value_new_sparse(&v, kind, 2, shape, &a, &b, &c);
    return tgo_val_of(st, v);
}

static inline tenso_quantized tgo_quantized(const void *data, uint64_t nbytes, const uint64_t *shape, uint32_t ndim,
                                            int32_t dtype, const float *scales, const float *zero_points,
                                            uint32_t num_scales, int32_t scheme, int32_t axis, uint32_t group_size) {
    tenso_quantized q;
    q.data = data;
    q.nbytes = nbytes;
    q.shape = shape;
    q.scales = scales;
    q.zero_points = zero_points;
    q.ndim = ndim;
    q.dtype = dtype;
    q.scheme = scheme;
    q.axis = axis;
    q.group_size = group_size;
    q.num_scales = num_scales;
    return q;
}

static inline tgo_val tgo_value_quantized(const void *data, uint64_t nbytes, const uint64_t *shape, uint32_t ndim,
                                          int32_t dtype, const float *scales, const float *zero_points,
                                          uint32_t num_scales, int32_t scheme, int32_t axis, uint32_t group_size) {
    tenso_value *v = NULL;
    tenso_quantized q = tgo_quantized(data, nbytes, shape, ndim, dtype, scales, zero_points, num_scales, scheme,
                                      axis, group_size);
    tenso_status st = tenso_value_new_quantized(&v, &q);
    return tgo_val_of(st, v);
}

static inline tgo_res tgo_dequantize(float *dst, uint64_t count, const void *data, uint64_t nbytes,
                                     const uint64_t *shape, uint32_t ndim, int32_t dtype, const float *scales,
                                     const float *zero_points, uint32_t num_scales, int32_t scheme, int32_t axis,
                                     uint32_t group_size) {
    tenso_quantized q = tgo_quantized(data, nbytes, shape, ndim, dtype, scales, zero_points, num_scales, scheme,
                                      axis, group_size);
    return tgo_res_of(tenso_dequantize(dst, count, &q), 0);
}

/* Quantizes and returns the parts (C memory owned by the value, which the caller frees after
 * copying them). */
typedef struct {
    tgo_quant q;
    tenso_value *v;
} tgo_quantize_res;

static inline tgo_quantize_res tgo_quantize(const void *data, uint64_t nbytes, const uint64_t *shape, uint32_t ndim,
                                            int32_t dtype, int32_t qdtype, int32_t scheme, int32_t axis,
                                            uint32_t group_size) {
    tgo_quantize_res r;
    tenso_quantized q;
    tenso_tensor t = tgo_tensor(data, nbytes, shape, ndim, dtype);
    tenso_status st;
    r.v = NULL;
    st = tenso_quantize(&r.v, &t, qdtype, scheme, axis, group_size);
    if (st != TENSO_OK) {
        r.q = tgo_quant_of(st, NULL, NULL, 0);
        return r;
    }
    st = tenso_value_quantized(&q, r.v);
    r.q = tgo_quant_of(st, &q, NULL, 0);
    return r;
}

static inline tgo_val tgo_value_strings(uint64_t count, const uint64_t *offsets, const void *payload,
                                        uint64_t payload_len) {
    tenso_value *v = NULL;
    tenso_status st = tenso_value_new_strings(&v, count, offsets, payload, payload_len);
    return tgo_val_of(st, v);
}

static inline tgo_val tgo_value_ragged(const void *data, uint64_t nbytes, const uint64_t *shape, uint32_t ndim,
                                       int32_t dtype, uint64_t count, const uint64_t *row_offsets) {
    tenso_value *v = NULL;
    tenso_tensor flat = tgo_tensor(data, nbytes, shape, ndim, dtype);
    tenso_status st = tenso_value_new_ragged(&v, &flat, count, row_offsets);
    return tgo_val_of(st, v);
}

static inline tgo_val tgo_value_ipc(const void *handle64, uint64_t byte_offset, uint64_t nbytes,
                                    const void *uuid16) {
    tenso_value *v = NULL;
    tenso_ipc_ref ref;
    tenso_status st;
    memcpy(ref.handle, handle64, sizeof ref.handle);
    ref.byte_offset = byte_offset;
    ref.nbytes = nbytes;
    memcpy(ref.device_uuid, uuid16, sizeof ref.device_uuid);
    st = tenso_value_new_ipc_ref(&v, &ref);
    return tgo_val_of(st, v);
}

static inline tgo_res tgo_value_dumps_bound(const tenso_value *v, tenso_encode_options o) {
    size_t n = 0;
    tenso_status st = tenso_value_dumps_bound(&n, v, &o);
    return tgo_res_of(st, n);
}

static inline tgo_res tgo_value_dumps_into(void *dst, size_t cap, const tenso_value *v, tenso_encode_options o) {
    size_t n = 0;
    tenso_status st = tenso_value_dumps_into(dst, cap, &n, v, &o);
    return tgo_res_of(st, n);
}

static inline tgo_res tgo_value_write_fd(int fd, const tenso_value *v, tenso_encode_options o) {
    uint64_t n = 0;
    tenso_status st = tenso_value_write_fd(&n, fd, v, &o);
    return tgo_res_of(st, n);
}

static inline tgo_res tgo_value_save_file(const char *path, const tenso_value *v, tenso_encode_options o) {
    return tgo_res_of(tenso_value_save_file(path, v, &o), 0);
}

#endif /* TENSO_SDK_GO_TGO_H */
