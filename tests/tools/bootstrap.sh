#!/usr/bin/env bash
# Idempotent machine set-up for every Makefile target that builds.
#
#   tests/tools/bootstrap.sh              install the Debian packages the build needs, if missing
#   tests/tools/bootstrap.sh --lib        only those the library needs (make lib, make install)
#   tests/tools/bootstrap.sh --dist       also those make dist and its tests need (dpkg-dev and
#                                         file for CPack DEB, mmdebstrap for the Debian root)
#   tests/tools/bootstrap.sh --upstream   also create the upstream tenso virtualenv
#                                         (tests/upstream/venv.sh; needs PyPI)
#   tests/tools/bootstrap.sh --js         also install what sdk/js needs: emscripten (the
#                                         WebAssembly engine), chromium (its browser test);
#                                         node >= 20 and npm must be on PATH already
#   tests/tools/bootstrap.sh --cuda       also create the CUDA toolchain virtualenv
#                                         (tests/tools/cuda-toolchain.sh; needs PyPI; CMake
#                                         configure does this itself when TENSO_CUDA is not OFF)
#   tests/tools/bootstrap.sh --aarch64    also the aarch64 cross toolchain, qemu-user and the
#                                         arm64 -dev packages (adds the dpkg architecture arm64;
#                                         for make check-aarch64: tests/cross/check-aarch64.sh)
#   tests/tools/bootstrap.sh --lint       also clang-format and clang-tidy (make lint)
#   tests/tools/bootstrap.sh --docs       also doxygen (make docs)
#
# When everything is present this is one dpkg-query call: a fast no-op. apt-get runs only
# for the packages actually missing, with sudo only when we are not root.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$script_dir/../.." && pwd)"

# What libtenso itself needs to build (make lib, make install, the source tarball's README).
lib_packages=(cmake ninja-build pkg-config g++ liblz4-dev libxxhash-dev nlohmann-json3-dev
              libasio-dev libssl-dev)
# python3-venv: CMake configure builds the CUDA plugin's toolchain virtualenv (TENSO_CUDA=AUTO).
# abigail-tools: abi.abidiff.
packages=("${lib_packages[@]}" libcppunit-dev openssl clang libclang-rt-14-dev llvm python3
          python3-venv abigail-tools)

want_upstream=0
want_cuda=0
want_js=0
want_aarch64=0
# make lint and make docs only: make test does not pay for these packages.
lint_packages=(clang-format clang-tidy)
docs_packages=(doxygen)
for arg in "$@"; do
    case "$arg" in
        --upstream) want_upstream=1 ;;
        --cuda) want_cuda=1 ;;
        --lib) packages=("${lib_packages[@]}") ;;
        --dist) packages+=(dpkg-dev file binutils mmdebstrap python3-venv ccache) ;;
        --js) want_js=1 ;;
        --aarch64) want_aarch64=1 ;;
        --lint) packages+=("${lint_packages[@]}") ;;
        --docs) packages+=("${docs_packages[@]}") ;;
        -h|--help) sed -n '2,/^set /{/^#/p}' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "bootstrap.sh: unknown argument '$arg'" >&2; exit 2 ;;
    esac
done

# The virtualenv needs Python >= 3.11 with venv (Debian 12's python3 is 3.11).
if ((want_upstream)); then
    packages+=(python3 python3-venv)
fi

# sdk/js: Debian's emscripten 3.1.6 (with its clang, lld and binaryen) and chromium.
if ((want_js)); then
    packages+=(emscripten chromium)
fi

# Cross-building for aarch64: the compilers and qemu-user run here; the libraries the engine,
# tests and CLI link come from Debian's arm64 packages (multiarch, beside the amd64 ones).
if ((want_aarch64)); then
    packages+=(g++-aarch64-linux-gnu qemu-user liblz4-dev:arm64 libxxhash-dev:arm64
               libcppunit-dev:arm64 libssl-dev:arm64)
fi

log() { printf 'bootstrap: %s\n' "$*" >&2; }

# One dpkg-query for all packages (one per package would cost a dozen process starts). A
# package counts as present only in state "installed"; one that is unknown or only has its
# config files left is missing. (dpkg -s refuses a name installed for two architectures, as
# liblz4-dev:amd64 + :i386 can be; dpkg-query -W lists each instance.) A name without ":arch"
# is satisfied by the native architecture or "all"; "name:arm64" only by arm64.
missing=()
if command -v dpkg-query >/dev/null 2>&1; then
    native_arch="$(dpkg --print-architecture)"
    declare -A installed=()
    while read -r name arch status; do
        [[ "$status" == installed ]] || continue
        installed["$name:$arch"]=1
        if [[ "$arch" == "$native_arch" || "$arch" == all ]]; then installed["$name"]=1; fi
    done < <(LC_ALL=C dpkg-query -W -f='${Package} ${Architecture} ${db:Status-Status}\n' \
                 "${packages[@]}" 2>/dev/null || true)
    for p in "${packages[@]}"; do
        [[ -n "${installed[$p]:-}" ]] || missing+=("$p")
    done
else
    log "dpkg-query not found (not a Debian system): skipping the package check"
fi

if ((${#missing[@]})); then
    log "installing missing packages: ${missing[*]}"
    sudo_cmd=()
    if [[ "$(id -u)" != 0 ]]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo_cmd=(sudo)
        else
            log "not root and no sudo: install these by hand: ${missing[*]}"
            exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    if ((want_aarch64)) && ! dpkg --print-foreign-architectures | grep -x arm64 >/dev/null; then
        log "adding the dpkg architecture arm64 (for the cross-build's -dev packages)"
        "${sudo_cmd[@]}" dpkg --add-architecture arm64
    fi
    "${sudo_cmd[@]}" apt-get update
    "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

if ((want_js)); then
    # Debian 12's nodejs is 18; sdk/js needs 20 (nodesource's or another install on PATH).
    node_major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
    if ((node_major < 20)) || ! command -v npm >/dev/null 2>&1; then
        log "sdk/js needs node >= 20 and npm on PATH (found node major '$node_major')"
        exit 1
    fi
fi

if ((want_upstream)); then
    # venv.sh prints the interpreter path last on stdout; keep our stdout clean of it.
    bash "$repo/tests/upstream/venv.sh" >&2
fi

if ((want_cuda)); then
    # cuda-toolchain.sh prints the toolkit root last on stdout; keep our stdout clean of it.
    bash "$repo/tests/tools/cuda-toolchain.sh" >&2
fi
