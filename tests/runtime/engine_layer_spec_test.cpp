// Pipelines from layer specs (issue 17; DeepSpeed's LayerSpec / TiedLayerSpec): a small language
// model given as specs (an embedding tied to the output head, four residual tanh blocks), cut into
// PP=2 (world 2), PP=4 and PP=2 x DP=2 (world 4). Each rank builds every layer once to count it (one
// at a time) and then only its stage's layers; with seed_layers the stages' layers start as the one
// process's, and every step's loss and every parameter a stage holds stay within 1e-5 of the
// one-process loop over the same specs. A checkpoint saved at one cut resumes at another from specs
// seeded otherwise, the next losses equal.
#include <deepspeed/deepspeed.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <set>

#include "comm/comm.h"
#include "parallel/layer_spec.h"
#include "parallel/pipe_schedule.h"
#include "runtime/pipeline_engine.h"
#include "util/error.h"

namespace ds::layer_spec_test {
namespace {

constexpr int64_t kVocab = 64, kWidth = 32, kMicro = 2, kSeq = 8;
constexpr int kSteps = 6;

std::atomic<int> g_builds{0};  // every build call on this rank

struct Block : torch::nn::Module {
  Block() : fc(register_module("fc", torch::nn::Linear(kWidth, kWidth))) {}
  torch::nn::Linear fc;
};

std::vector<parallel::LayerSpec> lm_specs() {
  std::vector<parallel::LayerSpec> specs;
  specs.push_back({"embed",
                   [] {
                     ++g_builds;
                     return torch::nn::Embedding(kVocab, kWidth).ptr();
                   },
                   [](torch::nn::Module& m, const torch::Tensor& x) {
                     return torch::embedding(m.named_parameters()["weight"], x);
                   },
                   "embed"});
  for (int i = 0; i < 4; ++i)
    specs.push_back({"block" + std::to_string(i),
                     [] {
                       ++g_builds;
                       return std::make_shared<Block>();
                     },
                     [](torch::nn::Module& m, const torch::Tensor& x) {
                       return x + torch::tanh(static_cast<Block&>(m).fc->forward(x));
                     }});
  specs.push_back({"head",
                   [] {
                     ++g_builds;
                     return torch::nn::Embedding(kVocab, kWidth).ptr();
                   },
                   [](torch::nn::Module& m, const torch::Tensor& x) {
                     return torch::matmul(x, m.named_parameters()["weight"].t());  // logits on the tied embedding
                   },
                   "embed"});
  return specs;
}

torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  return torch::nn::functional::cross_entropy(logits.reshape({-1, kVocab}), labels.reshape({-1}));
}

// Micro-batch k of step s (k = data-parallel rank x GAS + m): predict the next token of a pattern.
std::pair<torch::Tensor, torch::Tensor> micro_batch(int step, int k) {
  torch::manual_seed(500 + int64_t{step} * 64 + k);
  const torch::Tensor x = torch::randint(0, kVocab, {kMicro, kSeq}, torch::kInt64);
  return {x, torch::remainder(x * 3 + 1, kVocab)};
}

parallel::PipelineModuleOptions options(int64_t base_seed = 1234) {
  parallel::PipelineModuleOptions o;
  o.loss_fn = lm_loss;
  o.seeds = {true, base_seed};
  return o;
}

std::string config(int stages, int gas, int zero) {
  return fmt::format(R"({{"train_micro_batch_size_per_gpu": {}, "gradient_accumulation_steps": {},
      "pipeline": {{"stages": {}}}, "gradient_clipping": 1.0,
      "optimizer": {{"type": "AdamW", "params": {{"lr": 1e-2, "weight_decay": 0.0}}}},
      "zero_optimization": {{"stage": {}}}}})",
                     kMicro, gas, stages, zero);
}

PipelineEngine make_engine(int stages, int gas, int zero, int64_t base_seed = 1234) {
  return initialize_pipeline(lm_specs(), load_config_text(config(stages, gas, zero), comm::launcher_world_size(), "<specs>"),
                             options(base_seed));
}

double train_step(PipelineEngine& engine, int step) {
  const int d = engine.topology().data().rank(), gas = engine.micro_batches();
  int m = 0;
  return engine.train_batch([&] {
    auto [x, y] = micro_batch(step, d * gas + m++);
    return PipeBatch{x, y};
  });
}

