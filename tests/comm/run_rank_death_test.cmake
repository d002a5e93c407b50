# Runs `mpirun -np 2 comm_tests --ds-die-test` (rank 1 exits abruptly while rank 0 waits in a
# barrier), with no watchdog timeout set, and checks that the job still ends non-zero within
# ${LIMIT_S} seconds: a dead rank never leaves the others hanging.
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
unset(ENV{DS_COMM_TIMEOUT_S})
string(TIMESTAMP start "%s")
execute_process(
  COMMAND ${MPIEXEC} -np 2 --oversubscribe ${TEST_BIN} --ds-die-test
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${LIMIT_S})
string(TIMESTAMP end "%s")
math(EXPR elapsed "${end} - ${start}")
message(STATUS "exit: ${rc}; ${elapsed} s\n${out}\n${err}")
if(rc STREQUAL "0")
  message(FATAL_ERROR "the job exited 0 although rank 1 died")
endif()
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the surviving rank did not exit within ${LIMIT_S} s (${rc})")
endif()
string(FIND "${out}\n${err}" "barrier returned without rank 1" wrong)
if(NOT wrong EQUAL -1)
  message(FATAL_ERROR "rank 0's barrier completed without rank 1")
endif()
message(STATUS "the job ended (exit ${rc}) ${elapsed} s after rank 1 died")
