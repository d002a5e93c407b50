# Runs `mpirun -np 2 comm_tests --ds-stall-test` with DS_COMM_TIMEOUT_S=${TIMEOUT_S} and checks that
# the job ends non-zero, within ${LIMIT_S} seconds, with the watchdog's diagnostic in its output.
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
set(ENV{DS_COMM_TIMEOUT_S} ${TIMEOUT_S})
string(TIMESTAMP start "%s")
execute_process(
  COMMAND ${MPIEXEC} -np 2 --oversubscribe ${TEST_BIN} --ds-stall-test
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${LIMIT_S})
string(TIMESTAMP end "%s")
math(EXPR elapsed "${end} - ${start}")
set(all "${out}\n${err}")
message(STATUS "exit: ${rc}; ${elapsed} s\n${all}")
if(rc STREQUAL "0")
  message(FATAL_ERROR "the stalled job exited 0: the watchdog did not abort it")
endif()
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the stalled job did not exit by itself within ${LIMIT_S} s (${rc})")
endif()
foreach(needle "comm watchdog: collective #" "barrier" "tag=stall_test_barrier" "DS_COMM_TIMEOUT_S=${TIMEOUT_S}"
               "Last collectives on this rank" "calling MPI_Abort")
  string(FIND "${all}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the watchdog's diagnostic lacks \"${needle}\"")
  endif()
endforeach()
message(STATUS "watchdog aborted the stalled job after ${elapsed} s (timeout ${TIMEOUT_S} s)")
