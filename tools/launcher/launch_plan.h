// From ds-run's options and the facts about this machine to the mpirun options: DeepSpeed's
// runner.py main() order of decisions (hostfile or localhost, filters, --num_nodes/--num_gpus,
// master address), with the machine passed in so tests and --dry-run are deterministic.
#pragma once

#include <string>
#include <vector>

#include "launcher/hostfile.h"
#include "launcher/mpirun_command.h"

namespace ds::launcher {

// ds-run's command line (docs/launcher.md lists each option).
struct LaunchRequest {
  std::string hostfile = kDefaultHostfile;
  bool hostfile_given = false;  // -H named it: a missing file is then an error, not "run locally"
  std::string include;
  std::string exclude;
  int num_nodes = -1;           // -1: not given (DeepSpeed's default)
  int num_gpus = -1;            // --num_gpus / --num_accelerators / --num_procs
  std::string master_addr;      // empty: 127.0.0.1 on one machine, else the first host
  int master_port = 29500;
  std::string launcher = "openmpi";
  std::string launcher_args;
  bool bind_cores_to_rank = false;
  std::string each_rank_log;    // directory; empty: off
  std::string mpirun = "mpirun";
  std::vector<std::string> program;
};

// What the plan depends on besides the request; detect_machine_facts() fills it for real runs.
struct MachineFacts {
  int cores = 1;
  int numa_nodes = 1;
  std::vector<std::string> local_names = {"localhost", "127.0.0.1"};
  bool root = false;
  std::string self_exe = "ds-run";
  std::vector<std::string> environment;  // "NAME=value" entries
  std::vector<EnvVar> deepspeed_env;     // .deepspeed_env lines
  std::string timestamp = "19700101000000";  // per-rank log prefix, DeepSpeed's %Y%m%d%H%M%S
  std::string status_dir = "/tmp/ds-run.XXXXXX";  // replaced by a fresh mkdtemp at launch
};

MachineFacts detect_machine_facts();

struct LaunchPlan {
  MpirunOptions mpirun;
  ActiveResources active;
  std::vector<std::string> warnings;  // printed to stderr, do not stop the launch
};

// Throws ds::Error (NotSupported for other --launcher values) with the DeepSpeed-worded cause.
LaunchPlan plan_launch(const LaunchRequest& request, const MachineFacts& machine);

}  // namespace ds::launcher
