#!/usr/bin/env bash
# `make lint`: the type and lint gates. Every gate runs; the exit status is 1 when any failed
# (the summary names them).
#
#   tests/tools/lint.sh [format] [python] [rust] [go] [c]     (default: all, in that order)
#
#   format  tests/tools/format.sh --check: clang-format 14, ruff format, rustfmt, gofmt; no
#           shell script or Makefile recipe pipes into grep -q (a SIGPIPE under pipefail)
#   python  ruff check (ruff.toml) over every Python file; mypy --strict over the tenso package
#           (sdk/python/mypy.ini); mypy.stubtest of _tenso.pyi against the built extension
#           (sdk/python/stubtest-allowlist.txt) and tests/tools/stubsig.py for its parameters
#   rust    cargo clippy -D warnings, every target and feature of sdk/rust
#   go      go vet (with and without cgo) and tests/tools/godoc (a doc comment on every
#           exported identifier), for sdk/go and sdk/go/tensogonum
#   c       clang-tidy's bugprone checks (.clang-tidy) over impl/, capi/, sdk/cli and tests/,
#           from the compile_commands.json of build-lint/ (configured here, nothing is built)
#
# Nothing here needs libtenso built: clippy and go vet type-check against the headers only
# (a pkg-config file in build-lint/ points at capi/include). The Python checks use the SDK's
# virtualenv, built by sdk/python/run-tests.sh when missing (tests/tools/pyenv.sh).
# Environment: JOBS (parallel jobs, default 2).
set -euo pipefail
exec < <(:) # cargo's rustc probe reads stdin as a program (see sdk/rust/run-tests.sh)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"
jobs="${JOBS:-2}"
lint_build="$repo/build-lint"
export PATH="$PATH:${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:/usr/local/go/bin"
export GOTOOLCHAIN=local
log() { printf 'lint.sh: %s\n' "$*" >&2; }
step() { printf '\n== lint: %s (+%ss)\n' "$*" "$SECONDS" >&2; }

# Each gate runs in a process of its own (this script again, with --gate), so that one failing
# gate stops at its first error and the others still run.
if [[ "${1:-}" != --gate ]]; then
    steps=("$@")
    ((${#steps[@]})) || steps=(format python rust go c)
    failed=()
    for s in "${steps[@]}"; do
        bash "${BASH_SOURCE[0]}" --gate "$s" || failed+=("$s")
    done
    if ((${#failed[@]})); then
        step "FAILED: ${failed[*]} (of ${steps[*]})"
        exit 1
    fi
    step "all lint gates passed: ${steps[*]}"
    exit 0
fi
steps=("$2")

# A tenso.pc for type-checking only: the headers of this tree and no library (nothing links).
header_pc() {
    mkdir -p "$lint_build/pkgconfig"
    local version
    version="$(sed -n 's/^#define TENSO_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
        capi/include/tenso/version.h | paste -sd.)"
    printf '%s\n' "Name: tenso" "Description: tenso headers of $repo (lint only)" \
        "Version: $version" "Cflags: -I$repo/capi/include" "Libs: -ltenso" \
        >"$lint_build/pkgconfig/tenso.pc"
    echo "$lint_build/pkgconfig"
}

for s in "${steps[@]}"; do
    case "$s" in
    format)
        step "formatting (tests/tools/format.sh --check)"
        bash "$here/format.sh" --check
        # Under pipefail, a producer piped into `grep -q` fails when grep exits at its first
        # match and the producer, still writing, dies of SIGPIPE (141); whether it does depends
        # on output size and timing (dist.source failed so in CI). Read all instead:
        # `| grep PATTERN >/dev/null`.
        if git grep -nE '\|[[:space:]]*grep -[a-zA-Z]*q' -- '*.sh' Makefile; then
            log "the lines above pipe into grep -q; write '| grep PATTERN >/dev/null'"
            exit 1
        fi
        ;;
    python)
        step "ruff check"
        tools_py="$(bash "$here/pyenv.sh" tools | tail -n1)"
        "$(dirname "$tools_py")/ruff" check --quiet .
        py="$(bash "$here/pyenv.sh" sdk lint | tail -n1)"
        step "mypy --strict (sdk/python/mypy.ini)"
        (cd sdk/python && "$py" -m mypy)
        step "mypy.stubtest tenso._tenso, stubsig"
        (cd sdk/python && "$py" -m mypy.stubtest tenso._tenso --mypy-config-file mypy.ini \
            --allowlist stubtest-allowlist.txt)
        "$py" "$here/stubsig.py" sdk/python/src/tenso/_tenso.pyi tenso._tenso
        ;;
    rust)
        step "cargo clippy -D warnings"
        # Type-checks against the headers alone: tenso-sys links nothing at this stage. Its
        # own target directory keeps these build-script settings away from run-tests.sh's.
        (
            cd sdk/rust
            export TENSO_NO_PKG_CONFIG=1 TENSO_LIB_DIR="$lint_build" TENSO_INCLUDE_DIR="$repo/capi/include"
            export CARGO_TARGET_DIR="$lint_build/cargo"
            # Every feature but `bundled` (its sources are added only when the crate is packaged).
            cargo clippy --workspace --all-targets --no-default-features --features libtenso/ndarray,libtenso/tokio --locked --quiet -- -D warnings
        )
        ;;
    go)
        step "go vet, doc comments"
        PKG_CONFIG_PATH="$(header_pc)${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
        export PKG_CONFIG_PATH
        for mod in sdk/go sdk/go/tensogonum; do
            (cd "$mod" && CGO_ENABLED=1 go vet ./... && CGO_ENABLED=0 go vet ./...)
        done
        (cd "$here/godoc" && go run . "$repo/sdk/go" "$repo/sdk/go/tensogonum")
        ;;
    c)
        step "clang-tidy (.clang-tidy: bugprone-*)"
        # A configure only (about 10 s): compile_commands.json for the engine, the C ABI, the
        # CLI and the test suites. The CUDA plugin needs nvcc and is left to the compiler.
        generator=()
        [[ -f "$lint_build/CMakeCache.txt" ]] || generator=(-G Ninja)
        cmake -S . -B "$lint_build" "${generator[@]}" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
            -DTENSO_CUDA=OFF -DTENSO_SDK_TESTS=OFF >/dev/null
        mapfile -t files < <(sed -n 's/^ *"file": "\(.*\)",\{0,1\}$/\1/p' "$lint_build/compile_commands.json" |
            grep -E "^$repo/(impl|capi|sdk/cli|tests)/" | sort -u)
        out="$lint_build/clang-tidy.log"
        # Findings are errors (.clang-tidy: WarningsAsErrors), so the exit status tells.
        if ! run-clang-tidy-14 -p "$lint_build" -j "$jobs" -quiet -extra-arg=-Wno-unknown-warning-option \
            "^$repo/(impl|capi|sdk/cli|tests)/" >"$out" 2>&1; then
            sed 's/\x1b\[[0-9;]*m//g' "$out" | grep -E -A3 ': (warning|error): ' >&2 || tail -n 30 "$out" >&2
            log "clang-tidy findings (full log: $out)"
            exit 1
        fi
        log "clang-tidy: ${#files[@]} files clean"
        ;;
    *)
        log "unknown step '$s' (format, python, rust, go, c)"
        exit 2
        ;;
    esac
done
