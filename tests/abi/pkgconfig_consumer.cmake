# cmake -P, abi.install_consumer(_cxx): build tests/abi/consumer.c (or consumer.cpp) the way a
# user of the installed library would - only with the flags `pkg-config --cflags --libs tenso`
# gives for PREFIX - as strict C11 (or C++17), check with ldd that the scratch libtenso is the
# one loaded, and run it.
#   PREFIX, PKG_CONFIG, CC, SOURCE, WORK_DIR, SOVERSION; optional STD (-std=c11) and FLAGS
#   (-Wall -Wextra -pedantic -Werror), for the C++ consumer; a cross build also passes
#   EMULATOR (runs the consumer, and its loader for the ldd check) and PKG_CONFIG_LIBDIR (the
#   target's .pc directories, for liblz4)
cmake_minimum_required(VERSION 3.16)
foreach(_v PREFIX PKG_CONFIG CC SOURCE WORK_DIR SOVERSION)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "pkgconfig_consumer.cmake: -D${_v}= is required")
  endif()
endforeach()

if(NOT DEFINED STD)
  set(STD -std=c11)
endif()
if(NOT DEFINED FLAGS)
  set(FLAGS -Wall -Wextra -pedantic -Werror)
endif()

separate_arguments(EMULATOR UNIX_COMMAND "${EMULATOR}")  # empty: run natively
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# Only the scratch prefix is searched; the system's own .pc dirs stay (liblz4 lives there).
set(ENV{PKG_CONFIG_PATH} "${PREFIX}/lib/pkgconfig")
if(PKG_CONFIG_LIBDIR)
  set(ENV{PKG_CONFIG_LIBDIR} "${PKG_CONFIG_LIBDIR}")
else()
  unset(ENV{PKG_CONFIG_LIBDIR})
endif()
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs tenso
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _flags ERROR_VARIABLE _err
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs tenso failed (${_rc}) with "
                      "PKG_CONFIG_PATH=${PREFIX}/lib/pkgconfig: ${_err}")
endif()
message(STATUS "pkg-config --cflags --libs tenso: ${_flags}")
# The .pc is relocatable (prefix=${pcfiledir}/../..): compare the directories it names, resolved.
if(NOT _flags MATCHES "-Wl,-rpath,")
  message(FATAL_ERROR "tenso.pc in a private prefix gives no run path: '${_flags}'")
endif()
string(REGEX MATCH "-I([^ ]+)" _ "${_flags}")
get_filename_component(_incdir "${CMAKE_MATCH_1}" REALPATH)
string(REGEX MATCH "-L([^ ]+)" _ "${_flags}")
get_filename_component(_libdir "${CMAKE_MATCH_1}" REALPATH)
get_filename_component(_prefix "${PREFIX}" REALPATH)
if(NOT _incdir STREQUAL "${_prefix}/include" OR NOT _libdir STREQUAL "${_prefix}/lib")
  message(FATAL_ERROR "the flags do not point into ${PREFIX}: '${_flags}'")
endif()
execute_process(COMMAND ${PKG_CONFIG} --modversion tenso OUTPUT_VARIABLE _ver
  OUTPUT_STRIP_TRAILING_WHITESPACE)
message(STATUS "pkg-config --modversion tenso: ${_ver}")

separate_arguments(_flags UNIX_COMMAND "${_flags}")
set(_exe ${WORK_DIR}/consumer)
execute_process(
  COMMAND ${CC} ${STD} ${FLAGS} ${SOURCE} -o ${_exe} ${_flags}
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "compiling the consumer with the pkg-config flags failed (${_rc}):\n${_out}")
endif()

# Nothing but the pkg-config line, as the README has it: the scratch prefix is one the dynamic
# linker does not search, so tenso.pc adds a run path to it, and the program must find the
# scratch libtenso (not one in /usr/local or the build tree) with LD_LIBRARY_PATH unset.
unset(ENV{LD_LIBRARY_PATH})
if(EMULATOR)
  # ldd is the loader in trace mode; the host's ldd cannot load a foreign binary. The variable
  # goes to the emulated program only (QEMU_SET_ENV): the host's loader would trace qemu.
  set(ENV{QEMU_SET_ENV} LD_TRACE_LOADED_OBJECTS=1)
  execute_process(COMMAND ${EMULATOR} ${_exe} RESULT_VARIABLE _rc OUTPUT_VARIABLE _ldd ERROR_VARIABLE _ldd)
  unset(ENV{QEMU_SET_ENV})
else()
  execute_process(COMMAND ldd ${_exe} RESULT_VARIABLE _rc OUTPUT_VARIABLE _ldd ERROR_VARIABLE _ldd)
endif()
if(NOT _ldd MATCHES "libtenso\\.so\\.${SOVERSION} => ([^ ]+)")
  message(FATAL_ERROR "the consumer does not load libtenso.so.${SOVERSION}:\n${_ldd}")
endif()
get_filename_component(_loaded "${CMAKE_MATCH_1}" REALPATH)
if(NOT _loaded MATCHES "^${_prefix}/lib/libtenso\\.so\\.")
  message(FATAL_ERROR "the consumer loads ${_loaded}, not the one in ${PREFIX}/lib:\n${_ldd}")
endif()

execute_process(COMMAND ${EMULATOR} ${_exe} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
message(STATUS "consumer output:\n${_out}")
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "the pkg-config consumer failed (${_rc})")
endif()
