// Issue 22, items 1, 3 and 4 (the step side): a step whose gradients or loss are not finite must never
// reach the weights silently.
//   1. a static fp16 loss scale (loss_scale 1e10) overflows: the step is skipped, as DeepSpeed skips it;
//   3. a non-finite loss or gradient outside fp16's dynamic scaling: skipped, and after
//      nan_guard.max_consecutive_steps such steps in a row the run stops naming the step, the loss and
//      the first parameter whose gradient is not finite (ds-train exits non-zero);
//      ZeRO-3: a parameter read while released (its NaN placeholder) is named on the first step.
#include <deepspeed/deepspeed.h>

#include <cmath>
#include <limits>

#include "faults_test_util.h"
#include "models/gpt2.h"
#include "models/token_data.h"
#include "nn/layer_list.h"
#include "util/error.h"

namespace ds::faults {
namespace {

models::TokenDataset corpus() {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "no weights are lost " + std::to_string(i * 7 % 31) + " ";
  return models::TokenDataset::from_text(text);
}

models::GPT2Config tiny() {
  auto c = models::GPT2Config::preset("tiny");
  c.n_layer = 2;
  c.n_embd = 32;
  c.n_head = 2;
  c.n_positions = 16;
  return c;
}

std::vector<torch::Tensor> snapshot(torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

bool all_finite(const std::vector<torch::Tensor>& ts) {
  for (const auto& t : ts)
    if (!torch::isfinite(t).all().item<bool>()) return false;
  return true;
}

bool same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i])) return false;
  return true;
}

// Item 1: at stages 0 and 2 a static scale of 1e10 overflowed the fp16 gradients, the step was applied
// (weights NaN) and skipped stayed 0.
class FaultStaticLossScale : public ::testing::TestWithParam<int> {};

TEST_P(FaultStaticLossScale, OverflowingStepsAreSkippedNotApplied) {
  auto data = corpus();
  models::BatchSampler sampler(data, 16, 1);
  torch::manual_seed(1);
  auto model = models::GPT2(tiny());
  auto engine = initialize(model, load_config_text(R"({"train_micro_batch_size_per_gpu": 2,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
      "fp16": {"enabled": true, "loss_scale": 1e10},
      "zero_optimization": {"stage": )" + std::to_string(GetParam()) + "}}", 1));
  const auto before = snapshot(*model);
  for (int s = 0; s < 2; ++s) {
    auto b = sampler.batch(s * 2, 2);
    engine.backward(engine.forward(b.inputs, b.targets));
    engine.step();
    EXPECT_FALSE(engine.was_step_applied()) << "step " << s;
  }
  EXPECT_EQ(engine.skipped_steps(), 2);
  EXPECT_EQ(engine.loss_scale(), 1e10) << "a static scale does not move";
  const auto after = snapshot(*model);
  EXPECT_TRUE(all_finite(after));
  EXPECT_TRUE(same(before, after)) << "an overflowed step must not touch the weights";
}

INSTANTIATE_TEST_SUITE_P(Stages, FaultStaticLossScale, ::testing::Values(0, 1, 2, 3));

// Item 3: a NaN loss through the API: skipped, then the run stops with the step, the loss and a parameter.
TEST(FaultNonFinite, NanLossIsSkippedThenStopsNamingStepLossAndParameter) {
  auto data = corpus();
  models::BatchSampler sampler(data, 16, 2);
  torch::manual_seed(2);
  auto model = models::GPT2(tiny());
  auto engine = initialize(model, load_config_text(R"({"train_micro_batch_size_per_gpu": 2,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
      "nan_guard": {"max_consecutive_steps": 3}})", 1));
  auto run_step = [&](int s, bool poison) {
    auto b = sampler.batch(s * 2, 2);
    auto loss = engine.forward(b.inputs, b.targets);
    if (poison) loss = loss * std::numeric_limits<float>::quiet_NaN();
    engine.backward(loss);
    engine.step();
  };
  run_step(0, false);
  EXPECT_TRUE(engine.was_step_applied());
  const auto good = snapshot(*model);
  run_step(1, true);
  run_step(2, true);
  EXPECT_EQ(engine.skipped_steps(), 2);
  EXPECT_TRUE(same(good, snapshot(*model))) << "a non-finite step must not touch the weights";
  run_step(3, false);  // a good step in between resets the count
  EXPECT_TRUE(engine.was_step_applied());
  const auto good2 = snapshot(*model);
  run_step(4, true);
  run_step(5, true);
  try {
    run_step(6, true);
    FAIL() << "the third consecutive non-finite step must stop the run";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("nan_guard.max_consecutive_steps"), std::string::npos) << msg;
    EXPECT_NE(msg.find("3 consecutive"), std::string::npos) << msg;
    EXPECT_NE(msg.find("step 7"), std::string::npos) << msg;  // global steps count from 1 in messages
    EXPECT_NE(msg.find("loss nan"), std::string::npos) << msg;
    EXPECT_NE(msg.find("first non-finite gradient: transformer.wte.weight"), std::string::npos) << msg;  // all are NaN: the first
  }
  EXPECT_TRUE(same(good2, snapshot(*model))) << "the weights are those of the last good step";
}

// Item 3, as the user met it: ds-train with a learning rate that blows the model up ran 200 steps of NaN
// and exited 0. Now it stops within a few steps, non-zero, naming nan_guard.
TEST(FaultNonFinite, DsTrainStopsOnNanInsteadOfTrainingOnIt) {
  TempDir dir("nan_train");
  write_text(dir.file("ds.json"), R"({"train_micro_batch_size_per_gpu": 2, "steps_per_print": 1000,
      "optimizer": {"type": "SGD", "params": {"lr": 1e30}}})");
  auto r = run(tiny_train("--config " + dir.file("ds.json") + " --steps 200"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("nan_guard"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("done: 200 steps"), std::string::npos) << r.output;
}

// Item 3, ZeRO-3: a layer that reads a parameter another layer lists sees its NaN placeholder. The first
// backward names it instead of training on NaN.
struct LeakyModel : torch::nn::Module {
  torch::nn::Linear a{nullptr}, b{nullptr};
  nn::LayerList list;
  LeakyModel() {
    a = register_module("a", torch::nn::Linear(8, 8));
    b = register_module("b", torch::nn::Linear(8, 8));
    list.add("a", [this](const torch::Tensor& x) { return a->forward(x); }, {"a.weight", "a.bias"});
    // Reads a.weight without listing it: under stage 3 a.weight is released by then.
    list.add("b", [this](const torch::Tensor& x) { return b->forward(x) + torch::matmul(x, a->weight.t()); },
             {"b.weight", "b.bias"});
  }
  nn::LayerList& layers() { return list; }
  torch::Tensor forward(const torch::Tensor& x) { return list.forward(x).square().mean(); }
};

TEST(FaultNonFinite, Zero3ReleasedParameterReadInForwardIsNamed) {
  torch::manual_seed(3);
  auto model = std::make_shared<LeakyModel>();
  auto engine = initialize(model, load_config_text(R"({"train_micro_batch_size_per_gpu": 2,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
      "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}})", 1));
  try {
    engine.backward(engine.forward(torch::randn({2, 8})));
    engine.step();
    FAIL() << "reading a released parameter must be reported";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("a.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("released"), std::string::npos) << msg;
    EXPECT_NE(msg.find("\"b\""), std::string::npos) << "names the layer that read it: " << msg;
  }
}

}  // namespace
}  // namespace ds::faults
