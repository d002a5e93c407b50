// Llama-family modules, HF initialisation, and the LayerList that is the model's forward path.
#include "models/llama.h"

#include <cmath>

#include "models/attention.h"
#include "models/hf_layers.h"
#include "nn/fused_ops.h"
#include "nn/memory_efficient_linear.h"
#include "util/error.h"

namespace ds::models {
namespace {

using hf::linear;
using hf::padding_row;
using hf::proj;

}  // namespace

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) { return nn::rms_norm(x, weight, eps_); }

LlamaAttentionImpl::LlamaAttentionImpl(const LlamaConfig& c)
    : heads_(c.num_attention_heads), kv_heads_(c.num_key_value_heads), head_dim_(c.head_dim) {
  q_proj = register_module("q_proj", proj(c.hidden_size, heads_ * head_dim_, c.qkv_bias));
  k_proj = register_module("k_proj", proj(c.hidden_size, kv_heads_ * head_dim_, c.qkv_bias));
  v_proj = register_module("v_proj", proj(c.hidden_size, kv_heads_ * head_dim_, c.qkv_bias));
  o_proj = register_module("o_proj", proj(heads_ * head_dim_, c.hidden_size, c.o_bias));
  for (auto* p : {&q_proj, &k_proj, &v_proj, &o_proj}) (*p)->set_shard_unit(head_dim_);  // AutoTP: whole heads
}

torch::Tensor LlamaAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                          const torch::Tensor& blocked,
                                          std::optional<int64_t> sliding_window) {
  const int64_t b = x.size(0), t = x.size(1);
  // Head counts follow the projections' widths: this rank's heads under AutoTP (all without it).
  auto heads = [&](const torch::Tensor& z) { return z.view({b, t, z.size(2) / head_dim_, head_dim_}).transpose(1, 2); };
  auto q = apply_rotary(heads(q_proj(x)), cos, sin);  // [B,H,T,D]
  auto k = apply_rotary(heads(k_proj(x)), cos, sin);  // [B,Hkv,T,D]
  auto v = heads(v_proj(x));
  auto y = sequence_parallel_causal_attention(*sequence, q, k, v, 1.0 / std::sqrt(static_cast<double>(head_dim_)),
                                              sliding_window, blocked);
  return o_proj(y.transpose(1, 2).reshape({b, t, q.size(1) * head_dim_}));
}

LlamaMLPImpl::LlamaMLPImpl(const LlamaConfig& c) {
  gate_proj = register_module("gate_proj", proj(c.hidden_size, c.intermediate_size, c.mlp_bias));
  up_proj = register_module("up_proj", proj(c.hidden_size, c.intermediate_size, c.mlp_bias));
  down_proj = register_module("down_proj", proj(c.intermediate_size, c.hidden_size, c.mlp_bias));
}

torch::Tensor LlamaMLPImpl::forward(const torch::Tensor& x) {
  return down_proj(nn::swiglu(gate_proj(x), up_proj(x)));
}

LlamaDecoderLayerImpl::LlamaDecoderLayerImpl(const LlamaConfig& c, int64_t index) : window_(c.window_of_layer(index)) {
  // HF's registration order: self_attn, mlp, input_layernorm, post_attention_layernorm.
  self_attn = register_module("self_attn", LlamaAttention(c));
  mlp = register_module("mlp", LlamaMLP(c));
  input_layernorm = register_module("input_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
  post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
}

torch::Tensor LlamaDecoderLayerImpl::forward(const torch::Tensor& x, RotaryEmbedding& rope,
                                             const SequenceLayout* layout) {
  auto [cos, sin] = rope.cos_sin(x.size(1), x.scalar_type(), x.device());  // [T,D] for positions 0..T-1
  if (const parallel::SequenceGroup& sp = *self_attn->sequence; sp.active()) {  // Ulysses: this rank's global positions
    const int64_t local = x.size(1), first = sp.comm->rank() * local;
    std::tie(cos, sin) = rope.cos_sin(local * sp.comm->size(), x.scalar_type(), x.device());
    cos = cos.narrow(0, first, local);
    sin = sin.narrow(0, first, local);
  }
  torch::Tensor blocked;
  if (layout) {  // packed: each token's own position (< T), attention within its document. Rotary
                 // scores depend only on position differences, so restarting is HF's position_ids
                 // convention more than a change in results; the mask is what keeps documents apart.
    cos = cos.index({layout->position_ids}).unsqueeze(1);  // [B,1,T,D]
    sin = sin.index({layout->position_ids}).unsqueeze(1);
    blocked = layout->blocked;
  }
  auto h = x + self_attn->forward(input_layernorm(x), cos, sin, blocked, window_);
  return h + mlp(post_attention_layernorm(h));
}

LlamaModelImpl::LlamaModelImpl(const LlamaConfig& c, const nn::LayerSelection& selection) {
  auto opts = torch::nn::EmbeddingOptions(c.vocab_size, c.hidden_size);
  if (auto pad = padding_row(c.pad_token_id, c.vocab_size)) opts.padding_idx(*pad);
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(opts));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    LlamaDecoderLayer layer(c, i);
    if (!selection.keeps(size_t(i) + 1)) nn::make_placeholders(*layer);  // one layer alive at a time
    layers->push_back(layer);
  }
  norm = register_module("norm", RMSNorm(c.hidden_size, c.rms_norm_eps));
}

