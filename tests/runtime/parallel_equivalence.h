// What the tensor- and sequence-parallel equivalence tests share: the models (GPT-2 tiny, a 4-layer
// 8-head GPT, Llama with GQA, OPT, all small), the corpus, which samples each data-parallel rank
// takes, and the one-process plain LibTorch loop over the same global batch that the engines are
// held to (AdamW with clipping active on every step, or plain SGD without).
#pragma once

#include <deepspeed/deepspeed.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "format/safetensors.h"
#include "models/gpt2.h"
#include "models/pretrained.h"
#include "models/token_data.h"
#include "zero/dtype_plan.h"

namespace ds::partest {

constexpr int kSteps = 20;
constexpr int kMicro = 2, kGas = 2;
constexpr int64_t kSeqLen = 16;
constexpr double kClip = 0.1;  // below every step's norm: a wrongly counted norm changes every update

// True when the launcher started one of these world sizes.
inline bool world_is(std::initializer_list<int> worlds) {
  const int w = comm::launcher_world_size();
  return std::find(worlds.begin(), worlds.end(), w) != worlds.end();
}

// "tiny": GPT-2 tiny (64 wide, 2 layers, 4 heads); "deep": 4 layers, 8 heads; "deep8": 8 layers, 4 heads;
// "vocab257": tiny with 257 tokens.
inline models::GPT2Config gpt2_shape(const std::string& which) {
  models::GPT2Config c = models::GPT2Config::preset("tiny");
  if (which == "deep") {
    c.n_layer = 4;
    c.n_head = 8;
  }
  if (which == "deep8") c.n_layer = 8;
  if (which == "vocab257") c.vocab_size = 257;  // splits unevenly over 2 and 4 ranks (vocab-parallel)
  return c;
}

// The Hugging Face families at the same size: Llama with GQA (4 heads, 2 kv heads) and OPT.
inline nlohmann::json hf_config(const std::string& which) {
  if (which == "llama")
    return {{"model_type", "llama"}, {"vocab_size", 256}, {"hidden_size", 32}, {"intermediate_size", 48},
            {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
            {"max_position_embeddings", 64}};
  return {{"model_type", "opt"}, {"vocab_size", 256}, {"hidden_size", 32}, {"ffn_dim", 48}, {"num_hidden_layers", 2},
          {"num_attention_heads", 4}, {"max_position_embeddings", 64}};
}

// "tiny" / "deep": GPT-2; "llama", "opt": the HF families. The same weights for the same name.
inline std::shared_ptr<models::CausalLM> make_model(const std::string& which) {
  torch::manual_seed(2024);
  if (which == "llama" || which == "opt") return models::from_config(hf_config(which));
  return models::GPT2(gpt2_shape(which)).ptr();
}

inline models::TokenDataset corpus() {
  std::string text;
  for (int i = 0; i < 150; ++i) text += "a stitch in time saves nine " + std::to_string(i * 37 % 101) + ". ";
  return models::TokenDataset::from_text(text);
}

// Samples of (step, micro-step, data-parallel rank): each DP rank its own, every rank of a tensor-
// or sequence-parallel group the same.
inline models::Batch batch_for(const models::BatchSampler& s, int step, int micro, int dp_rank, int dp) {
  return s.batch(((int64_t{step} * kGas + micro) * dp + dp_rank) * kMicro, kMicro);
}

// AdamW with clipping (the issues' check), or plain SGD without: Adam and clipping both hide a
// gradient's scale, which SGD does not.
struct Optimizer {
  bool sgd = false;
  double clip() const { return sgd ? 0.0 : kClip; }
  // The engine config's "optimizer" section (and what ZeRO needs to run SGD).
  std::string json() const {
    return sgd ? R"({"type": "SGD", "params": {"lr": 0.1}}, "zero_allow_untested_optimizer": true)"
               : R"({"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}})";
  }
};

// The engine's config for the same run: micro-batch, GAS, clipping and optimizer as the reference,
// AutoTP over `tp` ranks and Ulysses over `sp`, ZeRO `stage` with small buckets.
inline std::string engine_config(int stage, int tp, int sp, Optimizer how = {}, int micro = kMicro) {
  return fmt::format(R"({{"train_micro_batch_size_per_gpu": {}, "gradient_accumulation_steps": {},
      "gradient_clipping": {}, "sequence_parallel_size": {}, "tensor_parallel": {{"autotp_size": {}}},
      "optimizer": {},
      "zero_optimization": {{"stage": {}, "reduce_bucket_size": 4000, "stage3_param_persistence_threshold": 0}}}})",
                     micro, kGas, how.clip(), sp, tp == 1 ? 0 : tp, how.json(), stage);
}

struct Reference {
  std::vector<std::vector<double>> losses;  // [dp rank][step]: the mean over its micro-steps
  std::map<std::string, torch::Tensor> params;
};

