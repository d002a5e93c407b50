// ds-autotune: DeepSpeed's autotuner (`deepspeed --autotuning tune|run`) for any program that
// trains through ds::initialize. The config's "autotuning" section drives it (docs/autotuning.md):
//
//   ds-autotune -- --num_gpus 2 ds-train --model small --data d.txt --steps 10 --config tune.json
//   ds-run --autotuning tune --num_gpus 2 ds-train ... --config tune.json     (the same, as DeepSpeed)
//
// Everything after `--` is what you would give ds-run; each experiment runs it with its own config
// in place of yours, and the engine ends the experiment once measured (runtime/autotuning_probe.h).
// Results: autotuning_results/{summary.txt, ds_config_optimal.json, cmd_optimal.txt, <exp>/}.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "autotune/autotuner.h"
#include "cli_checks.h"
#include "launcher/child_process.h"
#include "launcher/local_machine.h"
#include "util/blas_core_select.h"
#include "util/error.h"

int main(int argc, char** argv) {
  ds::select_blas_core_or_reexec(argv, "ds-autotune");  // experiments inherit the chosen core
  bool run_after = false;
  ds::autotune::AutotuneOptions opt;
  std::string ds_run = ds::launcher::sibling_tool("ds-run");
  CLI::App app{"ds-autotune [options] -- [ds-run options] <program> [args...] --config ds_config.json\n"
               "Find the fastest ZeRO stage, micro-batch, offload and checkpointing for a program, as DeepSpeed's "
               "autotuner does (the config's \"autotuning\" section; docs/autotuning.md)"};
  app.add_flag("--run", run_after, "after tuning, run the program with the optimal config (deepspeed --autotuning run)");
  app.add_option("--exp_timeout", opt.exp_timeout_s, "seconds one experiment may take (0: no limit)")
      ->capture_default_str()->check(CLI::Range(0.0, 1e7));
  app.add_option("--memory_fraction", opt.memory_fraction,
                 "share of the available RAM an experiment's ranks may plan for")
      ->capture_default_str()->check(CLI::Range(0.05, 1.0));
  app.add_option("--ds_run", ds_run, "the launcher each experiment runs under")->capture_default_str();
  app.prefix_command();
  CLI11_PARSE(app, argc, argv);
  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
  try {
    DS_CHECK(!rest.empty(), ds::Error, "no program given: ds-autotune [options] -- [ds-run options] <program> ...");
    opt.command = ds::autotune::experiment_command(ds_run, rest);
    opt.config_path = opt.command.ds_run[opt.command.config_index].substr(opt.command.config_prefix.size());
    ds::autotune::Autotuner tuner(opt);
    tuner.tune();
    if (!run_after) return 0;
    std::printf("ds-autotune: running %s\n", ds::autotune::shell_line(tuner.optimal_command()).c_str());
    std::fflush(stdout);
    return ds::launcher::run_child(tuner.optimal_command(), {}, ds::launcher::SignalForwarding::kSentToUsOnly)
        .shell_code();
  } catch (const ds::Error& e) {
    std::fprintf(stderr, "ds-autotune: error: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ds-autotune: error: %s\n", e.what());
  }
  return 1;
}
