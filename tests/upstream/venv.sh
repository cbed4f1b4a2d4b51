#!/usr/bin/env bash
# Create (idempotently) the virtualenv holding the REAL upstream `tenso` package
# that produced the golden vectors, and print its python path on the last line
# of stdout. Everything else goes to stderr, so callers can do:
#     PY=$(bash tests/upstream/venv.sh | tail -n1)
#
# Location: ${TENSO_UPSTREAM_VENV:-<repo>/build/venv-upstream}
# Interpreter used to create it: ${PYTHON:-python3} (must be >= 3.11: the
# tenso 0.24.0 wheel is cp311-abi3).
#
# A stamp file inside the venv holds the exact requirement list; a re-run with
# an unchanged list does nothing (no network), a changed list reinstalls.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$script_dir/../.." && pwd)"
venv="${TENSO_UPSTREAM_VENV:-$repo/build/venv-upstream}"
base_python="${PYTHON:-python3}"

# Pinned set, verified to install together (binary wheels only) on CPython 3.11
# x86_64 manylinux. lz4 is tenso's own dependency, pinned for reproducibility.
requirements="tenso==0.24.0
numpy==2.4.6
ml_dtypes==0.6.0
scipy==1.17.1
xxhash==4.1.0
lz4==4.4.5"

stamp="$venv/.tenso-upstream-requirements"
py="$venv/bin/python"

log() { printf '%s\n' "$*" >&2; }

if [[ -x "$py" && -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$requirements" ]]; then
    printf '%s\n' "$py"
    exit 0
fi

if ! "$base_python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
    log "venv.sh: $base_python is older than Python 3.11; the tenso 0.24.0 wheel needs >= 3.11 (set PYTHON=...)"
    exit 1
fi

if [[ ! -x "$py" ]]; then
    log "venv.sh: creating $venv"
    mkdir -p "$(dirname "$venv")"
    "$base_python" -m venv "$venv" >&2
fi

log "venv.sh: installing pinned upstream requirements into $venv"
req_file="$(mktemp)"
trap 'rm -f "$req_file"' EXIT
printf '%s\n' "$requirements" > "$req_file"
# Remove a stale stamp first so an interrupted install is retried next time.
rm -f "$stamp"
"$py" -m pip install --disable-pip-version-check --no-input --quiet \
    --only-binary=:all: -r "$req_file" >&2
"$py" -c 'import tenso, numpy, ml_dtypes, scipy, xxhash, lz4' >&2
printf '%s\n' "$requirements" > "$stamp"
log "venv.sh: ready"
printf '%s\n' "$py"
