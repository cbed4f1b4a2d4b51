# dist.source, run by debian-root.sh inside a fresh Debian root, dist/ bound at /dist
# (read-only). A user with the source tarball and nothing else:
#   1. the tarball builds with `make install` (tests/tools/bootstrap.sh --lib fetches the build
#      packages from Debian's archive), into the system prefix /usr/local, which runs ldconfig;
#   2. the README's commands for a system prefix (the blocks marked
#      `<!-- tested: dist.source system -->`), run as written with app.c one of README.md's C
#      programs, make a program that runs, with no run path;
#   3. the README's commands for a private prefix ($HOME/.local; `<!-- tested: dist.source
#      private -->`) make a program that runs from there, through the run path tenso.pc adds,
#      with no LD_LIBRARY_PATH, even with the system copy present;
#   4. the README's CMake lines find that private install through CMAKE_PREFIX_PATH.
log() { printf 'dist.source: %s\n' "$*"; }

tarball="$(ls /dist/tenso-*.tar.gz)"
version="${tarball#/dist/tenso-}"
version="${version%.tar.gz}"
cd /root
tar -xzf "$tarball"
src="/root/tenso-$version"
cd "$src"
apt-get update -q >/dev/null

# The shell blocks README.md marks for a case, in order, one script.
readme_blocks() {
    awk -v want="<!-- tested: dist.source $1 -->" '
        $0 == want {armed = 1; next}
        armed && /^```sh$/ {f = 1; next}
        f && /^```$/ {f = 0; armed = 0; next}
        f {print}' README.md
}
# app.c: the README's GPU example (host backend), a complete program.
awk '/^```c$/ {f = 1; n++; next} /^```$/ {f = 0; next} f {print > ("/root/readme_" n ".c")}' README.md
cp "$(grep -l 'tenso_gpu_select_backend' /root/readme_*.c | head -n1)" app.c

for case in system private; do
    readme_blocks "$case" >"/root/$case.sh"
    [[ -s "/root/$case.sh" ]] || { log "README.md has no block marked '$case'"; exit 1; }
    log "README ($case prefix):"
    sed 's/^/    /' "/root/$case.sh"
    # The block as written, in the unpacked tarball; the program it leaves is ./app.
    rm -f app
    (bash -euo pipefail "/root/$case.sh")
    [[ -x app ]] || { log "the $case block made no ./app"; exit 1; }
    runpath="$(readelf -d app | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')"
    loaded="$(ldd app | sed -n 's/.*libtenso\.so\.1 => \([^ ]*\).*/\1/p')"
    log "  RUNPATH '$runpath', libtenso loaded from $loaded"
    case "$case" in
    system)
        [[ -z "$runpath" ]] || { log "a system install needs no run path"; exit 1; }
        [[ "$loaded" == /usr/local/lib/libtenso.so.1 ]]
        ldconfig -p | grep '/usr/local/lib/libtenso\.so\.1$' >/dev/null
        # Split debug information: the library is stripped, its .debug file beside it.
        readelf -S /usr/local/lib/libtenso.so.1 | grep gnu_debuglink >/dev/null
        if readelf -S /usr/local/lib/libtenso.so.1 | grep '\.debug_info' >/dev/null; then
            log "the installed library still has its debug information"; exit 1
        fi
        [[ -f "/usr/local/lib/.debug/$(readlink /usr/local/lib/libtenso.so.1).debug" ]]
        ;;
    private)
        [[ "$(realpath "$loaded")" == "$(realpath /root/.local/lib)"/libtenso.so.* ]]
        # Only the library, headers, tenso.pc, CMake package and CLI were installed.
        (cd /root/.local && find . -type f | sort)
        if find /root/.local -iname '*test*' | grep .; then log "tests were installed"; exit 1; fi
        ;;
    esac
done

log "CMake: the README's find_package lines against the private prefix"
mkdir -p /root/cmake-app
awk '/^```cmake$/ {f = 1; next} f && /^```$/ {exit} f {print}' README.md >/root/cmake-app/lines.cmake
grep -q 'find_package(tenso' /root/cmake-app/lines.cmake
{
    printf 'cmake_minimum_required(VERSION 3.16)\nproject(app C)\nadd_executable(app app.c)\n'
    cat /root/cmake-app/lines.cmake
} >/root/cmake-app/CMakeLists.txt
cp app.c /root/cmake-app/
cmake -S /root/cmake-app -B /root/cmake-app/build -DCMAKE_PREFIX_PATH=/root/.local >/dev/null
cmake --build /root/cmake-app/build
/root/cmake-app/build/app
log "all checks passed"
