# cmake -P: compile each public header alone (included twice: the guard must hold) with the
# consumer's strict flags, syntax only. Reports every header, then fails if any failed.
#   COMPILER, LANG (c | c++), STD, INCLUDE_DIR, HEADERS (list), FLAGS (list), WORK_DIR
cmake_minimum_required(VERSION 3.16)
foreach(_v COMPILER LANG STD INCLUDE_DIR HEADERS FLAGS WORK_DIR)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "headertest.cmake: -D${_v}= is required")
  endif()
endforeach()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
if(LANG STREQUAL "c")
  set(_ext c)
else()
  set(_ext cpp)
endif()

string(REPLACE ";" " " _flags_text "${FLAGS}")
message(STATUS "${COMPILER} ${STD} ${_flags_text} -fsyntax-only, each header alone:")
set(_failed)
list(LENGTH HEADERS _count)
foreach(_hdr IN LISTS HEADERS)
  get_filename_component(_name ${_hdr} NAME)
  # tenso.h and tenso.hpp each get their own source (tenso_h, tenso_hpp).
  string(MAKE_C_IDENTIFIER ${_name} _stem)
  set(_src ${WORK_DIR}/${_stem}.${_ext})
  file(WRITE ${_src}
    "#include <tenso/${_name}>\n#include <tenso/${_name}>\ntypedef int tenso_headertest_nonempty;\n")
  execute_process(
    COMMAND ${COMPILER} ${STD} ${FLAGS} -fsyntax-only -I${INCLUDE_DIR} ${_src}
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(_rc EQUAL 0 AND _out STREQUAL "")
    message(STATUS "ok    tenso/${_name}")
  else()
    message(STATUS "FAIL  tenso/${_name}, rc=${_rc}:\n${_out}")
    list(APPEND _failed ${_name})
  endif()
endforeach()

if(_count EQUAL 0)
  message(FATAL_ERROR "no public headers found under ${INCLUDE_DIR}/tenso")
endif()
if(_failed)
  message(FATAL_ERROR "headers that do not compile alone as ${LANG} ${STD}: ${_failed}")
endif()
message(STATUS "${_count} headers compile alone as ${LANG} ${STD}")
