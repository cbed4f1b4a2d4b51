// fuzz_loads.cpp - decode arbitrary bytes.
//
// The input is handed as it is to tenso_packet_length, tenso_inspect and tenso_loads (default
// options), and once more to tenso_packet_length and tenso_loads with tight limits and flags
// chosen by the input's LAST two bytes (the first byte of every real packet is 'T', so it
// would pin the choice). Beyond "no crash, no out-of-bounds access" the entry points must
// agree with each other:
//   - loads OK  =>  packet_length OK with the view's packet size (<= len), inspect agrees on
//     the header, and the packet alone (no trailing bytes) decodes the same way;
//   - packet_length fails with a framing error  =>  loads and inspect fail with that status;
//   - TRUNCATED  =>  the length asked for is > len, and supplying it makes progress;
//   - every dense view: nbytes == product(shape) * itemsize, borrowed data lies inside the
//     input, owned data is readable, and its DLPack export (versioned and legacy) describes it
//     and stays valid after the view is freed;
//   - bundles: entries walk recursively, keys are UTF-8 inside the input, find() returns the
//     first match, and the packet size is the sum of its parts;
//   - composite kinds: sparse components are 1-D dense views the encoder's own structure check
//     accepts, quantized parts match the scheme and dequantize, string offsets start at 0 and
//     never decrease, any bundle either reads as a consistent ragged array or is refused, and
//     each accessor refuses views of other kinds;
//   - a top-level dense, quantized, string or IPC packet in canonical form (v4, the flags and
//     zero padding the encoder writes) re-encodes to exactly the input bytes;
//   - tight limits only ever turn success into TOO_MANY_DIMS / TOO_MANY_ELEMENTS / LIMIT (or
//     MALFORMED with VALIDATE_UTF8), what they let through respects them, and framing under
//     them agrees with decoding under them.
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_common.hpp"

namespace {

bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

// Statuses a complete, well-framed packet may still fail to decode with: a footer or LZ4 frame
// that does not check out, or content that breaks a rule of its kind (sparse structure,
// string offsets) - framing reads lengths only.
bool is_decode_failure(tenso_status st) {
    return st == TENSO_E_CHECKSUM || st == TENSO_E_COMPRESSION || st == TENSO_E_MALFORMED ||
           st == TENSO_E_UNSUPPORTED_KIND || st == TENSO_E_NO_MEMORY;
}

struct Input {
    const uint8_t *data;
    size_t len;
    bool inside(const void *p, uint64_t n) const {
        const uint8_t *b = static_cast<const uint8_t *>(p);
        return b >= data && uint64_t(b - data) <= len && n <= len - size_t(b - data);
    }
};

struct Exports {
    std::vector<DLManagedTensorVersioned *> versioned;
    std::vector<DLManagedTensor *> legacy;
};

// The limits a decode ran under, with zero fields resolved to the protocol's.
struct Limits {
    uint32_t max_ndim = TENSO_MAX_NDIM, max_depth = TENSO_MAX_DEPTH;
    uint64_t max_elements = TENSO_MAX_ELEMENTS, max_packet_bytes = 0;
};

void check_dl_tensor(const DLTensor &t, const tenso_view *v) {
    FUZZ_CHECK(t.device.device_type == kDLCPU && t.device.device_id == 0, "DLPack device is not CPU 0");
    FUZZ_CHECK(t.ndim == int32_t(tenso_view_ndim(v)), "DLPack ndim %d, view ndim %u", t.ndim, tenso_view_ndim(v));
    DLDataType want = fuzz::dl_type_of(tenso_view_dtype(v));
    FUZZ_CHECK(t.dtype.code == want.code && t.dtype.bits == want.bits && t.dtype.lanes == want.lanes,
               "DLPack dtype (%u,%u,%u) for tenso dtype %d", t.dtype.code, t.dtype.bits, t.dtype.lanes,
               tenso_view_dtype(v));
    const uint64_t *shape = tenso_view_shape(v);
    for (int32_t i = 0; i < t.ndim; ++i)
        FUZZ_CHECK(t.shape && t.shape[i] >= 0 && uint64_t(t.shape[i]) == shape[i],
                   "DLPack shape[%d] differs from the view's", i);
    FUZZ_CHECK(t.byte_offset == 0, "DLPack byte_offset %llu", (unsigned long long)t.byte_offset);
    FUZZ_CHECK(t.data != nullptr, "DLPack data is NULL");
    if (tenso_view_nbytes(v)) FUZZ_CHECK(t.data == tenso_view_data(v), "DLPack data does not alias the view");
    // Compact row-major strides, in elements; NULL shape and strides for a scalar. (Strides
    // of an empty tensor address nothing: any convention will do.)
    if (t.ndim == 0) {
        FUZZ_CHECK(t.shape == nullptr && t.strides == nullptr, "DLPack scalar with a shape or strides");
    } else {
        FUZZ_CHECK(t.strides != nullptr, "DLPack strides missing");
        if (fuzz::numel(v) == 0) return;
        int64_t stride = 1;
        for (int32_t i = t.ndim - 1; i >= 0; --i) {
            FUZZ_CHECK(t.strides[i] == stride, "DLPack strides[%d] = %lld, compact is %lld", i, (long long)t.strides[i],
                       (long long)stride);
            stride *= t.shape[i] ? t.shape[i] : 1;
        }
    }
}

// Byte count of an exported tensor, from the DLPack description alone.
uint64_t dl_nbytes(const DLTensor &t) {
    uint64_t n = uint64_t(t.dtype.bits) / 8 * t.dtype.lanes;
    for (int32_t i = 0; i < t.ndim; ++i) n *= uint64_t(t.shape[i]);
    return n;
}

void export_dense(const tenso_view *v, Exports *ex) {
    DLManagedTensorVersioned *m = nullptr;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_to_dlpack(&m, v));
    FUZZ_CHECK(m && m->deleter, "no DLPack tensor or deleter");
    FUZZ_CHECK(m->version.major == 1, "DLPack major version %u", m->version.major);
    FUZZ_CHECK(m->flags & DLPACK_FLAG_BITMASK_READ_ONLY, "DLPack export of a view is not READ_ONLY");
    bool compressed = tenso_view_flags(v) & TENSO_FLAG_COMPRESSION;
    FUZZ_CHECK(bool(m->flags & DLPACK_FLAG_BITMASK_IS_COPIED) == compressed, "IS_COPIED is %d for a %scompressed body",
               int(bool(m->flags & DLPACK_FLAG_BITMASK_IS_COPIED)), compressed ? "" : "un");
    check_dl_tensor(m->dl_tensor, v);
    ex->versioned.push_back(m);

