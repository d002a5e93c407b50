// The "autotuning" section: DeepSpeed's defaults (deepspeed/autotuning/constants.py), every key
// read and checked, the experiment marker ds-autotune writes, and the refusals named by key.
#include <gtest/gtest.h>

#include <algorithm>

#include "config_test_util.h"

namespace ds {
namespace {

Config with_autotuning(const std::string& section) {
  return test::load(R"({"train_micro_batch_size_per_gpu": 2, "autotuning": )" + section + "}");
}

TEST(AutotuningConfig, DeepSpeedDefaults) {
  const AutotuningConfig a = with_autotuning("{}").autotuning;
  EXPECT_FALSE(a.enabled);
  EXPECT_TRUE(a.fast);
  EXPECT_EQ(a.results_dir, "autotuning_results");
  EXPECT_EQ(a.exps_dir, "autotuning_exps");
  EXPECT_TRUE(a.overwrite);
  EXPECT_EQ(a.start_profile_step, 3);
  EXPECT_EQ(a.end_profile_step, 5);
  EXPECT_EQ(a.metric, AutotuningMetric::Throughput);
  EXPECT_EQ(a.tuner_type, AutotuningTuner::GridSearch);
  EXPECT_EQ(a.tuner_early_stopping, 5);
  EXPECT_EQ(a.tuner_num_trials, 50);
  EXPECT_EQ(a.mp_size, 1);
  EXPECT_FALSE(a.max_train_batch_size.has_value());
  EXPECT_EQ(a.min_train_batch_size, 1);
  EXPECT_EQ(a.max_train_micro_batch_size_per_gpu, 1024);
  EXPECT_EQ(a.min_train_micro_batch_size_per_gpu, 1);
  EXPECT_EQ(a.num_tuning_micro_batch_sizes, 3);
  EXPECT_FALSE(a.model_info.has_value());
  EXPECT_FALSE(a.is_experiment());
}

TEST(AutotuningConfig, EveryKeyIsRead) {
  const Config c = with_autotuning(R"({"enabled": true, "fast": false, "results_dir": "r", "exps_dir": "e",
      "overwrite": false, "start_profile_step": 2, "end_profile_step": 4, "metric": "FLOPS",
      "tuner_type": "random", "tuner_early_stopping": 3, "tuner_num_trials": 7,
      "arg_mappings": {"train_micro_batch_size_per_gpu": "--micro"}, "mp_size": 2,
      "model_info": {"num_params": 1000, "hidden_size": 64, "num_layers": 2},
      "max_train_batch_size": 64, "min_train_batch_size": 2, "max_train_micro_batch_size_per_gpu": 16,
      "min_train_micro_batch_size_per_gpu": 2, "num_tuning_micro_batch_sizes": 4})");
  const AutotuningConfig& a = c.autotuning;
  // Read, and said to have no effect: ds-autotune profiles the model and takes the TP size from the config.
  EXPECT_EQ(c.warnings.size(), 5u) << (c.warnings.empty() ? "no warning" : c.warnings.front());
  for (const char* key : {"mp_size: 2", "min_train_batch_size: 2", "model_info.num_params: 1000",
                          "model_info.hidden_size: 64", "model_info.num_layers: 2"})
    EXPECT_TRUE(std::any_of(c.warnings.begin(), c.warnings.end(), [&](const std::string& w) {
      return w.rfind(std::string("autotuning.") + key + " has no effect", 0) == 0;
    })) << key;
  EXPECT_TRUE(a.enabled);
  EXPECT_FALSE(a.fast);
  EXPECT_EQ(a.results_dir, "r");
  EXPECT_EQ(a.metric, AutotuningMetric::Flops);  // DeepSpeed's users write "flops" or "FLOPS"
  EXPECT_EQ(a.tuner_type, AutotuningTuner::Random);
  EXPECT_EQ(a.arg_mappings.at("train_micro_batch_size_per_gpu"), "--micro");
  ASSERT_TRUE(a.model_info.has_value());
  EXPECT_EQ(a.model_info->num_params, 1000);
  EXPECT_FALSE(a.model_info->profile);
  EXPECT_EQ(a.max_train_batch_size, 64);
  EXPECT_EQ(a.num_tuning_micro_batch_sizes, 4);
  EXPECT_FALSE(a.is_experiment()) << "an enabled section without metric_path trains normally";
}

TEST(AutotuningConfig, ExperimentsAreMarkedByTheirOutputs) {
  EXPECT_TRUE(with_autotuning(R"({"enabled": true, "metric_path": "/tmp/m.json"})").autotuning.is_experiment());
  EXPECT_TRUE(with_autotuning(R"({"enabled": true, "model_info_path": "/tmp/i.json", "model_info": {"profile": true}})")
                  .autotuning.is_experiment());
  EXPECT_FALSE(with_autotuning(R"({"enabled": false, "metric_path": "/tmp/m.json"})").autotuning.is_experiment());
  EXPECT_FALSE(with_autotuning(R"({"enabled": true, "model_info": {"profile": true}})").autotuning.is_experiment());
}

TEST(AutotuningConfig, BadValuesNameTheKey) {
  auto error = [](const std::string& section) {
    return test::load_error(R"({"train_micro_batch_size_per_gpu": 2, "autotuning": )" + section + "}");
  };
  EXPECT_NE(error(R"({"end_profile_step": 3})").find("autotuning.end_profile_step: 3 is not after "
                                                      "autotuning.start_profile_step 3: no step would be timed"),
            std::string::npos);
  EXPECT_NE(error(R"({"metric": "speed"})").find("autotuning.metric"), std::string::npos);
  EXPECT_NE(error(R"({"results_dir": ""})").find("autotuning.results_dir: cannot be empty"), std::string::npos);
  EXPECT_NE(error(R"({"tuner_num_trials": 0})").find("autotuning.tuner_num_trials"), std::string::npos);
  EXPECT_NE(error(R"({"arg_mappings": {"x": 3}})").find("autotuning.arg_mappings.x"), std::string::npos);
  EXPECT_NE(error(R"({"min_train_micro_batch_size_per_gpu": 8, "max_train_micro_batch_size_per_gpu": 4})")
                .find("autotuning.min_train_micro_batch_size_per_gpu: 8 is above"),
            std::string::npos);
  EXPECT_NE(error(R"({"model_info": {"num_params": -1}})").find("autotuning.model_info.num_params"), std::string::npos);
}

TEST(AutotuningConfig, UnsupportedAndUnknownKeysWarnByName) {
  const Config c = with_autotuning(R"({"tuner_type": "model_based", "tunr_type": "random"})");
  EXPECT_TRUE(test::has_warning(c, "autotuning.tuner_type is parsed but not supported by deepspeed.cpp yet"));
  EXPECT_TRUE(test::has_warning(c, "autotuning.tunr_type: unknown key"));
}

}  // namespace
}  // namespace ds
