// The Open MPI `mpirun` command line for a launch: plain data in, argv out, so that `ds-run
// --dry-run` prints exactly what `ds-run` runs and tests can compare it as text.
//
// Shape (one app context when every host uses slots 0..k-1):
//   [OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1] mpirun --bind-to none [--oversubscribe]
//     [launcher args] -np N -H h0:k0,h1:k1 -x MASTER_ADDR=a -x MASTER_PORT=p [-x DS_BIND_CORES_TO_RANK=1]
//     [-x NAME ...] [-x NAME=VALUE ...] [<ds-run> --rank_shim ... --] program args...
// When --include/--exclude picked other slots (worker-1:0,2), each host becomes its own app context
// (`-np k -H host:k ... -x CUDA_VISIBLE_DEVICES=0,2 program : -np ...`), because that is the only
// way mpirun sets a variable per host; DeepSpeed's launch.py sets the same variable per node.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "launcher/resource_filter.h"

namespace ds::launcher {

using EnvVar = std::pair<std::string, std::string>;

struct MpirunOptions {
  ActiveResources resources;          // hosts and slots, in rank order
  std::vector<std::string> program;   // the rank's program and its arguments
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool bind_cores_to_rank = false;    // exports DS_BIND_CORES_TO_RANK=1 (the engine binds)
  std::vector<std::string> forward_names;  // `-x NAME`: value taken from mpirun's environment
  std::vector<EnvVar> forward_values;      // `-x NAME=VALUE` (.deepspeed_env lines)
  std::vector<std::string> launcher_args;  // --launcher_args, split, placed before -np
  std::string mpirun = "mpirun";
  bool as_root = false;               // adds Open MPI's two run-as-root variables
  int local_cores = 1;                // cores this process may use; more local ranks → --oversubscribe
  std::vector<std::string> local_names = {"localhost", "127.0.0.1"};  // names meaning this machine
  // The per-rank wrapper (ds-run itself in --rank_shim mode); empty: ranks run `program` directly.
  std::string shim;
  std::string status_dir;             // where the shim records each rank's exit status
  std::string rank_log_prefix;        // "<dir>/<timestamp>_": rank r writes <prefix>rank<r>.log
};

struct MpirunCommand {
  std::vector<EnvVar> env;          // set in mpirun's environment (printed as a VAR=value prefix)
  std::vector<std::string> argv;    // argv[0] is mpirun
};

// Throws ds::Error when there is no rank to start or no program.
MpirunCommand build_mpirun_command(const MpirunOptions& options);

// One shell line: env prefix, then argv, each word quoted for a POSIX shell where needed.
std::string format_command(const MpirunCommand& command);

// Quotes one word for a POSIX shell ('...' with embedded quotes escaped) unless it is plain.
std::string shell_quote(const std::string& word);

// Splits --launcher_args like a shell would for simple cases: whitespace, '...' and "..." quoting.
std::vector<std::string> split_launcher_args(const std::string& text);

bool is_local_host(const std::string& host, const std::vector<std::string>& local_names);

}  // namespace ds::launcher
