#!/usr/bin/env bash
# The Python tools of `make lint` and `make docs`, pinned and installed once (a stamp file per
# set makes re-runs offline no-ops). Prints the interpreter to use, last, on stdout.
#
#   tests/tools/pyenv.sh tools        build/venv-tools: ruff alone (no SDK build needed, so
#                                     tests/tools/format.sh stays cheap)
#   tests/tools/pyenv.sh sdk lint     build/venv-sdk (our tenso installed: built by
#   tests/tools/pyenv.sh sdk docs     sdk/python/run-tests.sh when `import tenso` fails) plus
#                                     mypy and the stub packages it needs, or pdoc
#
# The SDK venv is the one the Python suite builds: in CI `make test` has just built its wheel
# from this tree. Run sdk/python/run-tests.sh after changing the extension to lint against the
# new build (stubtest imports the installed one).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
log() { printf 'pyenv.sh: %s\n' "$*" >&2; }

tools_pins="ruff==0.17.6"
# mypy, and the stubs of what the package imports when the extras are installed (the SDK venv
# has them all): protobuf and grpcio (tenso.grpc, tenso.serve), scipy (sparse packets).
lint_pins="mypy==2.4.1
types-protobuf==7.35.1.20260906
types-grpcio==1.85.0.20261028
scipy-stubs==1.17.1.5"
docs_pins="pdoc==16.0.0"

# pinned PYTHON STAMP PINS: pip-installs PINS (binary wheels only) unless STAMP holds exactly them.
pinned() {
    if [[ -f "$2" ]] && [[ "$(cat "$2")" == "$3" ]]; then return 0; fi
    log "installing into $(dirname "$(dirname "$1")"): $(echo "$3" | tr '\n' ' ')"
    rm -f "$2"
    local req
    req="$(mktemp)"
    printf '%s\n' "$3" >"$req"
    "$1" -m pip install --disable-pip-version-check --no-input --quiet --only-binary=:all: -r "$req" >&2
    rm -f "$req"
    printf '%s\n' "$3" >"$2"
}

case "${1:-}" in
tools)
    venv="$repo/build/venv-tools"
    if [[ ! -x "$venv/bin/python" ]]; then
        log "creating $venv"
        mkdir -p "$(dirname "$venv")"
        "${PYTHON:-python3}" -m venv "$venv" >&2
    fi
    pinned "$venv/bin/python" "$venv/.tenso-tools" "$tools_pins"
    echo "$venv/bin/python"
    ;;
sdk)
    shift
    venv="${TENSO_SDK_VENV:-$repo/build/venv-sdk}"
    py="$venv/bin/python"
    if ! "$py" -c "import tenso._tenso" 2>/dev/null; then
        log "building the SDK venv and wheel (sdk/python/run-tests.sh)"
        (cd "$repo" && TENSO_SKIP_UPSTREAM=1 bash sdk/python/run-tests.sh -q -x -k test_api >&2)
    fi
    for set in "$@"; do
        case "$set" in
        lint) pinned "$py" "$venv/.tenso-lint" "$lint_pins" ;;
        docs) pinned "$py" "$venv/.tenso-docs" "$docs_pins" ;;
        *) log "unknown set '$set' (lint, docs)"; exit 2 ;;
        esac
    done
    echo "$py"
    ;;
*)
    sed -n '2,14p' "${BASH_SOURCE[0]}" >&2
    exit 2
    ;;
esac
