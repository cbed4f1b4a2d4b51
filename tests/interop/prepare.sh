# prepare.sh - sourced by run-chain.sh and run-nodes.sh: finds the Go and Rust toolchains (gobin,
# cargo), the Python SDK's venv (py; built with sdk/python/run-tests.sh if it cannot import
# tenso), and builds and installs libtenso into the shared stage under an exclusive flock, then
# holds the lock shared (fd 9) while the caller runs (libdir, PKG_CONFIG_PATH). Expects repo,
# stage, build, lock, jobs and log() from the caller.

# cargo's rustc probe parses its inherited stdin as a program: an empty pipe, never /dev/null
# (see sdk/rust/run-tests.sh).
exec < <(:)

# ---- toolchains
export PATH="$PATH:${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:/root/.cargo/bin:/usr/local/go/bin"
gobin="${GO:-$(command -v go || true)}"
cargo="${CARGO:-$(command -v cargo || true)}"
[[ -n "$gobin" && -x "$gobin" ]] || { log "no go toolchain (set GO=)"; exit 1; }
[[ -n "$cargo" && -x "$cargo" ]] || { log "no cargo (set CARGO=)"; exit 1; }
export GOTOOLCHAIN=local

# ---- the Python SDK's venv
py="$repo/build/venv-sdk/bin/python"
if ! "$py" -c "import tenso, tenso.net" 2>/dev/null; then
    log "build/venv-sdk cannot import tenso (or tenso.net): building it with sdk/python/run-tests.sh"
    bash "$repo/sdk/python/run-tests.sh" -q -x -k test_api
fi

# ---- libtenso, staged (exclusive), then held (shared)
mkdir -p "$repo/build"
exec 9>"$lock"
flock -x 9
configure=1
if [[ -f "$build/CMakeCache.txt" ]] &&
    grep -qx "CMAKE_INSTALL_PREFIX:PATH=$stage" "$build/CMakeCache.txt" &&
    grep -qx "TENSO_BUILD_TESTS:BOOL=OFF" "$build/CMakeCache.txt"; then
    configure=0
fi
if ((configure)); then
    generator=()
    if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then
        generator=(-G Ninja)
    fi
    cmake -S "$repo" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_INSTALL_PREFIX="$stage" -DTENSO_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" -j "$jobs" >/dev/null
cmake --install "$build" >/dev/null
flock -s 9
libdir="$stage/lib"
[[ -f "$libdir/pkgconfig/tenso.pc" ]] || { log "tenso.pc not found in $libdir/pkgconfig"; exit 1; }
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
unset LD_LIBRARY_PATH
