#!/usr/bin/env bash
# Builds the WebAssembly engine and packs the npm package libtenso; prints the tarball's path
# on the last line of stdout (everything else goes to stderr):
#
#   1. the engine: CMake project sdk/js/wasm on emscripten's toolchain, in $TENSO_JS_BUILD/wasm
#      (default build/js/wasm, the directory the top-level build's TENSO_JS uses too);
#   2. the package: sdk/js's package.json, README.md, src/*.js, src/index.d.ts and tenso.wasm
#      staged in $TENSO_JS_BUILD/package, `npm pack` into $TENSO_JS_BUILD;
#   3. with --install DIR: `npm ci` in DIR (its package-lock.json; skipped while the lock is
#      unchanged), then the tarball unpacked as DIR/node_modules/libtenso, which is what npm
#      installs from it (the package has no dependencies).
#
#   pack.sh [--install DIR]
#
# Needs emscripten (tests/tools/bootstrap.sh --js). Environment: JOBS (default 2), TENSO_JS_BUILD.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${TENSO_JS_BUILD:-$repo/build/js}"
jobs="${JOBS:-2}"
log() { printf 'pack.sh: %s\n' "$*" >&2; }

# emcc's own JavaScript tools need Debian's node modules (acorn) when node is not Debian's.
export NODE_PATH="/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}"
wasm_build="$out/wasm"
generator=()
[[ -f "$wasm_build/CMakeCache.txt" ]] || generator=(-G Ninja)
cmake -S "$here/wasm" -B "$wasm_build" "${generator[@]}" \
    -DCMAKE_TOOLCHAIN_FILE=/usr/share/emscripten/cmake/Modules/Platform/Emscripten.cmake >&2
cmake --build "$wasm_build" -j "$jobs" >&2
wasm="$wasm_build/tenso.wasm"

stage="$out/package"
rm -rf "$stage"
mkdir -p "$stage/src"
cp "$here/package.json" "$here/README.md" "$stage/"
cp "$here"/src/*.js "$here/src/index.d.ts" "$stage/src/"
cp "$wasm" "$stage/src/tenso.wasm"
tarball="$out/$(cd "$stage" && npm pack --silent --pack-destination "$out")"
log "$(basename "$tarball"): $(stat -c %s "$tarball") bytes; tenso.wasm $(stat -c %s "$wasm") bytes," \
    "$(gzip -9 -c "$wasm" | wc -c) gzipped"

if [[ "${1:-}" == --install ]]; then
    cd "$2"
    stamp="node_modules/.lock-sha256"
    lock_sum="$(sha256sum package-lock.json | cut -d' ' -f1)"
    if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$lock_sum" ]]; then
        npm ci --no-audit --no-fund --loglevel=error >&2
        printf '%s\n' "$lock_sum" >"$stamp"
    fi
    rm -rf node_modules/libtenso
    mkdir -p node_modules/libtenso
    tar -xzf "$tarball" -C node_modules/libtenso --strip-components=1
fi
printf '%s\n' "$tarball"