    DLManagedTensor *l = nullptr;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_to_dlpack_legacy(&l, v));
    FUZZ_CHECK(l && l->deleter, "no legacy DLPack tensor or deleter");
    check_dl_tensor(l->dl_tensor, v);
    ex->legacy.push_back(l);
}

// The sum of a container's parts must be its packet size.
uint64_t header_len(const tenso_view *v) { return tenso_view_version(v) == 4 ? 10 : 8; }

// Accessors of the other kinds refuse a view with UNSUPPORTED_KIND.
void check_other_accessors(const tenso_view *v) {
    const tenso_kind k = tenso_view_kind(v);
    const char *key;
    size_t key_len;
    const tenso_view *child;
    if (k != TENSO_KIND_BUNDLE) {
        FUZZ_CHECK(tenso_view_bundle_count(v) == 0, "a view of kind %d reports %u bundle entries (the API says 0)", k,
                   tenso_view_bundle_count(v));
        FUZZ_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_view_bundle_entry(&key, &key_len, &child, v, 0));
    }
    if (k != TENSO_KIND_SPARSE_COO && k != TENSO_KIND_SPARSE_CSR && k != TENSO_KIND_SPARSE_CSC)
        FUZZ_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_view_component(&child, v, 0));
    tenso_quantized q;
    if (k != TENSO_KIND_QUANTIZED) FUZZ_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_view_quantized(&q, v));
    const uint64_t *offs;
    const char *payload;
    if (k != TENSO_KIND_STRING && k != TENSO_KIND_RAGGED)
        FUZZ_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_view_string_offsets(&offs, &payload, v));
    tenso_ipc_ref ref;
    if (k != TENSO_KIND_GPU_IPC_REF) FUZZ_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_view_ipc_ref(&ref, v));
    if (k != TENSO_KIND_DENSE) {
        DLManagedTensorVersioned *m = nullptr;
        FUZZ_CHECK_STATUS(TENSO_E_UNSUPPORTED_KIND, tenso_view_to_dlpack(&m, v));
        FUZZ_CHECK(m == nullptr, "failed export left a tensor");
    }
}

