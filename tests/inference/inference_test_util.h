// Tiny models and prompts shared by the inference tests. Weights are re-drawn wider than the
// models' own init (std 0.02 makes every next-token distribution almost flat, and greedy output
// one repeated token), so greedy generations vary and exercise every position.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "inference/engine.h"
#include "inference/naive_generate.h"
#include "models/gpt2.h"
#include "models/pretrained.h"

namespace ds::inference::testing {

// Matrices N(0, std), biases N(0, std / 4); norm weights keep their 1.
inline void widen_weights(torch::nn::Module& m, double std) {
  torch::NoGradGuard no_grad;
  for (auto& item : m.named_parameters()) {
    auto& p = item.value();
    if (p.dim() >= 2) p.normal_(0.0, std);
    else if (item.key().ends_with(".bias")) p.normal_(0.0, std / 4);
  }
}

inline std::shared_ptr<models::CausalLM> tiny_gpt2(uint64_t seed = 0, int64_t embd = 32, int64_t layers = 2) {
  torch::manual_seed(seed);
  models::GPT2Config c{.vocab_size = 256, .n_positions = 64, .n_embd = embd, .n_layer = layers, .n_head = 2};
  auto m = std::make_shared<models::GPT2Impl>(c);
  widen_weights(*m, 0.4);
  m->eval();
  return m;
}

// model_type llama (GQA: 4 heads over 2 kv heads), mistral (sliding window 8) or qwen2 (q/k/v bias).
inline std::shared_ptr<models::CausalLM> tiny_llama(const std::string& type = "llama", uint64_t seed = 0) {
  torch::manual_seed(seed);
  nlohmann::json j = {{"model_type", type},        {"vocab_size", 256},        {"hidden_size", 32},
                      {"intermediate_size", 48},   {"num_hidden_layers", 2},   {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},  {"max_position_embeddings", 64}};
  if (type == "mistral") j["sliding_window"] = 8;
  if (type == "qwen2") j["use_sliding_window"] = false;
  auto m = models::from_config(j);
  widen_weights(*m, 0.4);
  m->eval();
  return m;
}

// "opt": pre-LN with a final LayerNorm (opt-125m's shape); "opt_post_ln": post-LN with
// project_in / project_out (opt-350m's). Tied head, 4 heads.
inline std::shared_ptr<models::CausalLM> tiny_opt(const std::string& variant = "opt", uint64_t seed = 0) {
  torch::manual_seed(seed);
  nlohmann::json j = {{"model_type", "opt"},      {"vocab_size", 256},       {"hidden_size", 32},
                      {"ffn_dim", 48},            {"num_hidden_layers", 2},  {"num_attention_heads", 4},
                      {"max_position_embeddings", 64}};
  if (variant == "opt_post_ln") {
    j["do_layer_norm_before"] = false;
    j["word_embed_proj_dim"] = 48;
  }
  auto m = models::from_config(j);
  widen_weights(*m, 0.4);
  m->eval();
  return m;
}

inline std::vector<std::vector<int64_t>> random_prompts(std::mt19937_64& rng, const std::vector<int64_t>& lengths,
                                                        int64_t vocab = 256) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t len : lengths) {
    std::vector<int64_t> p;
    for (int64_t i = 0; i < len; ++i) p.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab)));
    out.push_back(std::move(p));
  }
  return out;
}

inline SamplingParams greedy(int64_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.0;
  p.max_tokens = max_tokens;
  return p;
}

}  // namespace ds::inference::testing
