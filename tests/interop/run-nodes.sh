#!/usr/bin/env bash
# The cross-language node test (CTest interop.nodes): builds the Go pusher (sdk/go/cmd/
# tenso-node-push) and the Rust puller (sdk/rust/tenso/examples/node_pull.rs) against the
# staged libtenso, then runs tests/interop/nodes.py:
#
#   Go -(push, TLS)-> Python -(pull, TLS)-> Rust
#
# The stage, toolchains and Python venv are prepared by prepare.sh, as for run-chain.sh.
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

source "$here/prepare.sh"

log "building the Go pusher"
(cd "$repo/sdk/go" && CGO_ENABLED=1 CGO_LDFLAGS="-Wl,-rpath,$libdir" \
    "$gobin" build -o "$out/tenso-node-push" ./cmd/tenso-node-push)
log "building the Rust puller"
(cd "$repo/sdk/rust" && "$cargo" build --locked -q -p libtenso --no-default-features --example node_pull)
target="${CARGO_TARGET_DIR:-$repo/sdk/rust/target}"

log "running Go -> Python -> Rust"
"$py" "$here/nodes.py" --go "$out/tenso-node-push" --rust "$target/debug/examples/node_pull"
