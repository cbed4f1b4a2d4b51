#!/usr/bin/env bash
# The GPU suite, for a machine with an NVIDIA GPU and driver (CI and the build machines have
# none; there the CUDA backend is only checked to answer "unavailable", see tests/gpu).
#
#   tests/gpu/run-device-suite.sh [BUILD_DIR]      (default: build-gpu)
#
# 1. configures a Release build with the CUDA plugin required (TENSO_CUDA=ON) and the bench;
#    nvcc comes from the CUDA 13 wheels (tests/tools/cuda-toolchain.sh: needs the package index
#    once, or TENSO_CUDA_VENV naming a virtualenv that already has them), or from
#    CUDA_NVCC=/path/to/nvcc for a toolkit of one's own;
# 2. runs, against the CUDA backend (TENSO_GPU_BACKEND=cuda):
#      - capi CapiGpuTest: the public tenso_gpu_* suite, the one CI runs on the host backend;
#      - gpu  CudaPluginTest: the plugin's ops on the device, the kernel against the host
#             element code (bit-exact but for NaN payloads), IPC offsets;
#      - gpu  GpuDequantHostTest: the element code against tenso_dequantize;
# 3. prints the bench rows (bench/tenso_gpu_bench.cpp): packet -> device against pinned
#    cudaMemcpy at 64 MiB (goal >= 0.8x), fd -> device against the slower of disk and PCIe
#    (goal >= 0.8x), file -> device (and whether GDS served it), the dequantize kernel over
#    1 GiB of qint8 and tenso_gpu_dequantize end to end.
# Exit status: non-zero when a suite fails or the bench finds a wrong result. The speed goals
# are reported, not asserted (no wall-clock thresholds in tests).
#
# Environment: BENCH_DIR (where the bench writes its packet file; default: the build dir -
# put it on the disk you want measured), BENCH_MIB (default 64), BENCH_REPS (default 5).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$repo/build-gpu}"
jobs="$(nproc 2>/dev/null || echo 2)"

log() { printf '\n== %s\n' "$*"; }

log "the device"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current \
        --format=csv || true
else
    echo "nvidia-smi not found (the suite still runs; the plugin reports what the runtime sees)"
fi

log "configure $build"
cuda_args=(-DTENSO_CUDA=ON)
if [[ -n "${CUDA_NVCC:-}" ]]; then
    cuda_args+=(-DCMAKE_CUDA_COMPILER="$CUDA_NVCC")
fi
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTENSO_WERROR=ON \
    -DTENSO_BUILD_BENCH=ON -DTENSO_SDK_TESTS=OFF "${cuda_args[@]}"

log "build"
start=$(date +%s)
cmake --build "$build" -j"$jobs" --target tenso tenso_cuda tenso_capi_tests tenso_gpu_tests tenso_gpu_bench
echo "built in $(( $(date +%s) - start )) s"

export TENSO_GPU_BACKEND=cuda
status=0

log "capi CapiGpuTest (CUDA backend)"
"$build/tests/capi/tenso_capi_tests" CapiGpuTest || status=1

log "gpu CudaPluginTest + GpuDequantHostTest"
"$build/tests/gpu/tenso_gpu_tests" CudaPluginTest || status=1
"$build/tests/gpu/tenso_gpu_tests" GpuDequantHostTest || status=1

log "cuobjdump / exports of the plugin"
ctest --test-dir "$build" -R '^gpu\.cuda_plugin_binary$' --output-on-failure || status=1

log "bench rows (best of ${BENCH_REPS:-5})"
"$build/bench/tenso_gpu_bench" --dir "${BENCH_DIR:-$build}" --mib "${BENCH_MIB:-64}" --reps "${BENCH_REPS:-5}" \
    || status=1

if ((status)); then
    log "FAILED (see above)"
else
    log "all GPU suites passed"
fi
exit "$status"
