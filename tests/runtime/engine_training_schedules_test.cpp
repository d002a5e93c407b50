// DeepSpeed's step-driven schedules in training, against the one-process plain LibTorch loop:
// "curriculum_learning" (seqlen) trains each step on the schedule's sequence length — the plain
// engine at any world size and a pipeline whose activations change shape between steps (and again
// for eval_batch); "progressive_layer_drop" skips the blocks its draws name, the same ones at any
// world size, under ZeRO 2 and 3, activation checkpointing's recompute and a pipeline's 1F1B order.
// Losses and parameters within 1e-5 of the loop that truncates and drops the same way.
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "models/causal_lm.h"
#include "parallel_equivalence.h"
#include "runtime/progressive_layer_drop.h"

namespace ds {
namespace {

constexpr int kScheduleSteps = 8;

// The curriculum the tests run: 8 tokens for steps 1-3, 12 for 4-6, then the corpus windows' 16.
constexpr const char* kCurriculum = R"("curriculum_learning": {"enabled": true, "curriculum_type": "seqlen",
    "min_difficulty": 8, "max_difficulty": 16, "schedule_type": "fixed_discrete",
    "schedule_config": {"difficulty": [8, 12, 16], "max_step": [3, 6]}}, )";
int64_t curriculum_seqlen_at(int step) { return step < 3 ? 8 : step < 6 ? 12 : 16; }  // step 0-based

struct LayerDrop {
  double theta = 0.5, gamma = 0.5;
  // The theta step `step` (0-based) runs its forwards at: 1.0, then DeepSpeed's update at each
  // boundary before the step.
  double at(int step) const { return step == 0 ? 1.0 : (1.0 - theta) * std::exp(-gamma * (step - 1)) + theta; }
  std::string json() const {
    return fmt::format(R"("progressive_layer_drop": {{"enabled": true, "theta": {}, "gamma": {}}}, )", theta, gamma);
  }
};

struct Plain {
  partest::Reference ref;
  int dropped = 0;  // blocks the draws skipped over the run
};

// The plain loop over the global batch with the curriculum's truncation and the layer drop's
// draws applied by hand (the draw for the micro-batch's place in the global order).
Plain plain_loop(const std::string& which, int dp, int steps, bool curriculum, std::optional<LayerDrop> drop) {
  auto model = partest::make_model(which);
  torch::optim::AdamW adam(model->parameters(),
                           torch::optim::AdamWOptions(1e-3).betas({0.9, 0.999}).eps(1e-8).weight_decay(0.01));
  auto data = partest::corpus();
  models::BatchSampler sampler(data, partest::kSeqLen, 7);
  const nn::LayerList& layers = model->layers();
  Plain out;
  out.ref.losses.assign(size_t(dp), {});
  for (int step = 0; step < steps; ++step) {
    model->zero_grad();
    for (int d = 0; d < dp; ++d) {
      double sum = 0;
      for (int m = 0; m < partest::kGas; ++m) {
        auto b = partest::batch_for(sampler, step, m, d, dp);
        if (curriculum) b = {truncate_to_seqlen(b.inputs, curriculum_seqlen_at(step)),
                             truncate_to_seqlen(b.targets, curriculum_seqlen_at(step))};
        torch::Tensor h = b.inputs;
        const uint64_t micro_batch = uint64_t((step * partest::kGas + m) * dp + d);
        for (const auto& layer : layers) {
          if (!drop || layer.block == 0) {
            h = layer.forward(h);
            continue;
          }
          const double p = ProgressiveLayerDrop::keep_probability(layer.block, layer.blocks, drop->at(step));
          if (p < 1.0 && !ProgressiveLayerDrop::keeps(micro_batch, layer.block, p)) {
            ++out.dropped;
            continue;
          }
          h = p < 1.0 ? h + (layer.forward(h) - h) / p : layer.forward(h);
        }
        const torch::Tensor loss = model->loss(h, b.targets);
        (loss / double(dp * partest::kGas)).backward();
        sum += loss.item<double>();
      }
      out.ref.losses[size_t(d)].push_back(sum / partest::kGas);
    }
    torch::nn::utils::clip_grad_norm_(model->parameters(), partest::kClip);
    adam.step();
  }
  for (const auto& p : model->named_parameters()) out.ref.params[p.key()] = p.value().detach().clone();
  return out;
}

