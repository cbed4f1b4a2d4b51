# The wire format's sources, in one place: the native engine (CMakeLists.txt, tenso_impl) and
# the WebAssembly engine (sdk/js/wasm) build the same files.
set(_tenso_format ${CMAKE_CURRENT_LIST_DIR})
# layout, limits, encode/decode, composites, integrity
set(TENSO_FORMAT_SOURCES
  ${_tenso_format}/wire.cpp
  ${_tenso_format}/decoder.cpp
  ${_tenso_format}/codec.cpp
  ${_tenso_format}/spare_view.cpp
  ${_tenso_format}/lz4.cpp
  ${_tenso_format}/dlpack.cpp
  ${_tenso_format}/quant.cpp
  ${_tenso_format}/sparse.cpp
  ${_tenso_format}/composites.cpp
  ${_tenso_format}/hash.cpp)
# XXH3's baseline kernel (hash.cpp picks it where the CPU has nothing wider), and on x86-64 the
# wider ones. Elsewhere one kernel, with the target's own flags: NEON on aarch64, xxHash's
# portable code on the rest (wasm32 for sdk/js; its toolchains do not call themselves x86_64).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(TENSO_FORMAT_BASE_HASH ${_tenso_format}/hash_sse2.c)
  set(TENSO_FORMAT_X86_HASH ${_tenso_format}/hash_avx2.c ${_tenso_format}/hash_avx512.c)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
  set(TENSO_FORMAT_BASE_HASH ${_tenso_format}/hash_neon.c)
  set(TENSO_FORMAT_X86_HASH)
else()
  set(TENSO_FORMAT_BASE_HASH ${_tenso_format}/hash_generic.c)
  set(TENSO_FORMAT_X86_HASH)
endif()
# Quantization kernels: vectorised loops, and no FMA contraction (it would change the bits that
# must match upstream's float32 arithmetic).
set(TENSO_FORMAT_SIMD_SOURCES ${_tenso_format}/quant.cpp)
