#include "models/gpt2_hf.h"

#include "models/pretrained.h"

namespace ds::models {

bool is_conv1d_weight(const std::string& name) {
  for (const char* s : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
    if (name.ends_with(s)) return true;
  return false;
}

nlohmann::json hf_config_json(const GPT2Config& c) {
  return {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"activation_function", "gelu_new"},
          {"vocab_size", c.vocab_size}, {"n_positions", c.n_positions}, {"n_ctx", c.n_positions},
          {"n_embd", c.n_embd}, {"n_layer", c.n_layer}, {"n_head", c.n_head}, {"n_inner", nullptr},
          {"layer_norm_epsilon", 1e-5}, {"initializer_range", 0.02}, {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0},
          {"attn_pdrop", 0.0}, {"tie_word_embeddings", true}, {"bos_token_id", 50256}, {"eos_token_id", 50256},
          {"torch_dtype", "float32"}};
}

GPT2Config config_from_hf_json(const nlohmann::json& j) {
  GPT2Config c;
  c.vocab_size = j.value("vocab_size", c.vocab_size);
  c.n_positions = j.value("n_positions", c.n_positions);
  c.n_embd = j.value("n_embd", c.n_embd);
  c.n_layer = j.value("n_layer", c.n_layer);
  c.n_head = j.value("n_head", c.n_head);
  return c;
}

void load_hf_gpt2(GPT2Impl& model, const std::string& path) { load_pretrained_weights(model, path); }

}  // namespace ds::models
