#!/usr/bin/env bash
# Set up (idempotently) everything the Python benchmark needs, then run it once:
#   - build/venv-sdk with our `tenso` (built by sdk/python/run-tests.sh only if missing);
#   - the peer libraries, pinned, installed into that same venv (stamp file: re-runs are offline);
#   - build/venv-upstream with upstream tenso 0.24.0 (tests/upstream/venv.sh), measured in a
#     subprocess because it has the same import name as ours.
# Usage: run.sh [cache|archive|stream|encode|ray|http|net] [args...]. With no suite, bench.py (dumps/loads/files/sockets);
# `cache` runs cache_bench.py (TensoCache, issue 6), `archive` archive_bench.py (model files,
# issue 7), `stream` stream_bench.py (receive at wire speed, issue 14), `encode` encode_bench.py
# (encode at memory speed, issue 18), `ray` ray_bench.py (Ray put/get/task arguments with and
# without tenso.ray.register(), issue 17; ray comes from run-tests.sh's pins), `http`
# http_bench.py (HTTP inference round trip, issue 17: needs the web extras, which run-tests.sh
# installs and the upstream venv gets from it), `net` net_bench.py (nodes, issue 16). Extra
# arguments go to the script (e.g. --quick).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="$repo/build/venv-sdk"
py="$venv/bin/python"
log() { printf 'bench/python/run.sh: %s\n' "$*" >&2; }

if ! "$py" -c "import tenso" 2>/dev/null; then
    log "building the SDK venv (sdk/python/run-tests.sh)"
    (cd "$repo" && bash sdk/python/run-tests.sh -q -x -k test_api)
fi

peers="safetensors==0.8.0
bintensors==0.2.0
pyarrow==26.0.1
msgpack==1.2.4
msgpack-numpy==0.4.8
matplotlib==3.11.2"
stamp="$venv/.tenso-bench-peers"
if [[ ! -f "$stamp" ]] || [[ "$(cat "$stamp")" != "$peers" ]]; then
    log "installing pinned peer libraries into $venv"
    rm -f "$stamp"
    req_file="$(mktemp)"
    trap 'rm -f "$req_file"' EXIT
    printf '%s\n' "$peers" > "$req_file"
    "$py" -m pip install --disable-pip-version-check --no-input --quiet --only-binary=:all: -r "$req_file"
    "$py" -c "import safetensors.numpy, bintensors.numpy, pyarrow, msgpack, msgpack_numpy, matplotlib"
    printf '%s\n' "$peers" > "$stamp"
fi

upstream_py="$(cd "$repo" && bash tests/upstream/venv.sh | tail -n1)"

cd "$here"
case "${1:-}" in
    cache) shift; exec "$py" cache_bench.py --upstream-python "$upstream_py" "$@" ;;
    archive) shift; exec "$py" archive_bench.py "$@" ;;
    stream) shift; exec "$py" stream_bench.py --upstream-python "$upstream_py" "$@" ;;
    encode) shift; exec "$py" encode_bench.py --upstream-python "$upstream_py" "$@" ;;
    ray) shift; exec "$py" ray_bench.py --out ray_results.md "$@" ;;
    http) shift; exec "$py" http_bench.py --upstream-python "$upstream_py" "$@" ;;
    net) shift
        # The seed's own bindings, side by side (PyPI; a stamp keeps re-runs offline).
        if [[ ! -f "$venv/.tenso-bench-iroh" ]]; then
            "$py" -m pip install --disable-pip-version-check --no-input --quiet --only-binary=:all: \
                "tensor-iroh==0.1.1a3" && touch "$venv/.tenso-bench-iroh" ||
                log "tensor-iroh could not be installed: net_bench.py reports it"
        fi
        exec "$py" net_bench.py "$@" ;;
    *) exec "$py" bench.py --upstream-python "$upstream_py" "$@" ;;
esac
