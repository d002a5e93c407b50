// The output-path check at engine init (see output_paths.h).
#include "runtime/output_paths.h"

#include <string>
#include <utility>
#include <vector>

#include "comm/agreement.h"
#include "profiling/monitor.h"
#include "util/error.h"
#include "util/writable_path.h"

namespace ds {
namespace {

// The first unwritable output of `c` as {key, message}; {"", ""} when all are writable.
std::pair<std::string, std::string> first_problem(const Config& c) {
  struct Dir {
    bool enabled;
    const char* key;
    std::string dir;
  };
  const std::vector<Dir> dirs = {
      {c.tensorboard.enabled, "tensorboard.output_path", monitor_log_dir(c.tensorboard.output_path, c.tensorboard.job_name)},
      {c.csv_monitor.enabled, "csv_monitor.output_path", monitor_log_dir(c.csv_monitor.output_path, c.csv_monitor.job_name)},
      {c.jsonl_monitor.enabled, "jsonl_monitor.output_path", monitor_log_dir(c.jsonl_monitor.output_path, c.jsonl_monitor.job_name)},
  };
  for (const Dir& d : dirs) {
    if (!d.enabled) continue;
    if (std::string why = writable_dir_problem(d.dir); !why.empty())
      return {d.key, "the log folder \"" + d.dir + "\" is not writable: " + why +
                         " (point output_path at a writable folder)"};
  }
  const auto& out = c.flops_profiler.output_file;
  if (c.flops_profiler.enabled && out && !out->empty()) {
    if (std::string why = writable_file_problem(*out); !why.empty())
      return {"flops_profiler.output_file", "\"" + *out + "\" is not writable: " + why +
                                                " (point output_file at a writable location, or remove it to print to stdout)"};
  }
  return {};
}

}  // namespace

void check_output_paths(const Config& config, comm::Communicator& comm) {
  std::pair<std::string, std::string> problem;
  if (comm.rank() == 0) problem = first_problem(config);
  if (comm.size() > 1) {
    // Rank 0's verdict reaches every rank, so no rank walks on into collectives alone.
    const std::string text = comm::broadcast_text(
        comm, problem.first.empty() ? "" : problem.first + '\n' + problem.second, 0, "check_output_paths");
    const size_t nl = text.find('\n');
    problem = nl == std::string::npos ? std::pair<std::string, std::string>{} : std::pair{text.substr(0, nl), text.substr(nl + 1)};
  }
  if (!problem.first.empty()) throw ConfigError(problem.first, problem.second);
}

}  // namespace ds
