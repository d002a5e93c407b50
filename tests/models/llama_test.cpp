// Llama family (llama, mistral, qwen2): HF parameter names and counts, config parsing and its
// errors, rotary frequencies per rope_scaling type, the LayerList contract, causality and the
// sliding window, padding_idx, and the two loss conventions.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <numbers>
#include <set>
#include <string>
#include <vector>

#include "models/llama.h"
#include "models/pretrained.h"
#include "models/rope.h"
#include "util/error.h"

namespace {

using ds::models::Llama;
using ds::models::LlamaConfig;
using nlohmann::json;

json tiny_json(const std::string& type = "llama") {
  return {{"model_type", type},  {"vocab_size", 64},        {"hidden_size", 32},
          {"intermediate_size", 40}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}, {"max_position_embeddings", 64}};
}

Llama tiny(const json& j = tiny_json(), uint64_t seed = 0) {
  torch::manual_seed(seed);
  return Llama(LlamaConfig::from_hf_json(j));
}

std::vector<std::string> names(torch::nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& item : m.named_parameters()) out.push_back(item.key());
  return out;
}

template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Llama, ParameterNamesAndShapesAreHuggingFaces) {
  auto model = tiny();
  std::vector<std::string> expected = {"model.embed_tokens.weight"};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* s : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                          "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                          "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight"})
      expected.push_back(p + s);
  }
  expected.push_back("model.norm.weight");
  expected.push_back("lm_head.weight");
  EXPECT_EQ(names(*model), expected);
  auto params = model->named_parameters();
  EXPECT_EQ(params["model.layers.0.self_attn.q_proj.weight"].sizes(), torch::IntArrayRef({32, 32}));
  EXPECT_EQ(params["model.layers.0.self_attn.k_proj.weight"].sizes(), torch::IntArrayRef({16, 32}));  // 2 kv heads of 8
  EXPECT_EQ(params["model.layers.0.mlp.down_proj.weight"].sizes(), torch::IntArrayRef({32, 40}));
  int64_t count = 0;
  for (const auto& p : model->parameters()) count += p.numel();
  EXPECT_EQ(count, model->config().num_parameters());
}