void expect_params_match(const torch::OrderedDict<std::string, torch::Tensor>& got, const partest::Reference& ref,
                         const std::string& what) {
  size_t held = 0;
  for (const auto& p : got) {
    const torch::Tensor& want = ref.params.at(p.key());
    if (p.value().sizes() != want.sizes()) continue;
    ++held;
    EXPECT_LE((p.value().detach() - want).abs().max().item<double>(), 1e-5) << what << ": " << p.key();
  }
  EXPECT_GT(held, 0u) << what;
}

TEST(Curriculum, EachStepTrainsAtTheSchedulesSeqlenAsThePlainLoop) {
  const int world = comm::launcher_world_size();
  const Plain plain = plain_loop("tiny", world, kScheduleSteps, true, std::nullopt);
  std::string cfg = partest::engine_config(2, 1, 1);
  cfg.insert(1, kCurriculum);
  auto model = partest::make_model("tiny");
  auto engine = initialize(model, load_config_text(cfg, world, "<curriculum test>"));
  ASSERT_NE(engine.curriculum_scheduler(), nullptr);
  EXPECT_EQ(engine.curriculum_scheduler()->get_current_difficulty(), 8) << "min_difficulty before any step";
  auto data = partest::corpus();
  models::BatchSampler sampler(data, partest::kSeqLen, 7);
  const int d = engine.topology().data().rank();
  for (int step = 0; step < kScheduleSteps; ++step) {
    const std::optional<int64_t> seqlen = engine.curriculum_seqlen();
    ASSERT_TRUE(seqlen.has_value());
    EXPECT_EQ(*seqlen, curriculum_seqlen_at(step)) << "step " << step;
    for (int m = 0; m < partest::kGas; ++m) {
      auto b = partest::batch_for(sampler, step, m, d, world);
      engine.backward(engine.forward(truncate_to_seqlen(b.inputs, *seqlen), truncate_to_seqlen(b.targets, *seqlen)));
      engine.step();
    }
    const double want = plain.ref.losses[size_t(d)][size_t(step)];
    EXPECT_LE(std::abs(engine.last_loss() - want), 1e-5 * std::abs(want)) << "step " << step;
  }
  expect_params_match(engine.module().named_parameters(), plain.ref, "curriculum");
  // The forward moves the difficulty on by itself (DeepSpeed's engine does it in forward).
  engine.curriculum_scheduler()->set_current_difficulty(8);
  auto b = partest::batch_for(sampler, kScheduleSteps, 0, d, world);
  engine.forward(b.inputs, b.targets);
  EXPECT_EQ(engine.curriculum_scheduler()->get_current_difficulty(), 16);
}

TEST(Curriculum, PipelineStagesResendShapesWhenTheSeqlenChanges) {
  if (!partest::world_is({2, 4})) GTEST_SKIP() << "two pipeline stages (x DP=2 at world 4)";
  const int world = comm::launcher_world_size(), dp = world / 2;
  const int steps = kScheduleSteps + 1;  // one more after the eval_batch
  const Plain plain = plain_loop("deep8", dp, steps, true, std::nullopt);
  const Plain at_eval = plain_loop("deep8", dp, kScheduleSteps, true, std::nullopt);
  std::string cfg = partest::engine_config(1, 1, 1);
  cfg.insert(1, std::string(kCurriculum) + R"("pipeline": {"stages": 2}, )");
  auto model = partest::make_model("deep8");
  auto engine = initialize_pipeline(model, load_config_text(cfg, world, "<curriculum pipe test>"),
                                    {"parameters", [m = model.get()](const torch::Tensor& logits, const torch::Tensor& labels) {
                                       return m->loss(logits, labels);
                                     }});
  auto data = partest::corpus();
  models::BatchSampler sampler(data, partest::kSeqLen, 7);
  const int d = engine.topology().data().rank();
  auto train = [&](int step) {
    const int64_t seqlen = engine.curriculum_seqlen().value();
    int micro = 0;
    engine.train_batch([&] {
      auto b = partest::batch_for(sampler, step, micro++, d, dp);
      return PipeBatch{truncate_to_seqlen(b.inputs, seqlen), truncate_to_seqlen(b.targets, seqlen)};
    });
    const double want = plain.ref.losses[size_t(d)][size_t(step)];
    EXPECT_LE(std::abs(engine.last_loss() - want), 1e-5 * std::abs(want)) << "step " << step;
  };
  for (int step = 0; step < kScheduleSteps; ++step) train(step);
  // eval_batch at the windows' whole length: the reference model after the same steps.
  const double want_eval = partest::reference_eval_loss("deep8", at_eval.ref.params, dp);
  int micro = 0;
  const double eval = engine.eval_batch([&] {
    auto b = partest::batch_for(sampler, 0, micro++, d, dp);
    return PipeBatch{b.inputs, b.targets};
  });
  EXPECT_LE(std::abs(eval - want_eval), 1e-5 * std::abs(want_eval)) << "eval_batch at 16 tokens";
  train(kScheduleSteps);  // training again after the eval's shapes
  expect_params_match(engine.pipeline_module().named_parameters(), plain.ref, "curriculum pipeline");
}

