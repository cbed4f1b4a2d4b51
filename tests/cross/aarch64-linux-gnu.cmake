# CMake toolchain file: cross-build tenso for aarch64 Linux on a Debian x86-64 host.
#
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=tests/cross/aarch64-linux-gnu.cmake
#
# Needs Debian's cross compiler and the arm64 -dev packages beside the host's (multiarch:
# tests/tools/bootstrap.sh --aarch64 installs them). The cross compiler already searches
# /usr/include/aarch64-linux-gnu and /usr/lib/aarch64-linux-gnu, where those packages put
# their arch-specific headers and libraries; arch-independent headers (nlohmann-json, asio) are
# the host's own. Test programs run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR), so `ctest`
# runs the suites as they are.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(TENSO_CROSS_TRIPLET aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${TENSO_CROSS_TRIPLET}-gcc)
set(CMAKE_CXX_COMPILER ${TENSO_CROSS_TRIPLET}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${TENSO_CROSS_TRIPLET})

# pkg-config must see the arm64 .pc files only (liblz4, cppunit, openssl), never the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${TENSO_CROSS_TRIPLET}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# qemu-user without -L: the loader and every library then come from Debian's arm64 packages
# (libc6:arm64 installs /lib/ld-linux-aarch64.so.1), one consistent set. With
# -L /usr/aarch64-linux-gnu the loader would be the cross toolchain's copy of glibc while
# libc.so.6 is still found in /lib/aarch64-linux-gnu: two builds of glibc in one process.
find_program(TENSO_QEMU_AARCH64 qemu-aarch64)
if(TENSO_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${TENSO_QEMU_AARCH64})
endif()

# Libraries and headers from the host paths above; programs (python3, pkg-config) are the host's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