struct Reference {
  std::vector<double> losses;
  std::map<std::string, torch::Tensor> params;
};

// One process: the specs built whole (the same seeds), each step's `micros` micro-batches in turn.
Reference reference_run(int micros, int steps) {
  const auto specs = lm_specs();
  const parallel::LayerSeeds seeds{true, 1234};
  const auto census = parallel::take_census(specs, seeds);
  parallel::BuiltLayers whole = parallel::build_layers(specs, census, 0, int(specs.size()), seeds);
  torch::optim::AdamW opt(whole.model->parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(0.0));
  Reference out;
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    double loss = 0;
    for (int k = 0; k < micros; ++k) {
      auto [x, y] = micro_batch(s, k);
      auto l = lm_loss(whole.layers.forward(x), y) / double(micros);
      l.backward();
      loss += l.item<double>();
    }
    torch::nn::utils::clip_grad_norm_(whole.model->parameters(), 1.0);
    opt.step();
    out.losses.push_back(loss);
  }
  for (const auto& p : whole.model->named_parameters()) out.params[p.key()] = p.value().detach().clone();
  return out;
}

void expect_matches_reference(int stages, int zero) {
  const int gas = 2;
  g_builds = 0;
  auto engine = make_engine(stages, gas, zero);
  const int builds = g_builds.load();
  const int dp = engine.topology().data().size();
  const std::string what = fmt::format("PP {} x DP {} at world {}, stage {}", stages, dp,
                                       comm::launcher_world_size(), engine.stage_id());
  // The census built each of the 5 modules once; then this rank built its stage's modules only.
  const auto& parts = engine.pipeline_module().parts();
  const auto specs = lm_specs();
  std::set<std::string> mine;
  for (int i = parts[size_t(engine.stage_id())]; i < parts[size_t(engine.stage_id()) + 1]; ++i)
    mine.insert(parallel::layer_module_path(specs[size_t(i)]));
  EXPECT_EQ(builds, 5 + int(mine.size())) << what;
  for (const auto& p : engine.pipeline_module().model().named_parameters()) {
    bool in_stage = false;
    for (const auto& path : mine) in_stage = in_stage || p.key().rfind(path + ".", 0) == 0;
    EXPECT_TRUE(in_stage) << what << ": holds " << p.key();
  }

  const Reference want = reference_run(dp * gas, kSteps);
  for (int s = 0; s < kSteps; ++s) {
    const double got = train_step(engine, s);
    EXPECT_LE(std::abs(got - want.losses[size_t(s)]), 1e-5 * std::abs(want.losses[size_t(s)]))
        << what << " step " << s << ": " << got << " vs " << want.losses[size_t(s)];
  }
  size_t held = 0;
  for (const auto& p : engine.pipeline_module().named_parameters()) {
    ++held;
    EXPECT_LE((p.value().detach() - want.params.at(p.key())).abs().max().item<double>(), 1e-5) << what << ": " << p.key();
  }
  EXPECT_GT(held, 0u) << what;
}

TEST(LayerSpecPipeline, StagesBuildOnlyTheirLayersAndMatchOneProcess) {
  const int world = comm::launcher_world_size();
  if (world == 1) expect_matches_reference(1, 0);
  if (world == 2) expect_matches_reference(2, 0);
  if (world == 4) {
    expect_matches_reference(4, 0);
    expect_matches_reference(2, 1);  // PP 2 x DP 2, ZeRO-1 across the data group
  }
}

TEST(LayerSpecPipeline, CheckpointResumesAtAnotherCut) {
  const int world = comm::launcher_world_size();
  if (world != 2 && world != 4) GTEST_SKIP() << "worlds 2 and 4";
  const std::string dir = ::testing::TempDir() + fmt::format("layer_spec_ckpt_w{}", world);
  // World 2: PP=2 (GAS 4) -> one stage over DP=2 (GAS 2); world 4: PP=2 x DP=2 (GAS 2) -> PP=4 (GAS 4).
  const int from_stages = 2, from_gas = world == 2 ? 4 : 2, to_stages = world == 2 ? 1 : 4, to_gas = world == 2 ? 2 : 4;
  std::vector<double> want;
  {
    auto engine = make_engine(from_stages, from_gas, 0);
    for (int s = 0; s < 2; ++s) train_step(engine, s);
    engine.save_checkpoint(dir, "specs");
    for (int s = 2; s < 4; ++s) want.push_back(train_step(engine, s));
  }
  auto engine = make_engine(to_stages, to_gas, 0, /*base_seed=*/99);  // other initial values: all from the checkpoint
  ASSERT_TRUE(engine.load_checkpoint(dir, "specs").has_value());
  for (int s = 2; s < 4; ++s) {
    const double got = train_step(engine, s);
    EXPECT_LE(std::abs(got - want[size_t(s - 2)]), 1e-5 * std::abs(want[size_t(s - 2)]))
        << "PP " << to_stages << " step " << s << ": " << got << " vs " << want[size_t(s - 2)];
  }
}

