# cmake -P, abi.cmake_consumer: configure, build and run tests/abi/cmake-consumer against the
# scratch install, finding it only through CMAKE_PREFIX_PATH.
#   PREFIX, GENERATOR, C_COMPILER, CXX_COMPILER, SOURCE_DIR, BUILD_DIR, EXPECTED_VERSION;
#   optional TOOLCHAIN_FILE and EMULATOR (a cross build: the consumers run under EMULATOR)
cmake_minimum_required(VERSION 3.16)
foreach(_v PREFIX GENERATOR C_COMPILER CXX_COMPILER SOURCE_DIR BUILD_DIR EXPECTED_VERSION)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "cmake_consumer.cmake: -D${_v}= is required")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    string(REPLACE ";" " " _cmd "${ARGN}")
    message(FATAL_ERROR "failed (${_rc}): ${_cmd}")
  endif()
endfunction()

separate_arguments(EMULATOR UNIX_COMMAND "${EMULATOR}")  # empty: run natively
set(_toolchain)
if(TOOLCHAIN_FILE)
  set(_toolchain -DCMAKE_TOOLCHAIN_FILE=${TOOLCHAIN_FILE})
endif()
file(REMOVE_RECURSE ${BUILD_DIR})
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BUILD_DIR} -G ${GENERATOR} ${_toolchain}
  -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
  -DCMAKE_PREFIX_PATH=${PREFIX}
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
  -DTENSO_EXPECTED_VERSION=${EXPECTED_VERSION} -DTENSO_EXPECTED_PREFIX=${PREFIX})
run(${CMAKE_COMMAND} --build ${BUILD_DIR})
# The build tree's rpath points at the imported library in PREFIX; no LD_LIBRARY_PATH.
unset(ENV{LD_LIBRARY_PATH})
run(${EMULATOR} ${BUILD_DIR}/tenso_cmake_consumer)
run(${EMULATOR} ${BUILD_DIR}/tenso_cmake_consumer_cxx)
