// The per-rank wrapper: mpirun starts `ds-run --rank_shim [--status_dir D] [--rank_log P] --
// program args` as each rank. It sends the rank's stdout and stderr to `<P>rank<r>.log` (DeepSpeed's
// --enable_each_rank_log file name: `<dir>/<YYYYmmddHHMMSS>_rank<r>.log`), runs the program,
// forwards signals to it, records how it ended in `<D>/rank.<r>` for ds-run's worst-code rule
// (exit_status.h), and exits the way the program did. The rank comes from Open MPI's
// OMPI_COMM_WORLD_RANK (PMI_RANK, PMIX_RANK as fallbacks).
#pragma once

#include <string>
#include <vector>

namespace ds::launcher {

struct RankShimOptions {
  std::string status_dir;       // empty: record nothing
  std::string rank_log_prefix;  // empty: output stays on mpirun's forwarded stdout/stderr
  std::vector<std::string> program;
};

// Parses the arguments after `--rank_shim` (throws ds::Error on anything unexpected).
RankShimOptions parse_rank_shim_args(const std::vector<std::string>& args);

// Runs the rank; returns the process exit code for the wrapper (the program's, or 128+signal).
int run_rank_shim(const RankShimOptions& options);

}  // namespace ds::launcher
