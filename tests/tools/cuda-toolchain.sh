#!/usr/bin/env bash
# Create (idempotently) the virtualenv holding the CUDA toolchain the GPU plugin is built with
# - nvcc, the runtime headers and libcudart, all from the package index - and print the
# toolkit root (the directory with bin/nvcc, include/ and lib/libcudart.so.13) on the last
# line of stdout. Everything else goes to stderr, so callers can do:
#     CUDA_ROOT=$(bash tests/tools/cuda-toolchain.sh | tail -n1)
# Called by CMake at configure time (impl/gpu/cuda/CMakeLists.txt, TENSO_CUDA=AUTO|ON) and by
# tests/tools/bootstrap.sh --cuda.
#
# `--check`: only say whether that toolchain is already there (print the root, or exit 1),
# without installing or touching the network: CMake's TENSO_CUDA=AUTO uses it when it is.
#
# Location: ${TENSO_CUDA_VENV:-<repo>/build/venv-cuda}; interpreter: ${PYTHON:-python3}.
# A stamp file holds the exact requirement list: a re-run with the same list does nothing (no
# network); a changed list reinstalls. Exit status 1 when the wheels cannot be had (offline,
# no venv module): the caller builds without the plugin and says so.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$script_dir/../.." && pwd)"
venv="${TENSO_CUDA_VENV:-$repo/build/venv-cuda}"
base_python="${PYTHON:-python3}"

# CUDA 13, exact versions, verified to install together as binary wheels (x86_64 manylinux):
# nvcc (with ptxas, fatbinary, cudafe++; nvvm brings cicc), the runtime (headers, libcudart),
# crt (the device runtime headers nvcc includes), cccl (cub/thrust/libcu++ headers) and
# cuobjdump (the test that the plugin carries SASS for sm_80 / sm_90 and PTX).
requirements="nvidia-cuda-nvcc==13.5.37
nvidia-nvvm==13.5.37
nvidia-cuda-runtime==13.5.37
nvidia-cuda-crt==13.5.37
nvidia-cuda-cccl==13.3.5.0.6
nvidia-cuda-cuobjdump==13.4.92"

stamp="$venv/.tenso-cuda-requirements"
py="$venv/bin/python"

log() { printf 'cuda-toolchain: %s\n' "$*" >&2; }

toolkit_root() {
    local purelib
    purelib="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" || return 1
    local root="$purelib/nvidia/cu13"
    [[ -x "$root/bin/nvcc" && -f "$root/include/cuda_runtime.h" && -e "$root/lib/libcudart.so.13" ]] || return 1
    printf '%s\n' "$root"
}

if [[ "${1:-}" == --check ]]; then
    [[ -x "$py" && -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$requirements" ]] && toolkit_root
    exit
fi

# Two configures at once (several build trees, the SDK scripts) must not install over each
# other: one waits for the other, then finds the stamp.
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9

if [[ -x "$py" && -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$requirements" ]] && toolkit_root >/dev/null; then
    toolkit_root
    exit 0
fi

if [[ ! -x "$py" ]]; then
    log "creating $venv"
    mkdir -p "$(dirname "$venv")"
    if ! "$base_python" -m venv "$venv" >&2; then
        log "cannot create a virtualenv with $base_python (install python3-venv); no CUDA toolchain"
        exit 1
    fi
fi

log "installing the pinned CUDA 13 wheels into $venv"
req_file="$(mktemp)"
trap 'rm -f "$req_file"' EXIT
printf '%s\n' "$requirements" > "$req_file"
# Remove a stale stamp first so an interrupted install is retried next time.
rm -f "$stamp"
if ! "$py" -m pip install --disable-pip-version-check --no-input --quiet \
        --only-binary=:all: -r "$req_file" >&2; then
    log "the CUDA wheels could not be installed (offline?); no CUDA toolchain"
    exit 1
fi
if ! toolkit_root >/dev/null; then
    log "the wheels installed but bin/nvcc, include/cuda_runtime.h or lib/libcudart.so.13 is missing"
    exit 1
fi
printf '%s\n' "$requirements" > "$stamp"
log "ready"
toolkit_root
