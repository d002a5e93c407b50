#include "zero/flat_optimizer.h"

#include <gtest/gtest.h>

#include "config/loader.h"

namespace ds::zero {
namespace {

// A fake flat group of two parameters (5 and 3 elements) padded to 16.
FlatGroup layout() {
  FlatGroup g;
  g.numel = 8;
  g.padded_numel = 16;
  g.slots.push_back({"a", {5}, 0, 5, {}});
  g.slots.push_back({"b", {3}, 5, 3, {}});
  return g;
}

OptimizerConfig adamw() {
  return *load_config_text(R"({"train_batch_size": 1, "optimizer": {"type": "AdamW",
      "params": {"lr": 0.01, "betas": [0.8, 0.9], "weight_decay": 0.1}}})", 1).optimizer;
}

TEST(FlatOptimizer, PerTensorCallsFollowDeepSpeedsKernelCallPattern) {
  // Stage 0: one kernel call per tensor; the optimizer-wide beta^t state advances on every call.
  torch::manual_seed(3);
  auto p0 = torch::randn({16});
  p0.narrow(0, 8, 8).zero_();
  MemoryLedger ledger;
  FlatOptimizer opt(adamw(), {}, {layout()}, {p0.clone()}, ledger, Tier::Device, KernelCalls::PerTensor);
  auto p = p0.clone(), m = torch::zeros({16}), v = torch::zeros({16});
  optim::AdamStepState st;
  optim::AdamHyperparams h;
  h.lr = 0.01, h.beta1 = 0.8, h.beta2 = 0.9, h.weight_decay = 0.1;
  for (int step = 1; step <= 4; ++step) {
    auto g = torch::randn({16});
    g.narrow(0, 8, 8).zero_();
    opt.step({g});
    for (auto [off, len] : {std::pair<int64_t, int64_t>{0, 5}, {5, 3}}) {
      st.advance(step, h.beta1, h.beta2);
      optim::adam_update(p.data_ptr<float>() + off, g.data_ptr<float>() + off, m.data_ptr<float>() + off,
                         v.data_ptr<float>() + off, len, h, st);
    }
    ASSERT_TRUE(torch::equal(opt.master(0), p)) << "step " << step;
  }
  EXPECT_TRUE(torch::equal(opt.state(0).at("exp_avg"), m));
  // Padding is never touched.
  EXPECT_EQ(opt.master(0).narrow(0, 8, 8).count_nonzero().item<int64_t>(), 0);
  EXPECT_EQ(ledger.bytes(Tier::Device, MemKind::OptimizerState), 2u * 16 * 4);
  EXPECT_EQ(ledger.bytes(Tier::Device, MemKind::Master), 0u);  // fp32 storage is its own master
}

TEST(FlatOptimizer, PiecesHandEachUpdatedSpanOverWithTheSameNumbers) {
  // A 1000-element group padded to 1024. Stepped in pieces (as ZeRO 1-2 asks, so the all-gather of
  // what is updated can start), the sink sees consecutive pieces front to back, each already final,
  // and the masters equal a whole-span step bit for bit — also inside sub-groups whose size is not
  // a multiple of the piece.
  FlatGroup g;
  g.numel = 1000;
  g.padded_numel = 1024;
  g.slots.push_back({"a", {600}, 0, 600, {}});
  g.slots.push_back({"b", {400}, 600, 400, {}});
  for (int64_t sub : {int64_t{0}, int64_t{500}}) {
    SCOPED_TRACE("sub_group_size " + std::to_string(sub));
    torch::manual_seed(5);
    auto p0 = torch::randn({1024});
    MemoryLedger ledger;
    MasterPlacement placement;
    placement.sub_group_size = sub;
    FlatOptimizer whole(adamw(), {}, {g}, {p0.clone()}, ledger, Tier::Device, KernelCalls::PerPartition, placement);
    FlatOptimizer pieced(adamw(), {}, {g}, {p0.clone()}, ledger, Tier::Device, KernelCalls::PerPartition, placement);
    for (int step = 1; step <= 3; ++step) {
      auto grad = torch::randn({1024});
      whole.step({grad});
      std::vector<std::pair<int64_t, int64_t>> seen;
      pieced.step({grad}, [&](size_t gi, int64_t offset, const torch::Tensor& master) {
        EXPECT_EQ(gi, 0u);
        EXPECT_TRUE(torch::equal(master, whole.master(0).narrow(0, offset, master.numel()))) << "offset " << offset;
        seen.emplace_back(offset, master.numel());
      }, {128});
      int64_t at = 0;
      for (auto [offset, n] : seen) {
        EXPECT_EQ(offset, at) << "pieces come front to back";
        EXPECT_LE(n, 128);
        at += n;
      }
      EXPECT_EQ(at, 1024);
      EXPECT_EQ(seen.size(), sub == 0 ? 8u : 9u);  // [0, 500) and [500, 1000) cut at 128s, then [1000, 1024)
      ASSERT_TRUE(torch::equal(pieced.master(0), whole.master(0))) << "step " << step;
    }
  }
}

TEST(FlatOptimizer, SixteenBitStorageGetsAnFp32MasterCopy) {
  MemoryLedger ledger;
  auto storage = torch::ones({16}, torch::kBFloat16);
  FlatOptimizer opt(adamw(), {}, {layout()}, {storage}, ledger, Tier::Cpu);
  EXPECT_FALSE(opt.master_aliases_storage(0));
  EXPECT_EQ(opt.master(0).scalar_type(), torch::kFloat32);
  EXPECT_EQ(ledger.bytes(Tier::Cpu, MemKind::Master), 16u * 4);
}

TEST(FlatOptimizer, GroupOverridesAndStateNamesPerType) {
  MemoryLedger ledger;
  auto cfg = adamw();
  FlatGroup g1 = layout();
  g1.param_group = 1;
  FlatOptimizer opt(cfg, {{}, {0.5, 0.0}}, {layout(), g1}, {torch::zeros({16}), torch::zeros({16})}, ledger,
                    Tier::Device);
  EXPECT_EQ(opt.lrs(), (std::vector<double>{0.01, 0.5}));
  EXPECT_EQ(opt.state(0).size(), 2u);
  auto sgd = *load_config_text(R"({"train_batch_size": 1, "optimizer": {"type": "SGD",
      "params": {"lr": 0.1, "momentum": 0.9}}})", 1).optimizer;
  FlatOptimizer s(sgd, {}, {layout()}, {torch::zeros({16})}, ledger, Tier::Device);
  EXPECT_EQ(s.state(0).count("momentum_buffer"), 1u);
}

}  // namespace
}  // namespace ds::zero
