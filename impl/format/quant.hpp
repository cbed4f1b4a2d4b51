// quant.hpp - quantization kernels, bit-exact with upstream QuantizedTensor.
#pragma once

#include <cstdint>
#include <vector>

namespace tenso {

// The parts of a quantized tensor (pointers borrowed).
struct QuantDesc {
    int dtype = 0;  // TENSO_DTYPE_QINT8 .. QUINT4
    int scheme = 0;
    uint32_t axis = 0;
    uint32_t group_size = 0;
    uint32_t num_scales = 0;
    uint32_t ndim = 0;
    const uint64_t *shape = nullptr;
    const float *scales = nullptr;
    const float *zero_points = nullptr;
    const uint8_t *data = nullptr;
    uint64_t nbytes = 0;
};

struct QuantOutput {
    std::vector<uint8_t> packed;
    std::vector<float> scales, zero_points;
};

bool is_4bit(int qdtype);
bool is_signed_q(int qdtype);
uint64_t quant_body_len(int qdtype, uint64_t numel);

// Checks num_scales, axis, group size and nbytes against the scheme; fails with `status`.
void check_quant(const QuantDesc &q, int32_t status);

// Quantizes `numel` elements of src (dtype float32, float16 or bfloat16) laid out with `shape`.
QuantOutput quantize(const uint8_t *src, int src_dtype, const uint64_t *shape, uint32_t ndim, int qdtype, int scheme,
                     uint32_t axis, uint32_t group_size);

void dequantize(float *dst, const QuantDesc &q);

}  // namespace tenso
