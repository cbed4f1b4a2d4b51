#!/usr/bin/env bash
# dist.reproducible: `make dist` again, from scratch, must give the same bytes.
#
#   test-reproducible.sh DIST_DIR WORK_DIR
#
# Runs tests/dist/make-dist.sh once more into WORK_DIR/dist with ccache off (every object is
# compiled again: the compilers' own determinism is tested, not the cache's) and the crates'
# build verification skipped (it produces nothing that ships), in the same scratch directory
# make dist uses, then compares every file with DIST_DIR through SHA256SUMS. The source
# tarballs are compared first: if they differ, the sources changed since DIST_DIR was made, and
# that is reported instead.
set -euo pipefail
dist="$1" work="$2"
log() { printf 'dist.reproducible: %s\n' "$*" >&2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

[[ -f "$dist/SHA256SUMS" ]] || { log "no $dist/SHA256SUMS: run make dist first"; exit 1; }
rm -rf "$work"
mkdir -p "$work"
log "make dist again into $work/dist (ccache off)"
CCACHE_DISABLE=1 TENSO_DIST_VERIFY=0 TENSO_DIST_DIR="$work/dist" bash "$here/make-dist.sh" \
    >"$work/make-dist.log" 2>&1 || { tail -30 "$work/make-dist.log" >&2; exit 1; }

tarball="$(cd "$dist" && ls tenso-*.tar.gz)"
if ! cmp -s "$dist/$tarball" "$work/dist/$tarball"; then
    log "the source tarball differs: the sources changed since $dist was made (run make dist again)"
    exit 1
fi
if ! diff -u "$dist/SHA256SUMS" "$work/dist/SHA256SUMS"; then
    log "the rebuilt artifacts differ (above); diffoscope shows where"
    exit 1
fi
log "$(wc -l <"$dist/SHA256SUMS") files, byte for byte the same:"
sed 's/^/    /' "$dist/SHA256SUMS" >&2
