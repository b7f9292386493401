# One plain-C++ algorithm library under algo/ (no MLIR/LLVM), its GoogleTest executable and
# its CTest registration:
#
#   pipefill_add_algo_library(pipefill_NAME
#     SOURCES a.cpp b.cpp ...
#     [DEPS lib ...]                       PUBLIC link dependencies
#     [TESTS tests/aTest.cpp ...]          built when GTest is found
#     [TEST_TARGET pipefill-NAME-tests]    default: the library name with _ -> -, plus -tests
#     [TEST_PREFIX "NAME."]
#     [TEST_DEPS lib ...])
#
# The repository root is the library's public include directory (headers are included as
# "algo/NAME/Header.h"). Benchmarks live in bench/CMakeLists.txt.
function(pipefill_add_algo_library name)
  cmake_parse_arguments(ARG "" "TEST_TARGET;TEST_PREFIX" "SOURCES;DEPS;TESTS;TEST_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  if(ARG_DEPS)
    target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  endif()
  target_compile_features(${name} PUBLIC cxx_std_17)
  if(NOT MSVC)
    target_compile_options(${name} PRIVATE -Wall -Wextra)
  endif()
  if(ARG_TESTS AND TARGET GTest::gtest_main)
    set(test_target ${ARG_TEST_TARGET})
    if(NOT test_target)
      string(REPLACE "_" "-" test_target "${name}-tests")
    endif()
    add_executable(${test_target} ${ARG_TESTS})
    target_link_libraries(${test_target} PRIVATE ${name} ${ARG_TEST_DEPS} GTest::gtest_main)
    include(GoogleTest)
    gtest_discover_tests(${test_target} TEST_PREFIX "${ARG_TEST_PREFIX}" DISCOVERY_TIMEOUT 60)
  endif()
endfunction()
