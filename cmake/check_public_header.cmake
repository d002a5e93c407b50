# The public-header check (ctest `public_header`): include/deepspeed/deepspeed.h reaches, through
# quoted includes, only the headers of the API (what a user calls, and the Config it takes), listed
# below. An engine part's header (model states, optimizer, ledger, ...) showing up here means the
# engine leaked its internals again: forward-declare the type and include the header in the .cpp.
#   cmake -DDS_SOURCE_DIR=<repo> -P cmake/check_public_header.cmake
cmake_minimum_required(VERSION 3.20)
if(NOT DS_SOURCE_DIR)
  get_filename_component(DS_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()

set(allowed
  deepspeed/deepspeed.h
  checkpoint/load_options.h
  comm/collective_log.h comm/communicator.h comm/make_communicator.h comm/mpi_communicator.h comm/types.h
  comm/work.h
  config/activation_checkpointing_config.h config/aio_config.h config/autotuning_config.h config/batch_config.h config/checkpoint_config.h
  config/config.h config/flops_profiler_config.h config/loader.h config/monitor_config.h
  config/optimizer_config.h config/precision_config.h config/scheduler_config.h config/training_schedules_config.h
  config/zero_config.h
  nn/layer_list.h nn/placeholder.h
  parallel/layer_spec.h parallel/pipe_module.h parallel/process_topology.h parallel/topology.h parallel/topology_sizes.h
  runtime/curriculum_scheduler.h runtime/engine.h runtime/param_group.h runtime/param_groups.h runtime/pipeline_engine.h runtime/step_counters.h
  runtime/stop_request.h runtime/world.h
  util/stop_signal.h
  zero/gathered_parameters.h)

# Breadth-first over `#include "a/b.h"`, resolved against include/ and src/; `via` keeps one chain.
set(queue deepspeed/deepspeed.h)
set(seen deepspeed/deepspeed.h)
set(problems "")
while(queue)
  list(POP_FRONT queue header)
  set(path "${DS_SOURCE_DIR}/include/${header}")
  if(NOT EXISTS "${path}")
    set(path "${DS_SOURCE_DIR}/src/${header}")
  endif()
  if(NOT EXISTS "${path}")
    continue()  # a system header spelled with quotes
  endif()
  file(STRINGS "${path}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "#[ \t]*include[ \t]*\"([^\"]+)\"")
      continue()
    endif()
    set(child "${CMAKE_MATCH_1}")
    if(child IN_LIST seen)
      continue()
    endif()
    list(APPEND seen "${child}")
    list(APPEND queue "${child}")
    set(via_${child} "${header}")
    if(NOT child IN_LIST allowed AND (EXISTS "${DS_SOURCE_DIR}/src/${child}" OR EXISTS "${DS_SOURCE_DIR}/include/${child}"))
      set(chain "${child}")
      set(at "${header}")
      while(at)
        string(PREPEND chain "${at} → ")
        set(at "${via_${at}}")
      endwhile()
      string(APPEND problems "  ${chain}\n")
    endif()
  endforeach()
endwhile()

if(problems)
  message(FATAL_ERROR "public_header: deepspeed/deepspeed.h reaches internal headers (forward-declare what the "
                      "API names and include these in the .cpp instead, or add a deliberate API header to "
                      "cmake/check_public_header.cmake):\n${problems}")
endif()
list(LENGTH seen count)
message(STATUS "public_header: deepspeed/deepspeed.h reaches ${count} headers, all of them API")
