// Defaults are those of transformers' LlamaConfig, MistralConfig and Qwen2Config.
#include "models/llama_config.h"

#include <cstdio>

#include "models/hf_json.h"
#include "util/error.h"

namespace ds::models {

LlamaConfig LlamaConfig::from_hf_json(const nlohmann::json& j, const std::string& source) {
  LlamaConfig c;
  c.model_type = j.value("model_type", std::string("llama"));
  DS_CHECK(c.model_type == "llama" || c.model_type == "mistral" || c.model_type == "qwen2", NotSupported,
           "model_type \"" + c.model_type + "\" is not a Llama-family model (llama, mistral, qwen2) (in " + source + ")");
  const HfJson f(j, source, c.model_type);
  const bool mistral = c.model_type == "mistral", qwen2 = c.model_type == "qwen2";
  c.vocab_size = f.required_int("vocab_size");
  c.hidden_size = f.required_int("hidden_size");
  c.intermediate_size = f.required_int("intermediate_size");
  c.num_hidden_layers = f.required_int("num_hidden_layers");
  c.num_attention_heads = f.required_int("num_attention_heads");
  // HF: llama → num_attention_heads; MistralConfig's default 8; Qwen2Config's default 32.
  c.num_key_value_heads = f.get_int("num_key_value_heads", mistral ? 8 : qwen2 ? 32 : c.num_attention_heads);
  c.head_dim = f.get_int("head_dim", c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0);
  c.max_position_embeddings = f.get_int("max_position_embeddings", mistral ? 4096 * 32 : qwen2 ? 32768 : 2048);
  c.rms_norm_eps = f.get_double("rms_norm_eps", 1e-6);
  c.tie_word_embeddings = f.get_bool("tie_word_embeddings", false);
  c.hidden_act = f.get_string("hidden_act", "silu");
  c.initializer_range = f.get_double("initializer_range", 0.02);
  c.pad_token_id = f.get_nullable_int("pad_token_id", std::nullopt);
  c.bos_token_id = f.get_token_ids("bos_token_id", nullptr);
  c.eos_token_id = f.get_token_ids("eos_token_id", nullptr);
  // transformers 5 folds rope_theta and the scaling into "rope_parameters".
  if (j.contains("rope_parameters") && j.at("rope_parameters").is_object()) {
    const auto& rp = j.at("rope_parameters");
    const HfJson r(rp, source + " rope_parameters", c.model_type);
    c.rope_theta = r.get_double("rope_theta", f.get_double("rope_theta", 10000.0));
    c.rope_scaling = rope_scaling_from_json(rp, source);
  } else {
    c.rope_theta = f.get_double("rope_theta", 10000.0);
    c.rope_scaling = rope_scaling_from_json(j.contains("rope_scaling") ? j.at("rope_scaling") : nlohmann::json(),
                                            source);
  }
  if (f.get_double("partial_rotary_factor", 1.0) != 1.0)
    throw NotSupported("partial_rotary_factor other than 1 is not supported (in " + source + ")");
  if (qwen2) {
    c.qkv_bias = true;
    c.max_window_layers = f.get_int("max_window_layers", 28);
    if (f.get_bool("use_sliding_window", false)) c.sliding_window = f.get_nullable_int("sliding_window", 4096);
  } else if (mistral) {
    c.sliding_window = f.get_nullable_int("sliding_window", 4096);
  } else {
    c.qkv_bias = c.o_bias = f.get_bool("attention_bias", false);
    c.mlp_bias = f.get_bool("mlp_bias", false);
  }
  DS_CHECK(c.hidden_act == "silu", NotSupported,
           "hidden_act \"" + c.hidden_act + "\" is not supported for " + c.model_type + " (only silu) (in " + source + ")");
  c.validate(source);
  return c;
}

nlohmann::json LlamaConfig::to_hf_json() const {
  const char* arch = model_type == "mistral" ? "MistralForCausalLM"
                     : model_type == "qwen2" ? "Qwen2ForCausalLM"
                                             : "LlamaForCausalLM";
  nlohmann::json j = {{"architectures", {arch}},
                      {"model_type", model_type},
                      {"vocab_size", vocab_size},
                      {"hidden_size", hidden_size},
                      {"intermediate_size", intermediate_size},
                      {"num_hidden_layers", num_hidden_layers},
                      {"num_attention_heads", num_attention_heads},
                      {"num_key_value_heads", num_key_value_heads},
                      {"head_dim", head_dim},
                      {"max_position_embeddings", max_position_embeddings},
                      {"rms_norm_eps", rms_norm_eps},
                      {"rope_theta", rope_theta},
                      {"rope_scaling", rope_scaling_to_json(rope_scaling)},
                      {"tie_word_embeddings", tie_word_embeddings},
                      {"hidden_act", hidden_act},
                      {"initializer_range", initializer_range},
                      {"attention_dropout", 0.0},
                      {"use_cache", true},
                      {"torch_dtype", "float32"}};
  auto nullable = [](const std::optional<int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  j["pad_token_id"] = nullable(pad_token_id);
  j["bos_token_id"] = bos_token_id;
  j["eos_token_id"] = eos_token_id;
  if (model_type == "llama") {
    j["attention_bias"] = qkv_bias;
    j["mlp_bias"] = mlp_bias;
  } else if (model_type == "mistral") {
    j["sliding_window"] = nullable(sliding_window);
  } else {
    j["use_sliding_window"] = sliding_window.has_value();
    j["sliding_window"] = sliding_window ? nlohmann::json(*sliding_window) : nlohmann::json(4096);
    j["max_window_layers"] = max_window_layers;
  }
  return j;
}

std::optional<int64_t> LlamaConfig::window_of_layer(int64_t i) const {
  if (!sliding_window) return std::nullopt;
  if (model_type == "qwen2" && i < max_window_layers) return std::nullopt;
  return sliding_window;
}

int64_t LlamaConfig::num_parameters() const {
  const int64_t c = hidden_size, q = num_attention_heads * head_dim, kv = num_key_value_heads * head_dim;
  const int64_t attn = c * q + 2 * c * kv + q * c + (qkv_bias ? q + 2 * kv : 0) + (o_bias ? c : 0);
  const int64_t mlp = 3 * c * intermediate_size + (mlp_bias ? 2 * intermediate_size + c : 0);
  const int64_t per_layer = attn + mlp + 2 * c;  // + input_layernorm, post_attention_layernorm
  return vocab_size * c * (tie_word_embeddings ? 1 : 2) + num_hidden_layers * per_layer + c;
}

std::string LlamaConfig::describe() const {
  char count[32];
  std::snprintf(count, sizeof(count), "%.2fM", static_cast<double>(num_parameters()) / 1e6);
  std::string s = model_type + " layers=" + std::to_string(num_hidden_layers) + " hidden=" +
                  std::to_string(hidden_size) + " heads=" + std::to_string(num_attention_heads) + "/" +
                  std::to_string(num_key_value_heads) + "kv intermediate=" + std::to_string(intermediate_size) +
                  " vocab=" + std::to_string(vocab_size);
  if (rope_scaling.type != "default") s += " rope_scaling=" + rope_scaling.type;
  if (sliding_window) s += " sliding_window=" + std::to_string(*sliding_window);
  return s + " (" + count + " parameters)";
}

void LlamaConfig::validate(const std::string& source) const {
  const std::string in = source.empty() ? "" : " (in " + source + ")";
  auto require = [&](bool ok, const char* field, const std::string& msg) {
    if (!ok) throw ConfigError(field, msg + in);
  };
  const std::pair<const char*, int64_t> sizes[] = {{"vocab_size", vocab_size},
                                                   {"hidden_size", hidden_size},
                                                   {"intermediate_size", intermediate_size},
                                                   {"num_hidden_layers", num_hidden_layers},
                                                   {"num_attention_heads", num_attention_heads},
                                                   {"num_key_value_heads", num_key_value_heads},
                                                   {"head_dim", head_dim},
                                                   {"max_position_embeddings", max_position_embeddings}};
  for (const auto& [field, value] : sizes) require(value > 0, field, "must be > 0, got " + std::to_string(value));
  require(num_attention_heads % num_key_value_heads == 0, "num_key_value_heads",
          std::to_string(num_key_value_heads) + " does not divide num_attention_heads = " +
              std::to_string(num_attention_heads) + " (each group of query heads shares one key/value head)");
  require(head_dim % 2 == 0, "head_dim", "rotary embeddings need an even head_dim, got " + std::to_string(head_dim));
  require(rms_norm_eps > 0, "rms_norm_eps", "must be > 0");
  require(!sliding_window || *sliding_window > 0, "sliding_window",
          "must be > 0 or null, got " + std::to_string(sliding_window.value_or(0)));
  require(!pad_token_id || (*pad_token_id < vocab_size && *pad_token_id >= -vocab_size), "pad_token_id",
          std::to_string(pad_token_id.value_or(0)) + " is not a row of the embedding (vocab_size = " +
              std::to_string(vocab_size) + ")");
}

}  // namespace ds::models
