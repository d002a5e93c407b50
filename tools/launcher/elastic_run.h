// ds-run --elastic_training: DeepSpeed's elastic training over mpirun. The job starts on the
// largest world size its "elasticity" section allows on the hosts alive; when it fails (a host or
// link lost) it restarts on the hosts still alive, and when a host comes back while it runs it is
// stopped at a step boundary (the preemption path: every rank saves) and restarted on more. Each
// start resumes from the program's latest checkpoint with the same global batch, so the loss curve
// goes on (docs/elasticity.md).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "launcher/launch_plan.h"

namespace ds::launcher {

struct ElasticOptions {
  std::string config_path;    // the DeepSpeed config with the elasticity section
  int max_restarts = 3;       // restarts after failures (scaling up does not count)
  double probe_interval_s = 10;
  int min_nodes = -1;         // --min_elastic_nodes / --max_elastic_nodes (<= 0: no bound)
  int max_nodes = -1;
};

struct LaunchOutcome {
  int code = 0;         // ds-run's exit code for this launch
  int user_signal = 0;  // a SIGTERM/SIGINT/... sent to ds-run while it ran (0: none)
};

using LaunchFn = std::function<LaunchOutcome(LaunchPlan&)>;

// The DeepSpeed config named in the program's arguments (--deepspeed_config, --ds_config or
// --config, with a space or '='); "" when there is none.
std::string find_config_argument(const std::vector<std::string>& program);

// Runs the elastic loop; returns ds-run's exit code. Throws ds::Error on a config without an
// enabled elasticity section or when no valid world size fits the hosts alive at the start.
int run_elastic(const LaunchRequest& request, const MachineFacts& machine, const ElasticOptions& options,
                const LaunchFn& launch);

}  // namespace ds::launcher
