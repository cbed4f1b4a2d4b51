#!/usr/bin/env bash
# Build, install and test the Go SDK against the installed libtenso, as CI does:
#
#   1. build libtenso from this checkout and install it into build/stage-sdk (CMake tree
#      build/sdk-lib; a no-op when up to date). The Rust SDK's script shares that prefix, so
#      this runs under an exclusive flock on build/stage-sdk.lock, then holds it shared while
#      the tests run so nobody reinstalls the library under them;
#   2. gofmt check, go vet, go test (module github.com/tenso-project/tenso/sdk/go, the
#      tenso-relay command included), once more with GOEXPERIMENT=cgocheck2 (the full cgo
#      pointer checks), under the race detector (always, unless RACE=0), the tensogonum
#      module (gonum interop, its own go.mod), and the CGO_ENABLED=0 stub build with its
#      test;
#   3. a consumer module built outside the tree against the staged library, run with
#      LD_LIBRARY_PATH unset.
#
# The library is found through pkg-config (PKG_CONFIG_PATH) and at run time through the run
# path the staged tenso.pc adds (and CGO_LDFLAGS for the test binaries), so no
# LD_LIBRARY_PATH is needed. Test caching is off (-count=1): Go's cache
# does not see a rebuilt libtenso.
#
# Environment: GO (the go binary; default: PATH, then /usr/local/go/bin/go), JOBS (parallel
# build jobs, default 2), TENSO_SDK_STAGE / TENSO_SDK_BUILD (move the stage / build directory,
# as the Rust SDK's script allows), RACE (0: skip the race-detector run; default 1),
# BENCH=1 (also run the
# benchmarks), TENSO_SKIP_BOOTSTRAP=1 (do not check the Debian build packages).
# Extra arguments go to every `go test` run (e.g. -run Golden -v).
#
# Exit status: non-zero as soon as a step fails.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
stage="${TENSO_SDK_STAGE:-$repo/build/stage-sdk}"
build="${TENSO_SDK_BUILD:-$repo/build/sdk-lib}"
lock="$stage.lock"
jobs="${JOBS:-2}"
log() { printf 'run-tests.sh: %s\n' "$*" >&2; }

# ---- the Go toolchain (1.24 or newer: runtime.AddCleanup) ----
gobin="${GO:-}"
if [[ -z "$gobin" ]]; then
    for candidate in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go /usr/lib/go/bin/go \
        "$HOME/go/bin/go" "$HOME/sdk/go/bin/go"; do
        if [[ -n "$candidate" && -x "$candidate" ]]; then
            gobin="$candidate"
            break
        fi
    done
fi
if [[ -z "$gobin" ]]; then
    log "no go toolchain found (looked in PATH and /usr/local/go/bin); set GO=/path/to/go"
    exit 1
fi
export PATH="$(dirname "$gobin"):$PATH"
export GOTOOLCHAIN=local # never download another toolchain
log "using $("$gobin" version) at $gobin"

# ---- libtenso, staged ----
if [[ "${TENSO_SKIP_BOOTSTRAP:-0}" != 1 ]]; then
    bash "$repo/tests/tools/bootstrap.sh"
fi
mkdir -p "$(dirname "$lock")"
exec 9>"$lock"
log "waiting for $lock"
flock -x 9
generator=()
if [[ ! -f "$build/CMakeCache.txt" ]]; then
    generator=(-G Ninja)
fi
cmake -S "$repo" -B "$build" "${generator[@]}" -DCMAKE_INSTALL_PREFIX="$stage" -DTENSO_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j "$jobs" >/dev/null
cmake --install "$build" >/dev/null
flock -s 9 # keep the staged library as it is while the tests run

