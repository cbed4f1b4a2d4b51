# cmake -P: what the CUDA plugin carries and exports.
#   PLUGIN (libtenso_cuda.so), CUOBJDUMP, NM
# Checks: the fat binary holds real SASS for sm_80 and sm_90 and compute_90 PTX (so the kernels
# run on Ampere and Hopper without JIT, and newer GPUs JIT the PTX); the only defined dynamic
# symbol is the entry point tenso_cuda_backend_v1 (the CUDA runtime linked in stays local);
# the float32 arithmetic in the PTX is unfused.
cmake_minimum_required(VERSION 3.16)
foreach(_v PLUGIN CUOBJDUMP NM)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "cuda_plugin_binary.cmake: -D${_v}= is required")
  endif()
endforeach()
set(_errors)
foreach(_what elf ptx)
  execute_process(COMMAND ${CUOBJDUMP} --list-${_what} ${PLUGIN}
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out_${_what} ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "cuobjdump --list-${_what} ${PLUGIN} failed (${_rc}): ${_err}")
  endif()
endforeach()
message(STATUS "cuobjdump --list-elf:\n${_out_elf}cuobjdump --list-ptx:\n${_out_ptx}")
foreach(_sm 80 90)
  if(NOT _out_elf MATCHES "\\.sm_${_sm}\\.cubin")
    list(APPEND _errors "no SASS (cubin) for sm_${_sm}")
  endif()
endforeach()
if(NOT _out_ptx MATCHES "\\.sm_90\\.ptx")
  list(APPEND _errors "no compute_90 PTX")
endif()
if(_out_elf MATCHES "\\.sm_([0-9]+)\\.cubin" AND NOT CMAKE_MATCH_1 MATCHES "^(80|90)$")
  list(APPEND _errors "unexpected SASS for sm_${CMAKE_MATCH_1}")
endif()

# Bit-exactness with the host needs a separate subtract and multiply: the kernels' PTX must
# carry sub.rn.f32 / mul.rn.f32 (which ptxas never fuses) and no fma on float32.
execute_process(COMMAND ${CUOBJDUMP} --dump-ptx ${PLUGIN}
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _ptx ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "cuobjdump --dump-ptx ${PLUGIN} failed (${_rc}): ${_err}")
endif()
if(_ptx MATCHES "fma\\.[a-z.]*f32")
  list(APPEND _errors "the PTX has a float32 fma (the dequantize arithmetic must not be fused)")
endif()
if(NOT _ptx MATCHES "sub\\.rn\\.f32" OR NOT _ptx MATCHES "mul\\.rn\\.f32")
  list(APPEND _errors "the PTX lacks sub.rn.f32 / mul.rn.f32 (the dequantize arithmetic)")
endif()

execute_process(COMMAND ${NM} -D --defined-only ${PLUGIN}
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _nm ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${PLUGIN} failed (${_rc}): ${_err}")
endif()
string(REGEX MATCHALL "[^\n]+" _lines "${_nm}")
set(_exports)
foreach(_line IN LISTS _lines)
  if(_line MATCHES "^[0-9a-fA-F]* *[A-Za-z] (.+)$")
    list(APPEND _exports "${CMAKE_MATCH_1}")
  endif()
endforeach()
if(NOT _exports STREQUAL "tenso_cuda_backend_v1")
  list(APPEND _errors "exports must be exactly tenso_cuda_backend_v1, found: ${_exports}")
endif()

if(_errors)
  string(REPLACE ";" "\n  " _errors "${_errors}")
  message(FATAL_ERROR "cuda_plugin_binary: ${PLUGIN}:\n  ${_errors}")
endif()
message(STATUS "cuda_plugin_binary: sm_80 + sm_90 SASS, compute_90 PTX, unfused float32, one export")
