# End to end: ds-run starts launcher_probe at 2 ranks on localhost (cmake -P, so the exit code and
# output can both be checked), with the mpirun of the MPI the probe was built against. CASE: ok | fail_rank1 | worst.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(_hf ${WORK_DIR}/absent_hostfile)  # no hostfile: localhost with --num_procs ranks
if(CASE STREQUAL "ok")
  set(_args --num_procs 2 --master_port 29555 ${PROBE})
  set(_want_rc 0)
elseif(CASE STREQUAL "fail_rank1")
  set(_args --num_procs 2 ${PROBE} --fail_rank 1 --code 3)
  set(_want_rc 3)
elseif(CASE STREQUAL "worst")
  # rank 1 exits 5; rank 0 ignores mpirun's SIGTERM and exits 7 a little later. mpirun reports the
  # first failure it saw (5); ds-run the worst, 7, from the wrapper's records. The per-rank logs
  # must hold each rank's line. Open MPI kills the job's processes 1 s + 1 s after the first failure;
  # a loaded machine (CI building beside the tests) can take longer than that to let rank 0 finish,
  # so the test gives it 3 s + 3 s.
  set(_args --num_procs 2 --enable_each_rank_log ${WORK_DIR}/logs --launcher_args "--mca odls_base_sigkill_timeout 3"
            ${PROBE} --codes 7,5 --late_rank 0 --late_ms 300)
  set(_want_rc 7)
elseif(CASE STREQUAL "elastic_restarts")
  # --elastic_training on localhost: rank 1 fails, the job restarts once (--max_restarts 1) on the
  # 2 slots, fails again, and ds-run gives up with the rank's code.
  set(_args --elastic_training --num_procs 2 --max_restarts 1 --elastic_config ${DATA_DIR}/elastic_two.json
            ${PROBE} --fail_rank 1 --code 3)
  set(_want_rc 3)
endif()
execute_process(COMMAND ${DS_RUN} --mpirun ${MPIRUN} ${_args} WORKING_DIRECTORY ${WORK_DIR}
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err TIMEOUT 90)
message("ds-run exit ${_rc}\nstdout:\n${_out}\nstderr:\n${_err}")
if(NOT _rc EQUAL _want_rc)
  message(FATAL_ERROR "expected exit code ${_want_rc}, got ${_rc}")
endif()
if(CASE STREQUAL "ok")
  foreach(_r 0 1)
    if(NOT _out MATCHES "probe rank ${_r} of 2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555")
      message(FATAL_ERROR "rank ${_r}'s line is missing")
    endif()
  endforeach()
elseif(CASE STREQUAL "fail_rank1")
  if(NOT _err MATCHES "rank 1 exited with 3")
    message(FATAL_ERROR "ds-run did not name the failing rank")
  endif()
elseif(CASE STREQUAL "elastic_restarts")
  foreach(_line "elastic: starting 2 rank\\(s\\) on localhost \\(valid data-parallel sizes \\[1, 2\\]; batch 4 = micro 2 x GAS 1 x 2\\)"
                "elastic: the job failed \\(exit code 3\\); restart 1 of 1 from the latest checkpoint"
                "elastic: restarting with 2 rank\\(s\\)" "--max_restarts 1 are used up")
    if(NOT _err MATCHES "${_line}")
      message(FATAL_ERROR "stderr lacks: ${_line}")
    endif()
  endforeach()
elseif(CASE STREQUAL "worst")
  if(NOT _err MATCHES "rank 0 exited with 7; rank 1 exited with 5; mpirun returned 5")
    message(FATAL_ERROR "expected mpirun to return the first failure (5) and both ranks recorded")
  endif()
  foreach(_r 0 1)
    file(GLOB _log ${WORK_DIR}/logs/*_rank${_r}.log)
    if(NOT _log)
      message(FATAL_ERROR "no per-rank log for rank ${_r}")
    endif()
    file(READ ${_log} _text)
    if(NOT _text MATCHES "probe rank ${_r} of 2")
      message(FATAL_ERROR "rank ${_r}'s log lacks its line: ${_text}")
    endif()
  endforeach()
endif()