LlamaImpl::LlamaImpl(LlamaConfig config, bool random_init, const nn::LayerSelection& selection)
    : config_(std::move(config)) {
  config_.validate();
  model = register_module("model", LlamaModel(config_, selection));
  if (!config_.tie_word_embeddings)
    lm_head = register_module("lm_head", linear(config_.hidden_size, config_.vocab_size, false));
  rope_ = std::make_shared<RotaryEmbedding>(config_.head_dim, config_.rope_theta, config_.rope_scaling,
                                            config_.max_position_embeddings);
  for (size_t i = 0; i < model->layers->size(); ++i)
    model->layers->ptr<LlamaDecoderLayerImpl>(i)->self_attn->sequence = sp_slot_;
  if (random_init) init_weights();
  build_layers();
  nn::keep_selected_layers(*this, layers_, selection);
}

void LlamaImpl::init_weights() {
  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    if (name.ends_with(".bias")) nn::init_fill_(p, 0.0);
    else if (name.ends_with("norm.weight")) nn::init_fill_(p, 1.0);
    else nn::init_normal_(p, 0.0, config_.initializer_range);
  }
  if (auto pad = padding_row(config_.pad_token_id, config_.vocab_size)) model->embed_tokens->weight[*pad].zero_();
}

void LlamaImpl::build_layers() {
  // The lambdas hold shared module handles, so they stay valid when parameters move or change dtype.
  auto embed = model->embed_tokens.ptr();
  const int64_t vocab = config_.vocab_size;
  const int64_t pad = padding_row(config_.pad_token_id, vocab).value_or(-1);
  const std::string who = config_.model_type;
  parallel::SequenceGroupSlot sp = sp_slot_;
  layers_.add(
      "embed",
      [embed, vocab, pad, who, sp](const torch::Tensor& idx) {
        check_token_ids(idx, vocab, 0, who);
        const torch::Tensor mine = sp->active() ? parallel::shard_sequence(idx, *sp->comm) : idx;  // Ulysses
        return torch::embedding(embed->weight, mine, pad);  // [B,T,C]; no gradient into the pad row
      },
      {"model.embed_tokens.weight"});

  auto rope = rope_;
  auto slot = layout_slot_;
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    auto layer = model->layers->ptr<LlamaDecoderLayerImpl>(static_cast<size_t>(i));
    const std::string name = "layers." + std::to_string(i);
    layers_.add(nn::Layer{
        name,
        [layer, rope, slot](const torch::Tensor& x) {
          return layer->forward(x, *rope, current_layout(slot, x.size(0), x.size(1)));
        },
        prefixed_param_names(*layer, "model." + name + "."), int(i) + 1, int(config_.num_hidden_layers)});
  }

  auto norm = model->norm.ptr();
  std::vector<std::string> head_params = {"model.norm.weight"};
  std::shared_ptr<torch::nn::LinearImpl> head = lm_head ? lm_head.ptr() : nullptr;
  head_params.push_back(head ? "lm_head.weight" : "model.embed_tokens.weight");
  layers_.add(
      "head",
      [norm, head, embed](const torch::Tensor& x) {
        return nn::memory_efficient_linear(norm->forward(x), head ? head->weight : embed->weight);  // [B,T,V], as gpt2.cpp
      },
      std::move(head_params));
}

torch::Tensor LlamaImpl::forward(const torch::Tensor& idx) { return layers_.forward(idx); }

int64_t LlamaImpl::local_attention_heads() const {
  for (size_t i = 0; i < model->layers->size(); ++i)
    if (auto attn = model->layers->ptr<LlamaDecoderLayerImpl>(i)->self_attn; attn->k_proj->weight.numel() > 0)
      return attn->local_kv_heads();
  return config_.num_key_value_heads;
}

}  // namespace ds::models
