// LoRA (src/models/lora*.h) on every family: at init the adapted model is the base (B = 0); only
// the adapters get gradients; merge equals the unmerged adapter; PEFT's adapter files round-trip
// with PEFT's key names and config fields (checked again by tests/models/peft_adapter_check.py,
// which parses the safetensors header by hand); training through the engine at ZeRO-2 + CPU
// optimizer offload and at ZeRO-3 lowers the loss and leaves the frozen base bit-identical and
// in bf16.
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "format/safetensors.h"
#include "models/lora.h"
#include "models/pretrained.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;
using ds::models::CausalLM;
using ds::models::LoraConfig;
using nlohmann::json;

json family_json(const std::string& type) {
  if (type == "gpt2")
    return {{"model_type", "gpt2"}, {"vocab_size", 64}, {"n_positions", 16}, {"n_embd", 32}, {"n_layer", 2}, {"n_head", 2}};
  if (type == "llama")
    return {{"model_type", "llama"}, {"vocab_size", 64}, {"hidden_size", 32}, {"intermediate_size", 48},
            {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
            {"max_position_embeddings", 16}};
  return {{"model_type", "opt"}, {"vocab_size", 64}, {"hidden_size", 32}, {"ffn_dim", 48},
          {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"max_position_embeddings", 16}};
}

std::shared_ptr<CausalLM> make(const std::string& type, uint64_t seed = 1) {
  torch::manual_seed(seed);
  return ds::models::from_config(family_json(type));
}

torch::Tensor tokens(int64_t b = 2, int64_t t = 8) {
  torch::manual_seed(99);
  return torch::randint(0, 64, {b, t}, torch::kInt64);
}

LoraConfig config(std::vector<std::string> targets, std::optional<torch::ScalarType> base = std::nullopt) {
  LoraConfig c;
  c.r = 4;
  c.lora_alpha = 8;
  c.target_modules = std::move(targets);
  c.base_dtype = base;
  return c;
}

// B = 0 is the init; a trained adapter has B ≠ 0 (for merge and round-trip checks).
void randomize_adapters(CausalLM& m) {
  torch::NoGradGuard g;
  torch::manual_seed(5);
  for (auto& [name, t] : ds::models::lora_parameters(m)) t.normal_(0.0, 0.2);
}

std::map<std::string, torch::Tensor> snapshot(torch::nn::Module& m) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : m.named_parameters()) out[item.key()] = item.value().detach().clone();
  return out;
}

TEST(Lora, AtInitEqualsTheBaseOnEveryFamily) {
  for (std::string type : {"gpt2", "llama", "opt"}) {
    auto base = make(type);
    auto lora = make(type);
    torch::NoGradGuard g;
    auto expected = base->forward(tokens());
    auto adapted = ds::models::apply_lora(*lora, config({"all-linear"}));
    EXPECT_EQ(adapted.size(), type == "llama" ? 14u : type == "gpt2" ? 8u : 12u) << type;
    EXPECT_TRUE(torch::equal(lora->forward(tokens()), expected)) << type;
    // With the base in bf16 it equals the bf16 base exactly.
    auto base16 = make(type);
    base16->to(torch::kBFloat16);
    auto lora16 = make(type);
    ds::models::apply_lora(*lora16, config({"all-linear"}, torch::kBFloat16));
    EXPECT_TRUE(torch::equal(lora16->forward(tokens()), base16->forward(tokens()))) << type;
  }
}

