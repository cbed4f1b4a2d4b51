#!/usr/bin/env bash
# dist.rust: the crates from dist/, as a user meets them.
#
#   test-rust.sh DIST_DIR WORK_DIR
#
#   1. `cargo new app`, the one dependency line of sdk/rust/README.md, its Quick start program as
#      src/main.rs; libtenso and libtenso-sys come from the .crate files in dist/ (unpacked and
#      patched over crates.io, which serves every other dependency), nothing else is set up: no
#      build.rs, no installed libtenso (pkg-config is not consulted), no LD_LIBRARY_PATH;
#   2. `cargo run` builds the bundled libtenso into the program and runs it;
#   3. the binary needs no libtenso.so and carries no run path.
set -euo pipefail
exec < <(:)  # cargo's rustc probe reads stdin (sdk/rust/run-tests.sh)
dist="$1" work="$2"
log() { printf 'dist.rust: %s\n' "$*" >&2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin"

header="$repo/capi/include/tenso/version.h"
field() { sed -n "s/^#define TENSO_$1 \\([0-9]*\\).*/\\1/p" "$header"; }
version="$(field VERSION_MAJOR).$(field VERSION_MINOR).$(field VERSION_PATCH)"

rm -rf "$work"
mkdir -p "$work/crates"
for crate in libtenso-sys libtenso; do
    tar -xzf "$dist/$crate-$version.crate" -C "$work/crates"
done
log "1. cargo new app; the README's dependency line and Quick start"
cd "$work"
cargo new --quiet app
cd app
readme="$repo/sdk/rust/README.md"
dep="$(awk '/^## Quick start/ {q = 1} q && /^```toml$/ {f = 1; next} f && /^```$/ {exit} f && /^libtenso/ {print; exit}' "$readme")"
[[ "$dep" == "libtenso = \"${version%.*}\""* ]] || { log "README's dependency line is '$dep'"; exit 1; }
printf '%s\n' "$dep" >>Cargo.toml
awk '/^## Quick start/ {q = 1} q && /^```rust$/ {f = 1; next} f && /^```$/ {exit} f {print}' "$readme" >src/main.rs
grep -q 'fn main' src/main.rs || { log "no Quick start program in $readme"; exit 1; }
# The crates as crates.io would serve them: the unpacked .crate files patched over the registry.
mkdir .cargo
cat >.cargo/config.toml <<EOF
[patch.crates-io]
libtenso = { path = "$work/crates/libtenso-$version" }
libtenso-sys = { path = "$work/crates/libtenso-sys-$version" }
EOF
cat Cargo.toml

log "2. cargo run (no installed libtenso: PKG_CONFIG_PATH empty, LD_LIBRARY_PATH unset)"
env -u LD_LIBRARY_PATH PKG_CONFIG_PATH= cargo run --quiet
grep -A2 'name = "libtenso-sys"' Cargo.lock | grep "version = \"$version\"" >/dev/null

log "3. the program carries libtenso: no libtenso.so needed, no run path"
bin=target/debug/app
if readelf -d "$bin" | grep -E 'libtenso|\((RPATH|RUNPATH)\)'; then
    log "$bin links libtenso dynamically or has a run path"
    exit 1
fi
nm "$bin" | grep ' T tenso_loads$' >/dev/null || { log "libtenso's tenso_loads is not in $bin"; exit 1; }
log "all checks passed"
