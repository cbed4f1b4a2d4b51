#!/usr/bin/env bash
# Build, install and test the Python SDK, as CI does:
#
#   1. create (once) the virtualenv build/venv-sdk and install the pinned build and test
#      requirements into it (a stamp file makes re-runs offline no-ops);
#   2. build the wheel with `pip wheel` (libtenso compiled from this repository and bundled,
#      unless TENSO_USE_SYSTEM_LIB=1) and install exactly that wheel;
#   3. make sure the pinned upstream tenso venv exists (tests/upstream/venv.sh) for the interop
#      tests, which are then required to run (TENSO_SKIP_UPSTREAM=1 skips them instead);
#   4. run pytest on sdk/python/tests; extra arguments go to pytest.
#
# Exit status: pytest's; "no tests collected" (pytest's 5) is turned into a failure.
#
# Environment: PYTHON (interpreter for the venv, default python3, >= 3.11 for the upstream
# venv), TENSO_SDK_VENV (default <repo>/build/venv-sdk), JOBS (parallel build jobs),
# TENSO_USE_SYSTEM_LIB=1 (link an installed libtenso found by pkg-config instead),
# TENSO_TSAN_LIB_DIR (see below).
#
# ThreadSanitizer: with TENSO_TSAN_LIB_DIR=<dir of a -DTENSO_SANITIZE=thread libtenso.so.1>
# (build-tsan), the test files that call libtenso from several threads or processes run with
# that library instead of the wheel's (the extension's RUNPATH ranks below LD_LIBRARY_PATH) and
# gcc's TSan runtime preloaded into the uninstrumented python: races inside libtenso are
# reported and fail the run; Python, numpy and the extension are not instrumented. The
# upstream interop tests are skipped there.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${TENSO_SDK_VENV:-$repo/build/venv-sdk}"
base_python="${PYTHON:-python3}"
log() { printf 'run-tests.sh: %s\n' "$*" >&2; }

# Pinned, verified together on CPython 3.11 x86_64 (same numpy/scipy/ml_dtypes as the
# upstream venv, so both sides of the interop tests run the same scipy). safetensors and
# bintensors: the real packages, for the archive interop tests.
requirements="scikit-build-core==1.1.2
pybind11==3.1.0
numpy==2.4.6
ml_dtypes==0.6.0
scipy==1.17.1
pytest==9.2.0
hypothesis==6.170.15
safetensors==0.8.0
bintensors==0.2.0
# issue 17: ray (tests/test_ray.py runs a local cluster; the wheel is self-contained, ~70 MB)
ray==2.60.0"
# issue 17: web — the fastapi/client/serve and grpc extras (tests/test_fastapi.py, test_client.py,
# test_serve.py, test_grpc.py); the same pins go into the upstream venv for the interop tests.
web_requirements="fastapi==0.163.2
starlette==1.10.0
uvicorn==0.54.0
httptools==0.9.0
httpx==0.28.1
grpcio==1.85.1
grpcio-tools==1.85.1
protobuf==7.36.2"
requirements="$requirements
$web_requirements"

# Not torch, so its two tests (DLPack into torch, safe_open(framework="pt")) skip: PyPI's only
# Linux x86-64 torch wheel is the CUDA build (539 MB for 2.15.0), and `import torch` loads
# libcublasLt and the rest of CUDA, another ~15 packages of several GB (installed --no-deps it
# fails: "libcublasLt.so.*[0-9] not found"). CPU-only wheels are not published on PyPI.

py="$venv/bin/python"
stamp="$venv/.tenso-sdk-requirements"
if [[ ! -x "$py" ]]; then
    log "creating $venv"
    mkdir -p "$(dirname "$venv")"
    "$base_python" -m venv "$venv"
