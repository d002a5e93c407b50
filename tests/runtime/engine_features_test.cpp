// Features the engine switches on from the config, across real ranks: activation checkpointing
// over the LayerList at every ZeRO stage (same losses as without), the flops profiler's report
// at profile_step (rank 0 writes it), and ignore_unused_parameters false stopping the run.
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "comm/comm.h"
#include "comm/comms_logger.h"
#include "models/gpt2.h"
#include "models/token_data.h"
#include "nn/activation_checkpointing.h"
#include "util/error.h"

namespace ds {
namespace {
namespace fs = std::filesystem;

// `gathered`: the wire bytes stage 3's parameter all-gathers moved on this rank.
std::vector<double> train(const std::string& extra, int steps = 6, int64_t* recomputes = nullptr,
                          int64_t* gathered = nullptr) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "still waters run deep " + std::to_string(i * 3 % 71) + ". ";
  auto data = models::TokenDataset::from_text(text);
  models::BatchSampler sampler(data, 32, 9);
  torch::manual_seed(9);
  auto engine = initialize(models::GPT2(models::GPT2Config::preset("tiny")), nlohmann::json::parse(fmt::format(R"({{
      "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "gradient_clipping": 1.0,
      "optimizer": {{"type": "AdamW", "params": {{"lr": 2e-3}}}} {} }})", extra)));
  const int world = engine.world_size(), rank = engine.rank();
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    for (int m = 0; m < 2; ++m) {
      auto b = sampler.batch(((s * 2 + m) * world + rank) * 2, 2);
      engine.backward(engine.forward(b.inputs, b.targets));
      engine.step();
    }
    double loss = engine.last_loss();
    engine.communicator().all_reduce(comm::Buffer(&loss, 1));
    losses.push_back(loss / world);
  }
  if (recomputes) *recomputes = engine.activation_checkpointing() ? engine.activation_checkpointing()->stats().recomputes : 0;
  if (gathered) *gathered = engine.topology().data().collective_log().sum_wire_bytes("gather_parameters");
  return losses;
}

class CheckpointedStages : public ::testing::TestWithParam<int> {};

