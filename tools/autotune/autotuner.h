// ds-autotune's search (DeepSpeed's Autotuner, on our engine): profile the model once, keep the
// ZeRO stage variants and micro-batch sizes that fit this machine's RAM by the engine's estimate,
// time each survivor as a real job, optionally grid the stage's knobs (fast: false), and write
// DeepSpeed's autotuning_results/ (ds_config_optimal.json, cmd_optimal.txt, summary.txt, one
// folder per experiment). docs/autotuning.md.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "autotune/experiment.h"
#include "autotune/tuning_space.h"
#include "config/config.h"

namespace ds::autotune {

struct AutotuneOptions {
  std::string config_path;            // the user's config, with its "autotuning" section
  ExperimentCommand command;          // ds-run ... <program> ... --config <replaced>
  double exp_timeout_s = 1800;        // per experiment (0: none)
  double memory_fraction = 0.9;       // of the available RAM a rank's experiment may plan for
};

// One experiment and what came of it.
struct Record {
  std::string name, space;
  Json config;
  int stage = 0;
  int64_t micro = 0, gas = 0;
  uint64_t need_bytes = 0;  // the estimate it was planned with
  bool ok = false;
  double metric = 0;        // the config's metric (ok only)
  Json metrics;             // the whole metric file
  std::string why;          // why it failed
  double seconds = 0;
  std::string result_dir;
};

class Autotuner {
 public:
  // Reads the user's config (its autotuning section must be enabled) and prepares the folders.
  explicit Autotuner(AutotuneOptions options);
  // Runs the search and writes the results. Returns the path of ds_config_optimal.json; throws
  // ds::Error when nothing could run (naming what the smallest candidate needs, or the failure).
  std::string tune();
  // The optimal command line (after tune()).
  const std::vector<std::string>& optimal_command() const { return optimal_cmd_; }

 private:
  ModelProfile profile(const Json& config, const std::string& name);
  Record run(const std::string& name, const std::string& space, const Json& config, int stage, int64_t micro,
             int64_t gas, uint64_t need);
  void tune_stage(int stage, int64_t& prev_max_micro);
  void tune_knobs(int stage);
  const Record* best(const std::string& space = "") const;
  bool better(double a, double b) const;
  std::string metric_key() const;
  std::string metric_unit() const;
  void write_results();

  AutotuneOptions opt_;
  Json user_;
  Json base_;
  AutotuningConfig at_;
  ModelProfile profile_;
  MemoryModel memory_;
  std::vector<Record> records_;
  std::vector<std::string> skipped_;  // spaces not run, and why
  std::optional<std::pair<uint64_t, std::string>> smallest_;  // for "nothing fits": bytes, candidate
  std::vector<std::string> optimal_cmd_;
  double started_ = 0;
};

}  // namespace ds::autotune
