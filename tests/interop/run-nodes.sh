#!/usr/bin/env bash
# The cross-language node test (CTest interop.nodes): builds the Go pusher (sdk/go/cmd/
# tenso-node-push) and the Rust puller (sdk/rust/tenso/examples/node_pull.rs) against the
# staged libtenso, then runs tests/interop/nodes.py:
#
#   Go -(push, TLS)-> Python -(pull, TLS)-> Rust
#
# The stage and the Python venv are prepared as run-chain.sh does (same lock, same stage).
#
# Usage: run-nodes.sh [OUT_DIR]   (where the Go binary goes; default a temporary directory)
# Environment: GO, CARGO, JOBS (default 2).
# Exit status: 0 when every byte checked came through; non-zero otherwise.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
stage="$repo/build/stage-sdk"
build="$repo/build/sdk-lib"
lock="$repo/build/stage-sdk.lock"
jobs="${JOBS:-2}"
log() { printf 'run-nodes.sh: %s\n' "$*" >&2; }

if (($# == 1)); then
    out="$(realpath -m "$1")"
    mkdir -p "$out"
else
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
fi

export PATH="$PATH:${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:/root/.cargo/bin:/usr/local/go/bin"
gobin="${GO:-$(command -v go || true)}"
cargo="${CARGO:-$(command -v cargo || true)}"
[[ -n "$gobin" && -x "$gobin" ]] || { log "no go toolchain (set GO=)"; exit 1; }
[[ -n "$cargo" && -x "$cargo" ]] || { log "no cargo (set CARGO=)"; exit 1; }
export GOTOOLCHAIN=local

py="$repo/build/venv-sdk/bin/python"
if ! "$py" -c "import tenso.net" 2>/dev/null; then
    log "build/venv-sdk cannot import tenso.net: building it with sdk/python/run-tests.sh"
    bash "$repo/sdk/python/run-tests.sh" -q -x -k test_api
fi

mkdir -p "$repo/build"
exec 9>"$lock"
flock -x 9
if [[ ! -f "$build/CMakeCache.txt" ]]; then
    cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_INSTALL_PREFIX="$stage" -DTENSO_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" -j "$jobs" >/dev/null
cmake --install "$build" >/dev/null
flock -s 9
libdir="$stage/lib"
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
unset LD_LIBRARY_PATH

log "building the Go pusher"
(cd "$repo/sdk/go" && CGO_ENABLED=1 CGO_LDFLAGS="-Wl,-rpath,$libdir" \
    "$gobin" build -o "$out/tenso-node-push" ./cmd/tenso-node-push)
log "building the Rust puller"
(cd "$repo/sdk/rust" && "$cargo" build --locked -q -p tenso --example node_pull)
target="${CARGO_TARGET_DIR:-$repo/sdk/rust/target}"

log "running Go -> Python -> Rust"
"$py" "$here/nodes.py" --go "$out/tenso-node-push" --rust "$target/debug/examples/node_pull"
