#!/usr/bin/env bash
# bench/js (make bench-js): libtenso in Node against apache-arrow and JSON, and the C engine on
# the same LZ4 packets, in one run (bench.mjs prints the table with the load average).
#
#   1. the package: sdk/js/pack.sh (WebAssembly engine + npm pack), unpacked as
#      bench/js/node_modules/libtenso after `npm ci` (apache-arrow, lock file);
#   2. lz4_decode.c built against the build tree's libtenso (TENSO_BUILD, default build/);
#   3. node bench.mjs "$@" (--json for JSON).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${TENSO_BUILD:-$repo/build}"
out="${TENSO_JS_BUILD:-$build/js}"

bash "$repo/tests/tools/bootstrap.sh" --js
TENSO_JS_BUILD="$out" bash "$repo/sdk/js/pack.sh" --install "$here" >/dev/null
cd "$here"

cmake --build "$build" --target tenso >&2
cc -O2 -I"$repo/capi/include" "$here/lz4_decode.c" -L"$build" -ltenso -Wl,-rpath,"$build" -o "$out/lz4_decode"
BENCH_OUT="$out/bench" C_LZ4_BENCH="$out/lz4_decode" node --max-old-space-size=8192 bench.mjs "$@"
