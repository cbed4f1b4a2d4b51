#!/usr/bin/env bash
# The tree's formatting, checked or applied in one command (re-run it after merging branches):
#
#   tests/tools/format.sh [--check] [LANG...]   list what is not formatted; exit 1 if anything
#   tests/tools/format.sh --fix [LANG...]       reformat it in place
#
# LANG: c (clang-format 14 with .clang-format: C, C++ and CUDA files git tracks), python (ruff
# format with ruff.toml), rust (rustfmt with sdk/rust/rustfmt.toml), go (gofmt). Default: all.
# Only files git tracks are touched, so build trees and scratch files never are. `make lint`
# runs --check; `make format` runs --fix.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"
log() { printf 'format.sh: %s\n' "$*" >&2; }

mode=check
langs=()
for arg in "$@"; do
    case "$arg" in
    --check) mode=check ;;
    --fix) mode=fix ;;
    c | python | rust | go) langs+=("$arg") ;;
    -h | --help) sed -n '2,10p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) log "unknown argument '$arg'"; exit 2 ;;
    esac
done
((${#langs[@]})) || langs=(c python rust go)
export PATH="$PATH:${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:/usr/local/go/bin"
jobs="${JOBS:-2}"
failed=()

for lang in "${langs[@]}"; do
    case "$lang" in
    c)
        # Another clang-format major formats differently: the check would flag code that
        # clang-format 14 (Debian 12, bootstrap.sh --lint) considers formatted.
        cf="${CLANG_FORMAT:-clang-format}"
        version="$("$cf" --version 2>/dev/null | sed -n 's/.*clang-format version \([0-9]*\).*/\1/p')"
        if [[ "$version" != 14 ]]; then
            log "needs clang-format 14 (found '${version:-none}'): bash tests/tools/bootstrap.sh --lint"
            exit 1
        fi
        mapfile -d '' files < <(git ls-files -z -- '*.c' '*.h' '*.cpp' '*.hpp' '*.inc' '*.cu' '*.cuh' \
            ':!:tests/fuzz/corpus/**')
        if [[ "$mode" == fix ]]; then
            printf '%s\0' "${files[@]}" | xargs -0 -n 16 -P "$jobs" "$cf" -i --style=file
        else
            bad="$(printf '%s\0' "${files[@]}" | xargs -0 -n 16 -P "$jobs" "$cf" --dry-run --style=file 2>&1 |
                sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: warning: code should be clang-formatted.*/\1/p' | sort -u)"
            if [[ -n "$bad" ]]; then
                log "not clang-formatted (tests/tools/format.sh --fix c):"
                printf '  %s\n' $bad >&2
                failed+=(c)
            fi
        fi
        ;;
    python)
        ruff="$(dirname "$(bash "$here/pyenv.sh" tools | tail -n1)")/ruff"
        mapfile -d '' files < <(git ls-files -z -- '*.py' '*.pyi')
        # --force-exclude: ruff.toml's exclusions (generated gRPC modules) hold for files named
        # on the command line too.
        if [[ "$mode" == fix ]]; then
            "$ruff" format --force-exclude --quiet -- "${files[@]}"
        elif ! "$ruff" format --force-exclude --check --quiet -- "${files[@]}"; then
            log "not ruff-formatted (tests/tools/format.sh --fix python): the files above"
            failed+=(python)
        fi
        ;;
    rust)
        # rustfmt on the files git tracks (the consumer crate is a template cargo cannot load).
        mapfile -d '' files < <(git ls-files -z -- '*.rs')
        rustfmt=(rustfmt --edition 2021 --config-path sdk/rust/rustfmt.toml)
        if [[ "$mode" == fix ]]; then
            "${rustfmt[@]}" "${files[@]}"
        else
            bad="$("${rustfmt[@]}" --check -l "${files[@]}" || true)"
            if [[ -n "$bad" ]]; then
                log "not rustfmt-formatted (tests/tools/format.sh --fix rust):"
                printf '  %s\n' $bad >&2
                failed+=(rust)
            fi
        fi
        ;;
    go)
        mapfile -d '' files < <(git ls-files -z -- '*.go')
        if [[ "$mode" == fix ]]; then
            gofmt -w "${files[@]}"
        else
            bad="$(gofmt -l "${files[@]}")"
            if [[ -n "$bad" ]]; then
                log "not gofmt-formatted (tests/tools/format.sh --fix go):"
                printf '  %s\n' $bad >&2
                failed+=(go)
            fi
        fi
        ;;
    esac
done

if ((${#failed[@]})); then
    log "unformatted: ${failed[*]}"
    exit 1
fi
log "$mode: ${langs[*]}: ok"
