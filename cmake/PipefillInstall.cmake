# cmake --install: the tools, the runtime library, pfrt.h and a CMake package,
# so that another project can
#
#   find_package(pipefill REQUIRED)            # CMAKE_PREFIX_PATH=<prefix>
#   target_link_libraries(app PRIVATE pipefill::pfrt)   # #include "runtime/pfrt.h"
#
# and run the installed compiler through the imported executables
# pipefill::pipefill-compile, pipefill::pipefill-translate, pipefill::pipefill-opt,
# pipefill::pipefill-run and pipefill::pipefill-sim. Layout under the prefix:
#   bin/                       the five tools
#   lib/libpfrt.a, lib/libpipefill_proto.a
#   include/pipefill/runtime/pfrt.h
#   lib/cmake/pipefill/        pipefillConfig.cmake, version file, exported targets
# The Python module installs separately (component `python`, pip install .).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PIPEFILL_VERSION 0.1.0)
set(PIPEFILL_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/pipefill)

install(TARGETS pipefill-compile pipefill-opt pipefill-translate pipefill-run pipefill-sim
  EXPORT pipefillTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT pipefill)
# pfrt and every library of this project it links, found by walking its link
# list, so a new internal dependency of the runtime is exported without an edit
# here. Their include folders in the source or build tree are build-only
# ($<BUILD_INTERFACE:...>); the installed pfrt adds include/pipefill.
function(pipefill_internal_link_closure target out_var)
  set(closure ${${out_var}})
  get_target_property(libs ${target} LINK_LIBRARIES)
  if(NOT libs)
    set(libs "")
  endif()
  foreach(lib IN LISTS libs)
    if(lib MATCHES "^\\$<" OR NOT TARGET ${lib})
      continue()
    endif()
    get_target_property(aliased ${lib} ALIASED_TARGET)
    if(aliased)
      set(lib ${aliased})
    endif()
    get_target_property(imported ${lib} IMPORTED)
    if(imported OR lib IN_LIST closure)
      continue()
    endif()
    list(APPEND closure ${lib})
    pipefill_internal_link_closure(${lib} closure)
  endforeach()
  set(${out_var} ${closure} PARENT_SCOPE)
endfunction()

set(pipefill_exported_libs pfrt)
pipefill_internal_link_closure(pfrt pipefill_exported_libs)
foreach(lib IN LISTS pipefill_exported_libs)
  get_target_property(dirs ${lib} INTERFACE_INCLUDE_DIRECTORIES)
  if(NOT dirs)
    continue()
  endif()
  set(fixed "")
  foreach(dir IN LISTS dirs)
    string(FIND "${dir}/" "${PROJECT_SOURCE_DIR}/" in_source)
    string(FIND "${dir}/" "${PROJECT_BINARY_DIR}/" in_build)
    if(NOT dir MATCHES "^\\$<" AND (in_source EQUAL 0 OR in_build EQUAL 0))
      list(APPEND fixed "$<BUILD_INTERFACE:${dir}>")
    else()
      list(APPEND fixed "${dir}")
    endif()
  endforeach()
  set_target_properties(${lib} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${fixed}")
endforeach()
target_include_directories(pfrt INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/pipefill>)
message(STATUS "pipefill: cmake --install exports ${pipefill_exported_libs}")

install(TARGETS ${pipefill_exported_libs}
  EXPORT pipefillTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT pipefill)
install(FILES ${PROJECT_SOURCE_DIR}/runtime/pfrt.h ${PROJECT_SOURCE_DIR}/runtime/pfrt_tables.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipefill/runtime COMPONENT pipefill)
install(EXPORT pipefillTargets
  NAMESPACE pipefill::
  DESTINATION ${PIPEFILL_INSTALL_CMAKEDIR} COMPONENT pipefill)

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/pipefillConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/pipefillConfig.cmake
  INSTALL_DESTINATION ${PIPEFILL_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/pipefillConfigVersion.cmake
  VERSION ${PIPEFILL_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/cmake/pipefillConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/pipefillConfigVersion.cmake
  DESTINATION ${PIPEFILL_INSTALL_CMAKEDIR} COMPONENT pipefill)

# The installed-tree check: install into a fresh prefix, configure and build a
# small consumer project against it (find_package + pipefill::pfrt, the
# installed tools compiling a JobSpec at build time), and run it.
add_test(NAME install.consumer
  COMMAND ${CMAKE_COMMAND}
    -DBUILD_DIR=${PROJECT_BINARY_DIR}
    -DCONSUMER_SOURCE=${PROJECT_SOURCE_DIR}/test/install/consumer
    -DWORK_DIR=${PROJECT_BINARY_DIR}/test/install
    -DJOB=${PROJECT_SOURCE_DIR}/test/runtime/Inputs/tiny.pbtxt
    -DGENERATOR=${CMAKE_GENERATOR}
    -P ${PROJECT_SOURCE_DIR}/test/install/RunConsumer.cmake)
set_tests_properties(install.consumer PROPERTIES LABELS install TIMEOUT 300)
