# ctest gpu_nccl_build: configure the project with -DDS_WITH_NCCL=ON in its own folder and build only
# nccl_smoke (ds_util, ds_config, ds_comm with the NCCL backend, ds_pinned). Prints "SKIPPED: ..."
# (the test's SKIP_REGULAR_EXPRESSION) when nccl.h or cuda_runtime.h is not installed.
set(roots "$ENV{NCCL_HOME}" "$ENV{CUDA_HOME}" /usr/local/cuda /usr)
set(nccl_h "")
set(cuda_h "")
foreach(root IN LISTS roots)
  if(root AND NOT nccl_h AND EXISTS "${root}/include/nccl.h")
    set(nccl_h "${root}/include/nccl.h")
  endif()
  if(root AND NOT cuda_h AND EXISTS "${root}/include/cuda_runtime.h")
    set(cuda_h "${root}/include/cuda_runtime.h")
  endif()
endforeach()
if(NOT nccl_h OR NOT cuda_h)
  message("SKIPPED: no CUDA toolkit with NCCL here (looked for include/nccl.h and include/cuda_runtime.h under "
          "NCCL_HOME, CUDA_HOME, /usr/local/cuda, /usr); the DS_WITH_NCCL build is checked where they are installed")
  return()
endif()

cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${DS_SOURCE_DIR} -B ${DS_CHECK_DIR} -G ${DS_GENERATOR} -DCMAKE_BUILD_TYPE=Release
          -DCMAKE_CXX_COMPILER=${DS_CXX_COMPILER} -DTorch_DIR=${DS_TORCH_DIR} -DDS_WITH_NCCL=ON
          -DDS_BUILD_BENCHMARKS=OFF -DDS_BUILD_EXAMPLES=OFF
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring ${DS_CHECK_DIR} with -DDS_WITH_NCCL=ON failed:\n${out}")
endif()
string(REGEX MATCH "DS_WITH_NCCL: [^\n]*" found "${out}")
message(STATUS "${found}")
execute_process(COMMAND ${CMAKE_COMMAND} --build ${DS_CHECK_DIR} --target nccl_smoke -j ${cores}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the NCCL communicator and pinned buffers (-DDS_WITH_NCCL=ON) failed:\n${out}")
endif()
execute_process(COMMAND ${DS_CHECK_DIR}/tests/gpu/nccl_smoke RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nccl_smoke (link check, no GPU needed) failed (${rc}):\n${out}")
endif()
message(STATUS "${out}")
