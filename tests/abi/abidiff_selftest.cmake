# cmake -P, abi.abidiff_selftest: abidiff.cmake (the check abi.abidiff runs on libtenso) must
# pass an unchanged library and a pure addition, and fail a removed symbol and a changed struct
# layout, and pass a versioned options struct grown at its end (abidiff.suppr) but no other
# struct grown so. The libraries are scratch builds of abi_probe.c, whose functions take
# libtenso's public structs; the layout changes are copies of tenso.h with a field inserted.
#   CC, ABIDW, ABIDW_FLAGS (list), ABIDIFF, INCLUDE_DIR, SOURCE, CHECK_SCRIPT, WORK_DIR
cmake_minimum_required(VERSION 3.16)
foreach(_v CC ABIDW ABIDW_FLAGS ABIDIFF INCLUDE_DIR SOURCE CHECK_SCRIPT WORK_DIR)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "abidiff_selftest.cmake: -D${_v}= is required")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(NOT _rc EQUAL 0)
    string(REPLACE ";" " " _cmd "${ARGN}")
    message(FATAL_ERROR "failed (${_rc}): ${_cmd}\n${_out}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# probe(NAME INCLUDE_DIR [defines...]): lib<NAME>.so in WORK_DIR/NAME
function(probe name incdir)
  file(MAKE_DIRECTORY ${WORK_DIR}/${name})
  run(${CC} -std=c99 -g -O1 -fPIC -shared -fvisibility=hidden -I${incdir} ${ARGN}
      ${SOURCE} -o ${WORK_DIR}/${name}/libprobe.so)
endfunction()

# The baseline, written with the flags the real baseline uses.
probe(base ${INCLUDE_DIR})
run(${ABIDW} ${ABIDW_FLAGS} --headers-dir ${INCLUDE_DIR}/tenso
    --out-file ${WORK_DIR}/base.abi ${WORK_DIR}/base/libprobe.so)

# edited_headers(NAME FROM TO): a copy of the headers in WORK_DIR/NAME-include with FROM
# replaced by TO in tenso.h.
function(edited_headers name from to)
  file(COPY ${INCLUDE_DIR}/ DESTINATION ${WORK_DIR}/${name}-include)
  set(_hdr ${WORK_DIR}/${name}-include/tenso/tenso.h)
  file(READ ${_hdr} _text)
  string(REPLACE "${from}" "${to}" _changed "${_text}")
  if(_changed STREQUAL _text)
    message(FATAL_ERROR "abidiff_selftest: '${from}' not found in tenso.h")
  endif()
  file(WRITE ${_hdr} "${_changed}")
endfunction()
# A changed layout: one more field at the start of tenso_tensor.
edited_headers(layout "typedef struct tenso_tensor {\n" "typedef struct tenso_tensor {\n    uint32_t probe_inserted;\n")
# A versioned options struct grown at its end: allowed (abidiff.suppr).
edited_headers(tail "} tenso_encode_options;" "    uint64_t probe_tail;\n} tenso_encode_options;")
# Any other struct grown at its end: a changed layout.
edited_headers(tensortail "} tenso_tensor;" "    uint64_t probe_tail;\n} tenso_tensor;")

probe(same ${INCLUDE_DIR})
probe(added ${INCLUDE_DIR} -DPROBE_ADD)
probe(removed ${INCLUDE_DIR} -DPROBE_REMOVE)
probe(layout ${WORK_DIR}/layout-include)
probe(tail ${WORK_DIR}/tail-include)
probe(tensortail ${WORK_DIR}/tensortail-include)

set(_errors)
foreach(_case same:pass:${INCLUDE_DIR} added:pass:${INCLUDE_DIR}
              removed:fail:${INCLUDE_DIR} layout:fail:${WORK_DIR}/layout-include
              tail:pass:${WORK_DIR}/tail-include tensortail:fail:${WORK_DIR}/tensortail-include)
  string(REPLACE ":" ";" _case "${_case}")
  list(GET _case 0 _name)
  list(GET _case 1 _want)
  list(GET _case 2 _incdir)
  execute_process(COMMAND ${CMAKE_COMMAND} -DABIDIFF=${ABIDIFF}
      -DBASELINE=${WORK_DIR}/base.abi -DLIBRARY=${WORK_DIR}/${_name}/libprobe.so
      -DHEADERS_DIR=${_incdir}/tenso -P ${CHECK_SCRIPT}
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(_rc EQUAL 0)
    set(_got pass)
  else()
    set(_got fail)
  endif()
  message(STATUS "${_name}: ${_got} (expected ${_want})")
  if(NOT _got STREQUAL _want)
    list(APPEND _errors "${_name}: the check says ${_got}, expected ${_want}:\n${_out}")
  elseif(_want STREQUAL "fail" AND NOT _out MATCHES "differs[ \n]+from")
    list(APPEND _errors "${_name}: failed, but not with an ABI report:\n${_out}")
  endif()
endforeach()
if(_errors)
  string(REPLACE ";" "\n" _errors "${_errors}")
  message(FATAL_ERROR "${_errors}")
endif()
