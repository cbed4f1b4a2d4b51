#!/usr/bin/env bash
# `make bench-report`: the figures the README publishes, from one run on a quiet machine.
#
#   bench/report.sh [--force] [--quick] [--max-load L]
#
# 1. Refuses to start when the 1-minute load average is above L (default 1, or BENCH_MAX_LOAD):
#    on a busy machine every memory-bound time is several times a quiet one's, and a reader
#    cannot tell. --force runs anyway and marks every output as not quiet.
# 2. Builds tenso_bench in build-bench/ (Release, no tests) and runs the C groups the README
#    shows (encode, decode, lz4, stream, file, quant, sparse) with --json.
# 3. Runs bench/python/run.sh: ours against upstream tenso 0.24 (its own venv), pickle-5,
#    safetensors, pyarrow, npy and msgpack-numpy, with np.copy / sendall as the references.
# 4. Runs sdk/rust's vs_upstream bench: the Rust SDK against upstream's pure-Rust engine
#    (crates.io tenso 0.24.0), on the same Release libtenso.
# 5. Records the load average again, then bench/report.py writes the README's performance
#    section (between its bench-report markers), bench/performance.png and
#    bench/performance.json. Raw outputs stay in build/bench-report/.
#
# --quick: the benches' smoke sizes (up to 1 MiB), to check the command, never to publish.
# A full run takes about 10 minutes and needs ~3 GiB of memory and of /tmp (a 1 GiB file).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cd "$repo"
log() { printf 'bench/report.sh: %s\n' "$*" >&2; }
loadavg() { cut -d' ' -f1 /proc/loadavg; }

force=0
quick=()
max_load="${BENCH_MAX_LOAD:-1}"
while (($#)); do
    case "$1" in
    --force) force=1 ;;
    --quick) quick=(--quick) ;;
    --max-load) max_load="$2"; shift ;;
    -h | --help) sed -n '2,21p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) log "unknown argument '$1'"; exit 2 ;;
    esac
    shift
done

over() { awk -v l="$1" -v m="$max_load" 'BEGIN { exit !(l > m) }'; }
load_before="$(loadavg)"
if over "$load_before"; then
    if ((!force)); then
        log "load average $load_before is above $max_load: other work would inflate every figure."
        log "Run it on a quiet machine (watch uptime), or pass --force (make bench-report BENCH_FORCE=1) to"
        log "measure anyway; the README section then says the run was not quiet."
        exit 1
    fi
    printf '\n%s\n' "$(printf '!%.0s' {1..96})" >&2
    log "WARNING: load average $load_before > $max_load, running because of --force."
    log "WARNING: these figures are NOT representative and must not be published."
    printf '%s\n\n' "$(printf '!%.0s' {1..96})" >&2
fi

out="$repo/build/bench-report"
rm -rf "$out"
mkdir -p "$out"

log "building tenso_bench (build-bench/, Release)"
generator=()
[[ -f build-bench/CMakeCache.txt ]] || generator=(-G Ninja)
cmake -S . -B build-bench "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DTENSO_BUILD_BENCH=ON \
    -DTENSO_BUILD_TESTS=OFF -DTENSO_CUDA=OFF >/dev/null
cmake --build build-bench -j "${JOBS:-2}" --target tenso_bench >/dev/null

log "C ABI: tenso_bench"
./build-bench/bench/tenso_bench "${quick[@]}" --only encode,decode,lz4,stream,file,quant,sparse \
    --json "$out/c.json" >"$out/c.txt"

log "Python: ours against upstream tenso and the peers (bench/python/run.sh)"
bash bench/python/run.sh "${quick[@]}" --out "$out/python" >"$out/python.txt"

log "Rust: ours against upstream's pure-Rust crate (cargo bench vs_upstream)"
(
    # The Release libtenso of build-bench/, found without pkg-config (and embedded as a run path).
    cd sdk/rust
    export TENSO_NO_PKG_CONFIG=1 TENSO_LIB_DIR="$repo/build-bench" TENSO_INCLUDE_DIR="$repo/capi/include"
    export CARGO_TARGET_DIR="$repo/build-bench/cargo"
    if ((${#quick[@]})); then export TENSO_BENCH_QUICK=1; fi
    export PATH="$PATH:${CARGO_HOME:-${HOME:-/root}/.cargo}/bin"
    cargo bench -p libtenso --no-default-features --bench vs_upstream --locked  # the Release libtenso above, not a bundled one
) < <(:) >"$out/rust.txt"

load_after="$(loadavg)"
# The run itself keeps a core busy for minutes, which alone lifts the 1-minute average to about
# 1: afterwards, only more than that says other work came in.
over_after() { awk -v l="$1" -v m="$max_load" 'BEGIN { exit !(l > m + 1) }'; }
if over_after "$load_after"; then
    log "WARNING: the load average rose to $load_after during the run: the figures are marked as not quiet"
fi
cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
python3 - "$out/run.json" <<EOF
import json, sys
json.dump({
    "date": "$(date -u +%Y-%m-%d)",
    "commit": "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!README.md' ':!bench/performance.*' || echo +changes)",
    "machine": "$(nproc) CPUs, ${cpu:-unknown CPU}, $(uname -sr)",
    "build": "Release, gcc $(gcc -dumpfullversion)$( ((${#quick[@]})) && echo ', --quick sizes')",
    "load_before": float("$load_before"),
    "load_after": float("$load_after"),
    "max_load": float("$max_load"),
}, open(sys.argv[1], "w"), indent=1)
EOF
# The SDK venv has matplotlib (bench/python/run.sh installs it with the peers).
"$repo/build/venv-sdk/bin/python" bench/report.py "$out"
log "README.md's performance section, bench/performance.png and bench/performance.json written" \
    "(load average $load_before before, $load_after after)"