// Side tensors (PipeBatch::side: what a packed row's layout needs on every stage) reach every stage
// with their own micro-batch, before its forward and again before its backward, while 1F1B keeps
// several micro-batches in flight (and before each forward of eval_batch); side tensors with no use_side_inputs are refused.
TEST(LayerSpecPipeline, SideTensorsTravelWithTheirMicroBatch) {
  const int world = comm::launcher_world_size();
  if (world != 2 && world != 4) GTEST_SKIP() << "worlds 2 and 4";
  const int stages = world, gas = 4;
  std::vector<int64_t> seen;  // each pass's micro-batch tag, in order
  auto o = options();
  o.use_side_inputs = [&](const std::vector<torch::Tensor>& side) {
    ASSERT_EQ(side.size(), 2u);
    EXPECT_EQ(side[1].scalar_type(), torch::kBool);
    seen.push_back(side[0].item<int64_t>());
  };
  auto engine = initialize_pipeline(lm_specs(), load_config_text(config(stages, gas, 0), world, "<specs>"), o);
  int m = 0;
  engine.train_batch([&] {
    auto [x, y] = micro_batch(0, m);
    return PipeBatch{x, y, {torch::tensor(int64_t{100 + m++}), torch::ones({kMicro, kSeq}, torch::kBool)}};
  });
  // Each stage runs each micro-batch's forward and backward once: 8 passes, tags in 1F1B's order.
  ASSERT_EQ(seen.size(), size_t(2 * gas)) << "stage " << engine.stage_id();
  const auto schedule = parallel::train_schedule(gas, stages, engine.stage_id());
  std::vector<int64_t> want;
  int fwd = 0, bwd = 0;
  for (const auto& step : schedule)
    for (const auto& in : step) {
      if (in.op == parallel::PipeOp::ForwardPass) want.push_back(100 + fwd++);
      if (in.op == parallel::PipeOp::BackwardPass) want.push_back(100 + bwd++);
    }
  ASSERT_EQ(want.size(), seen.size());
  for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(seen[k], want[k]) << "stage " << engine.stage_id() << " pass " << k;

  // eval_batch: forwards only, in order.
  seen.clear();
  m = 0;
  engine.eval_batch([&] {
    auto [x, y] = micro_batch(1, m);
    return PipeBatch{x, y, {torch::tensor(int64_t{200 + m++}), torch::ones({kMicro, kSeq}, torch::kBool)}};
  });
  EXPECT_EQ(seen, (std::vector<int64_t>{200, 201, 202, 203})) << "stage " << engine.stage_id();
}

TEST(LayerSpecPipeline, SideTensorsNeedUseSideInputs) {
  if (comm::launcher_world_size() != 1) GTEST_SKIP() << "world 1 only";
  auto engine = make_engine(1, 1, 0);
  try {
    engine.train_batch([&] {
      auto [x, y] = micro_batch(0, 0);
      return PipeBatch{x, y, {torch::tensor(int64_t{0})}};
    });
    ADD_FAILURE() << "side tensors with no use_side_inputs were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PipelineModuleOptions::use_side_inputs"), std::string::npos) << e.what();
  }
}

TEST(LayerSpecPipeline, BadSpecsAreNamed) {
  if (comm::launcher_world_size() != 1) GTEST_SKIP() << "world 1 only";
  auto specs = lm_specs();
  specs[2].name = "block.1";
  try {
    make_engine(1, 1, 0);  // good specs build
    initialize_pipeline(specs, load_config_text(config(1, 1, 0), 1, "<specs>"), options());
    ADD_FAILURE() << "a dotted layer name was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline.layers"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("block.1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ds::layer_spec_test
