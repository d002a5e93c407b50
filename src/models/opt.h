// OPT (model_type opt) in LibTorch, as Hugging Face's OPTForCausalLM computes it: learned positions
// with OPT's offset of 2, pre- or post-LN blocks (do_layer_norm_before), ReLU MLP (fc1, fc2),
// project_in / project_out when word_embed_proj_dim ≠ hidden_size (opt-350m), output head tied to
// embed_tokens. Module names are HF's: "model.decoder.embed_tokens.weight",
// "model.decoder.embed_positions.weight", "model.decoder.layers.0.self_attn.q_proj.weight", ...,
// "model.decoder.final_layer_norm.weight"; Linear layout [out, in] as in HF files.
#pragma once

#include <torch/torch.h>

#include "models/causal_lm.h"
#include "models/lora_linear.h"
#include "models/opt_config.h"

namespace ds::models {

class OPTAttentionImpl : public torch::nn::Module {
 public:
  explicit OPTAttentionImpl(const OPTConfig& c);
  // [B,T,C] → [B,T,C], causal (and within documents where `blocked`, SequenceLayout's, is given)
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& blocked = {});

  LoraLinear k_proj{nullptr}, v_proj{nullptr}, q_proj{nullptr}, out_proj{nullptr};
  parallel::SequenceGroupSlot sequence = std::make_shared<parallel::SequenceGroup>();  // the model's (Ulysses)

  int64_t local_heads() const { return q_proj->weight.size(0) / head_dim_; }

 private:
  int64_t head_dim_;  // heads follow q_proj's width (this rank's heads under AutoTP)
};
TORCH_MODULE(OPTAttention);

// Pre-LN: x + attn(ln(x)), then + fc2(relu(fc1(ln(h)))). Post-LN: ln(x + attn(x)), ln(h + mlp(h)).
class OPTDecoderLayerImpl : public torch::nn::Module {
 public:
  explicit OPTDecoderLayerImpl(const OPTConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& blocked = {});

  OPTAttention self_attn{nullptr};
  torch::nn::LayerNorm self_attn_layer_norm{nullptr};
  LoraLinear fc1{nullptr}, fc2{nullptr};
  torch::nn::LayerNorm final_layer_norm{nullptr};

 private:
  bool pre_ln_;
};
TORCH_MODULE(OPTDecoderLayer);

// HF's "model.decoder" (registration order as HF: embed_tokens, embed_positions, project_out,
// project_in, final_layer_norm, layers). Optional pieces are null when the config has none.
class OPTDecoderImpl : public torch::nn::Module {
 public:
  explicit OPTDecoderImpl(const OPTConfig& c, const ds::nn::LayerSelection& selection = {});

  torch::nn::Embedding embed_tokens{nullptr};     // [V, word_embed_proj_dim]
  torch::nn::Embedding embed_positions{nullptr};  // [max_position_embeddings + 2, C]
  torch::nn::Linear project_out{nullptr}, project_in{nullptr};
  torch::nn::LayerNorm final_layer_norm{nullptr};
  torch::nn::ModuleList layers{nullptr};  // of OPTDecoderLayer
};
TORCH_MODULE(OPTDecoder);

class OPTModelImpl : public torch::nn::Module {  // HF's "model": just the decoder
 public:
  explicit OPTModelImpl(const OPTConfig& c, const ds::nn::LayerSelection& selection = {});
  OPTDecoder decoder{nullptr};
};
TORCH_MODULE(OPTModel);

class OPTImpl : public CausalLM {
 public:
  // Validates and initialises as HF does (N(0, init_std), biases 0, pad row 0, LayerNorm (1, 0)).
  // random_init false skips HF's init (LibTorch's module defaults stay): for from_pretrained,
  // which overwrites every weight. `selection`: only those layers materialised (as GPT2Impl's).
  explicit OPTImpl(OPTConfig config, bool random_init = true, const ds::nn::LayerSelection& selection = {});

  using CausalLM::forward;
  // idx int64 [B,T], T ≤ max_position_embeddings → logits [B,T,V].
  torch::Tensor forward(const torch::Tensor& idx) override;
  bool supports_sequence_layout() const override { return true; }
  bool supports_sequence_parallel() const override { return true; }

  // "embed" (tokens, project_in, positions), "layers.0".., "head" (final_layer_norm,
  // project_out, tied embed_tokens.weight or lm_head.weight).
  const ds::nn::LayerList& layers() const override { return layers_; }
  ds::nn::LayerList& layers() override { return layers_; }

  std::string model_type() const override { return "opt"; }
  nlohmann::json hf_config() const override { return config_.to_hf_json(); }
  std::string describe() const override { return config_.describe(); }
  const OPTConfig& config() const { return config_; }

  OPTModel model{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when tied (the default)

 protected:
  int64_t local_attention_heads() const override;

 private:
  void init_weights();
  void build_layers();

  OPTConfig config_;
  ds::nn::LayerList layers_;
};
TORCH_MODULE(OPT);

}  // namespace ds::models
