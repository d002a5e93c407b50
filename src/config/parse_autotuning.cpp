// The "autotuning" section (config/autotuning_config.h): DeepSpeed's keys and defaults, each
// checked and named. Only ds-autotune acts on most of them; see docs/autotuning.md.
#include "config/parse_sections.h"
#include "util/error.h"

namespace ds::config_detail {

namespace {

AutotuningModelInfo read_model_info(SectionReader& top) {
  SectionReader s(top.ctx(), top.raw("model_info"), top.key_path("model_info"), UnknownKeys::Warn);
  AutotuningModelInfo m;
  s.read("profile", m.profile);
  for (auto [key, field] : {std::pair{"num_params", &m.num_params}, std::pair{"hidden_size", &m.hidden_size},
                            std::pair{"num_layers", &m.num_layers}})
    if (s.read(key, *field, kPositive))
      warn_no_effect(s.ctx(), s.key_path(key), std::to_string(**field),
                     "ds-autotune measures the model in its profiling run instead of taking its size from here");
  s.finish();
  return m;
}

}  // namespace

void parse_autotuning(SectionReader& top, Config& cfg) {
  SectionReader s(top.ctx(), top.raw("autotuning"), "autotuning", UnknownKeys::Warn);
  AutotuningConfig& c = cfg.autotuning;
  s.read("enabled", c.enabled);
  s.read("fast", c.fast);
  s.read("results_dir", c.results_dir);
  s.read("exps_dir", c.exps_dir);
  // DeepSpeed asserts both are non-empty (DeepSpeedAutotuningConfig._initialize).
  if (c.results_dir.empty()) throw ConfigError("autotuning.results_dir", "cannot be empty");
  if (c.exps_dir.empty()) throw ConfigError("autotuning.exps_dir", "cannot be empty");
  s.read("overwrite", c.overwrite);
  s.read("start_profile_step", c.start_profile_step, kNonNegative);
  s.read("end_profile_step", c.end_profile_step, kPositive);
  if (c.end_profile_step <= c.start_profile_step)
    throw ConfigError("autotuning.end_profile_step",
                      std::to_string(c.end_profile_step) + " is not after autotuning.start_profile_step " +
                          std::to_string(c.start_profile_step) + ": no step would be timed");
  // DeepSpeed's users write "flops" or "FLOPS"; the experiment's metric file says FLOPS_per_gpu.
  s.read_enum("metric", c.metric,
              {{"throughput", AutotuningMetric::Throughput}, {"latency", AutotuningMetric::Latency},
               {"flops", AutotuningMetric::Flops}},
              /*case_insensitive=*/true);
  s.read("metric_path", c.metric_path);
  s.read_enum("tuner_type", c.tuner_type,
              {{"gridsearch", AutotuningTuner::GridSearch}, {"random", AutotuningTuner::Random},
               {"model_based", AutotuningTuner::ModelBased}});
  if (c.tuner_type == AutotuningTuner::ModelBased)
    warn_unsupported(s.ctx(), "autotuning.tuner_type",
                     "\"model_based\" (DeepSpeed's XGBoost cost model): ds-autotune runs \"gridsearch\" instead");
  s.read("tuner_early_stopping", c.tuner_early_stopping, kPositive);
  s.read("tuner_num_trials", c.tuner_num_trials, kPositive);
  if (const Json* m = s.take("arg_mappings"); m != nullptr && !m->is_null()) {
    if (!m->is_object()) type_error("autotuning.arg_mappings", "an object of DeepSpeed key -> program argument", *m);
    for (const auto& [key, arg] : m->items()) {
      if (!arg.is_string()) type_error("autotuning.arg_mappings." + key, "a string (the program's argument)", arg);
      c.arg_mappings[key] = arg.get<std::string>();
    }
  }
  if (const Json* m = s.raw("model_info"); m != nullptr && !m->is_null()) c.model_info = read_model_info(s);
  s.read("model_info_path", c.model_info_path);
  if (s.read("mp_size", c.mp_size, kPositive) && c.mp_size != 1)
    warn_no_effect(s.ctx(), "autotuning.mp_size", std::to_string(c.mp_size),
                   "the experiments' model-parallel size is the config's tensor_parallel.autotp_size");
  s.read("max_train_batch_size", c.max_train_batch_size, kPositive);
  if (s.read("min_train_batch_size", c.min_train_batch_size, kPositive) && c.min_train_batch_size != 1)
    warn_no_effect(s.ctx(), "autotuning.min_train_batch_size", std::to_string(c.min_train_batch_size),
                   "the micro-batch range starts at min_train_micro_batch_size_per_gpu");
  s.read("max_train_micro_batch_size_per_gpu", c.max_train_micro_batch_size_per_gpu, kPositive);
  s.read("min_train_micro_batch_size_per_gpu", c.min_train_micro_batch_size_per_gpu, kPositive);
  if (c.min_train_micro_batch_size_per_gpu > c.max_train_micro_batch_size_per_gpu)
    throw ConfigError("autotuning.min_train_micro_batch_size_per_gpu",
                      std::to_string(c.min_train_micro_batch_size_per_gpu) +
                          " is above autotuning.max_train_micro_batch_size_per_gpu " +
                          std::to_string(c.max_train_micro_batch_size_per_gpu));
  s.read("num_tuning_micro_batch_sizes", c.num_tuning_micro_batch_sizes, kPositive);
  s.finish();
}

}  // namespace ds::config_detail
