// composites.hpp - the rules for values built from parts: bundle entries, packets taken as
// they are, sparse matrices, quantized tensors, strings, ragged arrays (a bundle by
// convention) and GPU IPC references. The C ABI converts its arguments into engine types and
// calls these; every rule (limits, offsets, the ragged keys) lives here once.
#pragma once

#include <cstdint>
#include <string>

#include "format/codec.hpp"

namespace tenso {

// Copies a shape into dst, checking ndim <= 32 and that every dimension fits the wire's u32.
// Each dimension is read once (the caller's array may change meanwhile).
void set_shape(Tensor &dst, uint32_t ndim, const uint64_t *shape);

// count + 1 little-endian u64 offsets (possibly unaligned, possibly in memory others write:
// each is read once) must start at 0, never decrease and end at `end`. `what` names them in
// the message ("string", "ragged"); failures carry `status`.
void check_offsets(const void *offsets, uint64_t count, uint64_t end, int32_t status, const char *what);

// Appends child under key: at most 255 entries, keys of at most 65536 bytes of valid UTF-8,
// nesting at most 64 deep.
void bundle_insert(Value &bundle, std::string key, const Value &child);

// A value that is exactly one packet (bytes borrowed), checked by a full scan.
Value packet_value(const uint8_t *packet, size_t len);

// A sparse matrix of `format` (TENSO_KIND_SPARSE_COO/CSR/CSC) from its three components.
Value sparse_value(int format, uint32_t ndim, const uint64_t *shape, const Tensor parts[3]);

// Quantizes `in`; axis counts from the end when negative (per channel only).
Value quantize_value(const Tensor &in, int qdtype, int scheme, int32_t axis, uint32_t group_size);

// Completes a caller's description of quantized data: sets d.axis from `axis` (negative counts
// from the end, per channel), then checks the scheme, counts, lengths and pointers against
// d.shape (which must be the caller's shape copied, not the caller's memory).
void check_described(QuantDesc &d, int32_t axis, int32_t status);
// A value from a checked description (data, scales and zero points borrowed; shape copied).
Value quantized_value(const QuantDesc &d);
// The description of a quantized view (pointers into the view).
QuantDesc quant_of(const View &v);
// Dequantizes a checked description into dst, which holds exactly dst_count floats.
void dequantize_into(float *dst, uint64_t dst_count, const QuantDesc &d);

// A 1-D string array: count + 1 offsets into payload (both borrowed), valid UTF-8.
Value strings_value(uint64_t count, const uint64_t *offsets, const uint8_t *payload, uint64_t payload_len);

// Ragged arrays travel as a bundle with three 1-D entries (upstream's convention):
// __ragged_offsets__ (u64, count + 1), __ragged_flat__ (the values) and __ragged_count__ (u64, 1).
Value ragged_value(const Tensor &flat, uint64_t count, const uint64_t *row_offsets);
struct RaggedParts {
    const View *flat = nullptr;
    const View *offsets = nullptr;
};
// The parts of a bundle view that follows the convention; UNSUPPORTED_KIND when it does not
// have the three keys, MALFORMED when their contents break it.
RaggedParts ragged_parts(const View &v);

// A GPU IPC reference packet (kIpcRefLen bytes, owned by the value).
Value ipc_ref_value(const IpcRef &ref);

}  // namespace tenso
