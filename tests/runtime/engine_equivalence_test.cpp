// The engine (fp32, stage 0) against a plain LibTorch loop of the same model, seed and data:
// losses must agree within 1e-5 relative over 20 steps (DESIGN §7), and gradient accumulation
// (GAS 4 × micro b) must agree with one batch of 4b.
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "models/gpt2.h"
#include "models/token_data.h"

namespace ds {
namespace {

constexpr int kSteps = 20;
constexpr uint64_t kSeed = 1234;
constexpr double kRelTol = 1e-5;

models::TokenDataset corpus() {
  std::string text;
  for (int i = 0; i < 200; ++i)
    text += "the quick brown fox jumps over the lazy dog " + std::to_string(i * 7919 % 1000) + ". ";
  return models::TokenDataset::from_text(text);
}

models::GPT2 make_model() {
  torch::manual_seed(kSeed);
  return models::GPT2(models::GPT2Config::preset("tiny"));
}

std::string config_json(int micro, int gas, double clip) {
  return fmt::format(R"({{
    "train_micro_batch_size_per_gpu": {}, "gradient_accumulation_steps": {}, "gradient_clipping": {},
    "optimizer": {{"type": "AdamW", "params": {{"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8,
                                               "weight_decay": 0.01}}}}
  }})", micro, gas, clip);
}

// Mean loss per optimizer step from the engine.
std::vector<double> engine_losses(int micro, int gas, double clip) {
  auto data = corpus();
  models::BatchSampler sampler(data, 32, kSeed);
  auto engine = initialize(make_model(), load_config_text(config_json(micro, gas, clip), 1));
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) {
    for (int m = 0; m < gas; ++m) {
      auto b = sampler.batch((int64_t{step} * gas + m) * micro, micro);
      engine.backward(engine.forward(b.inputs, b.targets));
      engine.step();
    }
    EXPECT_EQ(engine.global_steps(), step + 1);
    losses.push_back(engine.last_loss());
  }
  EXPECT_EQ(engine.global_samples(), int64_t{kSteps} * micro * gas);
  return losses;
}

// The plain loop: torch::optim::AdamW with the same hyperparameters.
std::vector<double> reference_losses(int batch, double clip) {
  auto data = corpus();
  models::BatchSampler sampler(data, 32, kSeed);
  auto model = make_model();
  torch::optim::AdamW opt(model->parameters(),
                          torch::optim::AdamWOptions(1e-3).betas({0.9, 0.999}).eps(1e-8).weight_decay(0.01));
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) {
    auto b = sampler.batch(int64_t{step} * batch, batch);
    opt.zero_grad();
    auto loss = model->forward(b.inputs, b.targets);
    loss.backward();
    if (clip > 0) torch::nn::utils::clip_grad_norm_(model->parameters(), clip);
    opt.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::getenv("DS_TEST_VERBOSE")) std::printf("step %zu: %.9g vs %.9g (rel %.2e)\n", i, got[i], want[i], std::abs(got[i] - want[i]) / std::abs(want[i]));
    EXPECT_LE(std::abs(got[i] - want[i]), kRelTol * std::abs(want[i]))
        << "step " << i << ": engine " << got[i] << " vs reference " << want[i];
  }
  EXPECT_LT(want.back(), want.front() - 0.3) << "the reference itself should learn";
}

TEST(EngineEquivalence, MatchesPlainAdamWLoop) { expect_close(engine_losses(4, 1, 0.0), reference_losses(4, 0.0)); }

TEST(EngineEquivalence, GradientAccumulationMatchesOneLargeBatch) {
  expect_close(engine_losses(2, 4, 0.0), engine_losses(8, 1, 0.0));
}

TEST(EngineEquivalence, ClippingMatchesClipGradNorm) {
  // A small threshold so clipping is active on every step.
  expect_close(engine_losses(4, 1, 0.05), reference_losses(4, 0.05));
}

}  // namespace
}  // namespace ds
