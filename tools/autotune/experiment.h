// One ds-autotune experiment as a process: `ds-run <launcher args> <program> <args>` with the
// experiment's config in place of the user's, its output in the experiment's folder, a time
// limit, and the metric file the engine's probe writes read back (runtime/autotuning_probe.h).
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ds::autotune {

struct ExperimentCommand {
  std::vector<std::string> ds_run;  // ds-run and everything after it but the config's path
  size_t config_index = 0;          // the argument that holds the config path (whole, or "--flag=path")
  std::string config_prefix;        // "--config=" when given with '=', else ""
};

// Finds the program's --deepspeed_config / --ds_config / --config in `args` (the ds-run arguments).
// Throws ds::Error when there is none.
ExperimentCommand experiment_command(const std::string& ds_run, const std::vector<std::string>& args);
// The command line with `config_path` as the config.
std::vector<std::string> with_config(const ExperimentCommand& c, const std::string& config_path);
// autotuning.arg_mappings (DeepSpeed's scheduler): for each DeepSpeed key -> program argument, the
// experiment's value of that key (found at any depth of `config`, not "auto") replaces the value after
// the argument in `argv`, or is appended with it; so a program that takes its batch sizes as arguments
// (a Hugging Face script whose config says "auto") runs each experiment with the tuned ones.
std::vector<std::string> with_arg_mappings(std::vector<std::string> argv,
                                           const std::map<std::string, std::string>& mappings,
                                           const nlohmann::json& config);
std::string shell_line(const std::vector<std::string>& argv);  // quoted where needed

struct RunResult {
  int exit_code = 0;        // the shell's convention (128 + signal when killed)
  bool timed_out = false;
  bool interrupted = false;  // ds-autotune itself got SIGINT/SIGTERM
  double seconds = 0;
};

// Runs argv in its own process group with stdout/stderr into the two files; after `timeout_s`
// (0: none) or on SIGINT/SIGTERM to us, the group gets SIGTERM, then SIGKILL 15 s later.
RunResult run_logged(const std::vector<std::string>& argv, const std::string& stdout_path,
                     const std::string& stderr_path, double timeout_s);

// Installs the SIGINT/SIGTERM handlers run_logged polls (call once, before the first run).
void install_interrupt_handlers();
bool interrupted();

// The last `n` non-empty lines of a file ("" if unreadable).
std::string tail_lines(const std::string& path, int n);

}  // namespace ds::autotune
