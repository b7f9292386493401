# Runs EXE with ARGS (a ;-list) in WORKDIR and checks its exit status (EXPECT_RC: zero | nonzero)
# and that its combined output matches REGEX.
execute_process(COMMAND ${EXE} ${ARGS}
  WORKING_DIRECTORY ${WORKDIR}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(EXPECT_RC STREQUAL "zero" AND NOT rc EQUAL 0)
  message(FATAL_ERROR "expected exit 0, got ${rc}:\n${all}")
endif()
if(EXPECT_RC STREQUAL "nonzero" AND rc EQUAL 0)
  message(FATAL_ERROR "expected a non-zero exit, got 0:\n${all}")
endif()
if(NOT all MATCHES "${REGEX}")
  message(FATAL_ERROR "output does not match '${REGEX}':\n${all}")
endif()
message(STATUS "ok (exit ${rc}): ${all}")
