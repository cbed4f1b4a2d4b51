# cmake -P, abi.abidiff: the library's ABI against the baseline kept in the repository
# (libabigail's abidiff, as distributions check a new build of a library).
#   ABIDIFF, BASELINE (abidw XML), LIBRARY (an ELF with DWARF), HEADERS_DIR (public headers:
#   types declared elsewhere are private and not compared)
# Passes when nothing changed but additions (new functions, variables) and what abidiff.suppr
# allows (a versioned options struct growing at its end); fails on a removed or changed symbol,
# or any other changed layout of a type the public functions reach. The baseline is the ABI of
# 1.4.0; a new soname would regenerate it: `cmake --build build --target tenso_abi_baseline`.
cmake_minimum_required(VERSION 3.16)
foreach(_v ABIDIFF BASELINE LIBRARY HEADERS_DIR)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "abidiff.cmake: -D${_v}= is required")
  endif()
endforeach()

# The flags abidw used for the baseline (tests/abi/CMakeLists.txt, tenso_abi_baseline).
set(_flags --drop-private-types --exported-interfaces-only --headers-dir2 ${HEADERS_DIR}
    --suppressions ${CMAKE_CURRENT_LIST_DIR}/abidiff.suppr)

# Once with additions left out: its status decides. abidiff's status is a bit set: 1 error,
# 2 usage, 4 ABI change, 8 incompatible change (a removed symbol).
execute_process(COMMAND ${ABIDIFF} --no-added-syms ${_flags} ${BASELINE} ${LIBRARY}
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _report ERROR_VARIABLE _report)
if(NOT _rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "${ABIDIFF} did not run: ${_rc}")
endif()
math(EXPR _tool_error "${_rc} & 3")
if(_tool_error)
  message(FATAL_ERROR "abidiff failed (status ${_rc}):\n${_report}")
endif()

# Once in full, for the log: what this library adds to the baseline.
execute_process(COMMAND ${ABIDIFF} ${_flags} ${BASELINE} ${LIBRARY}
  OUTPUT_VARIABLE _full ERROR_VARIABLE _full)
if(NOT _rc EQUAL 0)
  math(EXPR _incompatible "${_rc} & 8")
  if(_incompatible)
    set(_what "incompatible: symbols removed")
  else()
    set(_what "changed: a symbol's type or a reachable struct layout")
  endif()
  message(FATAL_ERROR "the ABI of ${LIBRARY} differs from ${BASELINE} (${_what}; abidiff "
                      "status ${_rc}):\n${_report}\nIf the change is intended (a new soname), "
                      "regenerate the baseline: cmake --build <build> --target tenso_abi_baseline")
endif()
string(REGEX MATCH "Functions changes summary:[^\n]*" _summary "${_full}")
message(STATUS "ABI compatible with ${BASELINE}. ${_summary}")
if(_full MATCHES "\\[A\\]")
  message(STATUS "${_full}")
endif()