fi
# install_pinned PYTHON STAMP REQUIREMENTS WHAT: pip-installs the list (binary wheels only) unless
# STAMP already holds exactly that list; the stamp is written only after a complete install.
install_pinned() {
    if [[ -f "$2" ]] && [[ "$(cat "$2")" == "$3" ]]; then return 0; fi
    log "installing $4"
    rm -f "$2"
    local req_file
    req_file="$(mktemp)"
    printf '%s\n' "$3" > "$req_file"
    "$1" -m pip install --disable-pip-version-check --no-input --quiet --only-binary=:all: -r "$req_file"
    rm -f "$req_file"
    printf '%s\n' "$3" > "$2"
}
install_pinned "$py" "$stamp" "$requirements" "pinned requirements"

# The wheel: built against this checkout's libtenso (CMake tree kept in the venv for fast
# rebuilds), then installed as a user would install it.
dist="$venv/dist"
rm -rf "$dist"
mkdir -p "$dist"
log "building the wheel"
CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" "$py" -m pip wheel --disable-pip-version-check --no-input --quiet \
    --no-build-isolation --no-deps -w "$dist" \
    --config-settings=build-dir="$venv/cmake-build" "$here"
wheel="$(ls "$dist"/libtenso-*.whl)"
# The distribution was called `tenso` before it took its own name (libtenso); a venv made then
# still has it, and both install the `tenso` package.
if "$py" -m pip show -q tenso >/dev/null 2>&1; then
    "$py" -m pip uninstall --disable-pip-version-check --no-input -q -y tenso
fi
"$py" -m pip install --disable-pip-version-check --no-input --quiet --force-reinstall --no-deps "$wheel"
log "installed $(basename "$wheel")"

targets=(tests)
if [[ -n "${TENSO_TSAN_LIB_DIR:-}" ]]; then
    tsan_dir="$(cd "$TENSO_TSAN_LIB_DIR" && pwd)"
    tsan_rt="$(gcc -print-file-name=libtsan.so.2)"
    [[ -f "$tsan_rt" ]] || { log "no libtsan.so.2 (Debian's libtsan2) for TENSO_TSAN_LIB_DIR"; exit 1; }
    export LD_PRELOAD="$tsan_rt" LD_LIBRARY_PATH="$tsan_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}"
    # Fail, rather than pass without checking anything, if the sanitized library is not the one loaded.
    loaded="$("$py" -c 'import tenso; print(tenso.library_path)')"
    if [[ "$loaded" != "$tsan_dir/libtenso.so.1" ]]; then
        log "TENSO_TSAN_LIB_DIR: tenso loaded $loaded, not $tsan_dir/libtenso.so.1"
        exit 1
    fi
    log "ThreadSanitizer: $loaded with $tsan_rt preloaded"
    targets=(tests/test_cache.py tests/test_archive.py tests/test_streams.py tests/test_zero_copy.py)
    TENSO_SKIP_UPSTREAM=1
fi

if [[ "${TENSO_SKIP_UPSTREAM:-0}" == 1 ]]; then
    log "TENSO_SKIP_UPSTREAM=1: the interop tests will be skipped"
else
    TENSO_UPSTREAM_PYTHON="$(PYTHON="$base_python" bash "$repo/tests/upstream/venv.sh" | tail -n1)"
    export TENSO_UPSTREAM_PYTHON TENSO_REQUIRE_UPSTREAM=1
    # issue 17: web — upstream's tenso.fastapi / tenso.serve need these to run its side of the
    # interop tests (upstream declares them in its [api] extra); their own stamp, venv.sh's stays.
    install_pinned "$TENSO_UPSTREAM_PYTHON" "$(dirname "$(dirname "$TENSO_UPSTREAM_PYTHON")")/.tenso-web-requirements" \
        "$web_requirements" "the web requirements into the upstream venv"
fi

cd "$here"
set +e
TENSO_WHEEL="$wheel" "$py" -m pytest "${targets[@]}" -p no:cacheprovider "$@"
rc=$?
set -e
if ((rc == 5)); then
    log "pytest collected no tests: failing"
    rc=1
fi
exit "$rc"
