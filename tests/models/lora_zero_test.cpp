// LoRA across ranks (issue 19): a tiny OPT's adapters (frozen fp32 base) trained through the
// engine at ZeRO-2, ZeRO-3 and the seed's ZeRO-2 + offload_optimizer cpu (with gradient
// accumulation) against one process running the same micro-batches in turn (plain LibTorch AdamW
// on the adapters, gradients accumulated over every rank's micro-batches): the mean loss per step
// and the adapter weights within 1e-5; the optimizer holds only adapters (the frozen base has no
// master copy or state); and the PEFT files the engine's adapters save equal the one-process run's.
// Built into distributed_tests, so ctest runs it at worlds 1, 2 and 4 under mpirun.
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "comm/comm.h"
#include "format/safetensors.h"
#include "models/lora.h"
#include "models/pretrained.h"
#include "zero/gathered_parameters.h"
#include "zero/model_states.h"

namespace ds::lora_zero_test {
namespace {
namespace fs = std::filesystem;

constexpr int kSteps = 6;
constexpr int64_t kMicro = 2, kSeq = 12, kVocab = 64;
constexpr double kLr = 1e-2;

// The seed's targets for OPT plus an MLP layer; the frozen base in bf16 (the default) or fp32.
models::LoraConfig lora_config(bool bf16_base) {
  models::LoraConfig c;
  if (!bf16_base) c.base_dtype = std::nullopt;
  c.r = 4;
  c.lora_alpha = 8;
  c.target_modules = {"q_proj", "v_proj", "fc1"};
  c.base_model_name_or_path = "tiny-opt";
  return c;
}

std::shared_ptr<models::CausalLM> make_adapted(bool bf16_base) {
  torch::manual_seed(1);  // init_std 0.3: a tied head at width 32 needs it to fit the echo task quickly
  auto model = models::from_config({{"model_type", "opt"}, {"vocab_size", kVocab}, {"hidden_size", 32},
                                    {"ffn_dim", 48}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                                    {"max_position_embeddings", 16}, {"init_std", 0.3}});
  models::apply_lora(*model, lora_config(bf16_base));
  return model;
}

// Micro-batch m of step s on rank r, as one process sees them all: echo the input token.
torch::Tensor micro_batch(int step, int rank, int m, int world, int gas) {
  torch::manual_seed(1000 + ((int64_t{step} * world + rank) * gas + m));
  return torch::randint(0, kVocab, {kMicro, kSeq}, torch::kInt64);
}

struct Result {
  std::vector<double> losses;
  std::map<std::string, torch::Tensor> adapters;
};

Result engine_run(const std::string& zero, int gas, bool bf16_base, const fs::path& adapter_dir, int64_t* optimized_numel,
                  bool* only_adapters) {
  auto model = make_adapted(bf16_base);
  auto engine = initialize(model, nlohmann::json::parse(fmt::format(R"({{
      "train_micro_batch_size_per_gpu": {}, "gradient_accumulation_steps": {},
      "optimizer": {{"type": "AdamW", "params": {{"lr": {}, "weight_decay": 0.0}}}},
      "zero_optimization": {} }})", kMicro, gas, kLr, zero)));
  const int world = engine.world_size(), rank = engine.rank();
  Result out;
  for (int s = 0; s < kSteps; ++s) {
    for (int m = 0; m < gas; ++m) {
      auto x = micro_batch(s, rank, m, world, gas);
      engine.backward(engine.forward(x, x));
      engine.step();
    }
    double loss = engine.last_loss();
    engine.communicator().all_reduce(comm::Buffer(&loss, 1));
    out.losses.push_back(loss / world);
  }
  *optimized_numel = engine.model_states().numel();
  *only_adapters = true;
  for (size_t g = 0; g < engine.model_states().num_groups(); ++g)
    for (const auto& slot : engine.model_states().local_layout(g).slots)
      if (slot.name.find(".lora_") == std::string::npos) *only_adapters = false;
  zero::GatheredParameters full(engine);
  for (const auto& [name, t] : models::lora_parameters(engine.model())) out.adapters[name] = t.detach().clone();
  models::save_lora_adapter(engine.model(), lora_config(bf16_base), adapter_dir.string());
  return out;
}

// One process: every rank's micro-batches of a step in turn, gradients accumulated (each micro
// loss over world x gas), clipped to norm 1 as the engine's default, then AdamW on the adapters.
Result reference_run(int world, int gas, bool bf16_base, const fs::path& adapter_dir) {
  auto model = make_adapted(bf16_base);
  std::vector<torch::Tensor> adapters;
  for (auto& [name, t] : models::lora_parameters(*model)) adapters.push_back(t);
  torch::optim::AdamW opt(adapters, torch::optim::AdamWOptions(kLr).weight_decay(0.0));
  Result out;
  for (int s = 0; s < kSteps; ++s) {
    opt.zero_grad();
    double loss = 0;
    for (int r = 0; r < world; ++r)
      for (int m = 0; m < gas; ++m) {
        auto x = micro_batch(s, r, m, world, gas);
        auto l = model->forward(x, x) / double(world * gas);
        l.backward();
        loss += l.item<double>();
      }
    torch::nn::utils::clip_grad_norm_(adapters, 1.0);  // the engine's default gradient_clipping
    opt.step();
    out.losses.push_back(loss);
  }
  for (const auto& [name, t] : models::lora_parameters(*model)) out.adapters[name] = t.detach().clone();
  models::save_lora_adapter(*model, lora_config(bf16_base), adapter_dir.string());
  return out;
}

std::map<std::string, torch::Tensor> read_adapter(const fs::path& dir) {
  format::SafetensorsFile file((dir / "adapter_model.safetensors").string());
  std::map<std::string, torch::Tensor> out;
  for (const auto& t : file.tensors()) {
    EXPECT_EQ(t.dtype, format::StDtype::F32) << t.name;
    auto v = torch::empty(t.shape, torch::kFloat32);
    file.read(t, v.data_ptr(), t.nbytes());
    out[t.name] = v;
  }
  return out;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void expect_close(const std::map<std::string, torch::Tensor>& got, const std::map<std::string, torch::Tensor>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << what << ": no " << name;
    const double scale = std::max(1.0, w.abs().max().item<double>());
    EXPECT_LE((it->second - w).abs().max().item<double>(), 1e-5 * scale) << what << " " << name;
  }
}

struct Setting {
  const char* name;
  const char* zero;
  int gas;
  // false everywhere: with a bf16 base, last-bit differences in the adapters (another summation
  // order across ranks, or the CPU Adam kernel's) flip roundings of the base's bf16 outputs and
  // grow past 1e-5 within 3-4 steps (measured); lora_test.cpp checks the bf16 base through the engine.
  bool bf16_base;
};

class LoraZero : public ::testing::TestWithParam<Setting> {};

TEST_P(LoraZero, MatchesOneProcessAndSavesTheSameAdapter) {
  const auto& s = GetParam();
  const int world = comm::launcher_world_size();
  const fs::path root = fs::temp_directory_path() / fmt::format("ds_lora_zero_{}_{}", s.name, ::getpid());  // per rank
  fs::remove_all(root);
  int64_t optimized = 0;
  bool only_adapters = false;
  const Result got = engine_run(s.zero, s.gas, s.bf16_base, root / "engine", &optimized, &only_adapters);
  const Result want = reference_run(world, s.gas, s.bf16_base, root / "reference");

  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t i = 0; i < want.losses.size(); ++i)
    EXPECT_LE(std::abs(got.losses[i] - want.losses[i]), 1e-5 * std::abs(want.losses[i])) << "step " << i;
  for (const auto& [name, t] : got.adapters)  // trained: every B left its zero init
    if (name.find("lora_B") != std::string::npos) {
      EXPECT_GT(t.abs().max().item<double>(), 0.0) << name;
    }
  expect_close(got.adapters, want.adapters, "adapter weights");

