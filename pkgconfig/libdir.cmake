# Where the installed library is found at run time (included by CMakeLists.txt before tenso.pc
# is configured).
#
# A C library's .pc names no run path (zstd's libzstd.pc and libgit2.pc do not): in /usr or
# /usr/local the dynamic linker finds the library by itself (`make install` runs ldconfig
# there). A private prefix ($HOME/.local, /opt/tenso) is searched by nobody, so a program linked
# with `cc app.c $(pkg-config --cflags --libs tenso)` would not start. For such a prefix, and
# only for it, tenso.pc's Libs carry -Wl,-rpath,${libdir}: the README's commands make programs
# that run, with no LD_LIBRARY_PATH. Distribution packages install into /usr and get none.
#
# Sets:
#   TENSO_LIBDIR_IS_SYSTEM   whether CMAKE_INSTALL_FULL_LIBDIR is a directory the dynamic
#                            linker searches (ldconfig's list, or its built-in /lib, /usr/lib)
#   TENSO_PC_LIBS_RPATH      "" or " -Wl,-rpath,${libdir}", for tenso.pc.in's Libs
# Cache: TENSO_PC_RPATH = AUTO (the rule above), ON (always), OFF (never: packagers who set
# their own run paths).
set(TENSO_PC_RPATH AUTO CACHE STRING "Run path in tenso.pc's Libs: AUTO (only for a libdir the dynamic linker does not search), ON or OFF")
set_property(CACHE TENSO_PC_RPATH PROPERTY STRINGS AUTO ON OFF)

set(_tenso_linker_dirs /lib /usr/lib /lib64 /usr/lib64)
find_program(TENSO_LDCONFIG ldconfig PATHS /sbin /usr/sbin)
if(TENSO_LDCONFIG)
  # -N -X: list the directories (ld.so.conf and the built-in ones) without touching the cache.
  execute_process(COMMAND ${TENSO_LDCONFIG} -v -N -X
    OUTPUT_VARIABLE _tenso_ldconfig_out ERROR_QUIET RESULT_VARIABLE _tenso_ldconfig_rc)
  string(REGEX MATCHALL "(^|\n)/[^:\n]*:" _tenso_ldconfig_dirs "${_tenso_ldconfig_out}")
  foreach(_dir IN LISTS _tenso_ldconfig_dirs)
    string(REGEX REPLACE "^\n?(/[^:]*):$" "\\1" _dir "${_dir}")
    list(APPEND _tenso_linker_dirs "${_dir}")
  endforeach()
endif()

# Real paths: with a merged /usr, ldconfig names /lib/x86_64-linux-gnu for /usr/lib/x86_64-linux-gnu.
get_filename_component(_tenso_libdir "${CMAKE_INSTALL_FULL_LIBDIR}" REALPATH)
set(TENSO_LIBDIR_IS_SYSTEM OFF)
foreach(_dir IN LISTS _tenso_linker_dirs)
  get_filename_component(_dir "${_dir}" REALPATH)
  if(_dir STREQUAL _tenso_libdir)
    set(TENSO_LIBDIR_IS_SYSTEM ON)
  endif()
endforeach()

string(TOUPPER "${TENSO_PC_RPATH}" _tenso_pc_rpath)
if(_tenso_pc_rpath STREQUAL "ON" OR (_tenso_pc_rpath STREQUAL "AUTO" AND NOT TENSO_LIBDIR_IS_SYSTEM))
  set(TENSO_PC_LIBS_RPATH " -Wl,-rpath,\${libdir}")
elseif(_tenso_pc_rpath MATCHES "^(AUTO|OFF)$")
  set(TENSO_PC_LIBS_RPATH "")
else()
  message(FATAL_ERROR "TENSO_PC_RPATH must be AUTO, ON or OFF, not '${TENSO_PC_RPATH}'")
endif()
