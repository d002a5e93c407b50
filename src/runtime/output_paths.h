// Every output path the config names — the monitors' log folders (tensorboard, csv_monitor,
// jsonl_monitor) and flops_profiler.output_file — proved writable at engine init, before anything
// large is built, so a typo or a read-only mount fails in the first second rather than at the first
// log line or at the profile step (issue 22, item 5).
#pragma once

#include "comm/communicator.h"
#include "config/config.h"

namespace ds {

// Rank 0, the only rank that writes these, checks them (creating missing folders, as the writers
// would); every rank then learns the result, so all throw the same ConfigError naming the key, the
// path and the cause.
void check_output_paths(const Config& config, comm::Communicator& comm);

}  // namespace ds
