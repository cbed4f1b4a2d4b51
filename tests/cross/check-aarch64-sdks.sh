#!/usr/bin/env bash
# make check-aarch64-sdks: cross-build the Rust and Go SDKs for aarch64 Linux against the
# aarch64 libtenso of make check-aarch64 (build-aarch64/, installed into build-aarch64/stage),
# and run their test suites under qemu-user.
#
#   Rust: cargo test --target aarch64-unknown-linux-gnu (tenso-sys layout test, tenso's unit,
#         integration and doc tests), linked by aarch64-linux-gnu-gcc, run by qemu-aarch64
#         (cargo's target runner). The target's standard library comes from rustup.
#   Go:   GOARCH=arm64 CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc go vet and go test -exec
#         qemu-aarch64. Not under -race: the race detector's arm64 runtime maps shadow memory
#         at addresses qemu-user does not give it.
#
# Both find the staged library through pkg-config (the stage's tenso.pc first, then Debian's
# arm64 .pc files) and at run time through an rpath, as their native scripts do.
# Environment: JOBS (default 2), CROSS_BUILD (default build-aarch64).
set -euo pipefail
exec < <(:)  # cargo's rustc probe reads stdin (see sdk/rust/run-tests.sh)

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo="$PWD"
JOBS="${JOBS:-2}"
CROSS_BUILD="${CROSS_BUILD:-build-aarch64}"
stage="$repo/$CROSS_BUILD/stage"
triplet=aarch64-linux-gnu
start=$SECONDS
step() { printf '\n== check-aarch64-sdks: %s (+%ss)\n' "$*" "$((SECONDS - start))"; }
export PATH="$PATH:${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:/usr/local/go/bin"

if [[ ! -f "$CROSS_BUILD/CMakeCache.txt" ]]; then
    echo "check-aarch64-sdks: no $CROSS_BUILD: run make check-aarch64 first" >&2
    exit 1
fi
step "libtenso for aarch64 into $stage"
cmake --build "$CROSS_BUILD" -j "$JOBS" --target tenso tenso_cli
rm -rf "$stage"
cmake --install "$CROSS_BUILD" --prefix "$stage" >/dev/null

export PKG_CONFIG_PATH="$stage/lib/pkgconfig"
export PKG_CONFIG_LIBDIR="/usr/lib/$triplet/pkgconfig:/usr/share/pkgconfig"
qemu="$(command -v qemu-aarch64)"

# Tests that start an aarch64 program themselves (the test binary again, or a program they
# built) need qemu registered in binfmt_misc: qemu-user only emulates the process it started.
rust_skip=()
go_skip=()
if [[ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]]; then
    rust_skip=(--skip cuda_backend_reports_unavailable)
    go_skip=(-skip '^(TestGPUCUDAUnavailable|TestRelayGoldenBytes|TestRelayEnds|TestRelayLarge)$')
    echo "No binfmt_misc entry for qemu-aarch64: these tests, which start an aarch64 program"
    echo "themselves, are left out:"
    echo "  SKIPPED Rust tenso/tests/gpu.rs cuda_backend_reports_unavailable (re-runs its test binary)"
    echo "  SKIPPED Go TestGPUCUDAUnavailable (re-runs its test binary)"
    echo "  SKIPPED Go cmd/tenso-relay TestRelayGoldenBytes, TestRelayEnds, TestRelayLarge (run the relay they build)"
fi

step "Rust: cargo test --target aarch64-unknown-linux-gnu"
rustup target list --installed | grep -x aarch64-unknown-linux-gnu >/dev/null ||
    rustup target add aarch64-unknown-linux-gnu
(
    cd sdk/rust
    export PKG_CONFIG_ALLOW_CROSS=1
    export CARGO_TARGET_DIR="$repo/$CROSS_BUILD/cargo-target"
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER="$triplet-gcc"
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$qemu"
    export CC_aarch64_unknown_linux_gnu="$triplet-gcc"
    cargo test -j "$JOBS" --locked --no-fail-fast --target aarch64-unknown-linux-gnu --workspace \
        --no-default-features \
        -- "${rust_skip[@]}"
)

step "Go: GOARCH=arm64 go vet, go test -exec qemu-aarch64"
(
    cd sdk/go
    export GOARCH=arm64 CGO_ENABLED=1 CC="$triplet-gcc" CXX="$triplet-g++"
    export CGO_LDFLAGS="-Wl,-rpath,$stage/lib"
    export GOFLAGS="-p=$JOBS"
    go vet ./...
    go test -count=1 -exec "$qemu" "${go_skip[@]}" ./...
)

step "passed in $((SECONDS - start)) s (emulated: not a speed)"
