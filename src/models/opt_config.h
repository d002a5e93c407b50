// OPTConfig: the shape of an OPT model (model_type opt) as its Hugging Face config.json gives it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace ds::models {

struct OPTConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t ffn_dim = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t max_position_embeddings = 0;  // positions table has this + 2 rows (OPT's offset)
  int64_t word_embed_proj_dim = 0;      // ≠ hidden_size: project_in / project_out (opt-350m)
  bool do_layer_norm_before = true;     // pre-LN (false: post-LN, opt-350m)
  bool remove_final_layer_norm = false; // "_remove_final_layer_norm"
  bool enable_bias = true;
  bool layer_norm_elementwise_affine = true;
  bool tie_word_embeddings = true;
  std::string activation_function = "relu";
  std::optional<int64_t> pad_token_id = 1;  // HF padding_idx of embed_tokens
  nlohmann::json bos_token_id = 2, eos_token_id = 2;  // as written (an id, a list of ids, or null)
  double init_std = 0.02;

  // Rows of embed_positions: max_position_embeddings + kPositionOffset.
  static constexpr int64_t kPositionOffset = 2;

  // From an HF config.json object. Required: vocab_size, hidden_size, ffn_dim, num_hidden_layers,
  // num_attention_heads, max_position_embeddings; the rest take OPTConfig's HF defaults.
  static OPTConfig from_hf_json(const nlohmann::json& j, const std::string& source = "config.json");
  nlohmann::json to_hf_json() const;

  // The final layer norm exists only in pre-LN models (HF: do_layer_norm_before and not removed).
  bool has_final_layer_norm() const { return do_layer_norm_before && !remove_final_layer_norm; }
  bool has_projections() const { return word_embed_proj_dim != hidden_size; }
  int64_t num_parameters() const;  // exact, tied head counted once
  std::string describe() const;
  void validate(const std::string& source = "") const;
};

}  // namespace ds::models
