#!/usr/bin/env bash
# Lay out (idempotently) a CUDA toolkit root that cross-compiles for aarch64 Linux ("sbsa":
# Grace Hopper, Grace Blackwell, Arm servers) from this x86-64 host, all from the package index,
# and print it on the last line of stdout (everything else goes to stderr):
#     CUDA_ROOT=$(bash tests/cross/cuda-sbsa-toolchain.sh | tail -n1)
#     cmake ... -DCMAKE_TOOLCHAIN_FILE=tests/cross/aarch64-linux-gnu.cmake -DTENSO_CUDA=ON \
#           -DCMAKE_CUDA_COMPILER=$CUDA_ROOT/bin/nvcc
#
# nvcc, cicc, ptxas and fatbinary run here: they are the x86-64 wheels of
# tests/tools/cuda-toolchain.sh, and what they make for the GPU does not depend on the host.
# nvcc hands the host code to CMake's host compiler (aarch64-linux-gnu-g++), and links
# against libcudart from the nvidia-cuda-runtime wheel for manylinux2014_aarch64 (the same
# pinned version), which only has to be unpacked, not run. The root mirrors the wheel layout
# (bin/, nvvm/, include/ from the x86-64 wheels, lib/ from the aarch64 one): nvcc finds
# lib/ as <the directory it was started from>/../lib, so bin/ holds links to each tool rather
# than being a link itself.
#
# Location: ${TENSO_CUDA_SBSA:-<repo>/build-aarch64-cuda}. Exit status 1 when the wheels cannot
# be had (offline): the caller builds without the plugin and says so.
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$script_dir/../.." && pwd)"
dir="${TENSO_CUDA_SBSA:-$repo/build-aarch64-cuda}"
log() { printf 'cuda-sbsa-toolchain: %s\n' "$*" >&2; }

host_root="$(bash "$repo/tests/tools/cuda-toolchain.sh" | tail -n1)" || exit 1
# The same pin as the host toolchain (one version source: tests/tools/cuda-toolchain.sh).
runtime="$(grep -o '^nvidia-cuda-runtime==[0-9.]*' "$repo/tests/tools/cuda-toolchain.sh")"
root="$dir/root"
stamp="$dir/.tenso-sbsa-runtime"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$runtime $host_root" && -e "$root/lib/libcudart.so.13" ]]; then
    printf '%s\n' "$root"
    exit 0
fi

mkdir -p "$dir"
rm -rf "$dir/wheel" "$dir/unpacked" "$root" "$stamp"
log "fetching $runtime for manylinux2014_aarch64"
# pip from the host toolchain's virtualenv (tests/tools/cuda-toolchain.sh made it).
if ! "${TENSO_CUDA_VENV:-$repo/build/venv-cuda}/bin/python" -m pip download --disable-pip-version-check --no-input \
        --quiet --no-deps --only-binary=:all: --platform manylinux2014_aarch64 \
        --dest "$dir/wheel" "$runtime" >&2; then
    log "the aarch64 CUDA runtime wheel could not be had (offline?); no sbsa toolchain"
    exit 1
fi
python3 -m zipfile -e "$dir"/wheel/*.whl "$dir/unpacked"
lib="$dir/unpacked/nvidia/cu13/lib"
if ! readelf -h "$lib/libcudart.so.13" | grep 'Machine:.*AArch64' >/dev/null; then
    log "$lib/libcudart.so.13 is not an aarch64 library"
    exit 1
fi

mkdir -p "$root/bin"
for tool in "$host_root"/bin/*; do ln -s "$tool" "$root/bin/"; done
ln -s "$host_root/nvvm" "$root/nvvm"
ln -s "$host_root/include" "$root/include"
ln -s "$lib" "$root/lib"
printf '%s\n' "$runtime $host_root" > "$stamp"
log "ready: $root (host tools from $host_root, aarch64 libcudart from $runtime)"
printf '%s\n' "$root"
