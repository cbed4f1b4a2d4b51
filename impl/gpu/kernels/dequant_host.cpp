// dequant_host.cpp - the dequantize kernel of the host backend: the shared element code
// (dequant.hpp) over every element, on the calling thread. Built with -ffp-contract=off (see
// dequant.hpp: the arithmetic must stay a separate subtract and multiply).
#include "gpu/kernels/dequant.hpp"

#include <cstdio>

namespace tenso {
namespace gpu {

namespace {
tenso_status refuse(char *msg, size_t cap, const char *why) {
    if (msg && cap) std::snprintf(msg, cap, "dequantize: %s", why);
    return TENSO_E_INVALID_ARGUMENT;
}
}  // namespace

tenso_status check_dequant_args(const tenso_gpu_dequant_args &a, char *msg, size_t cap) {
    if (a.qdtype < TENSO_DTYPE_QINT8 || a.qdtype > TENSO_DTYPE_QUINT4)
        return refuse(msg, cap, "codes are not a quantized dtype (qint8, quint8, qint4, quint4)");
    if (a.out_dtype != TENSO_DTYPE_FLOAT32 && a.out_dtype != TENSO_DTYPE_FLOAT16 && a.out_dtype != TENSO_DTYPE_BFLOAT16)
        return refuse(msg, cap, "output dtype must be float32, float16 or bfloat16");
    switch (a.scheme) {
    case TENSO_QUANT_PER_TENSOR: break;
    case TENSO_QUANT_PER_CHANNEL:
        if (!a.inner || !a.channels) return refuse(msg, cap, "per channel needs inner and channels > 0");
        break;
    case TENSO_QUANT_PER_GROUP:
        if (!a.group_size) return refuse(msg, cap, "per group needs group_size > 0");
        break;
    default: return refuse(msg, cap, "unknown quantization scheme");
    }
    if (a.count && (!a.codes || !a.scales || !a.zero_points || !a.out))
        return refuse(msg, cap, "a NULL pointer among codes, scales, zero points and output");
    return TENSO_OK;
}

tenso_status dequantize_host(const tenso_gpu_dequant_args &a, char *msg, size_t cap) {
    const tenso_status st = check_dequant_args(a, msg, cap);
    if (st != TENSO_OK) return st;
    for (uint64_t i = 0; i < a.count; ++i) dq_element(a, i);
    return TENSO_OK;
}

}  // namespace gpu
}  // namespace tenso
