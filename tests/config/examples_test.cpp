// Every shipped example config loads cleanly (no error, no warning) at world sizes 1, 2 and 4.
#include <gtest/gtest.h>

#include <cstdlib>

#include <filesystem>
#include <vector>

#include "config_test_util.h"

namespace ds {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> example_configs() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(DS_SOURCE_DIR) / "examples" / "configs")) {
    if (e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Examples, AllLoadWithoutWarnings) {
  const auto files = example_configs();
  ASSERT_GE(files.size(), 10u);
  for (const auto& f : files) {
    // lora_opt.json is the seed's one-GPU config (8 = micro 2 x GAS 4 x 1): at world 4 there is no
    // whole micro-batch per rank, and DeepSpeed refuses it too.
    // autotp.json, autotp_vocab_parallel.json, ulysses.json, pipeline.json and onebit_lamb_pipeline.json
    // need a tensor- / sequence-parallel group or a pipeline of 2.
    const bool group_of_two = f.filename() == "autotp.json" || f.filename() == "autotp_vocab_parallel.json" ||
                              f.filename() == "ulysses.json" || f.filename() == "pipeline.json" ||
                              f.filename() == "onebit_lamb_pipeline.json";
    const std::vector<int> worlds = f.filename() == "lora_opt.json" ? std::vector<int>{1, 2}
                                    : group_of_two                  ? std::vector<int>{2, 4}
                                                                    : std::vector<int>{1, 2, 4};
    // elastic.json: as under ds-run --elastic_training, which tells the ranks what it sized the job by.
    if (f.filename() == "elastic.json")
      setenv("DEEPSPEED_ELASTICITY_CONFIG", R"({"max_train_batch_size": 96, "micro_batch_sizes": [2, 4, 6], "version": 0.1})", 1);
    for (int world : worlds) {
      try {
        const Config c = load_config_file(f.string(), world);
        EXPECT_TRUE(c.warnings.empty()) << f << ": " << (c.warnings.empty() ? "" : c.warnings.front());
        EXPECT_EQ(c.train_batch_size, c.train_micro_batch_size_per_gpu * c.gradient_accumulation_steps * world /
                                           c.parallel_sizes.autotp_size / c.parallel_sizes.sequence_parallel_size /
                                           c.parallel_sizes.pipeline_stages);
      } catch (const Error& e) {
        ADD_FAILURE() << f << " at world size " << world << ": " << e.what();
      }
    }
    unsetenv("DEEPSPEED_ELASTICITY_CONFIG");
  }
}

TEST(Examples, FeatureExamplesSetWhatTheirNameSays) {
  const fs::path dir = fs::path(DS_SOURCE_DIR) / "examples" / "configs";
  auto load = [&](const char* name) { return load_config_file((dir / name).string(), 2); };
  EXPECT_EQ(load("zero1.json").zero_optimization.stage, 1);
  EXPECT_EQ(load("onebit_adam.json").optimizer->type, OptimizerType::OneBitAdam);
  EXPECT_EQ(load("onebit_lamb_pipeline.json").optimizer->type, OptimizerType::OneBitLamb);
  EXPECT_EQ(load("onebit_lamb_pipeline.json").parallel_sizes.pipeline_stages, 2);
  EXPECT_EQ(load("zero2.json").zero_optimization.stage, 2);
  EXPECT_EQ(load("zero2_offload.json").zero_optimization.offload_optimizer.device, OffloadDevice::Cpu);
  EXPECT_TRUE(load("zero2_overlap_gather.json").zero_overlap_param_gather);
  EXPECT_EQ(load("zero3.json").zero_optimization.stage, 3);
  const Config off = load("zero3_offload.json");
  EXPECT_EQ(off.zero_optimization.offload_param.device, OffloadDevice::Cpu);
  EXPECT_EQ(off.zero_optimization.offload_optimizer.device, OffloadDevice::Cpu);
  const Config nvme = load("zero3_offload_nvme.json");
  EXPECT_EQ(nvme.zero_optimization.offload_param.device, OffloadDevice::Nvme);
  EXPECT_EQ(nvme.zero_optimization.offload_optimizer.device, OffloadDevice::Nvme);
  EXPECT_TRUE(load("fp16.json").fp16.enabled);
  EXPECT_TRUE(load("bf16.json").bf16.enabled);
  EXPECT_EQ(load("autotp.json").parallel_sizes.autotp_size, 2);
  EXPECT_EQ(load("ulysses.json").parallel_sizes.sequence_parallel_size, 2);
  const Config elastic = load("elastic.json");  // world 2: 96 = micro 6 x GAS 8 x 2
  EXPECT_EQ(elastic.train_batch_size, 96);
  EXPECT_EQ(elastic.train_micro_batch_size_per_gpu, 6);
  EXPECT_EQ(elastic.gradient_accumulation_steps, 8);
}

// DeepSpeed's own 1-bit configs (tests/config/data/onebit_real, SOURCES.md says where each is from):
// all load as written, except the one that pairs 1-bit LAMB with ZeRO, which DeepSpeed asserts on too.
TEST(RealWorld, DeepSpeedsOneBitConfigsLoad) {
  const fs::path dir = fs::path(DS_SOURCE_DIR) / "tests" / "config" / "data" / "onebit_real";
  int loaded = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    const std::string name = e.path().filename().string();
    if (name == "gpt_1bitlamb_heredoc.json") {
      try {
        (void)load_config_file(e.path().string(), 1);
        ADD_FAILURE() << name << " pairs OneBitLamb with ZeRO stage 1 and must be refused";
      } catch (const ConfigError& err) {
        EXPECT_NE(std::string(err.what()).find("1-bit Lamb is not compatible with ZeRO"), std::string::npos) << err.what();
      }
      continue;
    }
    for (int world : {1, 2}) {
      try {
        const Config c = load_config_file(e.path().string(), world);
        ASSERT_TRUE(c.optimizer.has_value()) << name;
        EXPECT_TRUE(is_onebit(c.optimizer->type)) << name;
      } catch (const Error& err) {
        ADD_FAILURE() << name << " at world size " << world << ": " << err.what();
      }
    }
    ++loaded;
  }
  EXPECT_GE(loaded, 21);
}

}  // namespace
}  // namespace ds
