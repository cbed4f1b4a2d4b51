# dist.deb, run by debian-root.sh inside a fresh Debian root, dist/ bound at /dist and the host's
# Go toolchain at /usr/local/go (both read-only). A user on Debian with our packages:
#   1. apt installs libtenso1, libtenso-dev and tenso from dist/, their dependencies from
#      Debian's archive; the library is in the linker's cache;
#   2. C: every complete C program in README.md (and tests/abi/consumer.c), built with the
#      README's command line `cc app.c $(pkg-config --cflags --libs tenso)`, runs;
#   3. C++ with CMake: tests/abi/cmake-consumer (find_package(tenso 1), tenso::tenso) builds
#      its C and C++ programs, which run;
#   4. the CLI: the packaged `tenso`, and sdk/cli built from the source tarball against
#      libtenso-dev, give the same answers on the same files;
#   5. Go: `go get` of the module from the file proxy in dist/goproxy, built against the
#      installed library, runs.
# No program carries a run path or needs LD_LIBRARY_PATH: the library is in /usr.
log() { printf 'dist.deb: %s\n' "$*"; }
no_runpath() {
    if readelf -d "$1" | grep -E '\((RPATH|RUNPATH)\)'; then log "$1 has a run path"; return 1; fi
}

tarball="$(ls /dist/tenso-*.tar.gz)"
version="${tarball#/dist/tenso-}"
version="${version%.tar.gz}"

log "1. apt install ./libtenso1 ./libtenso-dev ./tenso ($version)"
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends /dist/libtenso1_"$version"-*.deb \
    /dist/libtenso-dev_"$version"-*.deb /dist/tenso_"$version"-*.deb
dpkg-query -W libtenso1 libtenso-dev tenso liblz4-dev libssl-dev
ldconfig -p | grep 'libtenso\.so\.1 '
[[ "$(pkg-config --modversion tenso)" == "$version" ]]
pkg-config --cflags --libs tenso
if pkg-config --libs tenso | grep rpath >/dev/null; then log "the packaged tenso.pc names a run path"; exit 1; fi

cd /root
tar -xzf "$tarball"
src="/root/tenso-$version"
# The package files the READMEs name are the ones make dist wrote.
for f in $(grep -hoP '(?<![-*\w])[a-z][a-z0-9.+-]*_[0-9][0-9.]*-[0-9]+_amd64\.d?deb' "$src/README.md" "$src"/sdk/*/README.md | sort -u); do
    [[ -f "/dist/$f" ]] || { log "a README names $f, which is not in dist/"; exit 1; }
done

log "2. C: README.md's programs and tests/abi/consumer.c"
awk '/^```c$/ {f = 1; n++; next} /^```$/ {f = 0; next} f {print > ("readme_" n ".c")}' "$src/README.md"
programs=("$src/tests/abi/consumer.c")
for f in readme_*.c; do
    if grep -q 'int main' "$f"; then programs+=("$f"); fi
done
((${#programs[@]} >= 3)) || { log "expected at least two complete C programs in README.md"; exit 1; }
for program in "${programs[@]}"; do
    log "   $program"
    cp "$program" app.c
    cc app.c $(pkg-config --cflags --libs tenso) -o app && ./app
    no_runpath app
done

log "3. C++ with CMake (find_package(tenso 1), tenso::tenso)"
cmake -S "$src/tests/abi/cmake-consumer" -B build-cmake -DTENSO_EXPECTED_VERSION="$version" >/dev/null
cmake --build build-cmake
./build-cmake/tenso_cmake_consumer
./build-cmake/tenso_cmake_consumer_cxx

log "4. the CLI: packaged, and sdk/cli built against libtenso-dev"
cc "$src/tests/cli/make_inputs.c" $(pkg-config --cflags --libs tenso) -o make_inputs
mkdir inputs && ./make_inputs inputs
[[ "$(tenso --version)" == "tenso $version "* ]]
tenso verify inputs/*.tnso
tenso info --json inputs/bundle.tnso inputs/kinds.tnso >packaged.json
cmake -S "$src/sdk/cli" -B build-cli -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-cli
./build-cli/tenso info --json inputs/bundle.tnso inputs/kinds.tnso >built.json
cmp packaged.json built.json
no_runpath /usr/bin/tenso

log "5. Go: go get from the file proxy, built against the installed library"
export PATH="/usr/local/go/bin:$PATH" GOTOOLCHAIN=local GOFLAGS=-mod=mod
export GOPROXY=file:///dist/goproxy GONOSUMDB=github.com/tenso-project/tenso
module="$(cd /dist/goproxy && find . -name list -path '*/@v/*' | sed 's|^\./||; s|/@v/list$||')"
mkdir goapp && cd goapp
go mod init example.com/app
go get "$module@v$version"
cp "$src/sdk/go/testdata/consumer/main.go" .
go build -o app .
out="$(./app)"
log "   $out"
[[ "$out" == "[2 2] [1 2 3 4] $version" ]]
no_runpath app
grep -F "$module v$version" go.sum

log "all checks passed"
