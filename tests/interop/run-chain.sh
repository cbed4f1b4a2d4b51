#!/usr/bin/env bash
# The cross-language chain test (CTest interop.chain): builds the Go relay (sdk/go/cmd/
# tenso-relay) and the Rust relay (sdk/rust/tenso/examples/relay.rs) against the staged
# libtenso, then runs tests/interop/chain.py, which pipes packets
#
#   Python -(socket)-> Go -(pipe)-> Rust -(pipe)-> C -(socket)-> Python
#
# and checks every one that comes back.
#
# Usage: run-chain.sh C_RELAY [OUT_DIR]
#   C_RELAY  the C relay binary (built by CMake: tests/interop/relay.c)
#   OUT_DIR  where the Go binary goes (default: a temporary directory)
#
# The stage (build/stage-sdk, CMake tree build/sdk-lib) is shared with the Rust and Go SDK
# scripts, so, as they do, this builds and installs it under an exclusive flock on
# build/stage-sdk.lock and then holds the lock shared while the relays run, so nobody swaps
# libtenso.so under them. Python runs from build/venv-sdk (made by sdk/python/run-tests.sh,
# which is run once here when the venv cannot import tenso).
#
# Environment: GO (the go binary), CARGO, JOBS (default 2), TENSO_SKIP_BOOTSTRAP.
# Exit status: 0 when every packet came back right; non-zero otherwise.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
stage="$repo/build/stage-sdk"
build="$repo/build/sdk-lib"
lock="$repo/build/stage-sdk.lock"
jobs="${JOBS:-2}"
log() { printf 'run-chain.sh: %s\n' "$*" >&2; }

if (($# < 1 || $# > 2)); then
    log "usage: run-chain.sh C_RELAY [OUT_DIR]"
    exit 2
fi
c_relay="$(realpath "$1")"
[[ -x "$c_relay" ]] || { log "C relay $c_relay is not an executable"; exit 1; }
if (($# == 2)); then
    out="$(realpath -m "$2")"
    mkdir -p "$out"
else
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
fi

source "$here/prepare.sh"

# ---- the relays
log "building the Go relay"
(cd "$repo/sdk/go" && CGO_ENABLED=1 CGO_LDFLAGS="-Wl,-rpath,$libdir" \
    "$gobin" build -o "$out/tenso-relay-go" ./cmd/tenso-relay)
log "building the Rust relay"
(cd "$repo/sdk/rust" && "$cargo" build --locked -q -p libtenso --no-default-features --example relay)
rust_relay="$repo/sdk/rust/target/debug/examples/relay"

log "running the chain"
"$py" "$here/chain.py" --vectors "$repo/tests/vectors" \
    --go "$out/tenso-relay-go" --rust "$rust_relay" --c "$c_relay"
