#!/usr/bin/env bash
# Build, pack and test the JavaScript SDK (npm package libtenso), as CI does:
#
#   1. tests/tools/bootstrap.sh --js: emscripten and chromium from Debian (idempotent);
#   2. the WebAssembly engine and the npm package (pack.sh: build/js/wasm/tenso.wasm, shared
#      with the top-level build's TENSO_JS; build/js/libtenso-<version>.tgz);
#   3. `npm ci` of the test dependencies (lock file), then the tarball unpacked as
#      sdk/js/test/node_modules/libtenso, which is what npm installs from it;
#   4. inputs of the tests: the C hostile suite's table (its test binary writes it:
#      TENSO_CAPI_TESTS, default build/tests/capi/tenso_capi_tests), the Python SDK's venv
#      (build/venv-sdk; sdk/python/run-tests.sh builds it when it cannot import tenso) and the
#      upstream venv (tests/upstream/venv.sh);
#   5. node --test over sdk/js/test/*.test.js: golden vectors, round trips, hostile bytes,
#      interop with both Pythons, and the browser test (chromium, uvicorn, the viewer); its
#      screenshot is kept as build/js/artifacts/viewer.png.
#
# Environment: JOBS (default 2), TENSO_CAPI_TESTS, TENSO_JS_BUILD (default build/js: the engine's
# CMake tree, the package, artifacts), TENSO_SKIP_BOOTSTRAP=1.
# Extra arguments go to node --test (e.g. --test-name-pattern=golden).
# Exit status: node --test's.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${TENSO_JS_BUILD:-$repo/build/js}"
jobs="${JOBS:-2}"
log() { printf 'run-tests.sh: %s\n' "$*" >&2; }

# ---- 1. toolchain
if [[ "${TENSO_SKIP_BOOTSTRAP:-0}" != 1 ]]; then
    bash "$repo/tests/tools/bootstrap.sh" --js
fi
# ---- 2, 3. the engine and the package (pack.sh), installed beside the tests as npm would
bash "$here/pack.sh" --install "$here/test" >/dev/null
cd "$here/test"

# ---- 4. inputs
capi_tests="${TENSO_CAPI_TESTS:-$repo/build/tests/capi/tenso_capi_tests}"
if [[ ! -x "$capi_tests" ]]; then
    log "no $capi_tests: build it (cmake --build build --target tenso_capi_tests) or set TENSO_CAPI_TESTS"
    exit 1
fi
export TENSO_HOSTILE_CASES="$out/hostile-cases.json"
TENSO_HOSTILE_CASES_OUT="$TENSO_HOSTILE_CASES" "$capi_tests" CapiHostileTest::testCraftedPackets >/dev/null

TENSO_SDK_PYTHON="$repo/build/venv-sdk/bin/python"
if ! "$TENSO_SDK_PYTHON" -c "import tenso, tenso.serve, uvicorn, scipy" 2>/dev/null; then
    log "build/venv-sdk cannot import tenso: building it with sdk/python/run-tests.sh"
    bash "$repo/sdk/python/run-tests.sh" -q -x -k test_api >&2
fi
TENSO_UPSTREAM_PYTHON="$(bash "$repo/tests/upstream/venv.sh" | tail -n1)"
export TENSO_SDK_PYTHON TENSO_UPSTREAM_PYTHON
export TENSO_JS_ARTIFACTS="$out/artifacts"
mkdir -p "$TENSO_JS_ARTIFACTS"

# ---- 5. the tests (one file at a time: the browser and servers do not share the 2 cores well)
node --test --test-concurrency=1 "$@" ./*.test.js
