// Pipeline parallelism (issue 17) against the one-process plain LibTorch loop over the same global
// batch: GPT-2 of 8 layers (embed, h.0-h.7, head; wte tied between the first and the last stage),
// fp32, AdamW with clipping active on every step, 20 steps of GAS micro-batches on DeepSpeed's 1F1B
// schedule. Under mpirun -np 2: PP=2 with ZeRO 0 and 1, and plain SGD; -np 4: PP=4, PP=2 x DP=2
// (ZeRO-1) and PP=2 x TP=2; -np 8: PP=2 x TP=2 x DP=2. Each step's loss and every parameter a stage
// holds (the tied copies on both ends) are within 1e-5 of the reference, and so is eval_batch's loss
// afterwards. At world 1: one stage, and the refusals.
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include "models/causal_lm.h"
#include "parallel_equivalence.h"
#include "util/error.h"

namespace ds {
namespace {

std::string pipe_config(int stages, int stage, int tp = 1, partest::Optimizer how = {}) {
  std::string cfg = partest::engine_config(stage, tp, 1, how);
  cfg.insert(1, fmt::format(R"("pipeline": {{"stages": {}}}, )", stages));
  return cfg;
}

parallel::PipelineModuleOptions lm_options(const std::string& method = "parameters") {
  return {method, [](const torch::Tensor& logits, const torch::Tensor& labels) { return models::lm_loss(logits, labels); }};
}

void pipe_expect_matches_reference(int stages, int stage, int tp = 1, partest::Optimizer how = {},
                                   const std::string& method = "parameters") {
  const int world = comm::launcher_world_size();
  const int dp = world / stages / tp;
  const partest::Reference ref = partest::reference("deep8", dp, partest::kSteps, how);
  auto model = partest::make_model("deep8");
  auto engine = initialize_pipeline(model, load_config_text(pipe_config(stages, stage, tp, how), world, "<pipe test>"),
                                    lm_options(method));
  ASSERT_EQ(engine.num_stages(), stages);
  ASSERT_EQ(engine.topology().data().size(), dp);
  const std::string what = fmt::format("pp {} tp {} dp {} stage {} ({})", stages, tp, dp, stage, method);
  const int d = engine.topology().data().rank();
  auto data = partest::corpus();
  models::BatchSampler sampler(data, partest::kSeqLen, 7);
  for (int step = 0; step < partest::kSteps; ++step) {
    int micro = 0;
    const double mean = engine.train_batch([&] {
      auto b = partest::batch_for(sampler, step, micro++, d, dp);
      return PipeBatch{b.inputs, b.targets};
    });
    if (engine.is_first_stage() || engine.is_last_stage()) EXPECT_EQ(micro, partest::kGas) << what;
    const double want = ref.losses[size_t(d)][size_t(step)];
    EXPECT_LE(std::abs(engine.last_loss() - want), 1e-5 * std::abs(want))
        << what << " step " << step << ": engine " << engine.last_loss() << " vs reference " << want;
    double want_mean = 0;
    for (const auto& r : ref.losses) want_mean += r[size_t(step)] / double(dp);
    EXPECT_LE(std::abs(mean - want_mean), 1e-5 * std::abs(want_mean)) << what << " step " << step;
  }
  EXPECT_EQ(engine.global_steps(), partest::kSteps);
  size_t held = 0;
  for (const auto& p : engine.pipeline_module().named_parameters()) {
    const torch::Tensor& want = ref.params.at(p.key());
    if (p.value().sizes() != want.sizes()) continue;  // a TP slice (the AutoTP test checks slices)
    ++held;
    EXPECT_LE((p.value().detach() - want).abs().max().item<double>(), 1e-5) << what << ": " << p.key();
  }
  EXPECT_GT(held, 0u) << what;

  // eval_batch: the trained pipe's mean loss on step 0's micro-batches is the reference model's.
  auto check = partest::make_model("deep8");
  {
    torch::NoGradGuard no_grad;
    for (auto& p : check->named_parameters()) p.value().copy_(ref.params.at(p.key()));
  }
  double want_eval = 0;
  for (int r = 0; r < dp; ++r)
    for (int m = 0; m < partest::kGas; ++m) {
      auto b = partest::batch_for(sampler, 0, m, r, dp);
      want_eval += check->forward(b.inputs, b.targets).item<double>() / double(dp * partest::kGas);
    }
  int micro = 0;
  const double eval = engine.eval_batch([&] {
    auto b = partest::batch_for(sampler, 0, micro++, d, dp);
    return PipeBatch{b.inputs, b.targets};
  });
  EXPECT_LE(std::abs(eval - want_eval), 1e-5 * std::abs(want_eval)) << what << ": eval_batch";
  EXPECT_EQ(engine.global_steps(), partest::kSteps) << "eval_batch takes no step";
  if (engine.is_first_stage() || engine.is_last_stage())
    EXPECT_TRUE(engine.pipeline_module().named_parameters().contains("transformer.wte.weight")) << what;
}

TEST(Pipeline, OneStageIsThePlainLoop) {
  if (!partest::world_is({1})) GTEST_SKIP() << "world 1 only";
  pipe_expect_matches_reference(1, 1);
}

TEST(Pipeline, TwoStagesMatchTheReference) {
  if (!partest::world_is({2})) GTEST_SKIP() << "world 2 only";
  pipe_expect_matches_reference(2, 0);
  pipe_expect_matches_reference(2, 1, 1, {}, "uniform");
  pipe_expect_matches_reference(2, 1, 1, {.sgd = true});
}

TEST(Pipeline, FourStagesAndThreeDMatchTheReference) {
  if (!partest::world_is({4})) GTEST_SKIP() << "world 4 only";
  pipe_expect_matches_reference(4, 1);
  pipe_expect_matches_reference(2, 1);      // PP 2 x DP 2, ZeRO-1 across the data group
  pipe_expect_matches_reference(2, 1, 2);   // PP 2 x TP 2
}

TEST(Pipeline, ThreeDOnEightRanks) {
  if (!partest::world_is({8})) GTEST_SKIP() << "world 8 only (ctest distributed_tests_pipeline_np8)";
  pipe_expect_matches_reference(2, 1, 2);  // PP 2 x TP 2 x DP 2, ZeRO-1 across the data group
}

TEST(Pipeline, PartitionAndTies) {
  if (!partest::world_is({2})) GTEST_SKIP() << "world 2 only";
  auto model = partest::make_model("deep8");
  const int world = comm::launcher_world_size();
  auto engine = initialize_pipeline(model, load_config_text(pipe_config(2, 1), world, "<pipe test>"), lm_options());
  const auto& pm = engine.pipeline_module();
  EXPECT_EQ(pm.parts(), (std::vector<int>{0, 5, 10})) << pm.describe_partition();
  ASSERT_EQ(pm.tied().size(), 1u);
  EXPECT_EQ(pm.tied()[0].name, "transformer.wte.weight");
  EXPECT_EQ(pm.tied()[0].stages, (std::vector<int>{0, 1}));
  EXPECT_EQ(pm.tied()[0].counts_in_norm, engine.is_first_stage());
  // The other stage's parameters are released; this stage's modules keep the model's names.
  const auto names = pm.stage_parameter_names();
  for (const auto& p : model->named_parameters()) {
    const bool mine = std::find(names.begin(), names.end(), p.key()) != names.end();
    EXPECT_EQ(p.value().numel() > 0, mine) << p.key();
    EXPECT_EQ(pm.named_parameters().contains(p.key()), mine) << p.key();
  }
}

TEST(Pipeline, Refusals) {
  const int world = comm::launcher_world_size();
  if (world == 2) {
    // A plain engine cannot run stages: the error says what to use.
    try {
      initialize(partest::make_model("tiny"), load_config_text(pipe_config(2, 1), world, "<pipe test>"));
      ADD_FAILURE() << "expected ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("pipeline.stages: 2 stages need the model cut into stages"), std::string::npos)
          << e.what();
    }
    // ZeRO 2 and 3 partition gradients during backward: refused with pipelines, as DeepSpeed does.
    try {
      initialize_pipeline(partest::make_model("tiny"), load_config_text(pipe_config(2, 2), world, "<pipe test>"),
                          lm_options());
      ADD_FAILURE() << "expected ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.path(), "zero_optimization.stage") << e.what();
    }
  }
  // More stages than layers, and a method that matches nothing.
  if (world == 4) {
    auto tiny = partest::make_model("tiny");  // embed, h.0, h.1, head: 4 layers over 4 stages is fine
    EXPECT_THROW(initialize_pipeline(partest::make_model("tiny"),
                                     load_config_text(pipe_config(4, 1), world, "<pipe test>"), lm_options("type:nothing")),
                 ConfigError);
  }
}

}  // namespace
}  // namespace ds