  // The frozen base is not in the optimizer: it holds exactly the adapters' elements.
  int64_t adapter_numel = 0;
  for (const auto& [name, t] : want.adapters) adapter_numel += t.numel();
  EXPECT_EQ(optimized, adapter_numel);
  EXPECT_TRUE(only_adapters) << "a frozen parameter has a slot in the optimizer's partition";

  // PEFT's files: the same keys and values, the same config.
  expect_close(read_adapter(root / "engine"), read_adapter(root / "reference"), "adapter_model.safetensors");
  EXPECT_EQ(read_text(root / "engine" / "adapter_config.json"), read_text(root / "reference" / "adapter_config.json"));
  fs::remove_all(root);
}

INSTANTIATE_TEST_SUITE_P(
    Stages, LoraZero,
    ::testing::Values(Setting{"zero2", R"({"stage": 2, "reduce_bucket_size": 3000})", 1, false},
                      Setting{"zero3", R"({"stage": 3, "stage3_param_persistence_threshold": 0,
                                           "reduce_bucket_size": 3000, "allgather_bucket_size": 3000})", 1, false},
                      Setting{"zero2_offload_cpu_gas2", R"({"stage": 2, "offload_optimizer": {"device": "cpu"}})", 2,
                              false}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ds::lora_zero_test
