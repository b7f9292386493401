# Included by CTest after the gtest discovery: the slowdown measurement runs alone.
if(TEST CompareTest.SlowdownMovesWhenFillRunsUnbounded)
  set_tests_properties(CompareTest.SlowdownMovesWhenFillRunsUnbounded PROPERTIES RUN_SERIAL TRUE)
endif()
