// The Llama family (model_type llama, mistral, qwen2) in LibTorch, as Hugging Face's
// LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM compute it: RMSNorm, rotary position
// embeddings (with rope_scaling), grouped-query attention, SwiGLU MLP, pre-norm blocks, tied or
// untied output head, qwen2's q/k/v bias, mistral's sliding window. Module names are HF's, so
// named_parameters() yields "model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
// ..., "model.norm.weight", "lm_head.weight" (absent when tied) — and HF's Linear layout [out, in],
// so checkpoints load without transposes.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "models/causal_lm.h"
#include "models/llama_config.h"
#include "models/lora_linear.h"
#include "models/rope.h"

namespace ds::models {

// x · rsqrt(mean(x²) + eps) in fp32, cast back, times weight (HF's LlamaRMSNorm).
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

class LlamaAttentionImpl : public torch::nn::Module {
 public:
  explicit LlamaAttentionImpl(const LlamaConfig& c);
  // x [B,T,C], cos/sin [T,head_dim] (or [B,1,T,head_dim] for packed rows) → [B,T,C]; `blocked`:
  // SequenceLayout's cross-document mask, or undefined.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& blocked, std::optional<int64_t> sliding_window);

  LoraLinear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  parallel::SequenceGroupSlot sequence = std::make_shared<parallel::SequenceGroup>();  // the model's (Ulysses)

  int64_t local_kv_heads() const { return k_proj->weight.size(0) / head_dim_; }

 private:
  int64_t heads_, kv_heads_, head_dim_;
};
TORCH_MODULE(LlamaAttention);

// down_proj(silu(gate_proj(x)) · up_proj(x)).
class LlamaMLPImpl : public torch::nn::Module {
 public:
  explicit LlamaMLPImpl(const LlamaConfig& c);
  torch::Tensor forward(const torch::Tensor& x);

  LoraLinear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(LlamaMLP);

// h = x + self_attn(input_layernorm(x)); out = h + mlp(post_attention_layernorm(h)).
class LlamaDecoderLayerImpl : public torch::nn::Module {
 public:
  LlamaDecoderLayerImpl(const LlamaConfig& c, int64_t index);
  torch::Tensor forward(const torch::Tensor& x, RotaryEmbedding& rope, const SequenceLayout* layout = nullptr);

  LlamaAttention self_attn{nullptr};
  LlamaMLP mlp{nullptr};
  RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};

 private:
  std::optional<int64_t> window_;
};
TORCH_MODULE(LlamaDecoderLayer);

// HF's "model" submodule; no forward of its own (LlamaImpl's LayerList sequences the pieces).
class LlamaModelImpl : public torch::nn::Module {
 public:
  explicit LlamaModelImpl(const LlamaConfig& c, const ds::nn::LayerSelection& selection = {});

  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};  // of LlamaDecoderLayer
  RMSNorm norm{nullptr};
};
TORCH_MODULE(LlamaModel);

class LlamaImpl : public CausalLM {
 public:
  // Validates the config and initialises as HF does (Linear and Embedding N(0, initializer_range),
  // biases 0, pad row 0, norms 1) from torch's global generator: torch::manual_seed first.
  // random_init false skips HF's init (LibTorch's module defaults stay): for from_pretrained,
  // which overwrites every weight. `selection`: only those layers materialised (as GPT2Impl's).
  explicit LlamaImpl(LlamaConfig config, bool random_init = true, const ds::nn::LayerSelection& selection = {});

  using CausalLM::forward;
  // idx int64 [B,T] (no length limit: rotary positions extrapolate) → logits [B,T,V].
  torch::Tensor forward(const torch::Tensor& idx) override;
  bool supports_sequence_layout() const override { return true; }
  bool supports_sequence_parallel() const override { return true; }

  // "embed" (embed_tokens), "layers.0".."layers.{L-1}", "head" (norm, then lm_head or the tied
  // embed_tokens.weight, listed in both "embed" and "head").
  const ds::nn::LayerList& layers() const override { return layers_; }
  ds::nn::LayerList& layers() override { return layers_; }

  std::string model_type() const override { return config_.model_type; }
  nlohmann::json hf_config() const override { return config_.to_hf_json(); }
  std::string describe() const override { return config_.describe(); }
  const LlamaConfig& config() const { return config_; }
  RotaryEmbedding& rotary() { return *rope_; }

  LlamaModel model{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when tie_word_embeddings

 protected:
  int64_t local_attention_heads() const override;  // the kv heads: N must divide them (and so the q heads)

 private:
  void init_weights();
  void build_layers();

  LlamaConfig config_;
  std::shared_ptr<RotaryEmbedding> rope_;
  ds::nn::LayerList layers_;
};
TORCH_MODULE(Llama);

}  // namespace ds::models