TEST(Llama, Qwen2HasQkvBiasAndTiedHeadHasNoLmHead) {
  json j = tiny_json("qwen2");
  j["tie_word_embeddings"] = true;
  auto model = tiny(j);
  auto n = names(*model);
  const std::set<std::string> s(n.begin(), n.end());
  EXPECT_TRUE(s.count("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_TRUE(s.count("model.layers.0.self_attn.v_proj.bias"));
  EXPECT_FALSE(s.count("model.layers.0.self_attn.o_proj.bias"));
  EXPECT_FALSE(s.count("lm_head.weight"));
  int64_t count = 0;
  for (const auto& p : model->parameters()) count += p.numel();
  EXPECT_EQ(count, model->config().num_parameters());
  // The tied weight is listed by both ends of the LayerList.
  const auto& layers = model->layers();
  EXPECT_EQ(layers[0].param_names, std::vector<std::string>{"model.embed_tokens.weight"});
  EXPECT_EQ(layers[layers.size() - 1].param_names.back(), "model.embed_tokens.weight");
}

TEST(Llama, ConfigDefaultsFollowEachFamily) {
  json j = tiny_json("mistral");
  j.erase("num_key_value_heads");
  j["num_attention_heads"] = 8;
  auto m = LlamaConfig::from_hf_json(j);
  EXPECT_EQ(m.num_key_value_heads, 8);       // MistralConfig's default
  ASSERT_TRUE(m.sliding_window.has_value());  // MistralConfig's default 4096
  EXPECT_EQ(*m.sliding_window, 4096);
  j["sliding_window"] = nullptr;
  EXPECT_FALSE(LlamaConfig::from_hf_json(j).sliding_window.has_value());
  json l = tiny_json("llama");
  l.erase("num_key_value_heads");
  EXPECT_EQ(LlamaConfig::from_hf_json(l).num_key_value_heads, 4);  // = num_attention_heads
  EXPECT_FALSE(LlamaConfig::from_hf_json(l).tie_word_embeddings);
  json q = tiny_json("qwen2");
  EXPECT_FALSE(LlamaConfig::from_hf_json(q).sliding_window.has_value());  // use_sliding_window false
  q["use_sliding_window"] = true;
  q["sliding_window"] = 8;
  q["max_window_layers"] = 1;
  auto qc = LlamaConfig::from_hf_json(q);
  EXPECT_FALSE(qc.window_of_layer(0).has_value());
  EXPECT_EQ(qc.window_of_layer(1).value_or(0), 8);
  // Round trip through config.json.
  auto back = LlamaConfig::from_hf_json(qc.to_hf_json());
  EXPECT_EQ(back.to_hf_json(), qc.to_hf_json());
}

TEST(Llama, ConfigErrorsNameTheFieldAndFile) {
  json j = tiny_json();
  j.erase("hidden_size");
  auto msg = error_of<ds::ConfigError>([&] { LlamaConfig::from_hf_json(j, "/m/config.json"); });
  EXPECT_NE(msg.find("hidden_size"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/m/config.json"), std::string::npos) << msg;

  j = tiny_json();
  j["num_hidden_layers"] = "two";
  msg = error_of<ds::ConfigError>([&] { LlamaConfig::from_hf_json(j); });
  EXPECT_NE(msg.find("num_hidden_layers"), std::string::npos) << msg;

  j = tiny_json();
  j["num_key_value_heads"] = 3;
  msg = error_of<ds::ConfigError>([&] { LlamaConfig::from_hf_json(j); });
  EXPECT_NE(msg.find("num_key_value_heads"), std::string::npos) << msg;

  j = tiny_json();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  msg = error_of<ds::NotSupported>([&] { LlamaConfig::from_hf_json(j); });
  EXPECT_NE(msg.find("yarn"), std::string::npos) << msg;

  j = tiny_json();
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  msg = error_of<ds::ConfigError>([&] { LlamaConfig::from_hf_json(j); });
  EXPECT_NE(msg.find("rope_scaling.low_freq_factor"), std::string::npos) << msg;

  j = tiny_json();
  j["hidden_act"] = "relu";
  msg = error_of<ds::NotSupported>([&] { LlamaConfig::from_hf_json(j); });
  EXPECT_NE(msg.find("hidden_act"), std::string::npos) << msg;

  j = tiny_json();
  j["model_type"] = "mamba";
  msg = error_of<ds::NotSupported>([&] { ds::models::from_config(j, "/m/config.json"); });
  EXPECT_NE(msg.find("\"mamba\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("llama"), std::string::npos) << msg;  // lists what is supported
  j.erase("model_type");
  msg = error_of<ds::NotSupported>([&] { ds::models::from_config(j, "/m/config.json"); });
  EXPECT_NE(msg.find("model_type"), std::string::npos) << msg;
}

TEST(Rope, InvFreqPerScalingType) {
  using ds::models::RopeScaling;
  using ds::models::rope_inv_freq;
  const int64_t dim = 8;
  auto base = rope_inv_freq(dim, 10000.0, RopeScaling{}, 64, 0);
  for (int64_t i = 0; i < dim / 2; ++i)
    EXPECT_NEAR(base[i].item<double>(), std::pow(10000.0, -2.0 * i / dim), 1e-6 * std::pow(10000.0, -2.0 * i / dim));
  RopeScaling linear{"linear", 4.0};
  EXPECT_TRUE(torch::allclose(rope_inv_freq(dim, 10000.0, linear, 64, 0), base / 4.0));
  RopeScaling dynamic{"dynamic", 2.0};
  EXPECT_TRUE(torch::equal(rope_inv_freq(dim, 10000.0, dynamic, 64, 32), base));  // within max: unscaled
  auto grown = rope_inv_freq(dim, 10000.0, dynamic, 64, 128);
  const double ntk_base = 10000.0 * std::pow(2.0 * 128 / 64 - 1.0, 8.0 / 6.0);
  EXPECT_NEAR(grown[1].item<double>(), std::pow(ntk_base, -2.0 / dim), 1e-6);
  // llama3 with original 64: wavelength 2π (< 16) kept, 62.8 interpolated, ≥ 628 (> 64) divided by 8.
  RopeScaling llama3{"llama3", 8.0, 1.0, 4.0, 64};
  auto l3 = rope_inv_freq(dim, 10000.0, llama3, 64, 0);
  EXPECT_EQ(l3[0].item<float>(), base[0].item<float>());
  EXPECT_FLOAT_EQ(l3[2].item<float>(), base[2].item<float>() / 8.0f);
  EXPECT_FLOAT_EQ(l3[3].item<float>(), base[3].item<float>() / 8.0f);
  const double smooth = (64.0 / (2 * std::numbers::pi / base[1].item<double>()) - 1.0) / 3.0;
  EXPECT_NEAR(l3[1].item<double>(), (1 - smooth) * base[1].item<double>() / 8 + smooth * base[1].item<double>(), 1e-7);
}

TEST(Rope, DynamicScalingKeepsHuggingFacesState) {
  ds::models::RotaryEmbedding rope(8, 10000.0, {"dynamic", 2.0}, 16);
  const auto original = rope.inv_freq().clone();
  rope.cos_sin(24, torch::kFloat, torch::kCPU);  // longer than 16: the base grows
  const auto grown = rope.inv_freq().clone();
  EXPECT_FALSE(torch::equal(grown, original));
  rope.cos_sin(20, torch::kFloat, torch::kCPU);  // between: HF keeps the grown frequencies
  EXPECT_TRUE(torch::equal(rope.inv_freq(), grown));
  rope.cos_sin(8, torch::kFloat, torch::kCPU);  // shorter than the original: reset
  EXPECT_TRUE(torch::equal(rope.inv_freq(), original));
}

TEST(Llama, LayersUseOnlyListedParameters) {
  json j = tiny_json("qwen2");
  j["tie_word_embeddings"] = true;
  for (const json& cfg : {tiny_json(), j}) {
    auto model = tiny(cfg);
    auto params = model->named_parameters();
    torch::Tensor x = torch::randint(64, {2, 8}, torch::kLong);
    const auto& layers = model->layers();
    for (size_t i = 0; i < layers.size(); ++i) {
      model->zero_grad();
      torch::Tensor in = i == 0 ? x : torch::randn({2, 8, 32}, torch::requires_grad());
      layers[i].forward(in).sum().backward();
      std::set<std::string> got;
      for (const auto& item : params)
        if (item.value().grad().defined() && item.value().grad().abs().sum().item<double>() > 0) got.insert(item.key());
      const std::set<std::string> listed(layers[i].param_names.begin(), layers[i].param_names.end());
      EXPECT_EQ(got, listed) << layers[i].name;
    }
    EXPECT_EQ(layers.size(), 4u);
    EXPECT_EQ(layers.all_param_names().size(), params.size());
  }
}

TEST(Llama, CausalAndSlidingWindow) {
  json j = tiny_json("mistral");
  j["num_hidden_layers"] = 1;
  j["sliding_window"] = 4;
  auto model = tiny(j);
  torch::NoGradGuard ng;
  auto x = torch::randint(64, {1, 12}, torch::kLong);
  auto y = x.clone();
  y.index_put_({0, 0}, (x[0][0].item<int64_t>() + 1) % 64);  // change token 0
  auto a = model->forward(x), b = model->forward(y);
  // With one layer and a window of 4, positions 0..3 see token 0, positions ≥ 4 do not.
  for (int64_t t = 0; t < 12; ++t) {
    const bool same = torch::equal(a[0][t], b[0][t]);
    EXPECT_EQ(same, t >= 4) << "position " << t;
  }
  // Without the window every position sees token 0; changing the last token changes only it.
  json full = tiny_json("llama");
  full["num_hidden_layers"] = 1;
  auto m2 = tiny(full);
  a = m2->forward(x);
  b = m2->forward(y);
  for (int64_t t = 0; t < 12; ++t) EXPECT_FALSE(torch::equal(a[0][t], b[0][t])) << t;
  auto z = x.clone();
  z.index_put_({0, 11}, (x[0][11].item<int64_t>() + 1) % 64);
  auto c = m2->forward(z);
  EXPECT_TRUE(torch::equal(a.narrow(1, 0, 11), c.narrow(1, 0, 11)));
}

TEST(Llama, PadRowGetsGradientOnlyFromATiedHead) {
  for (bool tied : {false, true}) {
    json j = tiny_json();
    j["pad_token_id"] = 0;
    j["tie_word_embeddings"] = tied;
    auto model = tiny(j);
    auto& w = model->model->embed_tokens->weight;
    EXPECT_EQ(w[0].abs().sum().item<double>(), 0.0);  // HF init zeroes it
    {
      torch::NoGradGuard ng;
      w.add_(torch::randn_like(w) * 0.1);
    }
    auto x = torch::tensor({0, 5, 0, 7}, torch::kLong).unsqueeze(0);
    model->forward(x).sum().backward();
    EXPECT_GT(w.grad()[5].abs().sum().item<double>(), 0.0);
    // The lookup gives the pad row nothing; a tied head does.
    EXPECT_EQ(w.grad()[0].abs().sum().item<double>() > 0.0, tied) << (tied ? "tied" : "untied");
    if (tied) {
      EXPECT_GT(w.grad()[9].abs().sum().item<double>(), 0.0);  // a row only the head reads
    }
  }
}

TEST(Llama, AlignedTargetsEqualHuggingFacesShiftedLabels) {
  auto model = tiny();
  auto ids = torch::randint(64, {2, 10}, torch::kLong);
  auto labels = ids.clone();
  labels.index_put_({0, torch::indexing::Slice(0, 4)}, -100);
  auto hf = ds::models::causal_lm_loss(model->forward(ids), labels);
  // targets[t] = labels[t+1], last position ignored.
  auto targets = torch::full_like(ids, -100);
  targets.narrow(1, 0, 9).copy_(labels.narrow(1, 1, 9));
  auto ours = model->forward(ids, targets);
  EXPECT_NEAR(ours.item<double>(), hf.item<double>(), 1e-6);
}

TEST(Llama, Bf16ForwardFollowsFp32) {
  auto model = tiny();
  auto ids = torch::randint(64, {2, 8}, torch::kLong);
  auto ref = model->forward(ids).detach();
  model->to(torch::kBFloat16);
  auto low = model->forward(ids);
  EXPECT_EQ(low.scalar_type(), torch::kBFloat16);
  EXPECT_LT((low.to(torch::kFloat) - ref).abs().max().item<double>(), 0.1 * ref.abs().max().item<double>());
}

TEST(Llama, BadTokenIdsAreClearErrors) {
  auto model = tiny();
  auto msg = error_of<ds::Error>([&] { model->forward(torch::full({1, 3}, 64, torch::kLong)); });
  EXPECT_NE(msg.find("vocab_size"), std::string::npos) << msg;
  msg = error_of<ds::Error>([&] { model->forward(torch::zeros({3}, torch::kLong)); });
  EXPECT_NE(msg.find("[batch, seq]"), std::string::npos) << msg;
}

TEST(Llama, LearnsARepeatedSequence) {
  auto model = tiny();
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(3e-3));
  auto seq = torch::arange(17, torch::kLong).remainder(7).unsqueeze(0).repeat({4, 1});
  auto x = seq.narrow(1, 0, 16), y = seq.narrow(1, 1, 16);
  double first = 0, last = 0;
  for (int s = 0; s < 60; ++s) {
    opt.zero_grad();
    auto loss = model->forward(x, y);
    loss.backward();
    opt.step();
    if (s == 0) first = loss.item<double>();
    last = loss.item<double>();
  }
  EXPECT_LT(last, 0.2 * first) << first << " -> " << last;
}

}  // namespace
