// composites.cpp - values built from parts, and the ragged-array convention (composites.hpp).
#include "format/composites.hpp"

#include <cstring>
#include <memory>

#include "error.hpp"
#include "format/sparse.hpp"

namespace tenso {

namespace {
std::string num(uint64_t v) { return std::to_string(v); }

const char kRaggedOffsets[] = "__ragged_offsets__";
const char kRaggedFlat[] = "__ragged_flat__";
const char kRaggedCount[] = "__ragged_count__";

uint64_t load_u64(const void *p, uint64_t i) {
    uint64_t v;
    std::memcpy(&v, static_cast<const uint8_t *>(p) + 8 * i, 8);  // host is little-endian
    return v;
}

Value with_type(Value::Type t) {
    Value v;
    v.type = t;
    return v;
}
}  // namespace

void set_shape(Tensor &dst, uint32_t ndim, const uint64_t *shape) {
    if (ndim > TENSO_MAX_NDIM) fail(TENSO_E_TOO_MANY_DIMS, "ndim exceeds 32");
    if (ndim && !shape) fail(TENSO_E_INVALID_ARGUMENT, "shape is NULL");
    for (uint32_t i = 0; i < ndim; ++i) {
        const uint64_t d = shape[i];
        if (d > UINT32_MAX) fail(TENSO_E_INVALID_ARGUMENT, "dimension does not fit the wire's u32");
        dst.shape[i] = d;
    }
    dst.ndim = ndim;
}

void check_offsets(const void *offsets, uint64_t count, uint64_t end, int32_t status, const char *what) {
    uint64_t prev = load_u64(offsets, 0);
    if (prev != 0) fail(status, std::string(what) + " offsets do not start at 0");
    for (uint64_t i = 1; i <= count; ++i) {
        const uint64_t cur = load_u64(offsets, i);
        if (cur < prev) fail(status, std::string(what) + " offsets decrease at " + num(i));
        prev = cur;
    }
    if (prev != end) fail(status, std::string(what) + " offsets end at " + num(prev) + ", not at " + num(end));
}

void bundle_insert(Value &b, std::string key, const Value &child) {
    if (b.type != Value::kBundle) fail(TENSO_E_INVALID_ARGUMENT, "value is not a bundle");
    if (b.entries.size() >= TENSO_MAX_BUNDLE_ENTRIES)
        fail(TENSO_E_INVALID_ARGUMENT, "a bundle holds at most 255 entries");
    if (key.size() > TENSO_MAX_KEY_BYTES)
        fail(TENSO_E_INVALID_ARGUMENT, "key is longer than TENSO_MAX_KEY_BYTES (65536)");
    if (!valid_utf8(reinterpret_cast<const uint8_t *>(key.data()), key.size()))
        fail(TENSO_E_INVALID_ARGUMENT, "bundle key is not valid UTF-8");
    if (child.depth() + 1 > TENSO_MAX_DEPTH) fail(TENSO_E_INVALID_ARGUMENT, "bundles would nest deeper than 64");
    b.entries.push_back(Value::Entry{std::move(key), child});
}

Value packet_value(const uint8_t *p, size_t len) {
    Node n;
    try {
        n = scan(p, len, Limits());
    } catch (const NeedMore &) {
        fail(TENSO_E_TRUNCATED, "packet is truncated");
    }
    if (n.end != len)
        fail(TENSO_E_INVALID_ARGUMENT, "bytes are not exactly one packet (" + num(n.end) + " of " + num(len) + ")");
    Value v = with_type(Value::kPacket);
    v.packet = p;
    v.packet_len = len;
    v.packet_depth = nesting_depth(n);
    return v;
}

Value sparse_value(int format, uint32_t ndim, const uint64_t *shape, const Tensor parts[3]) {
    Value v = with_type(Value::kSparse);
    v.sparse_kind = format;
    set_shape(v.tensor, ndim, shape);
    SparseArray comps[3];
    for (int i = 0; i < 3; ++i) {
        const Tensor &p = parts[i];
        v.parts.push_back(p);
        comps[i] = SparseArray{p.dtype, p.ndim, p.ndim ? p.shape[0] : 0, p.data};
    }
    check_sparse(format, v.tensor.shape, v.tensor.ndim, comps, TENSO_E_INVALID_ARGUMENT);
    return v;
}

Value quantize_value(const Tensor &in, int qdtype, int scheme, int32_t axis, uint32_t group_size) {
    if (scheme == TENSO_QUANT_PER_CHANNEL) {
        if (axis < 0) axis += int32_t(in.ndim);
        if (axis < 0 || uint32_t(axis) >= in.ndim) fail(TENSO_E_INVALID_ARGUMENT, "per-channel axis is out of range");
    } else {
        axis = 0;
    }
    if (scheme != TENSO_QUANT_PER_GROUP) group_size = 0;
    auto res = std::make_shared<QuantOutput>(
        quantize(in.data, in.dtype, in.shape, in.ndim, qdtype, scheme, uint32_t(axis), group_size));
    Value v = with_type(Value::kQuantized);
    v.tensor = in;
    v.tensor.dtype = qdtype;
    v.tensor.data = nullptr;
    QuantDesc &q = v.quant;
    q.dtype = qdtype;
    q.scheme = scheme;
    q.axis = uint32_t(axis);
    q.group_size = group_size;
    q.num_scales = uint32_t(res->scales.size());
    q.ndim = in.ndim;
    q.scales = res->scales.data();
    q.zero_points = res->zero_points.data();
    q.data = res->packed.data();
    q.nbytes = res->packed.size();
    v.owned = std::move(res);
    return v;
}

void check_described(QuantDesc &d, int32_t axis, int32_t status) {
    if (d.ndim > TENSO_MAX_NDIM) fail(TENSO_E_TOO_MANY_DIMS, "ndim exceeds 32");
    if (d.ndim && !d.shape) fail(status, "shape is NULL");
    if (d.scheme == TENSO_QUANT_PER_CHANNEL && axis < 0) axis += int32_t(d.ndim);
    if (axis < 0) fail(status, "axis is out of range");
    d.axis = uint32_t(axis);
    check_quant(d, status);
    if (d.num_scales && (!d.scales || !d.zero_points)) fail(status, "scales or zero_points is NULL");
    if (d.nbytes && !d.data) fail(status, "data is NULL");
}

Value quantized_value(const QuantDesc &d) {
    Value v = with_type(Value::kQuantized);
    v.quant = d;
    set_shape(v.tensor, d.ndim, d.shape);
    v.quant.shape = nullptr;  // the value's own copy (tensor.shape) is used from here on
    return v;
}

QuantDesc quant_of(const View &w) {
    QuantDesc q = w.extra->quant;
    q.scales = w.extra->qparams.data();
    q.zero_points = w.extra->qparams.data() + q.num_scales;
    q.data = w.data;
    q.nbytes = w.nbytes;
    return q;
}

void dequantize_into(float *dst, uint64_t dst_count, const QuantDesc &d) {
    const uint64_t n = checked_numel(d.shape, d.ndim, TENSO_MAX_ELEMENTS);
    if (dst_count != n)
        fail(TENSO_E_INVALID_ARGUMENT, "dst_count " + num(dst_count) + " is not the element count " + num(n));
    dequantize(dst, d);
}

Value strings_value(uint64_t count, const uint64_t *offsets, const uint8_t *payload, uint64_t payload_len) {
    if (count > UINT32_MAX) fail(TENSO_E_INVALID_ARGUMENT, "more strings than the wire's u32 count");
    check_offsets(offsets, count, payload_len, TENSO_E_INVALID_ARGUMENT, "string");
    if (payload_len && !payload) fail(TENSO_E_INVALID_ARGUMENT, "payload is NULL");
    if (!valid_utf8(payload, payload_len)) fail(TENSO_E_INVALID_ARGUMENT, "string payload is not valid UTF-8");
    Value v = with_type(Value::kStrings);
    v.tensor.dtype = TENSO_DTYPE_STRING;
    v.tensor.ndim = 1;
    v.tensor.shape[0] = count;
    v.tensor.data = payload;
    v.tensor.nbytes = payload_len;
    v.offsets = offsets;
    return v;
}

Value ragged_value(const Tensor &flat, uint64_t count, const uint64_t *row_offsets) {
    if (flat.ndim != 1) fail(TENSO_E_INVALID_ARGUMENT, "the flat values of a ragged array are 1-D");
    if (count >= UINT32_MAX) fail(TENSO_E_INVALID_ARGUMENT, "too many rows");
    check_offsets(row_offsets, count, flat.shape[0], TENSO_E_INVALID_ARGUMENT, "ragged");
    auto count_arr = std::make_shared<uint64_t>(count);
    Value offs, cnt, flatv;
    offs.tensor.dtype = cnt.tensor.dtype = TENSO_DTYPE_UINT64;
    offs.tensor.ndim = cnt.tensor.ndim = 1;
    offs.tensor.shape[0] = count + 1;
    offs.tensor.data = reinterpret_cast<const uint8_t *>(row_offsets);
    offs.tensor.nbytes = (count + 1) * 8;
    cnt.tensor.shape[0] = 1;
    cnt.tensor.data = reinterpret_cast<const uint8_t *>(count_arr.get());
    cnt.tensor.nbytes = 8;
    flatv.tensor = flat;
    Value v = with_type(Value::kBundle);
    v.entries.push_back({kRaggedOffsets, offs});
    v.entries.push_back({kRaggedFlat, flatv});
    v.entries.push_back({kRaggedCount, cnt});
    v.owned = std::move(count_arr);
    return v;
}

RaggedParts ragged_parts(const View &w) {
    const View *parts[3] = {nullptr, nullptr, nullptr};
    const char *names[3] = {kRaggedOffsets, kRaggedFlat, kRaggedCount};
    if (w.kind == TENSO_KIND_BUNDLE)
        for (const auto &e : w.entries)
            for (int i = 0; i < 3; ++i)
                if (!parts[i] && e.key_len == std::strlen(names[i]) && std::memcmp(e.key, names[i], e.key_len) == 0)
                    parts[i] = &e.view;
    if (!parts[0] || !parts[1] || !parts[2]) fail(TENSO_E_UNSUPPORTED_KIND, "view is not a ragged array bundle");
    const View &offs = *parts[0], &flat = *parts[1], &cnt = *parts[2];
    for (const View *p : parts)
        if (p->kind != TENSO_KIND_DENSE || p->ndim != 1)
            fail(TENSO_E_MALFORMED, "ragged parts must be 1-D dense arrays");
    if (offs.dtype != TENSO_DTYPE_UINT64 || cnt.dtype != TENSO_DTYPE_UINT64 || cnt.shape[0] != 1)
        fail(TENSO_E_MALFORMED, "ragged offsets and count must be uint64 (count: one element)");
    const uint64_t count = load_u64(cnt.data, 0);
    if (offs.shape[0] != count + 1 || count == UINT64_MAX)
        fail(TENSO_E_MALFORMED, "ragged offsets do not have count + 1 entries");
    check_offsets(offs.data, count, flat.shape[0], TENSO_E_MALFORMED, "ragged");
    return RaggedParts{&flat, &offs};
}

Value ipc_ref_value(const IpcRef &ref) {
    auto bytes = std::shared_ptr<uint8_t>(new uint8_t[kIpcRefLen], std::default_delete<uint8_t[]>());
    write_ipc_ref(bytes.get(), ref);
    Value v = with_type(Value::kPacket);
    v.packet = bytes.get();
    v.packet_len = kIpcRefLen;
    v.owned = std::move(bytes);
    return v;
}

}  // namespace tenso
