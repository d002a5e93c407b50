// The "autotuning" section (DeepSpeed's deepspeed/autotuning/constants.py and config.py: same keys,
// same defaults). ds-autotune reads it to shape its search; an engine whose section carries a
// metric_path or model_info.profile is one of its experiments: it measures itself and ends the
// process (runtime/autotuning_probe.h). docs/autotuning.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ds {

enum class AutotuningMetric { Throughput, Latency, Flops };
enum class AutotuningTuner { GridSearch, Random, ModelBased };

struct AutotuningModelInfo {
  bool profile = false;  // an experiment that writes model_info_path after one forward
  std::optional<int64_t> num_params, hidden_size, num_layers;
};

struct AutotuningConfig {
  bool enabled = false;
  bool fast = true;  // tune the stage and micro-batch only (not the stage's bucket/overlap knobs)
  std::string results_dir = "autotuning_results";
  std::string exps_dir = "autotuning_exps";
  bool overwrite = true;
  int64_t start_profile_step = 3;  // timed: the global steps after this one, up to end_profile_step
  int64_t end_profile_step = 5;
  AutotuningMetric metric = AutotuningMetric::Throughput;
  std::optional<std::string> metric_path;  // set by ds-autotune in each experiment's config
  AutotuningTuner tuner_type = AutotuningTuner::GridSearch;
  int64_t tuner_early_stopping = 5;
  int64_t tuner_num_trials = 50;
  std::map<std::string, std::string> arg_mappings;  // DeepSpeed key -> the program's argument
  std::optional<AutotuningModelInfo> model_info;
  std::optional<std::string> model_info_path;
  int64_t mp_size = 1;
  std::optional<int64_t> max_train_batch_size;
  int64_t min_train_batch_size = 1;
  int64_t max_train_micro_batch_size_per_gpu = 1024;
  int64_t min_train_micro_batch_size_per_gpu = 1;
  int64_t num_tuning_micro_batch_sizes = 3;

  // This engine runs one of ds-autotune's experiments (it ends the process when measured).
  bool is_experiment() const {
    return enabled && (metric_path.has_value() || (model_info && model_info->profile && model_info_path));
  }
};

}  // namespace ds
