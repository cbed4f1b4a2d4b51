# cmake -P, the abi.install_setup fixture: configure a separate build of the project with
# CMAKE_INSTALL_PREFIX=PREFIX (so the generated tenso.pc names PREFIX), build only what is
# installed, and install it into a freshly emptied PREFIX.
#   SOURCE_DIR, BUILD_DIR, PREFIX, GENERATOR, BUILD_TYPE, C_COMPILER, CXX_COMPILER, WERROR;
#   optional TOOLCHAIN_FILE (a cross build passes its own: tests/cross/)
cmake_minimum_required(VERSION 3.16)
foreach(_v SOURCE_DIR BUILD_DIR PREFIX GENERATOR BUILD_TYPE C_COMPILER CXX_COMPILER WERROR)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "install_setup.cmake: -D${_v}= is required")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    string(REPLACE ";" " " _cmd "${ARGN}")
    message(FATAL_ERROR "failed (${_rc}): ${_cmd}")
  endif()
endfunction()

# A cache left by a different prefix or compiler would be silently kept: start over then.
set(_toolchain)
if(TOOLCHAIN_FILE)
  set(_toolchain -DCMAKE_TOOLCHAIN_FILE=${TOOLCHAIN_FILE})
endif()
set(_want "${PREFIX}|${C_COMPILER}|${CXX_COMPILER}|${GENERATOR}|${BUILD_TYPE}|${TOOLCHAIN_FILE}")
set(_stamp ${BUILD_DIR}/.abi-install-setup)
if(EXISTS ${_stamp})
  file(READ ${_stamp} _have)
  if(NOT _have STREQUAL _want)
    file(REMOVE_RECURSE ${BUILD_DIR})
  endif()
endif()

run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BUILD_DIR} -G ${GENERATOR} ${_toolchain}
  -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
  -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
  -DCMAKE_INSTALL_PREFIX=${PREFIX}
  -DTENSO_BUILD_TESTS=OFF -DTENSO_BUILD_FUZZERS=OFF -DTENSO_BUILD_BENCH=OFF
  -DTENSO_BUILD_TOOLS=OFF -DTENSO_SANITIZE= -DTENSO_WERROR=${WERROR}
  # The consumers use libtenso only; the CUDA plugin would cost an nvcc build here.
  -DTENSO_CUDA=OFF)
file(WRITE ${_stamp} "${_want}")
run(${CMAKE_COMMAND} --build ${BUILD_DIR} --target tenso tenso_cli)

file(REMOVE_RECURSE ${PREFIX})
run(${CMAKE_COMMAND} --install ${BUILD_DIR})

# What the consumer tests rely on must be there (libdir is "lib" for a prefix outside /usr).
foreach(_f include/tenso/tenso.h lib/libtenso.so lib/pkgconfig/tenso.pc bin/tenso
           lib/cmake/tenso/tensoConfig.cmake lib/cmake/tenso/tensoConfigVersion.cmake)
  if(NOT EXISTS ${PREFIX}/${_f})
    message(FATAL_ERROR "the install into ${PREFIX} lacks ${_f}")
  endif()
endforeach()
message(STATUS "installed into ${PREFIX}")
