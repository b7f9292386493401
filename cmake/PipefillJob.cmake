# pipefill_add_job_binary(TARGET JOB [ITERATIONS N])
#
# Compiles a JobSpec into a standalone runtime binary: import, the whole
# --pipefill-compile pipeline, lowering to stream programs, C++ emission
# (pipefill-translate --to-cpp), then a normal executable linked against the
# runtime. The compiled IR, the StreamProgram (TARGET.pb) and the generated
# source are kept next to the binary.
function(pipefill_add_job_binary target job)
  cmake_parse_arguments(ARG "" "ITERATIONS" "" ${ARGN})
  if(NOT ARG_ITERATIONS)
    set(ARG_ITERATIONS 1)
  endif()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${target})
  add_custom_command(
    OUTPUT ${out}.cpp ${out}.pb ${out}.compiled.mlir
    COMMAND pipefill-translate --import-job ${job} -o ${out}.mlir
    COMMAND pipefill-opt --pipefill-compile ${out}.mlir -o ${out}.compiled.mlir
    COMMAND pipefill-opt --pipefill-lower-to-stream=iterations=${ARG_ITERATIONS}
            ${out}.compiled.mlir -o ${out}.stream.mlir
    COMMAND pipefill-translate --to-stream-program ${out}.stream.mlir -o ${out}.pb
    COMMAND pipefill-translate --to-cpp ${out}.stream.mlir -o ${out}.cpp
    DEPENDS ${job} pipefill-translate pipefill-opt
    COMMENT "pipefill: compiling ${job} into ${target}"
    VERBATIM)
  add_executable(${target} ${out}.cpp)
  target_link_libraries(${target} PRIVATE pfrt)
  set_target_properties(${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endfunction()
