// The 1-bit optimizers inside the engine (distributed_tests: worlds 1, 2, 4): 1-bit Adam's warm-up is
// the plain loop's uncorrected Adam over the global batch (with DeepSpeed's set-up step); past the
// warm-up the gradient all-reduce stops, the momenta move compressed, and the replicas stay equal;
// a checkpoint resumes the compressed phase where it was.
#include <gtest/gtest.h>

#include <filesystem>

#include "parallel_equivalence.h"
#include "nn/tensor_buffer.h"
#include "runtime/pipeline_engine.h"
#include "util/error.h"
#include "zero/flat_optimizer.h"

namespace ds {
namespace {

using namespace partest;

std::string onebit_config(const std::string& type, const std::string& params) {
  return fmt::format(R"({{"train_micro_batch_size_per_gpu": {}, "gradient_accumulation_steps": {},
      "gradient_clipping": {}, "optimizer": {{"type": "{}", "params": {{"lr": 1e-3, "weight_decay": 0.01{}}}}}}})",
                     kMicro, kGas, kClip, type, params);
}

// DeepSpeed's 1-bit Adam warm-up in the plain loop: step 1 sets up only; then uncorrected Adam with
// the weight decay added to the update. Per-step losses of each data-parallel rank's samples.
Reference uncorrected_adam_reference(int dp, int steps) {
  auto model = make_model("tiny");
  std::vector<torch::Tensor> m, v;
  for (const auto& p : model->parameters()) {
    m.push_back(torch::zeros_like(p));
    v.push_back(torch::zeros_like(p));
  }
  return reference_loop(model, dp, steps, kClip, [&](int step) {
    if (step == 0) return;  // the set-up step
    torch::NoGradGuard no_grad;
    size_t i = 0;
    for (auto& p : model->parameters()) {
      const auto& g = p.grad();
      m[i].mul_(0.9).add_(g, 1 - 0.9);
      v[i].mul_(0.999).addcmul_(g, g, 1 - 0.999);
      p.add_(-1e-3 * (m[i] / (v[i].sqrt() + 1e-8) + 0.01 * p));
      ++i;
    }
  });
}

TEST(OneBit, AdamWarmUpIsThePlainLoopsUncorrectedAdam) {
  const int world = comm::launcher_world_size();
  const Reference ref = uncorrected_adam_reference(world, 8);
  auto engine = initialize(make_model("tiny"),
                           load_config_text(onebit_config("OneBitAdam", R"(, "freeze_step": 100)"), world, "<1-bit warm-up>"));
  train_like_reference(engine, ref, engine.topology().data().rank(), world, 1e-5, "1-bit Adam warm-up");
  EXPECT_TRUE(engine.optimizer()->wants_reduced_gradients());
  EXPECT_EQ(engine.optimizer()->compressed()->phase(), "warm-up");
}