libdir=""
for d in "$stage/lib" "$stage/lib64" "$stage"/lib/*-linux-gnu; do
    if [[ -f "$d/pkgconfig/tenso.pc" ]]; then
        libdir="$d"
        break
    fi
done
if [[ -z "$libdir" ]]; then
    log "tenso.pc not found under $stage"
    exit 1
fi
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export CGO_ENABLED=1
export CGO_LDFLAGS="-Wl,-rpath,$libdir${CGO_LDFLAGS:+ $CGO_LDFLAGS}"
log "libtenso $(pkg-config --modversion tenso) staged in $stage"

cd "$here"
unformatted="$(gofmt -l .)"
if [[ -n "$unformatted" ]]; then
    log "not gofmt-formatted: $unformatted"
    exit 1
fi
log "go vet"
go vet ./...
log "go test"
go test -count=1 ./... "$@"
log "go test (GOEXPERIMENT=cgocheck2)"
GOEXPERIMENT=cgocheck2 go test -count=1 ./... "$@"
race="${RACE:-1}"
if [[ "$race" == 1 ]]; then
    log "go test -race"
    go test -race -count=1 ./... "$@"
fi
# The gonum interop is its own module (tensogonum/: the core module needs no gonum); gonum
# comes from the module proxy (GOPROXY as configured) at the version go.sum pins.
log "tensogonum (own module): vet, test, -race"
(
    cd "$here/tensogonum"
    go vet ./...
    go test -count=1 ./... "$@"
    if [[ "$race" == 1 ]]; then
        go test -race -count=1 ./... "$@"
    fi
)
log "CGO_ENABLED=0: the stub"
CGO_ENABLED=0 go vet ./...
CGO_ENABLED=0 go test -count=1 ./... "$@"

# A consumer outside the tree, as a user builds one: its own module (the SDK through a
# replace directive, nothing downloaded), the library found by pkg-config, and nothing else:
# the staged prefix is one the dynamic linker does not search, so its tenso.pc puts a run path
# into the link line (pkgconfig/libdir.cmake) and the program starts with LD_LIBRARY_PATH
# unset. Proof that the run path is what finds it: the same program linked without the .pc's
# run path (flags from pkg-config, rpath left out) does not start. (The module as `go get`
# fetches it is tested by tests/dist, dist.deb.)
log "a consumer outside the tree, run without LD_LIBRARY_PATH"
consumer="$(mktemp -d "${TMPDIR:-/tmp}/tenso-go-consumer.XXXXXX")"
trap 'rm -rf "$consumer"' EXIT
printf '%s\n' 'module example.com/consumer' '' 'go 1.24' '' \
    'require github.com/tenso-project/tenso/sdk/go v0.0.0' '' \
    "replace github.com/tenso-project/tenso/sdk/go => $here" >"$consumer/go.mod"
cp "$here/testdata/consumer/main.go" "$consumer/main.go"
pclib="$(pkg-config --variable=libdir tenso)"
want="[2 2] [1 2 3 4] $(pkg-config --modversion tenso)"
(
    cd "$consumer"
    export GOFLAGS=-mod=mod GOPROXY=off GOWORK=off
    # Go's build cache does not key cgo packages on pkg-config's output (go 1.26 reused a
    # package linked with or without the run path across these two builds and across runs):
    # CGO_LDFLAGS, which it does key on, names a directory of this run's, different per build.
    CGO_LDFLAGS="-L$consumer/with" go build -o consumer .
    runpath="$(readelf -d consumer | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')"
    if [[ "$(realpath -m "$runpath")" != "$(realpath "$pclib")" ]]; then
        log "the consumer's RUNPATH is '$runpath', not tenso.pc's libdir $pclib"
        exit 1
    fi
    got="$(env -u LD_LIBRARY_PATH ./consumer)"
    if [[ "$got" != "$want" ]]; then
        log "the consumer printed '$got', want '$want'"
        exit 1
    fi
    # The same program without that run path: cgo's pkg-config with -Wl,-rpath filtered out.
    printf '#!/bin/sh\npkg-config "$@" | sed "s/-Wl,-rpath,[^ ]*//g"\n' >"$consumer/pkg-config-norpath"
    chmod +x "$consumer/pkg-config-norpath"
    CGO_LDFLAGS="-L$consumer/without" PKG_CONFIG="$consumer/pkg-config-norpath" go build -o without-rpath .
    if env -u LD_LIBRARY_PATH ./without-rpath >/dev/null 2>&1; then
        log "the consumer built without the run path started: is $pclib on the default library path?"
        exit 1
    fi
)
if [[ "${BENCH:-0}" == 1 ]]; then
    log "benchmarks"
    go test -count=1 -run '^$' -bench . -benchmem .
fi
log "all Go SDK checks passed"
