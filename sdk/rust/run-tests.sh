#!/usr/bin/env bash
# Build, stage and test the Rust SDK against the installed libtenso, as CI does:
#
#   1. build libtenso from this checkout in build/sdk-lib (CMake, tests off) and install it into
#      build/stage-sdk, the prefix its tenso.pc records. Idempotent: an up-to-date tree costs a
#      Ninja no-op and an install of unchanged files. The stage is shared with the Go SDK's
#      script, so it is guarded by flock on build/stage-sdk.lock: exclusive while building and
#      installing, shared while tests use the library (a rebuild never swaps libtenso.so under a
#      running test);
#   2. cargo test (tenso-sys layout/ABI test, unit, integration and doc tests), again for the
#      `ndarray` and `tokio` features, cargo clippy with warnings denied (default and all features), cargo
#      doc with warnings denied, all with PKG_CONFIG_PATH pointing at the stage and
#      --no-default-features: the staged libtenso, not the `bundled` build (whose sources only
#      the packaged crate carries; tests/dist tests it). LD_LIBRARY_PATH is not set: the test
#      binaries carry an rpath to the stage;
#   3. found at run time: the program in consumer/ is copied to a directory outside the tree,
#      built against the stage like a user's program, and run with LD_LIBRARY_PATH unset (its
#      build script embeds DEP_TENSO_RPATH); its binary must carry the stage's lib directory
#      as RUNPATH, and none when built with TENSO_SYS_NO_RPATH=1.
#
# Usage: sdk/rust/run-tests.sh [--bench]     (--bench also runs `cargo bench` at the end)
# Environment: JOBS (parallel build jobs, default 2), CARGO (default: cargo on PATH or
# ~/.cargo/bin), TENSO_SDK_STAGE / TENSO_SDK_BUILD to move the stage / build directory.
# Exit status: non-zero when any step fails.
set -euo pipefail
# cargo's rustc probe (`rustc - --print ...`) parses its inherited stdin as a program. Give it
# an empty pipe, not /dev/null: on the CI machine /dev/null was seen holding text other
# programs had written to it (cc's "unrecognized command-line option '-?'"), which rustc then
# failed to parse. The pipe reads as end-of-file once `:` exits.
exec < <(:)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
stage="${TENSO_SDK_STAGE:-$repo/build/stage-sdk}"
build="${TENSO_SDK_BUILD:-$repo/build/sdk-lib}"
lock="$stage.lock"
jobs="${JOBS:-2}"
log() { printf 'run-tests.sh: %s\n' "$*" >&2; }

run_bench=0
for arg in "$@"; do
    case "$arg" in
        --bench) run_bench=1 ;;
        *) log "unknown argument: $arg"; exit 2 ;;
    esac
done

# cargo lives in ~/.cargo/bin on these machines and is often not on a non-login PATH.
export PATH="$PATH:${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:/root/.cargo/bin"
cargo="${CARGO:-cargo}"
if ! command -v "$cargo" >/dev/null 2>&1; then
    log "cargo not found (looked on PATH and in ~/.cargo/bin); install Rust with rustup"
    exit 1
fi
for tool in cmake pkg-config flock readelf; do
    command -v "$tool" >/dev/null 2>&1 || { log "$tool not found"; exit 1; }
done

# ---- 1. libtenso into the shared stage
mkdir -p "$(dirname "$lock")"
exec 9>"$lock"
flock -x 9
configure=1
if [[ -f "$build/CMakeCache.txt" ]] &&
    grep -qx "CMAKE_INSTALL_PREFIX:PATH=$stage" "$build/CMakeCache.txt" &&
    grep -qx "TENSO_BUILD_TESTS:BOOL=OFF" "$build/CMakeCache.txt"; then
    configure=0  # Ninja re-runs CMake by itself when a CMakeLists.txt changed
fi
if ((configure)); then
    generator=()
    if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then
        generator=(-G Ninja)
    fi
    log "configuring libtenso in $build (prefix $stage)"
    cmake -S "$repo" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_INSTALL_PREFIX="$stage" -DTENSO_BUILD_TESTS=OFF
fi
cmake --build "$build" -j "$jobs"
cmake --install "$build" | { grep -v '^-- Up-to-date' || true; }
flock -s 9  # keep the library in place while the tests use it
log "libtenso $(PKG_CONFIG_PATH="$stage/lib/pkgconfig" pkg-config --modversion tenso) staged in $stage"

# ---- 2. cargo
export PKG_CONFIG_PATH="$stage/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
unset LD_LIBRARY_PATH
cd "$here"
log "cargo test"
# This checkout's libtenso, staged: the crates' `bundled` default is off throughout.
nodefault=(--no-default-features)
"$cargo" test --workspace "${nodefault[@]}" --locked
log "cargo test --features ndarray"
"$cargo" test -p libtenso "${nodefault[@]}" --features ndarray --locked
log "cargo test --features tokio (AsyncNode under tokio's multi-threaded runtime)"
"$cargo" test -p libtenso "${nodefault[@]}" --features tokio --locked
log "cargo clippy"
"$cargo" clippy --workspace --all-targets "${nodefault[@]}" --locked -- -D warnings
"$cargo" clippy --workspace --all-targets "${nodefault[@]}" --features libtenso/ndarray --locked -- -D warnings
log "cargo doc"
RUSTDOCFLAGS="-D warnings" "$cargo" doc --workspace --no-deps "${nodefault[@]}" --locked
# ---- 3. a consumer outside the tree, run without LD_LIBRARY_PATH
consumer="$(mktemp -d "${TMPDIR:-/tmp}/tenso-rust-consumer.XXXXXX")"
trap 'rm -rf "$consumer"' EXIT
cp -r "$here/consumer/." "$consumer/"
sed -i "s|@RUST_SDK@|$here|g" "$consumer/Cargo.toml"
cp "$here/Cargo.lock" "$consumer/Cargo.lock"  # the workspace's pinned versions, pruned by cargo
libdir="$(realpath "$(pkg-config --variable=libdir tenso)")"
runpath_of() { readelf -d "$1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\].*/\1/p'; }
log "consumer: build outside the tree ($consumer) and run with LD_LIBRARY_PATH unset"
(cd "$consumer" && "$cargo" build --offline -q)
bin="$consumer/target/debug/tenso-consumer"
[[ "$(runpath_of "$bin")" == "$libdir" ]] || { log "consumer: no RUNPATH to $libdir"; readelf -d "$bin"; exit 1; }
out="$(env -u LD_LIBRARY_PATH "$bin")"
[[ "$out" == "consumer ok $(pkg-config --modversion tenso)" ]] || { log "consumer printed: $out"; exit 1; }
log "consumer: $out (RUNPATH $(runpath_of "$bin"))"
(cd "$consumer" && TENSO_SYS_NO_RPATH=1 "$cargo" build --offline -q)
[[ -z "$(runpath_of "$bin")" ]] || { log "consumer: TENSO_SYS_NO_RPATH=1 still embedded $(runpath_of "$bin")"; exit 1; }
log "consumer: TENSO_SYS_NO_RPATH=1 embeds no run path"

if ((run_bench)); then
    log "cargo bench"
    "$cargo" bench -p libtenso "${nodefault[@]}" --locked
fi
log "all Rust SDK checks passed"
