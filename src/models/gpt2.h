// The GPT-2 family in LibTorch: pre-LN transformer blocks, written-out causal self-attention,
// tied token embeddings. Module names follow Hugging Face's GPT2LMHeadModel, so named_parameters()
// yields "transformer.wte.weight", "transformer.h.0.attn.c_attn.weight", ... "transformer.ln_f.bias".
//
// Layout note: Linear weights here are torch's [out, in]; Hugging Face's Conv1D stores [in, out],
// so export to / import from HF checkpoints transposes c_attn, c_proj and c_fc weights.
#pragma once

#include <torch/torch.h>

#include "models/causal_lm.h"
#include "models/gpt2_config.h"
#include "models/lora_linear.h"
#include "nn/layer_list.h"

namespace ds::models {

// Causal multi-head self-attention. x [B,T,C] → [B,T,C]. Under AutoTP c_attn holds this rank's
// heads (of q, k and v) and c_proj reads them; the head count follows from c_attn's width. Under
// Ulysses x holds this rank's T/N tokens and attention runs as DistributedAttention over `sequence`.
// `blocked` (bool [B,1,T,T], SequenceLayout's): keys a query may not see beyond the causal rule
// (packed rows: other documents).
class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalSelfAttentionImpl(int64_t n_embd, int64_t n_head);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& blocked = {});

  LoraLinear c_attn{nullptr};  // C → 3C (q, k, v)
  LoraLinear c_proj{nullptr};  // C → C (residual projection)
  parallel::SequenceGroupSlot sequence = std::make_shared<parallel::SequenceGroup>();  // the model's, once built

  int64_t local_heads() const { return c_attn->weight.size(0) / 3 / head_dim_; }

 private:
  int64_t head_dim_;
};
TORCH_MODULE(CausalSelfAttention);

// Position-wise MLP: c_fc (C → 4C) → GELU (tanh approximation) → c_proj (4C → C).
class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(int64_t n_embd);
  torch::Tensor forward(const torch::Tensor& x);

  LoraLinear c_fc{nullptr};
  LoraLinear c_proj{nullptr};
};
TORCH_MODULE(Mlp);

// Pre-LN block: x + attn(ln_1(x)), then + mlp(ln_2(x)). x [B,T,C] → [B,T,C].
class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(int64_t n_embd, int64_t n_head);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& blocked = {});

  torch::nn::LayerNorm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  torch::nn::LayerNorm ln_2{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(Block);

// The "transformer" submodule: embeddings, blocks "h.0".."h.{L-1}", final LayerNorm. It has no
// forward of its own: GPT2Impl's LayerList sequences these pieces.
class GPT2TransformerImpl : public torch::nn::Module {
 public:
  // The blocks `selection` leaves out (LayerList index i + 1) hold placeholders (nn/placeholder.h).
  explicit GPT2TransformerImpl(const GPT2Config& config, const ds::nn::LayerSelection& selection = {});

  torch::nn::Embedding wte{nullptr};  // [V, C], also the output projection (tied)
  torch::nn::Embedding wpe{nullptr};  // [P, C]
  torch::nn::ModuleList h{nullptr};   // of Block
  torch::nn::LayerNorm ln_f{nullptr};
};
TORCH_MODULE(GPT2Transformer);

// Call it as model->forward(...): with two forward overloads, LibTorch 1.13's ModuleHolder
// operator() (model(idx)) and AnyModule/Sequential cannot deduce which forward to use.
class GPT2Impl : public CausalLM {
 public:
  // Validates the config (ds::ConfigError) and initialises weights GPT-2 style from torch's
  // global generator: call torch::manual_seed(s) first for a deterministic model. With a
  // `selection` (a pipeline stage's layers) only those layers are materialised, the others' tensors
  // are placeholders and their layers throw when run; the selected ones get the values the whole
  // model's would (the generator draws for the others too).
  explicit GPT2Impl(GPT2Config config, const ds::nn::LayerSelection& selection = {});

  // idx int64 [B,T], T ≤ n_positions → logits [B,T,V] in the parameters' dtype.
  // Runs layers().forward(idx): one code path for the plain and the layer-walking engines.
  torch::Tensor forward(const torch::Tensor& idx) override;
  // Mean cross-entropy of the logits against targets int64 [B,T] (entries equal to -100 are
  // ignored, as in torch and Hugging Face) → scalar; computed in fp32 for 16-bit parameters.
  torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& targets) override;

  // "embed" (wte(idx) + wpe(pos)), "h.0".."h.{L-1}", "head" (ln_f, then x @ wte.weightᵀ).
  const ds::nn::LayerList& layers() const override { return layers_; }
  // Mutable access for installing LayerHooks (stage 3); do not add layers to a model's list.
  ds::nn::LayerList& layers() override { return layers_; }

  std::string model_type() const override { return "gpt2"; }
  nlohmann::json hf_config() const override;  // hf_config_json(config()) (gpt2_hf.h)
  bool hf_transposed(const std::string& name) const override;  // the Conv1D weights
  bool hf_ignorable(const std::string& name) const override;   // lm_head, attention-mask buffers
  std::string describe() const override { return config_.describe(); }
  std::string hf_base_prefix() const override { return "transformer."; }
  bool supports_sequence_parallel() const override { return true; }
  bool supports_sequence_layout() const override { return true; }
  bool supports_vocab_parallel() const override { return true; }

  const GPT2Config& config() const { return config_; }

  GPT2Transformer transformer{nullptr};

 protected:
  int64_t local_attention_heads() const override;
  std::string vocab_embedding_parameter() const override { return "transformer.wte.weight"; }

 private:
  void init_weights();
  void build_layers();

  GPT2Config config_;
  ds::nn::LayerList layers_;
};
TORCH_MODULE(GPT2);

}  // namespace ds::models