// For a top-level packet in canonical form (v4, the flags and zero padding our encoder
// writes), encoding what was decoded must give back the input bytes.
struct Canon {
    const Input *in;
    size_t plen;
    // Zero bytes between the header (hlen bytes) and `body`, and a zero reserved byte.
    bool plain(const tenso_view *v, size_t hlen, const void *body) const {
        if (tenso_view_version(v) != 4 || in->len < 10 || in->data[9] != 0) return false;
        size_t off = size_t(static_cast<const uint8_t *>(body) - in->data);
        if (off < hlen || off > plen) return false;
        for (size_t i = hlen; i < off; ++i)
            if (in->data[i]) return false;
        return true;
    }
    void expect(const tenso_value *value, const tenso_encode_options &o, const char *what) const {
        tenso_buffer b = TENSO_BUFFER_INIT;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_dumps(&b, value, &o));
        FUZZ_CHECK(b.size == plen && std::memcmp(b.data, in->data, plen) == 0,
                   "re-encoding a canonical %s packet gives %zu other bytes (packet: %zu)", what, b.size, plen);
        tenso_buffer_dispose(&b);
    }
};

tenso_encode_options opts_of(const tenso_view *v) {
    tenso_encode_options o;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_encode_options_init(&o, TENSO_ENCODE_OPTIONS_VERSION));
    o.alignment = tenso_view_alignment(v);
    o.flags = (tenso_view_flags(v) & TENSO_FLAG_INTEGRITY) ? TENSO_ENCODE_INTEGRITY : 0;
    return o;
}

uint32_t align_flag(uint32_t a) { return a == 64 ? TENSO_FLAG_ALIGNED : TENSO_FLAG_CUST_ALIGN; }

tenso_tensor tensor_of(const tenso_view *v) {
    tenso_tensor t;
    t.data = tenso_view_data(v);
    t.nbytes = tenso_view_nbytes(v);
    t.shape = tenso_view_shape(v);
    t.ndim = tenso_view_ndim(v);
    t.dtype = tenso_view_dtype(v);
    return t;
}

uint64_t rd_u64(const void *p, uint64_t i) {
    uint64_t x;
    std::memcpy(&x, static_cast<const uint8_t *>(p) + 8 * i, 8);
    return x;
}

