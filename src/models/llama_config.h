// LlamaConfig: the shape of a Llama-family model (model_type llama, mistral, qwen2) as its Hugging
// Face config.json gives it, with HF's per-family defaults for the optional keys.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "models/rope.h"

namespace ds::models {

struct LlamaConfig {
  std::string model_type = "llama";  // "llama" | "mistral" | "qwen2"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // grouped-query attention: heads share k/v in groups
  int64_t head_dim = 0;             // hidden_size / num_attention_heads unless the config says
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // llama: attention_bias; qwen2: always
  bool o_bias = false;    // llama: attention_bias; mistral, qwen2: never
  bool mlp_bias = false;  // llama: mlp_bias
  std::string hidden_act = "silu";
  // Keys [t − W, t] only, in the layers listed by sliding_window_layer(); nullopt: full attention.
  std::optional<int64_t> sliding_window;
  int64_t max_window_layers = 0;  // qwen2: layers ≥ this use the window (when use_sliding_window)
  std::optional<int64_t> pad_token_id;  // its embedding row gets no gradient from the lookup (HF padding_idx)
  nlohmann::json bos_token_id, eos_token_id;  // as written: an id, a list of ids (Llama 3) or null
  double initializer_range = 0.02;

  // From an HF config.json object (`source` names the file in errors). Required: vocab_size,
  // hidden_size, intermediate_size, num_hidden_layers, num_attention_heads; anything else takes
  // the family's HF default. ds::ConfigError names a missing or bad field; ds::NotSupported an
  // unsupported hidden_act or rope_scaling type.
  static LlamaConfig from_hf_json(const nlohmann::json& j, const std::string& source = "config.json");
  // The config.json HF's AutoConfig reads back into this shape (architectures, model_type, ...).
  nlohmann::json to_hf_json() const;

  // Whether layer i uses the sliding window (mistral: all; qwen2: i ≥ max_window_layers).
  std::optional<int64_t> window_of_layer(int64_t i) const;
  int64_t num_parameters() const;  // exact, a tied head counted once
  std::string describe() const;
  // Every size > 0, heads divide evenly, head_dim even: ds::ConfigError naming the field (and
  // `source`, the file, when given).
  void validate(const std::string& source = "") const;
};

}  // namespace ds::models
