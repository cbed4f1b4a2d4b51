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

/* Compile-time gate: the Go declarations below mirror the 1.x ABI from 1.1 on (shm.h and
 * archive.h are new in 1.1). */
#if !defined(TENSO_VERSION_MAJOR) || TENSO_VERSION_MAJOR != 1
#error "sdk/go is written for libtenso 1.x (tenso/version.h: TENSO_VERSION_MAJOR must be 1)"
#endif
#if TENSO_VERSION_MINOR < 1
#error "sdk/go needs libtenso 1.1 or newer (tenso/shm.h, tenso/archive.h)"
#endif

/* ---- status + message, captured in the failing cgo call ---- */

typedef struct {
    int32_t status;
    char *msg;  /* strdup'ed tenso_last_error() on failure, else NULL; Go frees it */
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
    tenso_view *view; /* tgo_loads_view / tgo_load_file / tgo_decoder_commit: the root; entries: the child */
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
    /* A plain dense packet: decoded into a struct, no view to allocate or free (1.5). */
    {
        tenso_tensor_view tv;
        uint32_t d;
        st = tenso_loads_tensor(&tv, data, len, &o);
        if (st == TENSO_OK) {
            i.kind = TENSO_KIND_DENSE;
            i.dtype = tv.dtype;
            i.ndim = tv.ndim;
            i.flags = tv.flags;
            i.version = tv.version;
            i.alignment = tv.alignment;
            i.packet_size = tv.packet_size;
            i.data = tgo_ref_of(tv.data, tv.nbytes, data, len);
            for (d = 0; d < tv.ndim && d < TENSO_MAX_NDIM; ++d) i.shape[d] = tv.shape[d];
            return i;
        }
        if (st != TENSO_E_UNSUPPORTED_KIND) {
            i.res = tgo_res_of(st, 0);
            return i;
        }
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

/* A child view (component, found entry) as info, or the failure that gave none. */
static inline tgo_info tgo_child_info(tenso_status st, const tenso_view *child, const void *base, size_t len) {
    tgo_info i;
    memset(&i, 0, sizeof i);
    if (st != TENSO_OK) {
        i.res = tgo_res_of(st, 0);
        return i;
    }
    tgo_fill(&i, child, base, len);
    return i;
}

static inline tgo_info tgo_view_component(const tenso_view *v, uint32_t index, const void *base, size_t len) {
    const tenso_view *child = NULL;
    tenso_status st = tenso_view_component(&child, v, index);
    return tgo_child_info(st, child, base, len);
}

/* The entry of bundle view v named key (INVALID_ARGUMENT "key not found" when none). */
static inline tgo_info tgo_view_find(const tenso_view *v, const char *key, size_t key_len, const void *base,
                                     size_t len) {
    const tenso_view *child = NULL;
    tenso_status st = tenso_view_bundle_find(&child, v, key, key_len);
    return tgo_child_info(st, child, base, len);
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

static inline tgo_val tgo_value_sparse(int32_t kind, uint64_t rows, uint64_t cols, const void *ad, uint64_t an,
                                       const uint64_t *as, uint32_t andim, int32_t at, const void *bd, uint64_t bn,
                                       const uint64_t *bs, uint32_t bndim, int32_t bt, const void *cd, uint64_t cn,
                                       const uint64_t *cs, uint32_t cndim, int32_t ct) {
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
    tenso_quantized q =
        tgo_quantized(data, nbytes, shape, ndim, dtype, scales, zero_points, num_scales, scheme, axis, group_size);
    tenso_status st = tenso_value_new_quantized(&v, &q);
    return tgo_val_of(st, v);
}

static inline tgo_res tgo_dequantize(float *dst, uint64_t count, const void *data, uint64_t nbytes,
                                     const uint64_t *shape, uint32_t ndim, int32_t dtype, const float *scales,
                                     const float *zero_points, uint32_t num_scales, int32_t scheme, int32_t axis,
                                     uint32_t group_size) {
    tenso_quantized q =
        tgo_quantized(data, nbytes, shape, ndim, dtype, scales, zero_points, num_scales, scheme, axis, group_size);
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

static inline tgo_val tgo_value_ipc(const void *handle64, uint64_t byte_offset, uint64_t nbytes, const void *uuid16) {
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

/* ---- shm.h: segments. A segment's bytes and views into it are C memory (the mapping). ---- */

typedef struct {
    tgo_res res; /* n: the packet length (create_for) */
    tenso_shm *shm;
} tgo_shm_res;

static inline tgo_shm_res tgo_shm_create(const char *name, uint64_t size, uint32_t flags) {
    tgo_shm_res r;
    r.shm = NULL;
    r.res = tgo_res_of(tenso_shm_create(&r.shm, name, size, flags), 0);
    return r;
}

static inline tgo_shm_res tgo_shm_create_for(const char *name, const tenso_value *v, tenso_encode_options o,
                                             uint32_t flags) {
    tgo_shm_res r;
    uint64_t n = 0;
    tenso_status st;
    r.shm = NULL;
    st = tenso_shm_create_for(&r.shm, &n, name, v, &o, flags); /* before n is read */
    r.res = tgo_res_of(st, n);
    return r;
}

static inline tgo_shm_res tgo_shm_open(const char *name, uint32_t flags) {
    tgo_shm_res r;
    r.shm = NULL;
    r.res = tgo_res_of(tenso_shm_open_flags(&r.shm, name, flags), 0);
    return r;
}

/* n: the packet length, or with TENSO_E_BUFFER_TOO_SMALL the size needed. */
static inline tgo_res tgo_shm_put(tenso_shm *s, const tenso_value *v, tenso_encode_options o) {
    uint64_t n = 0;
    tenso_status st = tenso_shm_put(&n, s, v, &o);
    return tgo_res_of(st, n);
}

/* Views of segments, caches and archives own (a reference to) every byte they point at. */
static inline tgo_info tgo_owned_view(tenso_status st, tenso_view *v) {
    tgo_info i;
    memset(&i, 0, sizeof i);
    if (st != TENSO_OK) {
        i.res = tgo_res_of(st, 0);
        return i;
    }
    tgo_fill(&i, v, NULL, 0);
    return i;
}

static inline tgo_info tgo_shm_get(const tenso_shm *s, tenso_decode_options o) {
    tenso_view *v = NULL;
    tenso_status st = tenso_shm_get(&v, s, &o);
    return tgo_owned_view(st, v);
}

static inline tgo_res tgo_shm_unlink(const char *name) { return tgo_res_of(tenso_shm_unlink(name), 0); }

/* ---- shm.h: the cache. Keys are passed as (pointer, length) for the call only. ---- */

typedef struct {
    tgo_res res;
    tenso_cache *cache;
} tgo_cache_res;

static inline tgo_cache_res tgo_cache_create(const char *name, tenso_cache_options o) {
    tgo_cache_res r;
    r.cache = NULL;
    r.res = tgo_res_of(tenso_cache_create(&r.cache, name, &o), 0);
    return r;
}

static inline tgo_cache_res tgo_cache_open(const char *name, tenso_cache_options o) {
    tgo_cache_res r;
    r.cache = NULL;
    r.res = tgo_res_of(tenso_cache_open(&r.cache, name, &o), 0);
    return r;
}

static inline tgo_res tgo_cache_unlink(const char *name) { return tgo_res_of(tenso_cache_unlink(name), 0); }

static inline tgo_res tgo_cache_put(tenso_cache *c, const char *key, size_t key_len, const tenso_value *v,
                                    tenso_encode_options o, double ttl) {
    uint64_t n = 0;
    tenso_status st = tenso_cache_put(&n, c, key, key_len, v, &o, ttl);
    return tgo_res_of(st, n);
}

static inline tgo_info tgo_cache_get(tenso_cache *c, const char *key, size_t key_len, tenso_decode_options o) {
    tenso_view *v = NULL;
    tenso_status st = tenso_cache_get(&v, c, key, key_len, &o);
    return tgo_owned_view(st, v);
}

static inline tgo_res tgo_cache_delete(tenso_cache *c, const char *key, size_t key_len) {
    return tgo_res_of(tenso_cache_delete(c, key, key_len), 0);
}

typedef struct {
    tgo_res res;
    tenso_cache_entry_info info;
} tgo_cache_info_res;

static inline tgo_cache_info_res tgo_cache_info(tenso_cache *c, const char *key, size_t key_len) {
    tgo_cache_info_res r;
    memset(&r, 0, sizeof r);
    r.res = tgo_res_of(tenso_cache_info(&r.info, c, key, key_len), 0);
    return r;
}

/* n: 1 when found. */
static inline tgo_res tgo_cache_contains(tenso_cache *c, const char *key, size_t key_len) {
    int found = 0;
    tenso_status st = tenso_cache_contains(&found, c, key, key_len);
    return tgo_res_of(st, (uint64_t)(found != 0));
}

/* Keys collected into one malloc'ed buffer of (uint32 length, bytes) records, so Go needs no
 * callback: it copies the keys out and frees the buffer. */
typedef struct {
    tgo_res res;
    char *buf;
    size_t len;
    size_t cap;
    uint64_t count;
} tgo_keys_res;

static inline int tgo_collect_key(const char *key, size_t key_len, void *user) {
    tgo_keys_res *r = (tgo_keys_res *)user;
    uint32_t n = (uint32_t)key_len;
    if (key_len > TENSO_CACHE_MAX_KEY_BYTES) return 1;
    if (r->cap - r->len < sizeof n + key_len) {
        size_t cap = r->cap ? r->cap * 2 : 1024;
        char *p;
        while (cap - r->len < sizeof n + key_len) cap *= 2;
        p = (char *)realloc(r->buf, cap);
        if (!p) return 1;
        r->buf = p;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, &n, sizeof n);
    memcpy(r->buf + r->len + sizeof n, key, key_len);
    r->len += sizeof n + key_len;
    r->count++;
    return 0;
}

static inline tgo_keys_res tgo_cache_keys(tenso_cache *c) {
    tgo_keys_res r;
    tenso_status st;
    memset(&r, 0, sizeof r);
    st = tenso_cache_keys(c, tgo_collect_key, &r);
    if (st == TENSO_E_USER) {
        /* only tgo_collect_key stops the walk: an allocation failed */
        r.res.status = TENSO_E_NO_MEMORY;
        r.res.msg = strdup("out of memory collecting cache keys");
    } else {
        r.res = tgo_res_of(st, 0);
    }
    if (r.res.status != TENSO_OK) {
        free(r.buf);
        r.buf = NULL;
        r.len = r.count = 0;
    }
    return r;
}

static inline tgo_res tgo_cache_clear(tenso_cache *c) { return tgo_res_of(tenso_cache_clear(c), 0); }

typedef struct {
    tgo_res res;
    tenso_cache_stats stats;
} tgo_cache_stats_res;

static inline tgo_cache_stats_res tgo_cache_stats(tenso_cache *c) {
    tgo_cache_stats_res r;
    memset(&r, 0, sizeof r);
    r.res = tgo_res_of(tenso_cache_stats_get(&r.stats, c), 0);
    return r;
}

static inline tgo_res tgo_cache_check(tenso_cache *c) { return tgo_res_of(tenso_cache_check(c), 0); }

/* ---- archive.h ---- */

typedef struct {
    tgo_res res;
    tenso_archive *a;
} tgo_archive_res;

static inline tgo_archive_res tgo_archive_open(const char *path, tenso_archive_options o) {
    tgo_archive_res r;
    r.a = NULL;
    r.res = tgo_res_of(tenso_archive_open(&r.a, path, &o), 0);
    return r;
}

typedef struct {
    tgo_res res;
    tenso_archive_entry e; /* e.name: C memory owned by the archive handle */
} tgo_entry_res;

static inline tgo_entry_res tgo_archive_entry_at(const tenso_archive *a, uint64_t index) {
    tgo_entry_res r;
    memset(&r, 0, sizeof r);
    r.res = tgo_res_of(tenso_archive_entry_at(&r.e, a, index), 0);
    return r;
}

/* n: the index. */
static inline tgo_res tgo_archive_find(const tenso_archive *a, const char *name, size_t name_len) {
    uint64_t i = 0;
    tenso_status st = tenso_archive_find(&i, a, name, name_len);
    return tgo_res_of(st, i);
}

static inline tgo_info tgo_archive_get(tenso_archive *a, uint64_t index, tenso_decode_options o) {
    tenso_view *v = NULL;
    tenso_status st = tenso_archive_get(&v, a, index, &o);
    return tgo_owned_view(st, v);
}

static inline tgo_res tgo_archive_read(void *dst, tenso_archive *a, uint64_t index, uint64_t offset, uint64_t len) {
    return tgo_res_of(tenso_archive_read(dst, a, index, offset, len), 0);
}

typedef struct {
    tgo_res res;
    const char *key; /* C memory owned by the archive handle */
    size_t key_len;
    const char *value;
    size_t value_len;
} tgo_meta_res;

static inline tgo_meta_res tgo_archive_metadata_at(const tenso_archive *a, uint64_t index) {
    tgo_meta_res r;
    memset(&r, 0, sizeof r);
    r.res = tgo_res_of(tenso_archive_metadata_at(&r.key, &r.key_len, &r.value, &r.value_len, a, index), 0);
    return r;
}

static inline tgo_meta_res tgo_archive_metadata_find(const tenso_archive *a, const char *key, size_t key_len) {
    tgo_meta_res r;
    memset(&r, 0, sizeof r);
    r.res = tgo_res_of(tenso_archive_metadata_find(&r.value, &r.value_len, a, key, key_len), 0);
    return r;
}

typedef struct {
    tgo_res res;
    tenso_archive_writer *w;
} tgo_writer_res;

static inline tgo_writer_res tgo_writer_open(const char *path, tenso_archive_write_options o) {
    tgo_writer_res r;
    r.w = NULL;
    r.res = tgo_res_of(tenso_archive_writer_open(&r.w, path, &o), 0);
    return r;
}

static inline tgo_res tgo_writer_add(tenso_archive_writer *w, const char *name, size_t name_len, const tenso_value *v) {
    return tgo_res_of(tenso_archive_writer_add(w, name, name_len, v), 0);
}

static inline tgo_res tgo_writer_set_metadata(tenso_archive_writer *w, const char *key, size_t key_len,
                                              const char *value, size_t value_len) {
    return tgo_res_of(tenso_archive_writer_set_metadata(w, key, key_len, value, value_len), 0);
}

static inline tgo_res tgo_writer_finish(tenso_archive_writer *w) {
    return tgo_res_of(tenso_archive_writer_finish(w), 0);
}

#endif /* TENSO_SDK_GO_TGO_H */
