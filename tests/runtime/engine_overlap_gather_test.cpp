// zero_overlap_param_gather across real ranks (ctest: worlds 1, 2 and 4): ZeRO stages 1 and 2
// with the updated parameters gathered behind the next forward give the same losses and parameters
// as the gather inside step(), bit for bit (it only moves copies); between step() and the next
// forward the other ranks' parameters really are the old ones; checkpoints and module() see
// current ones.
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "comm/make_communicator.h"
#include "format/safetensors.h"
#include "models/gpt2.h"
#include "models/token_data.h"
#include "util/error.h"

namespace ds {
namespace {

constexpr int kOverlapSteps = 4;

models::TokenDataset overlap_corpus() {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "a stitch in time saves nine " + std::to_string(i * 7 % 53) + ". ";
  return models::TokenDataset::from_text(text);
}

// Two groups that interleave along the layers (matrices decay, vectors do not), so the buckets of
// both groups are needed from the first layer on.
std::vector<ParamGroup> decay_groups(models::GPT2& model) {
  ParamGroup decay, no_decay;
  no_decay.weight_decay = 0.0;
  for (const auto& p : model->named_parameters()) (p.value().dim() >= 2 ? decay : no_decay).params.push_back(p.key());
  return {decay, no_decay};
}

struct OverlapRun {
  std::vector<double> losses;
  std::vector<torch::Tensor> params;
  bool stale_after_step = false;  // some parameter differed between step() and settle_parameters()
};

OverlapRun overlap_run(int stage, bool overlap, const std::string& extra = "") {
  auto data = overlap_corpus();
  models::BatchSampler sampler(data, 16, 99);
  torch::manual_seed(99);
  auto model = models::GPT2(models::GPT2Config::preset("tiny"));
  auto groups = decay_groups(model);
  auto engine = initialize(model, nlohmann::json::parse(fmt::format(R"({{
      "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
      "optimizer": {{"type": "AdamW", "params": {{"lr": 1e-3, "weight_decay": 0.01}}}},
      "zero_optimization": {{"stage": {}, "allgather_bucket_size": 3000}},
      "zero_overlap_param_gather": {} {} }})", stage, overlap, extra)), groups);
  const int world = engine.world_size(), rank = engine.rank();
  OverlapRun run;
  for (int s = 0; s < kOverlapSteps; ++s) {
    for (int m = 0; m < 2; ++m) {
      auto b = sampler.batch(((int64_t{s} * 2 + m) * world + rank) * 2, 2);
      engine.backward(engine.forward(b.inputs, b.targets));
      engine.step();
    }
    if (s == 0) {  // the parameters as the module holds them now, then once the gather is waited for
      std::vector<torch::Tensor> before;
      for (const auto& p : model->parameters()) before.push_back(p.detach().clone());
      engine.settle_parameters();
      for (size_t i = 0; i < before.size(); ++i)
        run.stale_after_step |= !torch::equal(before[i], model->parameters()[i].detach());
    }
    double loss = engine.last_loss();
    engine.communicator().all_reduce(comm::Buffer(&loss, 1));
    run.losses.push_back(loss / world);
  }
  for (const auto& p : engine.model().parameters()) run.params.push_back(p.detach().clone());
  return run;
}

void expect_same_overlap(const OverlapRun& a, const OverlapRun& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) EXPECT_EQ(a.losses[i], b.losses[i]) << "step " << i;
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) EXPECT_TRUE(torch::equal(a.params[i], b.params[i])) << "parameter " << i;
}

TEST(ZeroOverlapParamGather, SameAsTheGatherInsideStep) {
  for (int stage : {1, 2}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    const auto inside = overlap_run(stage, false), behind = overlap_run(stage, true);
    expect_same_overlap(inside, behind);
    EXPECT_FALSE(inside.stale_after_step);
    // With several buckets per partition only the first ones are issued by step(): the rest wait
    // for the forward's layers (or settle_parameters), so the module saw old values in between.
    EXPECT_EQ(behind.stale_after_step, comm::launcher_world_size() > 1);
  }
}

TEST(ZeroOverlapParamGather, ActivationCheckpointingAndBf16) {
  // The checkpointed segments call the same layer hooks; bf16 gathers 16-bit storage.
  const std::string extra = R"(, "activation_checkpointing": {}, "bf16": {"enabled": true})";
  expect_same_overlap(overlap_run(2, false, extra), overlap_run(2, true, extra));
}

TEST(ZeroOverlapParamGather, CheckpointsSeeCurrentParameters) {
  // save_16bit_model right after step() must not write other ranks' old parameters, and a load
  // while a gather is in flight must not be overwritten by it when it lands.
  const auto dir = std::filesystem::temp_directory_path() / "ds_overlap_gather_ckpt";
  auto data = overlap_corpus();
  models::BatchSampler sampler(data, 16, 7);
  torch::manual_seed(7);
  auto model = models::GPT2(models::GPT2Config::preset("tiny"));
  auto engine = initialize(model, nlohmann::json::parse(R"({
      "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
      "zero_optimization": {"stage": 1, "allgather_bucket_size": 3000}, "zero_overlap_param_gather": true})"));
  const int world = engine.world_size(), rank = engine.rank();
  auto train_step = [&](int s) {
    auto b = sampler.batch((int64_t{s} * world + rank) * 2, 2);
    engine.backward(engine.forward(b.inputs, b.targets));
    engine.step();
  };
  auto current = [&] {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& p : engine.model().named_parameters()) out.emplace_back(p.key(), p.value().detach().clone());
    return out;
  };
  if (rank == 0) std::filesystem::remove_all(dir);
  engine.communicator().barrier();
  for (int s = 0; s < 2; ++s) train_step(s);
  engine.save_checkpoint(dir.string(), "t");
  engine.save_16bit_model(dir.string());
  const auto saved = current();
  if (rank == 0) {
    format::SafetensorsFile f((dir / "model.safetensors").string());
    for (const auto& [name, want] : saved) {
      const auto& info = f.at(name);
      torch::Tensor got = torch::empty(info.shape, torch::kFloat32);
      f.read(info, got.data_ptr(), got.numel() * sizeof(float));
      EXPECT_TRUE(torch::equal(got, want)) << "save_16bit_model wrote an old " << name;
    }
  }
  train_step(2);  // a gather in flight again
  ASSERT_TRUE(engine.load_checkpoint(dir.string(), "t").has_value());
  const auto loaded = current();
  for (size_t i = 0; i < saved.size(); ++i)
    EXPECT_TRUE(torch::equal(saved[i].second, loaded[i].second)) << "after the load: " << saved[i].first;
  engine.communicator().barrier();
  if (rank == 0) std::filesystem::remove_all(dir);
}

TEST(ZeroOverlapParamGather, NeedsALayerList) {
  // Without a LayerList nothing would wait for a layer's parameters: refused, naming the key
  // (world 1 has nothing to gather, so the key changes nothing there).
  auto net = torch::nn::Linear(8, 8);
  const auto config = nlohmann::json::parse(R"({"train_micro_batch_size_per_gpu": 1,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
      "zero_optimization": {"stage": 2}, "zero_overlap_param_gather": true})");
  if (comm::launcher_world_size() == 1) {
    EXPECT_NO_THROW(initialize(net, config));
    return;
  }
  try {
    initialize(net, config);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("zero_overlap_param_gather"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("LayerList"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ds