TEST(Lora, TargetsByPeftNamesAndGradientsOnlyOnAdapters) {
  auto model = make("opt");
  auto adapted = ds::models::apply_lora(*model, config({"q_proj", "v_proj"}, torch::kBFloat16));
  ASSERT_EQ(adapted.size(), 4u);
  EXPECT_EQ(adapted[0], "model.decoder.layers.0.self_attn.v_proj");
  EXPECT_EQ(adapted[1], "model.decoder.layers.0.self_attn.q_proj");
  auto params = model->named_parameters();
  EXPECT_EQ(params["model.decoder.layers.1.self_attn.q_proj.lora_A.weight"].sizes(), torch::IntArrayRef({4, 32}));
  EXPECT_EQ(params["model.decoder.layers.1.self_attn.q_proj.lora_B.weight"].sizes(), torch::IntArrayRef({32, 4}));
  randomize_adapters(*model);  // so A's gradient is not zero either
  model->forward(tokens(), tokens()).backward();
  int64_t adapters = 0;
  for (const auto& item : params) {
    const bool adapter = item.key().find(".lora_") != std::string::npos;
    EXPECT_EQ(item.value().requires_grad(), adapter) << item.key();
    if (adapter) {
      ++adapters;
      EXPECT_EQ(item.value().scalar_type(), torch::kFloat32);
      ASSERT_TRUE(item.value().grad().defined()) << item.key();
      EXPECT_GT(item.value().grad().abs().sum().item<double>(), 0.0) << item.key();
    } else {
      EXPECT_EQ(item.value().scalar_type(), torch::kBFloat16) << item.key();
      EXPECT_FALSE(item.value().grad().defined()) << item.key();
    }
  }
  EXPECT_EQ(adapters, 8);
  // The LayerList lists each adapter in the layer of its base weight (ZeRO-3 gathers them there).
  const auto& layer = model->layers()[1];
  auto has = [&](const std::string& n) {
    return std::find(layer.param_names.begin(), layer.param_names.end(), n) != layer.param_names.end();
  };
  EXPECT_TRUE(has("model.decoder.layers.0.self_attn.q_proj.lora_A.weight"));
  EXPECT_TRUE(has("model.decoder.layers.0.self_attn.v_proj.lora_B.weight"));
  EXPECT_FALSE(has("model.decoder.layers.1.self_attn.q_proj.lora_A.weight"));
}

TEST(Lora, MergeGivesTheUnmergedLogits) {
  for (std::string type : {"gpt2", "llama", "opt"}) {
    auto model = make(type);
    ds::models::apply_lora(*model, config({"all-linear"}));
    randomize_adapters(*model);
    torch::NoGradGuard g;
    auto before = model->forward(tokens());
    EXPECT_EQ(ds::models::merge_lora(*model), type == "llama" ? 14 : type == "gpt2" ? 8 : 12);
    auto after = model->forward(tokens());
    EXPECT_TRUE(torch::allclose(after, before, 1e-5, 1e-5))
        << type << " max diff " << (after - before).abs().max().item<double>();
    EXPECT_FALSE(torch::equal(after, make(type)->forward(tokens()))) << "the merge changed nothing";
    EXPECT_TRUE(ds::models::lora_parameters(*model).empty());
    for (const auto& layer : model->layers())
      for (const auto& n : layer.param_names) EXPECT_EQ(n.find(".lora_"), std::string::npos) << n;
  }
}