// Checks one view and its children; returns the nesting depth below it. `canon` is set for
// the top-level packet of the default decode.
uint32_t walk(const tenso_view *v, const Input &in, const Limits &lim, const Canon *canon, bool utf8, Exports *ex) {
    FUZZ_CHECK(v != nullptr, "NULL view");
    uint64_t psize = tenso_view_packet_size(v);
    FUZZ_CHECK(psize > 0, "view has packet size 0");
    FUZZ_CHECK(tenso_view_version(v) >= 1 && tenso_view_version(v) <= 4, "version %u", tenso_view_version(v));
    uint32_t align = tenso_view_alignment(v);
    FUZZ_CHECK(is_pow2(align) && align <= TENSO_MAX_ALIGNMENT, "alignment %u", align);
    uint32_t ndim = tenso_view_ndim(v);
    FUZZ_CHECK(ndim <= lim.max_ndim, "ndim %u over the limit %u", ndim, lim.max_ndim);
    FUZZ_CHECK((tenso_view_shape(v) == nullptr) == (ndim == 0), "shape pointer vs ndim %u", ndim);
    const uint32_t flags = tenso_view_flags(v);
    const tenso_kind kind = tenso_view_kind(v);
    const void *data = tenso_view_data(v);
    const uint64_t nbytes = tenso_view_nbytes(v);
    const bool owns = tenso_view_owns_data(v);
    // tenso_loads owns exactly the decompressed bodies.
    FUZZ_CHECK(owns == (kind == TENSO_KIND_DENSE && (flags & TENSO_FLAG_COMPRESSION)),
               "owns_data %d for kind %d, flags 0x%x", int(owns), kind, flags);
    if (data && !owns)
        FUZZ_CHECK(in.inside(data, nbytes), "borrowed data [%p, +%llu) outside the input [%p, +%zu)", data,
                   (unsigned long long)nbytes, static_cast<const void *>(in.data), in.len);
    if (data) fuzz::touch(data, nbytes);
    check_other_accessors(v);
    const char *key;
    size_t key_len;
    const tenso_view *child;

    switch (kind) {
    case TENSO_KIND_DENSE: {
        size_t item = tenso_dtype_itemsize(tenso_view_dtype(v));
        FUZZ_CHECK(item > 0, "dense view with dtype %d", tenso_view_dtype(v));
        uint64_t n = fuzz::numel(v);
        FUZZ_CHECK(n <= lim.max_elements, "%llu elements over the limit", (unsigned long long)n);
        FUZZ_CHECK(nbytes == n * item, "nbytes %llu != %llu x %zu", (unsigned long long)nbytes, (unsigned long long)n,
                   item);
        FUZZ_CHECK((data == nullptr) == (nbytes == 0), "data pointer vs nbytes %llu", (unsigned long long)nbytes);
        // Alignment is relative to the packet start; the top packet starts at the input.
        if (data && !owns && canon)
            FUZZ_CHECK((static_cast<const uint8_t *>(data) - in.data) % align == 0,
                       "body offset %td is not a multiple of the alignment %u",
                       static_cast<const uint8_t *>(data) - in.data, align);
        if (ex) export_dense(v, ex);
        if (canon && data && !owns) {
            uint32_t want = align_flag(align) | (flags & TENSO_FLAG_INTEGRITY);
            size_t hlen = 10 + 4 * size_t(ndim) + ((flags & TENSO_FLAG_CUST_ALIGN) ? 1 : 0);
            if (flags == want && canon->plain(v, hlen, data)) {
                tenso_tensor t = tensor_of(v);
                tenso_value *val = nullptr;
                FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_new_tensor(&val, &t));
                canon->expect(val, opts_of(v), "dense");
                tenso_value_free(val);
            }
        }
        return 0;
    }
    case TENSO_KIND_BUNDLE: {
        FUZZ_CHECK(flags & TENSO_FLAG_BUNDLE, "bundle view without the BUNDLE flag: 0x%x", flags);
        FUZZ_CHECK(ndim == 0 && tenso_view_dtype(v) == 0 && nbytes == 0 && !data,
                   "bundle view with a dtype, shape or body");
        uint32_t count = tenso_view_bundle_count(v);
        FUZZ_CHECK(count <= TENSO_MAX_BUNDLE_ENTRIES, "bundle with %u entries", count);
        uint64_t sum = header_len(v);
        uint32_t depth = 0;
        for (uint32_t i = 0; i < count; ++i) {
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_bundle_entry(&key, &key_len, &child, v, i));
            FUZZ_CHECK(key != nullptr || key_len == 0, "NULL key with length %zu", key_len);
            if (key_len) {
                FUZZ_CHECK(in.inside(key, key_len), "bundle key %u outside the input", i);
                FUZZ_CHECK(fuzz::valid_utf8(reinterpret_cast<const uint8_t *>(key), key_len), "key %u is not UTF-8", i);
            }
            // find() returns the first entry with the key: duplicates are legal and kept in order.
            const tenso_view *found = nullptr;
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_bundle_find(&found, v, key_len ? key : "", key_len));
            for (uint32_t j = 0; j <= i; ++j) {
                const char *k2;
                size_t l2;
                const tenso_view *c2;
                FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_bundle_entry(&k2, &l2, &c2, v, j));
                if (l2 == key_len && (key_len == 0 || std::memcmp(k2, key, key_len) == 0)) {
                    FUZZ_CHECK(found == c2, "find() of key %u returned entry other than the first match %u", i, j);
                    break;
                }
            }
            uint32_t d = walk(child, in, lim, nullptr, utf8, ex) + 1;
            if (d > depth) depth = d;
            sum += 8 + key_len + tenso_view_packet_size(child);
        }
        FUZZ_CHECK(psize == sum, "bundle packet size %llu, its parts add up to %llu", (unsigned long long)psize,
                   (unsigned long long)sum);
        FUZZ_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_bundle_entry(&key, &key_len, &child, v, count));
        FUZZ_CHECK(depth <= lim.max_depth, "bundle nests %u deep, over the limit %u", depth, lim.max_depth);
        // Any bundle may be read as a ragged array; when it is one, its parts are consistent.
        const tenso_view *flat = nullptr, *offs = nullptr;
        tenso_status st = tenso_view_ragged(&flat, &offs, v);
        if (st == TENSO_OK) {
            FUZZ_CHECK(tenso_view_kind(flat) == TENSO_KIND_DENSE && tenso_view_ndim(flat) == 1 &&
                           tenso_view_kind(offs) == TENSO_KIND_DENSE && tenso_view_ndim(offs) == 1 &&
                           tenso_view_dtype(offs) == TENSO_DTYPE_UINT64,
                       "ragged parts are not 1-D dense (offsets uint64)");
            uint64_t n = tenso_view_shape(offs)[0];
            FUZZ_CHECK(n >= 1 && rd_u64(tenso_view_data(offs), 0) == 0, "ragged offsets do not start at 0");
            for (uint64_t i = 1; i < n; ++i)
                FUZZ_CHECK(rd_u64(tenso_view_data(offs), i) >= rd_u64(tenso_view_data(offs), i - 1),
                           "ragged offsets decrease at %llu", (unsigned long long)i);
            FUZZ_CHECK(rd_u64(tenso_view_data(offs), n - 1) == tenso_view_shape(flat)[0],
                       "ragged offsets end off the flat length");
        } else {
            FUZZ_CHECK(st == TENSO_E_UNSUPPORTED_KIND || st == TENSO_E_MALFORMED, "tenso_view_ragged: %s",
                       tenso_status_name(st));
            FUZZ_CHECK(flat == nullptr && offs == nullptr, "failed tenso_view_ragged left outputs");
        }
        return depth;
    }
    case TENSO_KIND_SPARSE_COO:
    case TENSO_KIND_SPARSE_CSR:
    case TENSO_KIND_SPARSE_CSC: {
        FUZZ_CHECK(ndim == 2, "sparse view with ndim %u", ndim);
        const tenso_view *c[3];
        uint64_t sum = header_len(v) + 4 * uint64_t(ndim);
        uint32_t depth = 0;
        tenso_tensor t[3];
        for (uint32_t i = 0; i < 3; ++i) {
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_component(&c[i], v, i));
            FUZZ_CHECK(tenso_view_kind(c[i]) == TENSO_KIND_DENSE && tenso_view_ndim(c[i]) == 1,
                       "sparse component %u is not a 1-D dense view", i);
            uint32_t d = walk(c[i], in, lim, nullptr, utf8, nullptr) + 1;
            if (d > depth) depth = d;
            sum += 4 + tenso_view_packet_size(c[i]);
            t[i] = tensor_of(c[i]);
        }
        FUZZ_CHECK_STATUS(TENSO_E_INVALID_ARGUMENT, tenso_view_component(&child, v, 3));
        FUZZ_CHECK(psize == sum, "sparse packet size %llu, its parts add up to %llu", (unsigned long long)psize,
                   (unsigned long long)sum);
        FUZZ_CHECK(depth <= lim.max_depth, "sparse nests %u deep, over the limit %u", depth, lim.max_depth);
        // The decoder checked the structure "as tenso_value_new_sparse does": the encoder agrees.
        tenso_value *val = nullptr;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_new_sparse(&val, kind, ndim, tenso_view_shape(v), &t[0], &t[1], &t[2]));
        tenso_value_free(val);
        return depth;
    }
    case TENSO_KIND_QUANTIZED: {
        tenso_quantized q;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_quantized(&q, v));
        FUZZ_CHECK(q.dtype == tenso_view_dtype(v) && q.dtype >= TENSO_DTYPE_QINT8 && q.dtype <= TENSO_DTYPE_QUINT4,
                   "quantized dtype %d (view %d)", q.dtype, tenso_view_dtype(v));
        FUZZ_CHECK(q.ndim == ndim && (ndim == 0 || std::memcmp(q.shape, tenso_view_shape(v), 8 * ndim) == 0),
                   "quantized parts disagree with the view's shape");
        uint64_t n = fuzz::numel(v);
        FUZZ_CHECK(n <= lim.max_elements, "%llu elements over the limit", (unsigned long long)n);
        bool four = q.dtype == TENSO_DTYPE_QINT4 || q.dtype == TENSO_DTYPE_QUINT4;
        FUZZ_CHECK(q.nbytes == (four ? (n + 1) / 2 : n) && q.nbytes == nbytes && q.data == data,
                   "quantized body of %llu bytes for %llu elements", (unsigned long long)q.nbytes,
                   (unsigned long long)n);
        uint64_t want = q.scheme == TENSO_QUANT_PER_TENSOR ? 1
                        : q.scheme == TENSO_QUANT_PER_CHANNEL
                            ? (q.axis >= 0 && uint32_t(q.axis) < ndim ? q.shape[q.axis] : ~0ull)
                        : q.scheme == TENSO_QUANT_PER_GROUP && q.group_size ? (n + q.group_size - 1) / q.group_size
                                                                            : ~0ull;
        FUZZ_CHECK(q.num_scales == want, "scheme %d with %u scales", q.scheme, q.num_scales);
        fuzz::touch(q.scales, 4 * size_t(q.num_scales));
        fuzz::touch(q.zero_points, 4 * size_t(q.num_scales));
        if (n <= (1u << 16)) {  // whatever floats the wire holds, dequantizing is defined
            std::vector<float> out(n ? n : 1);
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_dequantize(out.data(), n, &q));
        }
        tenso_value *val = nullptr;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_new_quantized(&val, &q));
        if (canon) {
            uint32_t wantf = align_flag(align) | (flags & TENSO_FLAG_INTEGRITY);
            size_t hlen =
                10 + 4 * size_t(ndim) + 10 + 8 * size_t(q.num_scales) + ((flags & TENSO_FLAG_CUST_ALIGN) ? 1 : 0);
            const void *body = data ? data : in.data + (psize - nbytes - ((flags & TENSO_FLAG_INTEGRITY) ? 8 : 0));
            if (flags == wantf && canon->plain(v, hlen, body)) canon->expect(val, opts_of(v), "quantized");
        }
        tenso_value_free(val);
        return 0;
    }
    case TENSO_KIND_STRING:
    case TENSO_KIND_RAGGED: {
        const uint64_t *offs = nullptr;
        const char *payload = nullptr;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_string_offsets(&offs, &payload, v));
        FUZZ_CHECK(ndim == 1, "string view with ndim %u", ndim);
        uint64_t count = tenso_view_shape(v)[0];
        FUZZ_CHECK(offs && offs[0] == 0, "string offsets do not start at 0");
        for (uint64_t i = 1; i <= count; ++i)
            FUZZ_CHECK(offs[i] >= offs[i - 1], "string offsets decrease at %llu", (unsigned long long)i);
        FUZZ_CHECK(offs[count] == nbytes, "last offset %llu, payload %llu", (unsigned long long)offs[count],
                   (unsigned long long)nbytes);
        FUZZ_CHECK(payload == data, "payload is not the view's data");
        if (nbytes) FUZZ_CHECK(in.inside(payload, nbytes), "string payload outside the input");
        bool is_utf8 = fuzz::valid_utf8(reinterpret_cast<const uint8_t *>(payload), nbytes);
        if (utf8 && kind == TENSO_KIND_STRING) FUZZ_CHECK(is_utf8, "VALIDATE_UTF8 let a non-UTF-8 payload through");
        if (canon && kind == TENSO_KIND_STRING) {
            tenso_value *val = nullptr;
            tenso_status st = tenso_value_new_strings(&val, count, offs, payload, nbytes);
            FUZZ_CHECK(st == (is_utf8 ? TENSO_OK : TENSO_E_INVALID_ARGUMENT), "new_strings of decoded strings: %s",
                       tenso_status_name(st));
            const void *body = payload - 8 * (count + 1);
            if (val && flags == (TENSO_FLAG_STRING | TENSO_FLAG_ALIGNED | (flags & TENSO_FLAG_INTEGRITY)) &&
                tenso_view_dtype(v) == TENSO_DTYPE_STRING && canon->plain(v, 14, body))
                canon->expect(val, opts_of(v), "string");
            tenso_value_free(val);
        }
        return 0;
    }
    case TENSO_KIND_GPU_IPC_REF: {
        tenso_ipc_ref ref;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_view_ipc_ref(&ref, v));
        FUZZ_CHECK(psize == 106, "IPC reference of %llu bytes", (unsigned long long)psize);
        FUZZ_CHECK(!(flags & TENSO_FLAG_INTEGRITY), "IPC reference with an integrity footer");
        // The decoder ignores the dtype byte of an IPC reference; the encoder writes 0.
        if (canon && flags == TENSO_FLAG_GPU_IPC_REF && in.data[7] == 0) {
            tenso_value *val = nullptr;
            FUZZ_CHECK_STATUS(TENSO_OK, tenso_value_new_ipc_ref(&val, &ref));
            canon->expect(val, opts_of(v), "IPC reference");
            tenso_value_free(val);
        }
        return 0;
    }
    default: FUZZ_CHECK(false, "view of unknown kind %d", kind);
    }
    return 0;
}

