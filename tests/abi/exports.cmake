# cmake -P: the shared library's dynamic symbol table and soname (STYLE rules 13 and 14).
#   LIBRARY, NM, READELF, EXPECTED_SONAME, EXPECTED_VERSION_NODE, HEADERS (list)
# Checks:
#   1. every defined dynamic symbol is tenso_*, apart from the version node (type A);
#   2. that version node is EXPECTED_VERSION_NODE (the version script was applied) and every
#      tenso_* symbol is bound to it;
#   3. every function declared with an export macro (TENSO_API, TENSO_<X>_API) in the public
#      headers is exported (a missing definition or export macro would otherwise only show up
#      in a consumer);
#   4. every exported symbol is declared in a public header (the version script exports any
#      tenso_* name, so an internal helper named tenso_* would leak into the ABI);
#   5. DT_SONAME is EXPECTED_SONAME.
cmake_minimum_required(VERSION 3.16)
foreach(_v LIBRARY NM READELF EXPECTED_SONAME EXPECTED_VERSION_NODE HEADERS)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "exports.cmake: -D${_v}= is required")
  endif()
endforeach()

execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY}
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _nm ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed (${_rc}): ${_err}")
endif()

set(_errors)
set(_exported)
set(_nodes)
string(REPLACE "\n" ";" _lines "${_nm}")
foreach(_line IN LISTS _lines)
  if(_line STREQUAL "")
    continue()
  endif()
  # "<address> <type> <name>[@@NODE]"
  if(NOT _line MATCHES "^[0-9a-fA-F]* *([A-Za-z]) ([^ @]+)(@@?([^ ]+))?$")
    list(APPEND _errors "unparsed nm line: '${_line}'")
    continue()
  endif()
  set(_type ${CMAKE_MATCH_1})
  set(_sym ${CMAKE_MATCH_2})
  set(_node "${CMAKE_MATCH_4}")
  if(_type STREQUAL "A")
    list(APPEND _nodes ${_sym})
  elseif(NOT _sym MATCHES "^tenso_")
    list(APPEND _errors "foreign symbol exported: ${_line}")
  else()
    list(APPEND _exported ${_sym})
    if(NOT _node STREQUAL EXPECTED_VERSION_NODE)
      list(APPEND _errors "${_sym} is bound to version '${_node}', not ${EXPECTED_VERSION_NODE}")
    endif()
  endif()
endforeach()
if(NOT EXPECTED_VERSION_NODE IN_LIST _nodes)
  list(APPEND _errors "version node ${EXPECTED_VERSION_NODE} missing (got: '${_nodes}'): "
                      "was the version script applied?")
endif()

# Functions the headers promise: "TENSO_API <return type> [*]name(".
set(_declared)
foreach(_hdr IN LISTS HEADERS)
  file(READ ${_hdr} _text)
  string(REGEX MATCHALL "TENSO_([A-Z]+_)?API[^;(]*[ *]tenso_[a-z0-9_]+[ \t]*\\(" _decls "${_text}")
  foreach(_d IN LISTS _decls)
    string(REGEX MATCH "tenso_[a-z0-9_]+[ \t]*\\($" _fn "${_d}")
    string(REGEX REPLACE "[ \t]*\\($" "" _fn "${_fn}")
    list(APPEND _declared ${_fn})
  endforeach()
endforeach()
list(REMOVE_DUPLICATES _declared)
list(LENGTH _declared _n_declared)
if(_n_declared EQUAL 0)
  list(APPEND _errors "found no TENSO_API declarations in the headers")
endif()
foreach(_fn IN LISTS _declared)
  if(NOT _fn IN_LIST _exported)
    list(APPEND _errors "declared TENSO_API but not exported: ${_fn}")
  endif()
endforeach()
foreach(_sym IN LISTS _exported)
  if(NOT _sym IN_LIST _declared)
    list(APPEND _errors "exported but declared in no public header: ${_sym}")
  endif()
endforeach()

execute_process(COMMAND ${READELF} -d ${LIBRARY}
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _dyn ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${READELF} -d ${LIBRARY} failed (${_rc}): ${_err}")
endif()
if(_dyn MATCHES "Library soname: \\[([^]]*)\\]")
  set(_soname ${CMAKE_MATCH_1})
else()
  set(_soname "<none>")
endif()
if(NOT _soname STREQUAL EXPECTED_SONAME)
  list(APPEND _errors "soname is ${_soname}, expected ${EXPECTED_SONAME}")
endif()

list(LENGTH _exported _n_exported)
if(_errors)
  string(REPLACE ";" "\n  " _msg "${_errors}")
  message(FATAL_ERROR "${LIBRARY}:\n  ${_msg}")
endif()
message(STATUS "${LIBRARY}: soname ${_soname}; ${_n_exported} symbols, all tenso_* at "
               "${EXPECTED_VERSION_NODE}; all ${_n_declared} TENSO_API functions exported")