TEST_P(CheckpointedStages, GiveTheSameLosses) {
  const std::string zero = fmt::format(R"(, "zero_optimization": {{"stage": {}, "stage3_param_persistence_threshold": 0}})", GetParam());
  int64_t gathered_plain = 0, gathered_per_layer = 0, gathered_two = 0;
  const auto plain = train(zero, 6, nullptr, &gathered_plain);
  int64_t recomputes_per_layer = 0, recomputes_two = 0;
  const auto per_layer = train(zero + R"(, "activation_checkpointing": {"partition_activations": false})", 6,
                               &recomputes_per_layer, &gathered_per_layer);
  const auto two_segments = train(zero + R"(, "activation_checkpointing": {"number_checkpoints": 2})", 6,
                                  &recomputes_two, &gathered_two);
  // GPT-2 tiny's LayerList: embed, h.0, h.1, head — 4 segments per layer, or 2; 12 backward passes.
  EXPECT_EQ(recomputes_per_layer, 12 * 4);
  EXPECT_EQ(recomputes_two, 12 * 2);
  // Stage 3 with the default stage3_max_reuse_distance keeps every layer gathered from its forward to
  // its backward from the second pass on; a checkpointed forward keeps them too, so the recompute
  // gathers nothing more than the plain step does.
  EXPECT_EQ(gathered_per_layer, gathered_plain);
  EXPECT_EQ(gathered_two, gathered_plain);
  if (GetParam() == 3 && comm::launcher_world_size() > 1) {
    EXPECT_GT(gathered_plain, 0);
  }
  for (size_t i = 0; i < plain.size(); ++i) {
    // The recompute runs the same kernels on the same inputs: equal, not merely close.
    EXPECT_EQ(per_layer[i], plain[i]) << "step " << i;
    EXPECT_EQ(two_segments[i], plain[i]) << "step " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Zero, CheckpointedStages, ::testing::Values(0, 1, 2, 3));

// DeepSpeed's TestStage2IgnoreUnusedParameters: a layer the loss never reaches. Without clipping the
// offloaded step could overlap backward; the check keeps it after, so nothing is stepped first.
struct WithUnusedLayer : torch::nn::Module {
  WithUnusedLayer() {
    used = register_module("used", torch::nn::Linear(4, 4));
    unused = register_module("unused", torch::nn::Linear(4, 4));
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& y) { return torch::mse_loss(used(x), y); }
  torch::nn::Linear used{nullptr}, unused{nullptr};
};

TEST(IgnoreUnusedParameters, FalseStopsEveryRankAtTheBoundaryBeforeAnyUpdate) {
  for (const std::string zero : {R"("stage": 1)", R"("stage": 2)", R"("stage": 2, "offload_optimizer": {"device": "cpu"})"}) {
    for (bool ignore : {false, true}) {
      SCOPED_TRACE(zero + (ignore ? ", ignore" : ", stop"));
      torch::manual_seed(3);
      auto model = std::make_shared<WithUnusedLayer>();
      auto engine = initialize(model, nlohmann::json::parse(fmt::format(R"({{
          "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
          "optimizer": {{"type": "Adam", "params": {{"lr": 1e-3}}}}, "gradient_clipping": 0.0,
          "zero_optimization": {{{}, "ignore_unused_parameters": {}}} }})", zero, ignore)));
      const int world = engine.world_size();
      const auto before = model->used->weight.clone();
      auto micro_step = [&] {
        engine.backward(engine.forward(torch::randn({2, 4}), torch::randn({2, 4})));
        engine.step();
      };
      micro_step();  // not a boundary: nothing is checked yet
      if (ignore) {
        micro_step();
        EXPECT_FALSE(torch::equal(model->used->weight, before));
        continue;
      }
      engine.backward(engine.forward(torch::randn({2, 4}), torch::randn({2, 4})));
      try {
        engine.step();
        ADD_FAILURE() << "the step went on with an unused parameter";
      } catch (const ConfigError& e) {
        const std::string what = e.what();
        EXPECT_EQ(e.path(), "zero_optimization.ignore_unused_parameters");
        EXPECT_NE(what.find("2 trainable parameters"), std::string::npos) << what;
        EXPECT_NE(what.find(fmt::format("unused.weight (on {0} of {0} ranks), unused.bias (on {0} of {0} ranks)", world)),
                  std::string::npos)
            << what;
      }
      EXPECT_TRUE(torch::equal(model->used->weight, before)) << "no update before the check";
    }
  }
}

// comms_logger: the engine switches DeepSpeed's communication logger on from the config (and off again
// for the next engine without it); ZeRO-2's collectives are then in the summary.
TEST(CommsLogger, TheConfigSwitchesItOnAndTheSummaryHasTheEnginesCollectives) {
  comm::CommsLogger& log = comm::CommsLogger::global();
  log.reset();
  train(R"(, "zero_optimization": {"stage": 2}, "comms_logger": {"enabled": true})", 2);
  const auto rows = log.summary();
  auto has = [&](const std::string& op) {
    return std::any_of(rows.begin(), rows.end(), [&](const comm::CommsOpSummary& r) { return r.name == op; });
  };
  if (comm::launcher_world_size() > 1) {
    EXPECT_TRUE(has("broadcast")) << log.format_summary();   // rank 0's parameters at start
    EXPECT_TRUE(has("all_gather")) << log.format_summary();  // the updated partitions
    EXPECT_TRUE(has("reduce") || has("reduce_scatter")) << log.format_summary();  // gradient buckets
  }
  for (const auto& r : rows) EXPECT_GT(r.count, 0) << r.name;
  log.reset();
  train(R"(, "zero_optimization": {"stage": 2})", 1);
  EXPECT_TRUE(log.summary().empty()) << "an engine without comms_logger switches it off";
}

TEST(FlopsProfiler, EngineWritesTheReportAtProfileStep) {
  int64_t pid = ::getpid();
  auto comm = comm::make_communicator(comm::Backend::Auto);  // the process's communicator (MPI is up)
  comm->broadcast(comm::Buffer(&pid, 1), 0);
  const fs::path out = fs::temp_directory_path() / fmt::format("ds_flops_{}", pid) / "profile.txt";
  train(fmt::format(R"(, "flops_profiler": {{"enabled": true, "profile_step": 2, "output_file": "{}"}})", out.string()), 3);
  comm->barrier();
  if (comm->rank() == 0) {
    std::ifstream in(out);
    ASSERT_TRUE(in.good()) << out;
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    for (const char* key : {"Profile Summary at step 3", "fwd flops per GPU:", "fwd latency:", "bwd latency:", "iter latency:",
                            "Aggregated Profile per GPU", "(c_attn): Linear("})
      EXPECT_NE(text.find(key), std::string::npos) << key << "\n" << text;
    fs::remove_all(out.parent_path());
  }
}

}  // namespace
}  // namespace ds
