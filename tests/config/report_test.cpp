// The resolved-value report (ds-report --config) and DeepSpeed's startup configuration block.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "config_test_util.h"

namespace ds {
namespace {

const char* kConfig = R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 4,
  "gradient_clipping": 1.0, "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"}, "mystery": 1})";

TEST(Report, EveryKeyWithItsSource) {
  const Config c = test::load(kConfig, 2);
  EXPECT_EQ(test::source_of(c, "gradient_clipping"), "file");
  EXPECT_EQ(test::source_of(c, "train_batch_size"), "auto");
  EXPECT_EQ(test::value_of(c, "train_batch_size"), "8");
  EXPECT_EQ(test::source_of(c, "gradient_accumulation_steps"), "derived");
  EXPECT_EQ(test::source_of(c, "zero_optimization.reduce_bucket_size"), "auto");
  EXPECT_EQ(test::source_of(c, "zero_optimization.sub_group_size"), "default");
  // Sorted by path, each path once, and every section is covered.
  for (size_t i = 1; i < c.resolved.size(); ++i) EXPECT_LT(c.resolved[i - 1].path, c.resolved[i].path);
  for (const char* prefix : {"fp16.", "bf16.", "data_types.", "zero_optimization.offload_param.",
                             "zero_optimization.offload_optimizer.", "aio.", "activation_checkpointing.",
                             "flops_profiler.", "tensorboard.", "csv_monitor.", "wandb.", "comet.", "checkpoint.",
                             "checkpoint.parallel_write."}) {
    const bool found = std::any_of(c.resolved.begin(), c.resolved.end(),
                                   [&](const ResolvedValue& v) { return v.path.rfind(prefix, 0) == 0; });
    EXPECT_TRUE(found) << prefix;
  }
  EXPECT_GT(c.resolved.size(), 100u);
}

TEST(Report, HumanRendering) {
  const Config c = test::load(kConfig, 2);
  const std::string r = render_config_report(c);
  EXPECT_NE(r.find("world size 2"), std::string::npos);
  EXPECT_NE(r.find("  gradient_clipping ...."), std::string::npos);
  EXPECT_NE(r.find(" 1.0  (file)\n"), std::string::npos);
  EXPECT_NE(r.find(" 8  (auto)\n"), std::string::npos);
  EXPECT_NE(r.find(" 1  (derived)\n"), std::string::npos);
  EXPECT_NE(r.find(" 500000000  (default)\n"), std::string::npos);
  EXPECT_NE(r.find("warnings: 2\n  mystery: unknown key; ignored\n  \"auto\" values are filled in"), std::string::npos);
  EXPECT_LT(r.find("  aio.block_size"), r.find("  zero_optimization.stage"));
}

TEST(Report, JsonRendering) {
  const Config c = test::load(kConfig, 2);
  const auto j = nlohmann::json::parse(render_config_report_json(c));
  EXPECT_EQ(j["config"]["gradient_clipping"]["value"], 1.0);
  EXPECT_EQ(j["config"]["gradient_clipping"]["source"], "file");
  EXPECT_EQ(j["config"]["train_batch_size"]["source"], "auto");
  EXPECT_EQ(j["config"]["gradient_accumulation_steps"]["source"], "derived");
  EXPECT_EQ(j["config"]["zero_optimization.offload_param.device"]["value"], "none");
  EXPECT_TRUE(j["config"]["steps_per_print"]["value"].is_null());
  ASSERT_EQ(j["warnings"].size(), 2u);  // the unknown key, and reduce_bucket_size's "auto"
  EXPECT_EQ(j["config"].size(), c.resolved.size());
}

TEST(Report, EngineConfigurationBlock) {
  const Config c = test::load(R"({"train_batch_size": 8, "gradient_clipping": 1.0})");
  const std::string r = render_engine_configuration(c);
  EXPECT_EQ(r.rfind("DeepSpeedEngine configuration:\n", 0), 0u);
  // dots fill to column 29: "gradient_clipping" has 17 characters → 12 dots.
  EXPECT_NE(r.find("\n  gradient_clipping ............ 1.0\n"), std::string::npos) << r;
  // longer keys get no dots, as Python's "." * negative.
  EXPECT_NE(r.find("\n  zero_optimization.reduce_bucket_size  500000000\n"), std::string::npos);
  EXPECT_NE(r.find("  json = {\n    \"gradient_clipping\": 1.0,\n    \"train_batch_size\": 8\n}\n"), std::string::npos) << r;
}

}  // namespace
}  // namespace ds