// Every rank's copy of every parameter, gathered: the largest difference between ranks.
double replica_spread(torch::nn::Module& module, comm::Communicator& c) {
  std::vector<float> mine;
  for (const auto& p : module.parameters()) {
    auto f = p.detach().to(torch::kFloat32).contiguous().view(-1);
    mine.insert(mine.end(), f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
  }
  auto hi = mine, lo = mine;
  c.all_reduce(comm::Buffer(hi.data(), int64_t(hi.size())), comm::ReduceOp::Max);
  c.all_reduce(comm::Buffer(lo.data(), int64_t(lo.size())), comm::ReduceOp::Min);
  double spread = 0;
  for (size_t i = 0; i < hi.size(); ++i) spread = std::max(spread, double(hi[i]) - lo[i]);
  return spread;
}

int64_t gradient_allreduces(const comm::Communicator& c) {
  int64_t n = 0;
  for (const auto& t : c.collective_log().totals())
    if (t.tag == "allreduce_gradients") n += t.calls;
  return n;
}

struct Case {
  std::string type, params;
};

// Twelve steps of kGas micro-batches on the plain engine, each data-parallel rank its own samples:
// every step's loss (this rank's) and the gradient all-reduces counted before step 8.
struct TwelveSteps {
  std::vector<double> losses;
  int64_t reduces_before_step8 = 0;
};
template <class E>
TwelveSteps train_twelve_steps(E& engine) {
  auto data = corpus();
  models::BatchSampler sampler(data, kSeqLen, 7);
  const int d = engine.topology().data().rank(), dp = engine.topology().data().size();
  TwelveSteps run;
  for (int step = 0; step < 12; ++step) {
    if (step == 8) run.reduces_before_step8 = gradient_allreduces(engine.topology().data());
    for (int k = 0; k < kGas; ++k) {
      auto b = batch_for(sampler, step, k, d, dp);
      engine.backward(engine.forward(b.inputs, b.targets));
      engine.step();
    }
    run.losses.push_back(engine.last_loss());
  }
  return run;
}

// Past the warm-up: no gradient all-reduce since step 8, compressed bytes sent, the data-parallel
// replicas equal bit for bit, and the loss fell.
template <class E>
void expect_compressed_replicas_agree(E& engine, const TwelveSteps& run, const std::string& type) {
  const comm::Communicator& dp = engine.topology().data();
  EXPECT_FALSE(engine.optimizer()->wants_reduced_gradients()) << type;
  EXPECT_EQ(gradient_allreduces(dp), run.reduces_before_step8) << type << ": no gradient all-reduce once compressed";
  EXPECT_GT(dp.collective_log().sum_wire_bytes("onebit_"), 0) << type;
  EXPECT_EQ(replica_spread(engine.module(), engine.topology().data()), 0.0) << type << ": replicas equal bit for bit";
  for (double l : run.losses) EXPECT_TRUE(std::isfinite(l)) << type;
  EXPECT_LT(run.losses.back(), run.losses.front()) << type << " still learns";
}

TEST(OneBit, PastTheWarmUpMomentaMoveCompressedAndReplicasAgree) {
  const int world = comm::launcher_world_size();
  if (world == 1) GTEST_SKIP() << "no exchange at world size 1";
  // 0/1 Adam: local steps from step 8, the sync interval 1, 2, then 4 (local_step_scaler 2): step 12 syncs.
  const Case cases[] = {{"OneBitAdam", R"(, "freeze_step": 3)"},
                        {"OneBitLamb", R"(, "freeze_step": 3)"},
                        {"ZeroOneAdam", R"(, "var_freeze_step": 6, "var_update_scaler": 2, "local_step_scaler": 2)"}};
  for (const Case& c : cases) {
    auto engine = initialize(make_model("tiny"), load_config_text(onebit_config(c.type, c.params), world, c.type));
    expect_compressed_replicas_agree(engine, train_twelve_steps(engine), c.type);
  }
}

// Under AutoTP (TP=2 x DP=2, world 4): each tensor-parallel rank's momenta move compressed over its
// own data-parallel group. 1-bit Adam's warm-up is the plain loop's uncorrected Adam over the global
// batch within 1e-5 (the sharded weights' updates are elementwise); past the warm-up (1-bit Adam,
// 0/1 Adam, 1-bit LAMB) the gradient all-reduce stops, the two replicas of each shard stay equal bit
// for bit and the loss falls.
TEST(OneBit, UnderAutoTp) {
  if (comm::launcher_world_size() != 4) GTEST_SKIP() << "world 4 only";
  constexpr int kDp = 2, kWarmUp = 3;
  const Reference ref = uncorrected_adam_reference(kDp, kWarmUp);
  const Case cases[] = {{"OneBitAdam", R"(, "freeze_step": 3)"},
                        {"OneBitLamb", R"(, "freeze_step": 3)"},
                        {"ZeroOneAdam", R"(, "var_freeze_step": 6, "var_update_scaler": 2, "local_step_scaler": 2)"}};
  for (const Case& c : cases) {
    std::string cfg = onebit_config(c.type, c.params);
    cfg.insert(1, R"("tensor_parallel": {"autotp_size": 2}, )");
    auto engine = initialize(make_model("tiny"), load_config_text(cfg, 4, c.type));
    ASSERT_EQ(engine.topology().data().size(), kDp) << c.type;
    const TwelveSteps run = train_twelve_steps(engine);
    const size_t d = size_t(engine.topology().data().rank());
    for (int step = 0; step < kWarmUp && c.type == "OneBitAdam"; ++step) {
      const double want = ref.losses[d][size_t(step)];
      EXPECT_LE(std::abs(run.losses[size_t(step)] - want), 1e-5 * std::abs(want)) << c.type << " warm-up step " << step;
    }
    expect_compressed_replicas_agree(engine, run, c.type);
  }
}

// On pipeline stages (PP=2 x DP=2, world 4): the warm-up is the plain loop's uncorrected Adam over
// the global batch, step for step within 1e-5; past it each stage's momenta move compressed over its
// data-parallel group, its gradient all-reduce stops, each stage's two replicas stay equal and so do
// the tied wte's copies on the first and last stage (1-bit Adam, and 0/1 Adam as the data-parallel
// test above runs it; 1-bit LAMB, whose exchange keeps the tied wte apart from each stage's other
// parameters: joined, as DeepSpeed does, the copies drifted 2.8e-3 apart in 8 steps).
TEST(OneBit, OnPipelineStages) {
  if (comm::launcher_world_size() != 4) GTEST_SKIP() << "world 4 only";
  constexpr int kDp = 2, kWarmUp = 3, kAll = 12;
  const Reference ref = uncorrected_adam_reference(kDp, kWarmUp);
  auto make = [](const Case& c) {
    std::string cfg = onebit_config(c.type, c.params);
    cfg.insert(1, R"("pipeline": {"stages": 2}, )");
    auto model = make_model("tiny");
    return initialize_pipeline(model, load_config_text(cfg, 4, c.type),
                               {"parameters", [m = model.get()](const torch::Tensor& logits, const torch::Tensor& y) {
                                  return m->loss(logits, y);
                                }});
  };
  // 0/1 Adam as the data-parallel test runs it: local steps from step 8, syncs at 9, 10 and 12.
  const Case cases[] = {{"OneBitAdam", R"(, "freeze_step": 3)"},
                        {"ZeroOneAdam", R"(, "var_freeze_step": 6, "var_update_scaler": 2, "local_step_scaler": 2)"},
                        {"OneBitLamb", R"(, "freeze_step": 3)"}};
  for (const Case& c : cases) {
    auto engine = make(c);
    ASSERT_EQ(engine.topology().data().size(), kDp);
    auto data = corpus();
    models::BatchSampler sampler(data, kSeqLen, 7);
    const int d = engine.topology().data().rank();
    const comm::Communicator& dp = engine.topology().data();
    int64_t reduces_at_freeze = 0;
    std::vector<double> losses;
    for (int step = 0; step < kAll; ++step) {
      if (step == (c.type == "ZeroOneAdam" ? 8 : kWarmUp + 1)) reduces_at_freeze = gradient_allreduces(dp);
      int k = 0;
      losses.push_back(engine.train_batch([&] {
        auto b = batch_for(sampler, step, k++, d, kDp);
        return PipeBatch{b.inputs, b.targets};
      }));
      if (step < kWarmUp && c.type == "OneBitAdam") {
        const double want = (ref.losses[0][size_t(step)] + ref.losses[1][size_t(step)]) / 2;
        EXPECT_LE(std::abs(losses.back() - want), 1e-5 * std::abs(want)) << c.type << " warm-up step " << step;
      }
    }
    EXPECT_FALSE(engine.optimizer()->wants_reduced_gradients()) << c.type;
    EXPECT_EQ(gradient_allreduces(dp), reduces_at_freeze) << c.type << ": no gradient all-reduce once compressed";
    EXPECT_GT(dp.collective_log().sum_wire_bytes("onebit_"), 0) << c.type;
    EXPECT_EQ(replica_spread(engine.pipeline_module(), engine.topology().data()), 0.0) << c.type;
    // The tied wte's copies on the first and the last stage stay equal too.
    ASSERT_EQ(engine.pipeline_module().tied().size(), 1u);
    const auto& tie = engine.pipeline_module().tied().front();
    torch::Tensor wte = engine.pipeline_module().named_parameters()[tie.name].detach().contiguous();
    torch::Tensor hi = wte.clone(), lo = wte.clone();
    tie.group->all_reduce(nn::as_buffer(hi), comm::ReduceOp::Max);
    tie.group->all_reduce(nn::as_buffer(lo), comm::ReduceOp::Min);
    EXPECT_EQ((hi - lo).abs().max().item<double>(), 0.0) << c.type << ": the tied copies of " << tie.name;
    for (double l : losses) EXPECT_TRUE(std::isfinite(l)) << c.type;
    EXPECT_LT(losses.back(), losses.front()) << c.type << " still learns";
  }
}

// ParamGroup::exp_avg_mask (DeepSpeed's param_group["exp_avg_mask"]): the rows of wpe it masks take
// no step once the momenta move compressed (their group has no weight decay), while the rows it
// keeps, and the same rows without a mask, do; it names the parameter or the optimizer it cannot serve.
TEST(OneBit, ExpAvgMaskHoldsTheMaskedElements) {
  const int world = comm::launcher_world_size();
  if (world != 2) GTEST_SKIP() << "world 2 only";
  const std::string wpe = "transformer.wpe.weight";
  const std::vector<std::string> types{"OneBitAdam", "OneBitLamb", "ZeroOneAdam"};
  const std::vector<std::string> params{R"(, "freeze_step": 3)", R"(, "freeze_step": 3)",
                                        R"(, "var_freeze_step": 3, "var_update_scaler": 1, "local_step_scaler": 1)"};
  for (size_t t = 0; t < types.size(); ++t)
    for (bool masked : {true, false}) {
      auto model = make_model("tiny");
      std::vector<std::string> rest;
      for (const auto& p : model->named_parameters())
        if (p.key() != wpe) rest.push_back(p.key());
      ParamGroup group{{wpe}, std::nullopt, 0.0};
      const torch::Tensor w = model->named_parameters()[wpe];
      if (masked) {
        group.exp_avg_mask = torch::ones_like(w);
        group.exp_avg_mask.narrow(0, 0, 4).zero_();  // positions 0-3: every sample reaches them
      }
      auto engine = initialize(model, load_config_text(onebit_config(types[t], params[t]), world, types[t]),
                               std::vector<ParamGroup>{group, ParamGroup{rest, std::nullopt, std::nullopt}});
      auto data = corpus();
      models::BatchSampler sampler(data, kSeqLen, 7);
      const int d = engine.topology().data().rank();
      torch::Tensor at_freeze;
      for (int step = 0; step < 8; ++step) {
        if (step == 4) at_freeze = w.detach().clone();  // the first compressed step is step 4
        for (int k = 0; k < kGas; ++k) {
          auto b = batch_for(sampler, step, k, d, world);
          engine.backward(engine.forward(b.inputs, b.targets));
          engine.step();
        }
      }
      const double held = (w.detach().narrow(0, 0, 4) - at_freeze.narrow(0, 0, 4)).abs().max().item<double>();
      const double kept = (w.detach().narrow(0, 4, 4) - at_freeze.narrow(0, 4, 4)).abs().max().item<double>();
      EXPECT_GT(kept, 0.0) << types[t] << ": unmasked rows move";
      if (masked) {
        EXPECT_EQ(held, 0.0) << types[t] << ": masked rows take no compressed step";
      } else {
        EXPECT_GT(held, 0.0) << types[t] << ": without the mask the same rows move";
      }
    }
  // A mask of another shape names the parameter; another optimizer names optimizer.type.
  auto bad_shape = [&](const std::string& type) {
    auto model = make_model("tiny");
    std::vector<std::string> rest;
    for (const auto& p : model->named_parameters())
      if (p.key() != wpe) rest.push_back(p.key());
    ParamGroup group{{wpe}, std::nullopt, std::nullopt, torch::ones({3})};
    try {
      initialize(model, load_config_text(onebit_config(type, type == "OneBitAdam" ? R"(, "freeze_step": 3)" : ""), world, type),
                 std::vector<ParamGroup>{group, ParamGroup{rest, std::nullopt, std::nullopt}});
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string shape = bad_shape("OneBitAdam");
  EXPECT_NE(shape.find("exp_avg_mask"), std::string::npos) << shape;
  EXPECT_NE(shape.find(wpe), std::string::npos) << shape;
  const std::string adam = bad_shape("AdamW");
  EXPECT_NE(adam.find("optimizer.type"), std::string::npos) << adam;
  EXPECT_NE(adam.find("exp_avg_mask"), std::string::npos) << adam;
}

TEST(OneBit, CheckpointResumesTheCompressedPhase) {
  const int world = comm::launcher_world_size();
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("ds_onebit_ckpt_w{}", world);
  const std::string cfg = onebit_config("OneBitAdam", R"(, "freeze_step": 3)");
  auto data = corpus();
  models::BatchSampler sampler(data, kSeqLen, 7);
  auto train = [&](auto& e, int from, int to) {
    std::vector<double> losses;
    for (int step = from; step < to; ++step) {
      for (int k = 0; k < kGas; ++k) {
        auto b = batch_for(sampler, step, k, e.topology().data().rank(), world);
        e.backward(e.forward(b.inputs, b.targets));
        e.step();
      }
      losses.push_back(e.last_loss());
    }
    return losses;
  };
  auto first = initialize(make_model("tiny"), load_config_text(cfg, world, "<1-bit save>"));
  train(first, 0, 6);
  first.save_checkpoint(dir.string(), "six");
  const auto straight = train(first, 6, 9);
  auto second = initialize(make_model("tiny"), load_config_text(cfg, world, "<1-bit load>"));
  ASSERT_TRUE(second.load_checkpoint(dir.string(), "six"));
  EXPECT_FALSE(second.optimizer()->wants_reduced_gradients()) << "the compressed phase is restored";
  EXPECT_EQ(second.optimizer()->compressed()->steps(), 6);
  const auto resumed = train(second, 6, 9);
  // The error buffers came back with the rest (same world size): the resumed run is the straight one.
  for (size_t i = 0; i < resumed.size(); ++i) EXPECT_EQ(resumed[i], straight[i]) << "step " << 6 + i;
  second.communicator().barrier();
  if (second.rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ds
