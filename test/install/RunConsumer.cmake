# cmake -P driver of the install.consumer test:
#   1. cmake --install BUILD_DIR into a fresh prefix under WORK_DIR
#   2. the prefix holds the tools, libpfrt.a, pfrt.h and the package config
#   3. configure + build test/install/consumer against that prefix only
#      (CMAKE_PREFIX_PATH), which also compiles JOB with the installed tools
#   4. run the consumer; it prints "consumer: ok" when its checks hold
foreach(var BUILD_DIR CONSUMER_SOURCE WORK_DIR JOB GENERATOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "RunConsumer.cmake: -D${var}=... is required")
  endif()
endforeach()

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
run_step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

foreach(f bin/pipefill-compile bin/pipefill-opt bin/pipefill-translate bin/pipefill-run bin/pipefill-sim
          lib/libpfrt.a lib/libpipefill_proto.a include/pipefill/runtime/pfrt.h
          lib/cmake/pipefill/pipefillConfig.cmake lib/cmake/pipefill/pipefillConfigVersion.cmake
          lib/cmake/pipefill/pipefillTargets.cmake)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "the installed tree lacks ${f}")
  endif()
endforeach()

run_step("configuring the consumer" ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${WORK_DIR}/build
         -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${prefix} -DJOB=${JOB}
         -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
string(FIND "${step_output}" "pipefill from ${prefix}/lib/cmake/pipefill" found)
if(found EQUAL -1)
  message(FATAL_ERROR "the consumer did not find pipefill in ${prefix}:\n${step_output}")
endif()
run_step("building the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run_step("running the consumer" ${WORK_DIR}/build/consumer ${WORK_DIR}/build/job.pb)
message("${step_output}")
if(NOT step_output MATCHES "consumer: ok")
  message(FATAL_ERROR "the consumer did not report ok")
endif()
