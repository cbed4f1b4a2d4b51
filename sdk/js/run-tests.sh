#!/usr/bin/env bash
# Build, pack and test the JavaScript SDK (npm package libtenso), as CI does:
#
#   1. tests/tools/bootstrap.sh --js: emscripten and chromium from Debian (idempotent);
#   2. the WebAssembly engine: CMake project sdk/js/wasm, emscripten's toolchain, in
#      build/js/wasm (shared with the top-level build's TENSO_JS ExternalProject);
#   3. the package: sdk/js's files and tenso.wasm staged in build/js/package, `npm pack` into
#      build/js/libtenso-<version>.tgz, then unpacked as sdk/js/test/node_modules/libtenso (what
#      npm installs from that tarball) after `npm ci` of the test dependencies (lock file);
#   4. inputs of the tests: the C hostile suite's table (its test binary writes it:
#      TENSO_CAPI_TESTS, default build/tests/capi/tenso_capi_tests), the Python SDK's venv
#      (build/venv-sdk; sdk/python/run-tests.sh builds it when it cannot import tenso) and the
#      upstream venv (tests/upstream/venv.sh);
#   5. node --test over sdk/js/test/*.test.js: golden vectors, round trips, hostile bytes,
#      interop with both Pythons, and the browser test (chromium, uvicorn, the viewer); its
#      screenshot is kept as build/js/artifacts/viewer.png.
#
# Environment: JOBS (default 2), TENSO_CAPI_TESTS, TENSO_SKIP_BOOTSTRAP=1.
# Extra arguments go to node --test (e.g. --test-name-pattern=golden).
# Exit status: node --test's.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$repo/build/js"
jobs="${JOBS:-2}"
log() { printf 'run-tests.sh: %s\n' "$*" >&2; }

# ---- 1. toolchain
if [[ "${TENSO_SKIP_BOOTSTRAP:-0}" != 1 ]]; then
    bash "$repo/tests/tools/bootstrap.sh" --js
fi
# emcc's own JavaScript tools need Debian's node modules (acorn) when node is not Debian's.
export NODE_PATH="/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}"

# ---- 2. the engine
wasm_build="$out/wasm"
generator=()
[[ -f "$wasm_build/CMakeCache.txt" ]] || generator=(-G Ninja)
cmake -S "$here/wasm" -B "$wasm_build" "${generator[@]}" \
    -DCMAKE_TOOLCHAIN_FILE=/usr/share/emscripten/cmake/Modules/Platform/Emscripten.cmake >/dev/null
cmake --build "$wasm_build" -j "$jobs"
wasm="$wasm_build/tenso.wasm"

# ---- 3. the package, packed and installed as npm would
version="$(node -p "require('$here/package.json').version")"
stage="$out/package"
rm -rf "$stage"
mkdir -p "$stage/src"
cp "$here/package.json" "$here/README.md" "$stage/"
cp "$here"/src/*.js "$here/src/index.d.ts" "$stage/src/"
cp "$wasm" "$stage/src/tenso.wasm"
tarball="$(cd "$stage" && npm pack --silent --pack-destination "$out")"
log "packed $out/$tarball ($(stat -c %s "$out/$tarball") bytes); tenso.wasm $(stat -c %s "$wasm") bytes," \
    "$(gzip -9 -c "$wasm" | wc -c) gzipped"

cd "$here/test"
stamp="node_modules/.lock-sha256"
lock_sum="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$lock_sum" ]]; then
    npm ci --no-audit --no-fund --loglevel=error
    printf '%s\n' "$lock_sum" >"$stamp"
fi
rm -rf node_modules/libtenso
mkdir -p node_modules/libtenso
tar -xzf "$out/$tarball" -C node_modules/libtenso --strip-components=1

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
export TENSO_JS_WASM="$wasm"
mkdir -p "$TENSO_JS_ARTIFACTS"

# ---- 5. the tests (one file at a time: the browser and servers do not share the 2 cores well)
node --test --test-concurrency=1 "$@" ./*.test.js
