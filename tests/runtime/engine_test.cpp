// Engine behaviour: counters and accumulation boundaries, param groups, the memory ledger, the
// error messages, and that any torch::nn::Module works.
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include "util/error.h"
#include "util/memory_ledger.h"
#include "zero/flat_params.h"

namespace ds {
namespace {

struct TwoLayer : torch::nn::Module {
  TwoLayer() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 1));
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& y) {
    return torch::mse_loss(fc2(torch::relu(fc1(x))), y);
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

Config cfg(const std::string& extra = "", int micro = 2, int gas = 1) {
  return load_config_text(fmt::format(R"({{"train_micro_batch_size_per_gpu": {}, "gradient_accumulation_steps": {},
      "optimizer": {{"type": "Adam", "params": {{"lr": 0.01}}}} {}}})", micro, gas, extra), 1);
}

TEST(Engine, CountersFollowAccumulationBoundaries) {
  auto engine = initialize(std::make_shared<TwoLayer>(), cfg("", 2, 3));
  EXPECT_EQ(engine.train_batch_size(), 6);
  std::vector<bool> boundaries;
  for (int i = 0; i < 6; ++i) {
    boundaries.push_back(engine.is_gradient_accumulation_boundary());
    engine.backward(engine.forward(torch::randn({2, 8}), torch::randn({2, 1})));
    engine.step();
  }
  EXPECT_EQ(boundaries, (std::vector<bool>{false, false, true, false, false, true}));
  EXPECT_EQ(engine.global_steps(), 2);
  EXPECT_EQ(engine.global_samples(), 12);
  EXPECT_EQ(engine.micro_steps(), 6);
}

TEST(Engine, ParametersOnlyChangeAtTheBoundaryAndGradsAreZeroedAfter) {
  auto model = std::make_shared<TwoLayer>();
  auto engine = initialize(model, cfg("", 2, 2));
  auto before = model->fc1->weight.clone();
  engine.backward(engine.forward(torch::randn({2, 8}), torch::randn({2, 1})));
  engine.step();
  EXPECT_TRUE(torch::equal(model->fc1->weight, before));
  EXPECT_GT(engine.flat_parameters().grad_buffer().count_nonzero().item<int64_t>(), 0);
  engine.backward(engine.forward(torch::randn({2, 8}), torch::randn({2, 1})));
  engine.step();
  EXPECT_FALSE(torch::equal(model->fc1->weight, before));
  EXPECT_EQ(engine.flat_parameters().grad_buffer().count_nonzero().item<int64_t>(), 0);
}

TEST(Engine, MemoryLedgerCountsFp32AdamBytes) {
  auto engine = initialize(std::make_shared<TwoLayer>(), cfg());
  const int64_t n = 8 * 16 + 16 + 16 + 1;  // 161 trainable elements, padded to 176 (multiple of 16)
  const auto& m = engine.memory();
  EXPECT_EQ(engine.flat_parameters().numel(), n);
  EXPECT_EQ(m.bytes(Tier::Device, MemKind::Params), 176u * 4);
  EXPECT_EQ(m.bytes(Tier::Device, MemKind::Grads), 704u);  // 176 × 4, already 64-byte aligned
  EXPECT_EQ(m.bytes(Tier::Device, MemKind::OptimizerState), 176u * 8);
  EXPECT_EQ(m.bytes(Tier::Device, MemKind::Master), 0u);   // fp32 parameters are their own master
  EXPECT_EQ(m.tier_total(Tier::Cpu) + m.tier_total(Tier::Nvme), 0u);
  EXPECT_NE(engine.memory_report().find("optim_state"), std::string::npos);
}

