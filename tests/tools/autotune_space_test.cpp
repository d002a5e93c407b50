// ds-autotune's search space without processes: DeepSpeed's micro-batch list and knob grids, the
// stage variants, the concrete base config, and the memory model the pruning trusts (its largest
// micro-batch is the last that fits the budget by the engine's own estimate).
#include <gtest/gtest.h>

#include "autotune/experiment.h"
#include "autotune/tuning_space.h"
#include "util/error.h"

namespace ds::autotune {
namespace {

std::vector<std::string> names(const std::vector<Variant>& vs) {
  std::vector<std::string> out;
  for (const Variant& v : vs) out.push_back(v.name());
  return out;
}

TEST(AutotuneSpace, MicroBatchListIsDeepSpeeds) {
  // Autotuner.get_tuning_micro_batch_size_list, worked by hand: from max/2 in (max - min) / 3
  // strides, dropping sizes whose accumulation steps equal the largest's.
  EXPECT_EQ(tuning_micro_batch_sizes(1, 16, 3, 16), (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(tuning_micro_batch_sizes(1, 16, 3, 64), (std::vector<int64_t>{8, 10, 12, 16}));
  EXPECT_EQ(tuning_micro_batch_sizes(12, 16, 3, 64), (std::vector<int64_t>{12, 16}));  // 13-15: GAS 4 as at 16
  EXPECT_EQ(tuning_micro_batch_sizes(1, 1, 3, 1), (std::vector<int64_t>{1}));
  EXPECT_TRUE(tuning_micro_batch_sizes(4, 2, 3, 8).empty());
  EXPECT_TRUE(tuning_micro_batch_sizes(1, 0, 3, 8).empty());
}

TEST(AutotuneSpace, StagesAsDeepSpeedsAutotunerReadsThem) {
  EXPECT_EQ(requested_stages(Json::object()), (std::vector<int>{0}));
  EXPECT_EQ(requested_stages(Json{{"zero_optimization", {{"stage", "all"}}}}), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(requested_stages(Json{{"zero_optimization", {{"stage", {3, 1, 1}}}}}), (std::vector<int>{1, 3}));
  try {
    requested_stages(Json{{"zero_optimization", {{"stage", 5}}}});
    FAIL() << "stage 5 accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "zero_optimization.stage");
  }
}

TEST(AutotuneSpace, VariantsAddOnlyWhatTheUserLeftOpen) {
  EXPECT_EQ(names(stage_variants(3, Json::object(), true)),
            (std::vector<std::string>{"z3", "z3_ckpt", "z3_offopt", "z3_offopt_ckpt", "z3_offparam", "z3_offparam_ckpt"}));
  EXPECT_EQ(names(stage_variants(0, Json::object(), false)), (std::vector<std::string>{"z0"}));
  const Json offloaded = {{"zero_optimization", {{"offload_optimizer", {{"device", "cpu"}}}}},
                          {"activation_checkpointing", {{"number_checkpoints", 2}}}};
  EXPECT_EQ(names(stage_variants(2, offloaded, true)), (std::vector<std::string>{"z2"}));
  EXPECT_EQ(names(stage_variants(3, offloaded, true)), (std::vector<std::string>{"z3", "z3_offparam"}));
  Json c = Json::object();
  Variant{3, true, true, true}.apply(c);
  EXPECT_EQ(c["zero_optimization"]["stage"], 3);
  EXPECT_EQ(c["zero_optimization"]["offload_param"]["device"], "cpu");
  EXPECT_EQ(c["zero_optimization"]["offload_optimizer"]["device"], "cpu");
  EXPECT_TRUE(c.contains("activation_checkpointing"));
}

TEST(AutotuneSpace, BaseConfigIsConcrete) {
  const Json user = {{"train_micro_batch_size_per_gpu", {1, 2, 4}},
                     {"gradient_accumulation_steps", "auto"},
                     {"optimizer", {{"type", "AdamW"}, {"params", {{"betas", {0.9, 0.95}}}}}},
                     {"zero_optimization", {{"stage", "all"}, {"reduce_bucket_size", {5e7, 5e8}}}},
                     {"autotuning", {{"enabled", true}}}};
  const Json b = base_config(user);
  EXPECT_FALSE(b.contains("autotuning"));
  EXPECT_FALSE(b.contains("train_micro_batch_size_per_gpu"));
  EXPECT_FALSE(b.contains("gradient_accumulation_steps"));
  EXPECT_FALSE(b["zero_optimization"].contains("stage"));
  EXPECT_EQ(b["zero_optimization"]["reduce_bucket_size"], 5e7);
  EXPECT_EQ(b["optimizer"]["params"]["betas"], Json({0.9, 0.95})) << "only ZeRO's lists are tuning lists";
  const Json e = experiment_config(b, Variant{1}, 4, 3, 2);
  EXPECT_EQ(e["train_batch_size"], 24);
  EXPECT_EQ(e["zero_optimization"]["stage"], 1);
}

TEST(AutotuneSpace, KnobGridsAreDeepSpeedsWithTheUsersValues) {
  EXPECT_EQ(zero_knob_grid(0, Json::object()).size(), 1u);
  EXPECT_EQ(zero_knob_grid(1, Json::object()).size(), 9u);
  EXPECT_EQ(zero_knob_grid(2, Json::object()).size(), 72u);
  EXPECT_EQ(zero_knob_grid(3, Json::object()).size(), 144u);
  // A value fixes its knob; a list replaces its range; a list of an unknown key adds a dimension.
  const auto g = zero_knob_grid(2, Json{{"overlap_comm", true}, {"reduce_bucket_size", {1e6}}, {"sub_group_size", {1e8, 1e9}}});
  EXPECT_EQ(g.size(), 2u * 3 * 2 * 2);
  for (const Json& p : g) {
    EXPECT_EQ(p["overlap_comm"], true);
    EXPECT_EQ(p["reduce_bucket_size"], 1e6);
  }
  EXPECT_EQ(knob_name(Json{{"overlap_comm", true}, {"reduce_bucket_size", 5e8}}), "oc1_rbs5e+08");
}

TEST(AutotuneSpace, LargestMicroBatchIsTheLastThatFits) {
  ModelProfile p;
  p.param_numels = {4000000, 1000000, 1000000, 1000};
  p.world_size = p.data_parallel_size = 2;
  p.activation_bytes = 3000000;  // per micro-batch of 1
  MemoryModel m;
  m.profile = &p;
  m.overhead = 50000000;
  const Json base = {{"optimizer", {{"type", "AdamW"}}}};
  const Json z0 = experiment_config(base, Variant{0}, 1, 1, 2), z1 = experiment_config(base, Variant{1}, 1, 1, 2);
  EXPECT_LT(m.states(z1), m.states(z0)) << "stage 1 partitions the Adam moments";
  m.budget = m.need(z0, 10, false) + 1000;
  EXPECT_EQ(m.max_micro(z0, false, 1024), 10);
  EXPECT_GT(m.max_micro(z1, false, 1024), 10);
  EXPECT_EQ(m.max_micro(z0, false, 4), 4) << "capped";
  m.checkpointed_activation_bytes = 1000000;
  EXPECT_GT(m.max_micro(z0, true, 1024), 25) << "a third of the activations per sample";
  m.budget = m.states(z0) + m.overhead - 1;
  EXPECT_EQ(m.max_micro(z0, false, 1024), 0);
}

TEST(AutotuneSpace, StageThreePlansForWhatAStepGathers) {
  ModelProfile p;
  p.param_numels = {4000000, 1000000, 1000000, 1000};  // the 1000 persists (stage3_param_persistence_threshold)
  p.world_size = p.data_parallel_size = 2;
  MemoryModel m;
  m.profile = &p;
  const Json base = {{"optimizer", {{"type", "AdamW"}}}};
  const Json z3 = experiment_config(base, Variant{3}, 1, 1, 2);
  Json z3_near = z3;
  z3_near["zero_optimization"]["stage3_max_reuse_distance"] = 0;
  // DeepSpeed's default distance keeps the whole fp32 model (less what persists) gathered from
  // forward to backward; at 0 one tensor at a time (the profile has no layers): the largest.
  EXPECT_EQ(m.states(z3) - m.states(z3_near), uint64_t(6000000 - 4000000) * 4);
}

TEST(AutotuneSpace, ProfileFieldsAreNamedWhenMissing) {
  try {
    read_model_profile(Json{{"num_params", 5}}, "model_info.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model_info.json: no \"trainable_num_params\""), std::string::npos);
  }
}

// autotuning.arg_mappings as DeepSpeed's scheduler applies them: the experiment's value (found at any
// depth, "auto" skipped) replaces the argument's value, or is appended with it.
TEST(AutotuneSpace, ArgMappingsPassTheExperimentsValues) {
  const std::vector<std::string> argv{"ds-run", "train.py", "--per_device_train_batch_size", "8", "--config", "c.json"};
  const std::map<std::string, std::string> mappings{{"train_micro_batch_size_per_gpu", "--per_device_train_batch_size"},
                                                    {"gradient_accumulation_steps", "--gradient_accumulation_steps"},
                                                    {"stage", "--zero_stage"},
                                                    {"train_batch_size", "--global_batch"}};
  const Json config = Json::parse(R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
                                      "train_batch_size": "auto", "zero_optimization": {"stage": 3}})");
  EXPECT_EQ(with_arg_mappings(argv, mappings, config),
            (std::vector<std::string>{"ds-run", "train.py", "--per_device_train_batch_size", "4", "--config", "c.json",
                                      "--gradient_accumulation_steps", "2", "--zero_stage", "3"}));
  EXPECT_EQ(with_arg_mappings(argv, {}, config), argv);
}

}  // namespace
}  // namespace ds::autotune