// The layer drop at theta 0.5 and a fast gamma: by step 4 about a third of the blocks are skipped.
void expect_layer_drop_matches(int stage, const std::string& more, const std::string& what) {
  const int world = comm::launcher_world_size();
  const LayerDrop drop;
  const Plain plain = plain_loop("deep", world, kScheduleSteps, false, drop);
  ASSERT_GT(plain.dropped, 0) << "the run must skip blocks to test anything";
  std::string cfg = partest::engine_config(stage, 1, 1);
  cfg.insert(1, drop.json() + more);
  auto engine = initialize(partest::make_model("deep"), load_config_text(cfg, world, "<layer drop test>"));
  ASSERT_TRUE(engine.get_pld_theta().has_value());
  auto data = partest::corpus();
  models::BatchSampler sampler(data, partest::kSeqLen, 7);
  const int d = engine.topology().data().rank();
  for (int step = 0; step < kScheduleSteps; ++step) {
    EXPECT_DOUBLE_EQ(*engine.get_pld_theta(), drop.at(step)) << what << " step " << step;
    for (int m = 0; m < partest::kGas; ++m) {
      auto b = partest::batch_for(sampler, step, m, d, world);
      engine.backward(engine.forward(b.inputs, b.targets));
      engine.step();
    }
    const double want = plain.ref.losses[size_t(d)][size_t(step)];
    EXPECT_LE(std::abs(engine.last_loss() - want), 1e-5 * std::abs(want)) << what << " step " << step;
  }
  if (engine.zero_plan().stage < 3) expect_params_match(engine.module().named_parameters(), plain.ref, what);
}

TEST(ProgressiveLayerDrop, SkipsTheBlocksItsDrawsNameAtAnyWorldSize) {
  expect_layer_drop_matches(2, "", "ZeRO 2");
  expect_layer_drop_matches(2, R"("activation_checkpointing": {"number_checkpoints": 2}, )", "ZeRO 2 + checkpointing");
  expect_layer_drop_matches(3, "", "ZeRO 3");
}

TEST(ProgressiveLayerDrop, PipelineStagesDropWhatTheirMicroBatchesDraw) {
  if (!partest::world_is({2})) GTEST_SKIP() << "two pipeline stages";
  const LayerDrop drop;
  const Plain plain = plain_loop("deep8", 1, kScheduleSteps, false, drop);
  std::string cfg = partest::engine_config(1, 1, 1);
  cfg.insert(1, drop.json() + R"("pipeline": {"stages": 2, "activation_checkpoint_interval": 1}, )");
  auto model = partest::make_model("deep8");
  auto engine = initialize_pipeline(model, load_config_text(cfg, 2, "<layer drop pipe test>"),
                                    {"parameters", [m = model.get()](const torch::Tensor& logits, const torch::Tensor& labels) {
                                       return m->loss(logits, labels);
                                     }});
  auto data = partest::corpus();
  models::BatchSampler sampler(data, partest::kSeqLen, 7);
  for (int step = 0; step < kScheduleSteps; ++step) {
    int micro = 0;
    engine.train_batch([&] {
      auto b = partest::batch_for(sampler, step, micro++, 0, 1);
      return PipeBatch{b.inputs, b.targets};
    });
    const double want = plain.ref.losses[0][size_t(step)];
    EXPECT_LE(std::abs(engine.last_loss() - want), 1e-5 * std::abs(want)) << "step " << step;
  }
  expect_params_match(engine.pipeline_module().named_parameters(), plain.ref, "layer drop pipeline");
}

}  // namespace
}  // namespace ds