TEST(Engine, ParamGroupsOverrideLrAndMustCoverEveryParameter) {
  std::vector<ParamGroup> groups{{{"fc1.weight", "fc2.weight"}, std::nullopt, 0.1},
                                 {{"fc1.bias", "fc2.bias"}, 0.5, 0.0}};
  auto engine = initialize(std::make_shared<TwoLayer>(), cfg(), groups);
  EXPECT_EQ(engine.get_lr(), (std::vector<double>{0.01, 0.5}));

  std::vector<ParamGroup> missing{{{"fc1.weight", "fc2.weight", "fc1.bias"}, 0.1, std::nullopt}};
  try {
    initialize(std::make_shared<TwoLayer>(), cfg(), missing);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'fc2.bias' is in no group"), std::string::npos) << e.what();
  }
  std::vector<ParamGroup> unknown{{{"fc1.weight", "fc2.weight", "fc1.bias", "fc2.bias", "fc3.bias"}, {}, {}}};
  EXPECT_THROW(initialize(std::make_shared<TwoLayer>(), cfg(), unknown), ConfigError);
}

TEST(Engine, ZeroGradSetToNoneByUserCodeDoesNotLoseTheFlatGradients) {
  auto model = std::make_shared<TwoLayer>();
  auto engine = initialize(model, cfg());
  for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
  engine.backward(engine.forward(torch::randn({2, 8}), torch::randn({2, 1})));
  EXPECT_GT(engine.flat_parameters().grad_buffer().count_nonzero().item<int64_t>(), 0);
}

TEST(Engine, WorksWithTorchModuleHolders) {
  auto engine = initialize(torch::nn::Linear(4, 2), cfg());
  auto y = engine.forward(torch::randn({3, 4}));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{3, 2}));
  engine.backward(y.pow(2).mean());
  engine.step();
  EXPECT_EQ(engine.global_steps(), 1);
}

TEST(Engine, FrozenParametersStayOutOfTheFlatBuffers) {
  auto model = std::make_shared<TwoLayer>();
  model->fc1->weight.set_requires_grad(false);
  auto frozen = model->fc1->weight.clone();
  auto engine = initialize(model, cfg());
  EXPECT_EQ(engine.flat_parameters().find("fc1.weight"), nullptr);
  engine.backward(engine.forward(torch::randn({2, 8}), torch::randn({2, 1})));
  engine.step();
  EXPECT_TRUE(torch::equal(model->fc1->weight, frozen));
}

void expect_error_mentions(const std::string& extra, const std::string& needle) {
  try {
    initialize(std::make_shared<TwoLayer>(), cfg(extra));
    FAIL() << "expected an error for " << extra;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Engine, FeaturesNotBuiltYetAreRefusedByConfigPath) {
  // Optimizer offload (cpu or nvme) needs partitions (ZeRO 1-3), as in DeepSpeed.
  expect_error_mentions(R"(, "zero_optimization": {"stage": 0, "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp"}})",
                        "zero_optimization.offload_optimizer");
  expect_error_mentions(R"(, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0.5}})",
                        "zero_optimization.offload_optimizer.ratio");
}

TEST(Engine, Stage3WithoutALayerListNamesTheContract) {
  // TwoLayer has no layers(): stage 3 cannot know when its parameters are used.
  expect_error_mentions(R"(, "zero_optimization": {"stage": 3})", "LayerList");
}

TEST(Engine, LambUnderZeroIsRefused) {
  auto model = std::make_shared<TwoLayer>();
  try {
    // Even past DeepSpeed's untested-optimizer gate, Lamb cannot run on partitions.
    initialize(model, load_config_text(R"({"train_batch_size": 2, "zero_optimization": {"stage": 1},
                                           "zero_allow_untested_optimizer": true, "optimizer": {"type": "Lamb"}})", 1));
    FAIL() << "Lamb with ZeRO must be refused";
  } catch (const NotSupported& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.type"), std::string::npos) << e.what();
  }
}

TEST(Engine, StepWithoutOptimizerNamesTheMissingSection) {
  auto engine = initialize(std::make_shared<TwoLayer>(), load_config_text(R"({"train_batch_size": 2})", 1));
  engine.backward(engine.forward(torch::randn({2, 8}), torch::randn({2, 1})));
  try {
    engine.step();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("\"optimizer\""), std::string::npos) << e.what();
  }
}

TEST(Engine, BackwardRejectsNonScalarLoss) {
  auto engine = initialize(torch::nn::Linear(4, 2), cfg());
  EXPECT_THROW(engine.backward(engine.forward(torch::randn({3, 4}))), Error);
}

}  // namespace
}  // namespace ds
