#!/usr/bin/env bash
# make check-aarch64: cross-build tenso for aarch64 Linux and run its C/C++ suites under
# qemu-user, on an x86-64 Debian host.
#
#   1. The native build's packets: golden.write_ours in build/ (the tree `make` uses, when it
#      exists; else a small one in build-aarch64-host/) re-encodes every golden case, LZ4 ones
#      included, into build*/tests/golden/ours/.
#   2. build-aarch64/: the library, the CLI, the demo (built, not run: it is a timing tour),
#      the CUDA plugin (nvcc from the package index, tests/cross/cuda-sbsa-toolchain.sh) and
#      every C/C++ suite, with Debian's g++-aarch64-linux-gnu and the arm64 -dev packages
#      (tests/cross/aarch64-linux-gnu.cmake).
#   3. ctest there: every test program runs under qemu-aarch64 (CMake's cross-compiling
#      emulator): the cppunit suites, the golden vectors, the fuzz corpus replays, the CLI, the
#      installed library's C and C++ consumers, and golden.same_bytes_as_native (the aarch64
#      packets equal the native ones byte for byte). What cannot run under qemu-user is listed
#      below with the reason, printed, and left out.
#
# Timings under emulation mean nothing (qemu-user translates every instruction); the script
# reports only how long each step took. The machine set-up (cross compiler, qemu-user, arm64
# packages) is tests/tools/bootstrap.sh --aarch64, which make check-aarch64 runs first.
#
# Arguments go to ctest (e.g. -R '^golden\.' to run some suites only).
# Environment: JOBS (default 2), CROSS_BUILD (default build-aarch64), NATIVE_BUILD (default:
# build/ if configured, else build-aarch64-host/).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
JOBS="${JOBS:-2}"
CROSS_BUILD="${CROSS_BUILD:-build-aarch64}"
if [[ -z "${NATIVE_BUILD:-}" ]]; then
    if [[ -f build/CMakeCache.txt ]]; then NATIVE_BUILD=build; else NATIVE_BUILD=build-aarch64-host; fi
fi
generator() { [[ -f "$1/CMakeCache.txt" ]] || echo "-GNinja"; }

start=$SECONDS
step() { printf '\n== check-aarch64: %s (+%ss)\n' "$*" "$((SECONDS - start))"; }

# Test cases left out under qemu-user, each with the reason; the rest of their suites runs.
# The cppunit runner leaves out what TENSO_TEST_SKIP names and says so (tests/common/runner.cpp).
skip_names=()
skip_reasons=()
skip() { skip_names+=("$1"); skip_reasons+=("$2"); }
skip CapiCacheStressTest::testKilledWriters \
    "kills writers holding the pool's robust mutex; qemu-user does not register the robust-futex list with the kernel (set_robust_list is ENOSYS there), so the lock is never handed on as EOWNERDEAD"
skip CapiGpuTest::ipcInForkedChild \
    "a child forked from a multi-threaded process starts threads; qemu-user 7.2 aborts there (TCG assertion cpu == current_cpu)"
skip CapiNetTest::testTlsRecordsUnderBackpressure \
    "pushes 64 MiB through TLS against a 20 s deadline; under qemu-user every AES and GHASH instruction is emulated, far too slowly for it"
for t in CapiGpuHostileTest::readFdHeaderClaimHoldsNothing CapiGpuHostileTest::readFdAllocatesAsBytesArrive; do
    skip "$t" "waits until the reader thread sleeps in read(2), seen in /proc/self/task/<tid>/syscall; under qemu-user that file shows the host's (x86-64) system call numbers, never aarch64's SYS_read"
done
skip CapiNetHostileTest::testPassedDescriptorsBounded \
    "counts the descriptors a node holds after peers pass more than fit its control buffer; the kernel closes what a truncated SCM_RIGHTS message drops, but qemu-user receives into a larger host buffer and does not close the descriptors it cannot hand on (127 held for 40 peers here, against 80 natively): qemu's count, not ours"
skip CapiTrustTest::testFullDevShm \
    "a pool created on a full 4 MiB tmpfs answers OK under qemu-user 7.2 (natively TRUNCATED, in make test; the segment case passes under qemu too): not explained yet, see issue 25's note"
if [[ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]]; then
    for t in CapiGpuTest::stagingFailsHalfway CapiGpuTest::cudaBackendUnavailable CapiTrustTest::testForeignSigbusChained; do
        skip "$t" "re-executes the test program (/proc/self/exe): starting an aarch64 program from inside the emulator needs qemu registered in binfmt_misc, which this machine lacks"
    done
fi

step "native packets in $NATIVE_BUILD"
if [[ ! -f "$NATIVE_BUILD/CMakeCache.txt" ]]; then
    cmake -S . -B "$NATIVE_BUILD" $(generator "$NATIVE_BUILD") -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DTENSO_WERROR=ON -DTENSO_CUDA=OFF -DTENSO_SDK_TESTS=OFF -DTENSO_BUILD_TOOLS=OFF
fi
cmake --build "$NATIVE_BUILD" -j "$JOBS" --target tenso_golden_tests
ctest --test-dir "$NATIVE_BUILD" --output-on-failure -R '^golden\.(clean_ours|write_ours)$'
native_out="$(cd "$NATIVE_BUILD" && pwd)/tests/golden/ours"

step "CUDA toolchain for aarch64 (sbsa)"
# The CUDA plugin too, when the wheels can be had (tests/cross/cuda-sbsa-toolchain.sh); its
# tests then run under qemu, where (no driver) every op must answer TENSO_E_GPU_UNAVAILABLE.
if cuda_root="$(bash tests/cross/cuda-sbsa-toolchain.sh | tail -n1)"; then
    cuda=(-DTENSO_CUDA=ON -DCMAKE_CUDA_COMPILER="$cuda_root/bin/nvcc")
else
    echo "check-aarch64: no CUDA toolchain for aarch64 (see above): the plugin is not built"
    cuda=(-DTENSO_CUDA=OFF)
fi

step "cross-build in $CROSS_BUILD ($(aarch64-linux-gnu-g++ --version | head -n1))"
cmake -S . -B "$CROSS_BUILD" $(generator "$CROSS_BUILD") \
    -DCMAKE_TOOLCHAIN_FILE="$PWD/tests/cross/aarch64-linux-gnu.cmake" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENSO_WERROR=ON "${cuda[@]}" -DTENSO_SDK_TESTS=OFF \
    -DTENSO_NATIVE_GOLDEN_OUT="$native_out"
cmake --build "$CROSS_BUILD" -j "$JOBS"
# What was built is what the suites test: aarch64 code, linked against the arm64 libraries.
readelf -h "$CROSS_BUILD/libtenso.so" | grep 'Machine:.*AArch64' >/dev/null ||
    { echo "check-aarch64: $CROSS_BUILD/libtenso.so is not an aarch64 library" >&2; exit 1; }
built=$((SECONDS - start))

step "suites under $(qemu-aarch64 --version | head -n1)"
echo "Not run under emulation (cpp.asan.* is not built in a cross build: the ASan runtime dies at"
echo "start under qemu-user):"
for i in "${!skip_names[@]}"; do printf '  SKIPPED %s: %s\n' "${skip_names[$i]}" "${skip_reasons[$i]}"; done
export TENSO_TEST_SKIP="${skip_names[*]}"
tests_start=$SECONDS
ctest --test-dir "$CROSS_BUILD" --output-on-failure -j "$JOBS" "$@"

step "passed: build ${built} s, suites under qemu $((SECONDS - tests_start)) s (emulated: not a speed)"
