// Defaults are those of transformers' OPTConfig.
#include "models/opt_config.h"

#include <cstdio>

#include "models/hf_json.h"
#include "util/error.h"

namespace ds::models {

OPTConfig OPTConfig::from_hf_json(const nlohmann::json& j, const std::string& source) {
  OPTConfig c;
  const HfJson f(j, source, "opt");
  c.vocab_size = f.required_int("vocab_size");
  c.hidden_size = f.required_int("hidden_size");
  c.ffn_dim = f.required_int("ffn_dim");
  c.num_hidden_layers = f.required_int("num_hidden_layers");
  c.num_attention_heads = f.required_int("num_attention_heads");
  c.max_position_embeddings = f.required_int("max_position_embeddings");
  c.word_embed_proj_dim = f.get_int("word_embed_proj_dim", c.hidden_size);
  c.do_layer_norm_before = f.get_bool("do_layer_norm_before", true);
  c.remove_final_layer_norm = f.get_bool("_remove_final_layer_norm", false);
  c.enable_bias = f.get_bool("enable_bias", true);
  c.layer_norm_elementwise_affine = f.get_bool("layer_norm_elementwise_affine", true);
  c.tie_word_embeddings = f.get_bool("tie_word_embeddings", true);
  c.activation_function = f.get_string("activation_function", "relu");
  c.pad_token_id = f.get_nullable_int("pad_token_id", 1);
  c.bos_token_id = f.get_token_ids("bos_token_id", 2);
  c.eos_token_id = f.get_token_ids("eos_token_id", 2);
  c.init_std = f.get_double("init_std", 0.02);
  DS_CHECK(c.activation_function == "relu", NotSupported,
           "activation_function \"" + c.activation_function + "\" is not supported for opt (only relu) (in " + source + ")");
  c.validate(source);
  return c;
}

nlohmann::json OPTConfig::to_hf_json() const {
  auto nullable = [](const std::optional<int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  return {{"architectures", {"OPTForCausalLM"}},
          {"model_type", "opt"},
          {"vocab_size", vocab_size},
          {"hidden_size", hidden_size},
          {"ffn_dim", ffn_dim},
          {"num_hidden_layers", num_hidden_layers},
          {"num_attention_heads", num_attention_heads},
          {"max_position_embeddings", max_position_embeddings},
          {"word_embed_proj_dim", word_embed_proj_dim},
          {"do_layer_norm_before", do_layer_norm_before},
          {"_remove_final_layer_norm", remove_final_layer_norm},
          {"enable_bias", enable_bias},
          {"layer_norm_elementwise_affine", layer_norm_elementwise_affine},
          {"tie_word_embeddings", tie_word_embeddings},
          {"activation_function", activation_function},
          {"pad_token_id", nullable(pad_token_id)},
          {"bos_token_id", bos_token_id},
          {"eos_token_id", eos_token_id},
          {"init_std", init_std},
          {"dropout", 0.0},
          {"attention_dropout", 0.0},
          {"activation_dropout", 0.0},
          {"layerdrop", 0.0},
          {"use_cache", true},
          {"torch_dtype", "float32"}};
}

int64_t OPTConfig::num_parameters() const {
  const int64_t c = hidden_size, f = ffn_dim, e = word_embed_proj_dim;
  const int64_t b = enable_bias ? 1 : 0, ln = layer_norm_elementwise_affine ? 2 * c : 0;
  const int64_t per_layer = 4 * (c * c + b * c) + (c * f + b * f) + (f * c + b * c) + 2 * ln;
  int64_t n = vocab_size * e * (tie_word_embeddings ? 1 : 2) + (max_position_embeddings + kPositionOffset) * c +
              num_hidden_layers * per_layer;
  if (has_final_layer_norm()) n += ln;
  if (has_projections()) n += 2 * c * e;
  return n;
}

std::string OPTConfig::describe() const {
  char count[32];
  std::snprintf(count, sizeof(count), "%.2fM", static_cast<double>(num_parameters()) / 1e6);
  std::string s = "opt layers=" + std::to_string(num_hidden_layers) + " hidden=" + std::to_string(hidden_size) +
                  " heads=" + std::to_string(num_attention_heads) + " ffn=" + std::to_string(ffn_dim) +
                  " vocab=" + std::to_string(vocab_size) + " positions=" + std::to_string(max_position_embeddings);
  if (has_projections()) s += " word_embed_proj_dim=" + std::to_string(word_embed_proj_dim);
  if (!do_layer_norm_before) s += " post-LN";
  return s + " (" + count + " parameters)";
}

void OPTConfig::validate(const std::string& source) const {
  const std::string in = source.empty() ? "" : " (in " + source + ")";
  auto require = [&](bool ok, const char* field, const std::string& msg) {
    if (!ok) throw ConfigError(field, msg + in);
  };
  const std::pair<const char*, int64_t> sizes[] = {{"vocab_size", vocab_size},
                                                   {"hidden_size", hidden_size},
                                                   {"ffn_dim", ffn_dim},
                                                   {"num_hidden_layers", num_hidden_layers},
                                                   {"num_attention_heads", num_attention_heads},
                                                   {"max_position_embeddings", max_position_embeddings},
                                                   {"word_embed_proj_dim", word_embed_proj_dim}};
  for (const auto& [field, value] : sizes) require(value > 0, field, "must be > 0, got " + std::to_string(value));
  require(hidden_size % num_attention_heads == 0, "hidden_size",
          std::to_string(hidden_size) + " is not divisible by num_attention_heads = " +
              std::to_string(num_attention_heads));
  require(!pad_token_id || (*pad_token_id < vocab_size && *pad_token_id >= -vocab_size), "pad_token_id",
          std::to_string(pad_token_id.value_or(0)) + " is not a row of the embedding (vocab_size = " +
              std::to_string(vocab_size) + ")");
}

}  // namespace ds::models