TEST(Lora, PeftFilesRoundTripWithPeftNames) {
  const fs::path dir = fs::temp_directory_path() / ("ds_lora_peft_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto model = make("opt");
  auto cfg = config({"q_proj", "v_proj"}, torch::kBFloat16);
  cfg.base_model_name_or_path = "facebook/opt-125m";
  ds::models::apply_lora(*model, cfg);
  randomize_adapters(*model);
  ds::models::save_lora_adapter(*model, cfg, dir.string());

  ds::format::SafetensorsFile file((dir / "adapter_model.safetensors").string());
  std::set<std::string> keys;
  for (const auto& t : file.tensors()) keys.insert(t.name);
  EXPECT_EQ(keys.size(), 8u);
  EXPECT_TRUE(keys.count("base_model.model.model.decoder.layers.0.self_attn.q_proj.lora_A.weight"));
  EXPECT_TRUE(keys.count("base_model.model.model.decoder.layers.1.self_attn.v_proj.lora_B.weight"));
  EXPECT_EQ(file.metadata().at("format"), "pt");
  auto j = json::parse(std::ifstream(dir / "adapter_config.json"));
  EXPECT_EQ(j["peft_type"], "LORA");
  EXPECT_EQ(j["task_type"], "CAUSAL_LM");
  EXPECT_EQ(j["r"], 4);
  EXPECT_EQ(j["lora_alpha"], 8.0);
  EXPECT_EQ(j["target_modules"], json({"q_proj", "v_proj"}));
  EXPECT_EQ(j["base_model_name_or_path"], "facebook/opt-125m");

  // Independent reader: Debian's python3, header parsed by hand.
  if (std::system("/usr/bin/python3 -c 'import json, struct' >/dev/null 2>&1") == 0) {
    {
      std::ofstream ex(dir / "expected_keys.txt");
      for (const auto& k : keys) ex << k << "\n";
    }
    const std::string cmd = "/usr/bin/python3 " + std::string(DS_SOURCE_DIR) + "/tests/models/peft_adapter_check.py " +
                            dir.string() + " " + (dir / "expected_keys.txt").string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }

  torch::NoGradGuard g;
  auto expected = model->forward(tokens());
  auto loaded = make("opt");
  auto back = ds::models::load_lora_adapter(*loaded, dir.string());
  EXPECT_EQ(back.r, 4);
  EXPECT_EQ(back.target_modules, cfg.target_modules);
  EXPECT_TRUE(torch::equal(loaded->forward(tokens()), expected));

  // A base of another width: the shape error names the key and both shapes.
  auto other = ds::models::from_config([] { auto j = family_json("opt"); j["hidden_size"] = 16; j["ffn_dim"] = 24; return j; }());
  try {
    ds::models::load_lora_adapter(*other, dir.string());
    ADD_FAILURE() << "a mismatched base loaded";
  } catch (const ds::IoError& e) {
    EXPECT_NE(std::string(e.what()).find("lora_A.weight' has shape [4,32] but the model's is [4,16]"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(Lora, TargetsThatMatchNothingAreNamed) {
  auto model = make("opt");
  try {
    ds::models::apply_lora(*model, config({"q_proj", "c_attn"}));
    ADD_FAILURE() << "c_attn matched an OPT";
  } catch (const ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("target_modules: 'c_attn' matched no Linear of this opt model"),
              std::string::npos) << e.what();
  }
}

// Trains the adapters of a tiny OPT on one repeated batch through the engine.
void train_and_check(const std::string& zero) {
  // init_std 0.3: with HF's 0.02 at width 32 the tied head's logits cannot exceed about ±0.6.
  torch::manual_seed(1);
  auto model = ds::models::from_config([] { auto j = family_json("opt"); j["init_std"] = 0.3; return j; }());
  ds::models::apply_lora(*model, config({"q_proj", "v_proj", "fc1"}, torch::kBFloat16));
  std::map<std::string, torch::Tensor> base;
  for (const auto& [name, t] : snapshot(*model))
    if (name.find(".lora_") == std::string::npos) base[name] = t;
  auto engine = ds::initialize(model, json::parse(R"({"train_micro_batch_size_per_gpu": 4,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}}, "zero_optimization": )" + zero + "}"));
  torch::manual_seed(3);
  auto x = torch::randint(0, 64, {4, 12}, torch::kInt64);
  auto y = x.clone();  // echo the input token: learnable through the adapters alone
  double first = 0, last = 0;
  for (int s = 0; s < 20; ++s) {
    engine.backward(engine.forward(x, y));
    engine.step();
    (s == 0 ? first : last) = engine.last_loss();
  }
  EXPECT_LT(last, first - 0.5) << zero;
  for (const auto& item : model->named_parameters()) {
    auto it = base.find(item.key());
    if (it == base.end()) continue;
    EXPECT_EQ(item.value().scalar_type(), torch::kBFloat16) << zero << " " << item.key();
    EXPECT_TRUE(torch::equal(item.value(), it->second)) << zero << " " << item.key();
  }
}

TEST(Lora, TrainsAtZero2WithCpuOffloadAndLeavesTheBaseBitIdentical) {
  train_and_check(R"({"stage": 2, "offload_optimizer": {"device": "cpu"}})");
}

TEST(Lora, TrainsAtZero3AndLeavesTheBaseBitIdentical) { train_and_check(R"({"stage": 3})"); }

}  // namespace