// packet_length on `len` bytes said TRUNCATED asking for `need`: with that many bytes (the
// input, then zeros) it must get further - succeed past `len`, fail, or ask for even more.
void check_progress(const uint8_t *data, size_t len, size_t need) {
    if (need > len + (size_t(1) << 20)) return;  // too big to materialise cheaply
    std::vector<uint8_t> more(need, 0);
    if (len) std::memcpy(more.data(), data, len);
    size_t next = 0;
    tenso_status st = tenso_packet_length(&next, more.data(), need, nullptr);
    if (st == TENSO_OK)
        FUZZ_CHECK(next > len && next <= need, "with %zu bytes the packet is %zu long, with %zu it was truncated", need,
                   next, len);
    if (st == TENSO_E_TRUNCATED)
        FUZZ_CHECK(next > need, "asked for %zu bytes, got them, and was asked for %zu", need, next);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const Input in{data, size};

    size_t plen = 12345;
    tenso_status st_len = tenso_packet_length(&plen, data, size, nullptr);
    tenso_packet_info info;
    tenso_status st_insp = tenso_inspect(&info, data, size);
    tenso_view *view = reinterpret_cast<tenso_view *>(1);
    tenso_status st = tenso_loads(&view, data, size, nullptr);
    FUZZ_CHECK((st == TENSO_OK) == (view != nullptr), "loads returned %s with view %p", tenso_status_name(st),
               static_cast<void *>(view));
    if (st != TENSO_OK) FUZZ_CHECK(tenso_last_error()[0] != '\0', "%s without a message", tenso_status_name(st));

    // ---- packet_length, inspect and loads agree ----
    if (st_len == TENSO_OK) {
        FUZZ_CHECK(plen > 0 && plen <= size, "packet_length %zu for %zu bytes", plen, size);
        FUZZ_CHECK(st == TENSO_OK || is_decode_failure(st), "framed packet fails to decode with %s",
                   tenso_status_name(st));
        FUZZ_CHECK_STATUS(TENSO_OK, st_insp);
        FUZZ_CHECK(info.packet_size == plen, "inspect packet_size %llu, packet_length %zu",
                   (unsigned long long)info.packet_size, plen);
        // The packet alone: same length, same decode result; every strict prefix is truncated
        // and asks for no byte past the packet.
        size_t again = 0;
        FUZZ_CHECK_STATUS(TENSO_OK, tenso_packet_length(&again, data, plen, nullptr));
        FUZZ_CHECK(again == plen, "packet_length of the packet alone is %zu, not %zu", again, plen);
        tenso_view *alone = nullptr;
        tenso_status st_alone = tenso_loads(&alone, data, plen, nullptr);
        FUZZ_CHECK(st_alone == st, "loads of the packet alone gives %s, with trailing bytes %s",
                   tenso_status_name(st_alone), tenso_status_name(st));
        tenso_view_free(alone);
        const size_t cuts[3] = {0, plen / 2, plen - 1};
        for (size_t cut : cuts) {
            size_t need = 0;
            FUZZ_CHECK_STATUS(TENSO_E_TRUNCATED, tenso_packet_length(&need, data, cut, nullptr));
            FUZZ_CHECK(need > cut && need <= plen, "prefix of %zu bytes of a %zu-byte packet asks for %zu", cut, plen,
                       need);
        }
    } else if (st_len == TENSO_E_TRUNCATED) {
        FUZZ_CHECK(plen > size, "TRUNCATED with %zu bytes, but only %zu asked for", size, plen);
        FUZZ_CHECK_STATUS(TENSO_E_TRUNCATED, st);
        FUZZ_CHECK(st_insp == TENSO_OK || st_insp == TENSO_E_TRUNCATED, "inspect of a truncated packet: %s",
                   tenso_status_name(st_insp));
        if (st_insp == TENSO_OK) FUZZ_CHECK(info.packet_size == 0, "inspect sized an incomplete packet");
        check_progress(data, size, plen);
    } else {
        FUZZ_CHECK(plen == 0, "packet_length failed with %s but wrote %zu", tenso_status_name(st_len), plen);
        FUZZ_CHECK(st == st_len, "loads says %s, packet_length %s", tenso_status_name(st), tenso_status_name(st_len));
    }
    if (st_insp != TENSO_OK) {
        FUZZ_CHECK(st_insp == st_len, "inspect fails with %s, packet_length gives %s", tenso_status_name(st_insp),
                   tenso_status_name(st_len));
    } else {
        FUZZ_CHECK(info.version >= 1 && info.version <= 4, "inspect version %u", info.version);
        FUZZ_CHECK(info.ndim <= TENSO_MAX_NDIM, "inspect ndim %u", info.ndim);
        FUZZ_CHECK(is_pow2(info.alignment), "inspect alignment %u", info.alignment);
        if (info.packet_size)
            FUZZ_CHECK(st_len == TENSO_OK && info.packet_size == plen, "inspect sized %llu, packet_length %s %zu",
                       (unsigned long long)info.packet_size, tenso_status_name(st_len), plen);
    }

    // ---- the decoded tree ----
    Exports ex;
    if (st == TENSO_OK) {
        FUZZ_CHECK(tenso_view_packet_size(view) == plen, "view packet size %llu, packet_length %zu",
                   (unsigned long long)tenso_view_packet_size(view), plen);
        FUZZ_CHECK(info.kind == tenso_view_kind(view) && info.version == tenso_view_version(view) &&
                       info.flags == tenso_view_flags(view) && info.dtype == tenso_view_dtype(view) &&
                       info.ndim == tenso_view_ndim(view) && info.alignment == tenso_view_alignment(view),
                   "inspect and the view disagree on the header");
        for (uint32_t i = 0; i < info.ndim; ++i)
            FUZZ_CHECK(info.shape[i] == tenso_view_shape(view)[i], "inspect shape[%u] differs", i);
        if (info.kind == TENSO_KIND_BUNDLE)
            FUZZ_CHECK(info.entry_count == tenso_view_bundle_count(view), "inspect entry_count %u, view %u",
                       info.entry_count, tenso_view_bundle_count(view));
        const Canon canon{&in, plen};
        walk(view, in, Limits(), &canon, false, &ex);
    }
    // The exports hold their own references: they must outlive the view.
    tenso_view_free(view);
    for (DLManagedTensorVersioned *m : ex.versioned) {
        fuzz::touch(m->dl_tensor.data, dl_nbytes(m->dl_tensor));
        m->deleter(m);
    }
    for (DLManagedTensor *m : ex.legacy) {
        fuzz::touch(m->dl_tensor.data, dl_nbytes(m->dl_tensor));
        m->deleter(m);
    }

    // ---- the same bytes under tight limits ----
    const uint8_t sel = size ? data[size - 1] : 0;
    tenso_decode_options opts;
    FUZZ_CHECK_STATUS(TENSO_OK, tenso_decode_options_init(&opts, TENSO_DECODE_OPTIONS_VERSION));
    const uint8_t sel2 = size >= 2 ? data[size - 2] : 0;
    opts.flags = ((sel & 1) ? TENSO_DECODE_SKIP_CHECKSUM : 0) | ((sel2 & 1) ? TENSO_DECODE_VALIDATE_UTF8 : 0);
    opts.max_ndim = (sel >> 1) & 3;   // 0 (protocol limit) or 1..3
    opts.max_depth = (sel >> 3) & 3;  // 0 or 1..3
    opts.max_elements = (sel & 0x20) ? 64 : 0;
    static const uint64_t kPacketCaps[4] = {0, 128, 1024, 65536};
    opts.max_packet_bytes = kPacketCaps[(sel >> 6) & 3];
    Limits lim;
    if (opts.max_ndim) lim.max_ndim = opts.max_ndim;
    if (opts.max_depth) lim.max_depth = opts.max_depth;
    if (opts.max_elements) lim.max_elements = opts.max_elements;
    lim.max_packet_bytes = opts.max_packet_bytes;

    tenso_view *tight = nullptr;
    tenso_status st_tight = tenso_loads(&tight, data, size, &opts);
    // Framing under the same limits agrees with decoding, as with the defaults above.
    size_t tlen = 0;
    tenso_status st_tlen = tenso_packet_length(&tlen, data, size, &opts);
    if (st_tlen == TENSO_OK) {
        FUZZ_CHECK(tlen == plen && st_len == TENSO_OK, "framing under tight limits gives %zu bytes, defaults %s %zu",
                   tlen, tenso_status_name(st_len), plen);
        FUZZ_CHECK(st_tight == TENSO_OK || is_decode_failure(st_tight),
                   "framed under tight limits, decode fails with %s", tenso_status_name(st_tight));
    } else {
        // Framing refuses a container header's limit (depth, entries, packet bytes) as soon as the
        // header is there, before the rest of the packet: where loads of the same cut bytes stops
        // at the cut first, framing's LIMIT is the earlier, right answer for a stream.
        const bool limit_before_cut = st_tlen == TENSO_E_LIMIT && st_tight == TENSO_E_TRUNCATED;
        FUZZ_CHECK(st_tight == st_tlen || limit_before_cut, "tight limits: loads says %s, packet_length %s",
                   tenso_status_name(st_tight), tenso_status_name(st_tlen));
    }
    if (st_tight == TENSO_OK) {
        FUZZ_CHECK(st == TENSO_OK || (st == TENSO_E_CHECKSUM && (opts.flags & TENSO_DECODE_SKIP_CHECKSUM)),
                   "tight limits accept what the defaults reject with %s", tenso_status_name(st));
        FUZZ_CHECK(tenso_view_packet_size(tight) == plen, "tight limits frame %llu bytes, defaults %zu",
                   (unsigned long long)tenso_view_packet_size(tight), plen);
        if (lim.max_packet_bytes)
            FUZZ_CHECK(plen <= lim.max_packet_bytes, "%zu-byte packet passes max_packet_bytes %llu", plen,
                       (unsigned long long)lim.max_packet_bytes);
        walk(tight, in, lim, nullptr, opts.flags & TENSO_DECODE_VALIDATE_UTF8, nullptr);
    } else if (st == TENSO_OK) {
        FUZZ_CHECK(st_tight == TENSO_E_TOO_MANY_DIMS || st_tight == TENSO_E_TOO_MANY_ELEMENTS ||
                       st_tight == TENSO_E_LIMIT ||
                       (st_tight == TENSO_E_MALFORMED && (opts.flags & TENSO_DECODE_VALIDATE_UTF8)),
                   "tight limits turn success into %s", tenso_status_name(st_tight));
    }
    tenso_view_free(tight);
    return 0;
}
