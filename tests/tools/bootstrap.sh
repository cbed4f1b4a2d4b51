#!/usr/bin/env bash
# Idempotent machine set-up for every Makefile target that builds.
#
#   tests/tools/bootstrap.sh              install the Debian packages the build needs, if missing
#   tests/tools/bootstrap.sh --upstream   also create the upstream tenso virtualenv
#                                         (tests/upstream/venv.sh; needs PyPI)
#   tests/tools/bootstrap.sh --cuda       also create the CUDA toolchain virtualenv
#                                         (tests/tools/cuda-toolchain.sh; needs PyPI; CMake
#                                         configure does this itself when TENSO_CUDA is not OFF)
#   tests/tools/bootstrap.sh --lint       also clang-format and clang-tidy (make lint)
#   tests/tools/bootstrap.sh --docs       also doxygen (make docs)
#
# When everything is present this is one `dpkg -s` call: a fast no-op. apt-get runs only
# for the packages actually missing, with sudo only when we are not root.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$script_dir/../.." && pwd)"

# python3-venv: CMake configure builds the CUDA plugin's toolchain virtualenv (TENSO_CUDA=AUTO).
packages=(cmake ninja-build pkg-config g++ liblz4-dev libxxhash-dev libcppunit-dev
          nlohmann-json3-dev libasio-dev libssl-dev openssl clang libclang-rt-14-dev llvm python3
          python3-venv)

want_upstream=0
want_cuda=0
# make lint and make docs only: make test does not pay for these packages.
lint_packages=(clang-format clang-tidy)
docs_packages=(doxygen)
for arg in "$@"; do
    case "$arg" in
        --upstream) want_upstream=1 ;;
        --cuda) want_cuda=1 ;;
        --lint) packages+=("${lint_packages[@]}") ;;
        --docs) packages+=("${docs_packages[@]}") ;;
        -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "bootstrap.sh: unknown argument '$arg'" >&2; exit 2 ;;
    esac
done

# The virtualenv needs Python >= 3.11 with venv (Debian 12's python3 is 3.11).
if ((want_upstream)); then
    packages+=(python3 python3-venv)
fi

log() { printf 'bootstrap: %s\n' "$*" >&2; }

# One `dpkg -s` for all packages (one per package would cost a dozen process starts). A
# package counts as present only in state "install ok installed"; one that is unknown or only
# has its config files left is missing.
missing=()
if command -v dpkg >/dev/null 2>&1; then
    declare -A installed=()
    name=""
    while IFS= read -r line; do
        case "$line" in
            "Package: "*) name="${line#Package: }"; name="${name%%:*}" ;;
            "Status: install ok installed") [[ -n "$name" ]] && installed["$name"]=1 ;;
        esac
    done < <(LC_ALL=C dpkg -s "${packages[@]}" 2>/dev/null || true)
    for p in "${packages[@]}"; do
        [[ -n "${installed[$p]:-}" ]] || missing+=("$p")
    done
else
    log "dpkg not found (not a Debian system): skipping the package check"
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
    "${sudo_cmd[@]}" apt-get update
    "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

if ((want_upstream)); then
    # venv.sh prints the interpreter path last on stdout; keep our stdout clean of it.
    bash "$repo/tests/upstream/venv.sh" >&2
fi

if ((want_cuda)); then
    # cuda-toolchain.sh prints the toolkit root last on stdout; keep our stdout clean of it.
    bash "$repo/tests/tools/cuda-toolchain.sh" >&2
fi
