#!/usr/bin/env bash
# `make docs`: the API reference of every language, warnings as errors, under one landing page.
#
#   tests/tools/docs.sh [OUT_DIR]        (default build/docs; open OUT_DIR/index.html)
#
#   c/       Doxygen over capi/include/tenso (docs/Doxyfile): the C headers, tenso.hpp, and the
#            design documents of docs/. Any warning fails (undocumented function, field, macro
#            or member, a @param that names no parameter, half-documented parameters).
#   python/  pdoc over the tenso package and its modules, in the SDK's virtualenv (pdoc pinned
#            in tests/tools/pyenv.sh); any pdoc warning fails.
#   rust/    cargo doc --no-deps with RUSTDOCFLAGS="-D warnings" (broken intra-doc links,
#            invalid code blocks), tenso-sys and tenso.
#   go/      tests/tools/godoc: the module's reference page; an exported identifier without
#            a doc comment fails.
#
# Nothing is built but the docs: rustdoc type-checks against the headers only, as lint.sh's
# clippy does. Environment: JOBS (default 2).
set -euo pipefail
exec < <(:) # cargo's rustc probe reads stdin as a program (see sdk/rust/run-tests.sh)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"
out="$(mkdir -p "${1:-$repo/build/docs}" && cd "${1:-$repo/build/docs}" && pwd)"
export PATH="$PATH:${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:/usr/local/go/bin"
export GOTOOLCHAIN=local
log() { printf 'docs.sh: %s\n' "$*" >&2; }
step() { printf '\n== docs: %s (+%ss)\n' "$*" "$SECONDS" >&2; }

version="$(sed -n 's/^#define TENSO_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
    capi/include/tenso/version.h | paste -sd.)"

step "C and C++ (Doxygen)"
command -v doxygen >/dev/null || { log "doxygen not found: bash tests/tools/bootstrap.sh --docs"; exit 1; }
rm -rf "$out/c"
if ! TENSO_VERSION="$version" TENSO_DOCS_OUT="$out" doxygen docs/Doxyfile; then
    cat "$out/doxygen-warnings.log" >&2
    log "Doxygen warnings (above): document what they name"
    exit 1
fi

step "Python (pdoc)"
py="$(bash "$here/pyenv.sh" sdk docs | tail -n1)"
# Every public module (the package's __all__ does not list them); not the generated gRPC
# message modules, whose protoc stubs pdoc cannot match to their classes.
mapfile -t modules < <("$py" - <<'EOF'
import pkgutil, tenso
print("tenso")
for m in pkgutil.walk_packages(tenso.__path__, "tenso."):
    last = m.name.rsplit(".", 1)[1]
    if last.startswith("_"):
        continue
    # pdoc's "!pattern" keeps a module out of its walk (the package page lists submodules).
    print("!" + m.name.replace(".", r"\.") + "$" if "_pb2" in last else m.name)
EOF
)
rm -rf "$out/python"
# -W error: pdoc reports what it cannot resolve as warnings; deprecations of imported
# libraries are not ours to fix.
"$py" -W error -W ignore::DeprecationWarning -m pdoc --docformat numpy \
    --footer-text "tenso $version" -o "$out/python" "${modules[@]}"

step "Rust (rustdoc -D warnings)"
(
    cd sdk/rust
    export TENSO_NO_PKG_CONFIG=1 TENSO_LIB_DIR="$repo/build-lint" TENSO_INCLUDE_DIR="$repo/capi/include"
    export CARGO_TARGET_DIR="$repo/build-lint/cargo"
    # The workspace (not -p tenso: upstream's crate, a dev-dependency of the bench, has that name too).
    # Every feature but `bundled` (its sources are added only when the crate is packaged).
    RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --locked --quiet --workspace --exclude systest --no-default-features --features libtenso/ndarray,libtenso/tokio
)
rm -rf "$out/rust"
cp -r "$repo/build-lint/cargo/doc" "$out/rust"

step "Go (tests/tools/godoc)"
mkdir -p "$out/go"
(cd "$here/godoc" && go run . -title "tenso Go API reference ($version)" -o "$out/go/index.html" \
    "$repo/sdk/go" "$repo/sdk/go/tensogonum")

step "landing page"
cat >"$out/index.html" <<EOF
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tenso $version API reference</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:3rem auto;padding:0 1rem;color:#222}
a{color:#0b62a4}li{margin:.4rem 0}code{font-size:90%}</style></head><body>
<h1>tenso $version API reference</h1>
<p>Zero-copy tensor packets (Tenso protocol v4) behind a stable C ABI, <code>libtenso.so.1</code>,
and the SDKs over it. Generated from this tree by <code>make docs</code>.</p>
<ul>
<li><a href="c/index.html">C and C++</a>: <code>tenso/tenso.h</code> and the headers it includes,
and <code>tenso/tenso.hpp</code> (Doxygen)</li>
<li><a href="python/tenso.html">Python</a>: <code>import tenso</code> and its modules (pdoc)</li>
<li><a href="rust/tenso/index.html">Rust</a>: the <code>tenso</code> crate, and
<a href="rust/tenso_sys/index.html"><code>tenso-sys</code></a> (rustdoc)</li>
<li><a href="go/index.html">Go</a>: the cgo package and <code>tensogonum</code> (go/doc)</li>
</ul>
<h2>Design documents</h2>
<ul>
<li><a href="c/md_archive_format.html">The .tenso archive file format</a></li>
<li><a href="c/md_cache_layout.html">The tensor cache's shared-memory layout</a></li>
<li><a href="c/md_net_protocol.html">The node protocol</a></li>
<li><a href="c/md_threat_model.html">The threat model</a></li>
</ul>
</body></html>
EOF
# Every link of the landing page must lead to a page that was generated.
for target in $(grep -o 'href="[^"#]*"' "$out/index.html" | sed 's/^href="//; s/"$//'); do
    [[ -f "$out/$target" ]] || { log "the landing page links $target, which was not generated"; exit 1; }
done
step "done: $out/index.html"
