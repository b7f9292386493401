# cmake --install: the tools, the runtime library, pfrt.h and a CMake package,
# so that another project can
#
#   find_package(pipefill REQUIRED)            # CMAKE_PREFIX_PATH=<prefix>
#   target_link_libraries(app PRIVATE pipefill::pfrt)   # #include "runtime/pfrt.h"
#
# and run the installed compiler through the imported executables
# pipefill::pipefill-translate, pipefill::pipefill-opt, pipefill::pipefill-run and
# pipefill::pipefill-sim. Layout under the prefix:
#   bin/                       the four tools
#   lib/libpfrt.a, lib/libpipefill_proto.a
#   include/pipefill/runtime/pfrt.h
#   lib/cmake/pipefill/        pipefillConfig.cmake, version file, exported targets
# The Python module installs separately (component `python`, pip install .).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PIPEFILL_VERSION 0.1.0)
set(PIPEFILL_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/pipefill)

install(TARGETS pipefill-opt pipefill-translate pipefill-run pipefill-sim
  EXPORT pipefillTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT pipefill)
install(TARGETS pfrt pipefill_proto
  EXPORT pipefillTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT pipefill)
install(FILES ${PROJECT_SOURCE_DIR}/runtime/pfrt.h
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
