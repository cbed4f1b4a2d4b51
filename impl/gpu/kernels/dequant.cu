// dequant.cu - the dequantize kernel: a grid-stride loop running the shared element code
// (dequant.hpp) once per element. Memory-bound: one code byte (or nibble) in, 2 or 4 bytes
// out per element; the scheme / dtype switches in the element code are uniform across the
// grid, so they cost no divergence.
#include "gpu/kernels/dequant.hpp"

namespace tenso {
namespace gpu {

namespace {

constexpr int kThreads = 256;

// I: the index type, uint32_t when count < 2^32 (cheap division for the scale index).
template <class I>
__global__ void __launch_bounds__(kThreads) dequantize_kernel(const tenso_gpu_dequant_args a) {
    const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
    for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.count; i += stride) dq_element(a, I(i));
}

}  // namespace

cudaError_t dequantize_launch(const tenso_gpu_dequant_args &a, cudaStream_t stream) {
    if (!a.count) return cudaSuccess;
    int device = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e != cudaSuccess) return e;
    // Enough resident blocks to fill every SM a few times over; the loop covers the rest.
    const uint64_t want = (a.count + kThreads - 1) / kThreads;
    const uint64_t cap = uint64_t(sms > 0 ? sms : 1) * 16u;
    const unsigned blocks = unsigned(want < cap ? want : cap);
    if (a.count <= 0xFFFFFFFFull) dequantize_kernel<uint32_t><<<blocks, kThreads, 0, stream>>>(a);
    else dequantize_kernel<uint64_t><<<blocks, kThreads, 0, stream>>>(a);
    return cudaGetLastError();
}

}  // namespace gpu
}  // namespace tenso