// The plain loop over the whole global batch (dp x GAS micro-batches per step) on `model`: the
// gradients clipped to `clip` (> 0), then `update(step)` applies the step.
inline Reference reference_loop(const std::shared_ptr<models::CausalLM>& model, int dp, int steps, double clip,
                                const std::function<void(int step)>& update) {
  auto data = corpus();
  models::BatchSampler sampler(data, kSeqLen, 7);
  Reference ref;
  ref.losses.assign(dp, {});
  for (int step = 0; step < steps; ++step) {
    model->zero_grad();
    for (int d = 0; d < dp; ++d) {
      double sum = 0.0;
      for (int m = 0; m < kGas; ++m) {
        auto b = batch_for(sampler, step, m, d, dp);
        auto loss = model->forward(b.inputs, b.targets);
        (loss / double(dp * kGas)).backward();
        sum += loss.item<double>();
      }
      ref.losses[d].push_back(sum / kGas);
    }
    if (clip > 0) torch::nn::utils::clip_grad_norm_(model->parameters(), clip);
    update(step);
  }
  for (const auto& p : model->named_parameters()) ref.params[p.key()] = p.value().detach().clone();
  return ref;
}

// The plain loop with torch's AdamW or SGD.
inline Reference reference(const std::string& which, int dp, int steps = kSteps, Optimizer how = {}) {
  auto model = make_model(which);
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (how.sgd)
    optimizer = std::make_unique<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  else
    optimizer = std::make_unique<torch::optim::AdamW>(
        model->parameters(), torch::optim::AdamWOptions(1e-3).betas({0.9, 0.999}).eps(1e-8).weight_decay(0.01));
  return reference_loop(model, dp, steps, how.clip(), [&](int) { optimizer->step(); });
}

// The mean loss of step 0's micro-batches over the dp replicas, on model `which` holding `params`:
// what a pipeline's eval_batch after training must report.
inline double reference_eval_loss(const std::string& which, const std::map<std::string, torch::Tensor>& params, int dp) {
  auto model = make_model(which);
  torch::NoGradGuard no_grad;
  for (auto& p : model->named_parameters()) p.value().copy_(params.at(p.key()));
  auto data = corpus();
  models::BatchSampler sampler(data, kSeqLen, 7);
  double loss = 0;
  for (int r = 0; r < dp; ++r)
    for (int m = 0; m < kGas; ++m) {
      auto b = batch_for(sampler, 0, m, r, dp);
      loss += model->forward(b.inputs, b.targets).item<double>() / double(dp * kGas);
    }
  return loss;
}

// Trains `engine` (on data-parallel rank d of dp) over the reference's global batches, checking each
// step's loss against the reference's for that rank within `tolerance` (relative); `what` names the run.
template <class Engine>
void train_like_reference(Engine& engine, const Reference& ref, int d, int dp, double tolerance,
                          const std::string& what) {
  auto data = corpus();
  models::BatchSampler sampler(data, kSeqLen, 7);
  for (int step = 0; step < int(ref.losses[d].size()); ++step) {
    for (int m = 0; m < kGas; ++m) {
      auto b = batch_for(sampler, step, m, d, dp);
      engine.backward(engine.forward(b.inputs, b.targets));
      engine.step();
    }
    const double want = ref.losses[d][step];
    EXPECT_LE(std::abs(engine.last_loss() - want), tolerance * std::abs(want))
        << what << " step " << step << ": engine " << engine.last_loss() << " vs reference " << want;
  }
}

// Runs ds-zero-to-fp32 on checkpoint `dir` (its `latest`, or `tag`) into <dir>/export and expects
// the whole model there: every parameter of `want` with its shape, within `tolerance`.
inline void expect_export_equals(const std::string& dir, const std::map<std::string, torch::Tensor>& want,
                                 const std::string& tag = "", double tolerance = 1e-5) {
  const std::string cmd = fmt::format("{}/tools/ds-zero-to-fp32 {} {}/export{} > {}/export.log 2>&1", DS_BINARY_DIR, dir,
                                      dir, tag.empty() ? "" : " --tag " + tag, dir);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  format::SafetensorsFile f(dir + "/export/model.safetensors");
  for (const auto& [name, param] : want) {
    const auto& info = f.at(name);
    ASSERT_EQ(info.shape, param.sizes().vec()) << name;
    torch::Tensor got = torch::empty(info.shape, torch::kFloat32);
    f.read(info, got.data_ptr(), got.numel() * sizeof(float));
    EXPECT_LE((got - param).abs().max().item<double>(), tolerance) << "exported " << name;
  }
}

// bf16 parameters and activations (fp32 master) over `tp` x `sp` with ZeRO 1: every step's loss
// within 5% of the fp32 reference, the bound EnginePrecision.Bf16TracksFp32 holds the one-rank
// engine to.
inline void expect_bf16_tracks_fp32(int tp, int sp) {
  const int world = comm::launcher_world_size(), dp = world / tp / sp;
  const Reference ref = reference("tiny", dp);
  std::string cfg = engine_config(1, tp, sp);
  cfg.insert(1, R"("bf16": {"enabled": true}, )");
  auto engine = initialize(make_model("tiny"), load_config_text(cfg, world, "<bf16 tracks fp32>"));
  ASSERT_EQ(engine.dtypes().model, torch::kBFloat16);
  train_like_reference(engine, ref, engine.topology().data().rank(), dp, 0.05, "bf16");
}

}  // namespace ds::partest
