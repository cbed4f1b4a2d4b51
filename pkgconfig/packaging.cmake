# Install-time steps and the Debian packages. Included at the end of CMakeLists.txt, after every
# install rule (install(CODE) runs in the order of declaration, so these run last).
#
#   TENSO_SPLIT_DEBUG (OFF; `make lib`/`make install` turn it on)  at install, move the debug
#       information of each installed binary into <its directory>/.debug/<name>.debug and strip
#       the binary, which keeps a .gnu_debuglink to it (gdb finds it there, in any prefix)
#   ldconfig  an install into a directory the dynamic linker searches (pkgconfig/libdir.cmake),
#       with no DESTDIR, refreshes the linker cache; into another, says how programs find it
#   CPack DEB  `cpack -G DEB` in the build tree makes one package per component (tests/dist/
#       make-dist.sh calls it): libtenso1 (runtime), libtenso-dev (dev), tenso (cli),
#       libtenso1-cuda (cuda, when the plugin is built), each with a -dbgsym package holding
#       its debug information

# ---- split debug information ----
option(TENSO_SPLIT_DEBUG "At install: debug information into .debug/<name>.debug beside each binary, which is stripped" OFF)
find_program(TENSO_OBJCOPY NAMES objcopy llvm-objcopy)
# tenso_split_debug_on_install(COMPONENT DIR FILE_NAME): FILE_NAME may be a generator expression.
function(tenso_split_debug_on_install component dir name)
  if(NOT TENSO_SPLIT_DEBUG)
    return()
  endif()
  if(NOT TENSO_OBJCOPY)
    message(FATAL_ERROR "TENSO_SPLIT_DEBUG=ON needs objcopy (binutils)")
  endif()
  install(CODE "
    set(_file \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${dir}/${name}\")
    set(_debug_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${dir}/.debug\")
    if(CMAKE_INSTALL_DO_STRIP)
      # cmake --install --strip already dropped the debug information.
    elseif(EXISTS \"\${_file}\" AND NOT IS_SYMLINK \"\${_file}\")
      file(MAKE_DIRECTORY \"\${_debug_dir}\")
      execute_process(COMMAND \"${TENSO_OBJCOPY}\" --only-keep-debug --compress-debug-sections
          \"\${_file}\" \"\${_debug_dir}/${name}.debug\" RESULT_VARIABLE _rc)
      if(_rc EQUAL 0)
        execute_process(COMMAND \"${TENSO_OBJCOPY}\" --strip-debug --strip-unneeded
            \"--add-gnu-debuglink=\${_debug_dir}/${name}.debug\" \"\${_file}\" RESULT_VARIABLE _rc)
      endif()
      if(NOT _rc EQUAL 0)
        message(FATAL_ERROR \"splitting the debug information of \${_file} failed\")
      endif()
      message(STATUS \"Debug information: \${_debug_dir}/${name}.debug\")
    endif()" COMPONENT ${component})
endfunction()

tenso_split_debug_on_install(runtime ${CMAKE_INSTALL_LIBDIR} "$<TARGET_FILE_NAME:tenso>")
if(TARGET tenso_cli)
  tenso_split_debug_on_install(cli ${CMAKE_INSTALL_BINDIR} "$<TARGET_FILE_NAME:tenso_cli>")
endif()
if(TARGET tenso_cuda)
  tenso_split_debug_on_install(cuda ${CMAKE_INSTALL_LIBDIR} "$<TARGET_FILE_NAME:tenso_cuda>")
endif()

# ---- the dynamic linker's cache ----
# Decided at install time, for the prefix given then (cmake --install --prefix may differ).
install(CODE "
  set(_libdir \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}\")
  get_filename_component(_libdir \"\${_libdir}\" REALPATH)
  set(_system OFF)
  foreach(_dir IN ITEMS ${_tenso_linker_dirs})
    get_filename_component(_dir \"\${_dir}\" REALPATH)
    if(_dir STREQUAL _libdir)
      set(_system ON)
    endif()
  endforeach()
  if(NOT \"\$ENV{DESTDIR}\" STREQUAL \"\")
    # A staged install (packages): their own scripts or triggers run ldconfig.
  elseif(_system AND NOT \"${TENSO_LDCONFIG}\" STREQUAL \"\")
    execute_process(COMMAND \"${TENSO_LDCONFIG}\" RESULT_VARIABLE _rc ERROR_VARIABLE _err)
    if(_rc EQUAL 0)
      message(STATUS \"ldconfig: the dynamic linker now finds libtenso in \${_libdir}\")
    else()
      message(WARNING \"ldconfig failed (\${_err}): run `sudo ldconfig` so that programs find libtenso in \${_libdir}\")
    endif()
  elseif(NOT _system)
    message(STATUS \"libtenso is in \${_libdir}, which the dynamic linker does not search: \"
      \"programs linked with `pkg-config --libs tenso` get a run path to it from tenso.pc, \"
      \"CMake builds from the tenso::tenso target\")
  endif()" COMPONENT runtime)

# ---- the engine's source list, for libtenso-sys's bundled build ----
# libtenso-sources.txt in the build tree: every source of libtenso with its own compile options,
# the definitions and the include directories (paths relative to the source tree). tests/dist/
# make-dist.sh puts it into the crate beside the sources; its build.rs compiles exactly these, so
# CMakeLists.txt and impl/format/sources.cmake stay the one list. The XXH3 kernels depend on the
# target's architecture: impl/format/sources.cmake's choice for x86_64, aarch64 and the rest is
# written out for each, as `source@<arch>` lines (options as set for this build's own kernels).
if(CMAKE_SOURCE_DIR STREQUAL PROJECT_SOURCE_DIR)
  function(_tenso_hash_kernels processor out)
    set(CMAKE_SYSTEM_PROCESSOR ${processor})
    include(${PROJECT_SOURCE_DIR}/impl/format/sources.cmake)
    set(${out} ${TENSO_FORMAT_BASE_HASH} ${TENSO_FORMAT_X86_HASH} PARENT_SCOPE)
  endfunction()
  # _tenso_source_line(VAR SOURCE TAG): "source<TAG> <relative path> [options]\n" appended to VAR
  function(_tenso_source_line var src tag)
    get_filename_component(_abs "${src}" ABSOLUTE BASE_DIR "${PROJECT_SOURCE_DIR}")
    file(RELATIVE_PATH _rel "${PROJECT_SOURCE_DIR}" "${_abs}")
    get_source_file_property(_opts "${_abs}" COMPILE_OPTIONS)
    if(NOT _opts)
      set(_opts "")
    endif()
    string(REPLACE ";" " " _opts "${_opts}")
    string(STRIP "source${tag} ${_rel} ${_opts}" _line)
    set(${var} "${${var}}${_line}\n" PARENT_SCOPE)
  endfunction()

  set(_txt "# libtenso's sources, written by CMake (pkgconfig/packaging.cmake)\n")
  get_target_property(_defs tenso_impl COMPILE_DEFINITIONS)
  foreach(_d IN LISTS _defs)
    string(APPEND _txt "define ${_d}\n")
  endforeach()
  string(APPEND _txt "include impl\ninclude capi/include\n")
  _tenso_hash_kernels(${CMAKE_SYSTEM_PROCESSOR} _own_kernels)
  set(_own_kernels_abs)
  foreach(_k IN LISTS _own_kernels)
    get_filename_component(_k "${_k}" ABSOLUTE BASE_DIR "${PROJECT_SOURCE_DIR}")
    list(APPEND _own_kernels_abs "${_k}")
  endforeach()
  get_target_property(_impl_sources tenso_impl SOURCES)
  get_target_property(_capi_sources tenso SOURCES)
  foreach(_src IN LISTS _impl_sources _capi_sources)
    get_filename_component(_abs "${_src}" ABSOLUTE BASE_DIR "${PROJECT_SOURCE_DIR}")
    if(_src MATCHES "^\\$<" OR _abs IN_LIST _own_kernels_abs)
      continue()
    endif()
    _tenso_source_line(_txt "${_src}" "")
  endforeach()
  foreach(_arch x86_64 aarch64 other)
    _tenso_hash_kernels(${_arch} _kernels)
    foreach(_k IN LISTS _kernels)
      _tenso_source_line(_txt "${_k}" "@${_arch}")
    endforeach()
  endforeach()
  file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/libtenso-sources.txt CONTENT "${_txt}" @ONLY)
endif()

# ---- Debian packages (CPack DEB) ----
# Only for this project's own build, not when another project (the Python SDK) adds it.
if(NOT CMAKE_SOURCE_DIR STREQUAL PROJECT_SOURCE_DIR)
  return()
endif()
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tenso)
set(CPACK_PACKAGE_VENDOR "The tenso project")
set(CPACK_PACKAGE_CONTACT "The tenso project <https://github.com/tenso-project/tenso>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/cpack)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
if(TARGET tenso_cli)
  list(APPEND CPACK_COMPONENTS_ALL cli)
endif()
if(TARGET tenso_cuda)
  list(APPEND CPACK_COMPONENTS_ALL cuda)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE https://github.com/tenso-project/tenso)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends computed from the ELF files by dpkg-shlibdeps; the debug information goes into a
# -dbgsym package per component (Debian's layout: /usr/lib/debug/.build-id/).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
set(_tenso_deb_version "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")
set(_tenso_runtime_pkg libtenso${TENSO_SOVERSION})

# Each package's description below starts with its own synopsis line.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "")

# libtenso1: the shared library. Its shlibs file tells dpkg-shlibdeps of other packages to
# depend on libtenso1 (>= this version); CPack adds the postinst/postrm that run ldconfig.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME ${_tenso_runtime_pkg})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
"Zero-copy tensor packets (Tenso protocol v4) - shared library
libtenso reads and writes tensors as Tenso packets, byte-compatible with the
Tenso protocol v4 of the Python package tenso 0.24, behind a stable C ABI
(soname libtenso.so.${TENSO_SOVERSION}): in-memory, file, stream, shared-memory and network
transports, archives and safetensors/bintensors files.")

# libtenso-dev: headers, the libtenso.so link, tenso.pc and the CMake package. tenso.pc names
# liblz4 and OpenSSL in Requires.private, which pkg-config resolves even for dynamic linking.
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libtenso-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${_tenso_runtime_pkg} (= ${_tenso_deb_version}), liblz4-dev, libssl-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION
"Zero-copy tensor packets (Tenso protocol v4) - development files
Headers (C and the header-only C++17 layer), pkg-config file and CMake
package (find_package(tenso), target tenso::tenso) for libtenso.")

set(CPACK_DEBIAN_CLI_PACKAGE_NAME tenso)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_CLI_DESCRIPTION
"Zero-copy tensor packets (Tenso protocol v4) - command line
The tenso command: info, verify, convert (tenso, safetensors, bintensors)
and bench, over libtenso.")

set(CPACK_DEBIAN_CUDA_PACKAGE_NAME ${_tenso_runtime_pkg}-cuda)
set(CPACK_DEBIAN_CUDA_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_CUDA_DESCRIPTION
"Zero-copy tensor packets (Tenso protocol v4) - CUDA backend
The plugin libtenso loads for transfers to and from NVIDIA GPUs, with the
CUDA runtime it was built against.")
# The cli and cuda packages link libtenso.so.1, whose package is built beside them: dpkg-shlibdeps
# finds it staged there (but no shlibs of an uninstalled package), and the dependency on it is
# stated here.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
  ${CPACK_PACKAGE_DIRECTORY}/_CPack_Packages/Linux/DEB/tenso-${PROJECT_VERSION}-Linux/runtime${CMAKE_INSTALL_FULL_LIBDIR})
set(CPACK_DEBIAN_CLI_PACKAGE_DEPENDS "${_tenso_runtime_pkg} (>= ${_tenso_deb_version})")
set(CPACK_DEBIAN_CUDA_PACKAGE_DEPENDS "${_tenso_runtime_pkg} (= ${_tenso_deb_version})")

include(CPack)
