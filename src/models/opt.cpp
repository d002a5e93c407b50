// OPT modules, HF initialisation, and the LayerList that is the model's forward path.
#include "models/opt.h"

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

torch::nn::LayerNorm layer_norm(const OPTConfig& c) {
  return torch::nn::LayerNorm(
      torch::nn::LayerNormOptions({c.hidden_size}).eps(1e-5).elementwise_affine(c.layer_norm_elementwise_affine));
}

}  // namespace

OPTAttentionImpl::OPTAttentionImpl(const OPTConfig& c) : head_dim_(c.hidden_size / c.num_attention_heads) {
  k_proj = register_module("k_proj", proj(c.hidden_size, c.hidden_size, c.enable_bias));
  v_proj = register_module("v_proj", proj(c.hidden_size, c.hidden_size, c.enable_bias));
  q_proj = register_module("q_proj", proj(c.hidden_size, c.hidden_size, c.enable_bias));
  out_proj = register_module("out_proj", proj(c.hidden_size, c.hidden_size, c.enable_bias));
  for (auto* p : {&q_proj, &k_proj, &v_proj, &out_proj}) (*p)->set_shard_unit(head_dim_);  // AutoTP: whole heads
}

torch::Tensor OPTAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& blocked) {
  const int64_t b = x.size(0), t = x.size(1), d = head_dim_;
  auto heads = [&](const torch::Tensor& z) { return z.view({b, t, z.size(2) / d, d}).transpose(1, 2); };
  auto y = sequence_parallel_causal_attention(*sequence, heads(q_proj(x)), heads(k_proj(x)), heads(v_proj(x)),
                                              1.0 / std::sqrt(static_cast<double>(d)), std::nullopt, blocked);
  return out_proj(y.transpose(1, 2).reshape({b, t, y.size(1) * d}));
}

OPTDecoderLayerImpl::OPTDecoderLayerImpl(const OPTConfig& c) : pre_ln_(c.do_layer_norm_before) {
  self_attn = register_module("self_attn", OPTAttention(c));
  self_attn_layer_norm = register_module("self_attn_layer_norm", layer_norm(c));
  fc1 = register_module("fc1", proj(c.hidden_size, c.ffn_dim, c.enable_bias));
  fc2 = register_module("fc2", proj(c.ffn_dim, c.hidden_size, c.enable_bias));
  final_layer_norm = register_module("final_layer_norm", layer_norm(c));
}

torch::Tensor OPTDecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& blocked) {
  auto h = x + self_attn->forward(pre_ln_ ? nn::layer_norm(self_attn_layer_norm, x) : x, blocked);
  if (!pre_ln_) h = nn::layer_norm(self_attn_layer_norm, h);
  auto out = h + fc2(torch::relu(fc1(pre_ln_ ? nn::layer_norm(final_layer_norm, h) : h)));
  return pre_ln_ ? out : nn::layer_norm(final_layer_norm, out);
}

OPTDecoderImpl::OPTDecoderImpl(const OPTConfig& c, const nn::LayerSelection& selection) {
  auto opts = torch::nn::EmbeddingOptions(c.vocab_size, c.word_embed_proj_dim);
  if (auto pad = padding_row(c.pad_token_id, c.vocab_size)) opts.padding_idx(*pad);
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(opts));
  embed_positions = register_module(
      "embed_positions", torch::nn::Embedding(c.max_position_embeddings + OPTConfig::kPositionOffset, c.hidden_size));
  if (c.has_projections()) {
    project_out = register_module("project_out", linear(c.hidden_size, c.word_embed_proj_dim, false));
    project_in = register_module("project_in", linear(c.word_embed_proj_dim, c.hidden_size, false));
  }
  if (c.has_final_layer_norm()) final_layer_norm = register_module("final_layer_norm", layer_norm(c));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    OPTDecoderLayer layer(c);
    if (!selection.keeps(size_t(i) + 1)) nn::make_placeholders(*layer);  // one layer alive at a time
    layers->push_back(layer);
  }
}

OPTModelImpl::OPTModelImpl(const OPTConfig& c, const nn::LayerSelection& selection) {
  decoder = register_module("decoder", OPTDecoder(c, selection));
}

OPTImpl::OPTImpl(OPTConfig config, bool random_init, const nn::LayerSelection& selection)
    : config_(std::move(config)) {
  config_.validate();
  model = register_module("model", OPTModel(config_, selection));
  if (!config_.tie_word_embeddings)
    lm_head = register_module("lm_head", linear(config_.word_embed_proj_dim, config_.vocab_size, false));
  if (random_init) init_weights();
  build_layers();
  nn::keep_selected_layers(*this, layers_, selection);
}

void OPTImpl::init_weights() {
  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    const bool norm = name.find("layer_norm.") != std::string::npos;
    if (name.ends_with(".bias")) nn::init_fill_(p, 0.0);
    else if (norm) nn::init_fill_(p, 1.0);
    else nn::init_normal_(p, 0.0, config_.init_std);
  }
  if (auto pad = padding_row(config_.pad_token_id, config_.vocab_size))
    model->decoder->embed_tokens->weight[*pad].zero_();
}

void OPTImpl::build_layers() {
  auto dec = model->decoder.ptr();
  const std::string pre = "model.decoder.";
  const int64_t vocab = config_.vocab_size, max_pos = config_.max_position_embeddings;
  const int64_t pad = padding_row(config_.pad_token_id, vocab).value_or(-1);
  auto slot = layout_slot_;
  parallel::SequenceGroupSlot sp = sp_slot_;
  for (size_t i = 0; i < dec->layers->size(); ++i) dec->layers->ptr<OPTDecoderLayerImpl>(i)->self_attn->sequence = sp;

  std::vector<std::string> embed_params = {pre + "embed_tokens.weight", pre + "embed_positions.weight"};
  if (dec->project_in) embed_params.push_back(pre + "project_in.weight");
  layers_.add(
      "embed",
      [dec, vocab, max_pos, pad, slot, sp](const torch::Tensor& idx) {
        check_token_ids(idx, vocab, max_pos, "opt");
        const torch::Tensor mine = sp->active() ? parallel::shard_sequence(idx, *sp->comm) : idx;  // Ulysses
        auto x = torch::embedding(dec->embed_tokens->weight, mine, pad);  // [B,T,E]
        if (dec->project_in) x = dec->project_in(x);                      // [B,T,C]
        // Positions 0..T-1 (or each packed document's own; this rank's under Ulysses), stored at rows
        // 2..T+1 (OPT's offset).
        auto pos = sp->active() ? parallel::sequence_positions(idx.size(1), *sp->comm, idx.device())
                                : torch::arange(idx.size(1), idx.options());
        if (auto* l = current_layout(slot, idx.size(0), idx.size(1))) pos = l->position_ids;
        pos = pos + OPTConfig::kPositionOffset;
        return x + dec->embed_positions(pos);
      },
      std::move(embed_params));

  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    auto layer = dec->layers->ptr<OPTDecoderLayerImpl>(static_cast<size_t>(i));
    const std::string name = "layers." + std::to_string(i);
    layers_.add(nn::Layer{
        name,
        [layer, slot](const torch::Tensor& x) {
          auto* l = current_layout(slot, x.size(0), x.size(1));
          return layer->forward(x, l ? l->blocked : torch::Tensor());
        },
        prefixed_param_names(*layer, pre + name + "."), int(i) + 1, int(config_.num_hidden_layers)});
  }

  std::vector<std::string> head_params;
  if (dec->final_layer_norm) {
    for (auto& n : prefixed_param_names(*dec->final_layer_norm, pre + "final_layer_norm.")) head_params.push_back(n);
  }
  if (dec->project_out) head_params.push_back(pre + "project_out.weight");
  std::shared_ptr<torch::nn::LinearImpl> head = lm_head ? lm_head.ptr() : nullptr;
  head_params.push_back(head ? "lm_head.weight" : pre + "embed_tokens.weight");
  layers_.add(
      "head",
      [dec, head](const torch::Tensor& x) {
        auto h = dec->final_layer_norm ? nn::layer_norm(dec->final_layer_norm, x) : x;
        if (dec->project_out) h = dec->project_out(h);
        return nn::memory_efficient_linear(h, head ? head->weight : dec->embed_tokens->weight);  // [B,T,V], as gpt2.cpp
      },
      std::move(head_params));
}

torch::Tensor OPTImpl::forward(const torch::Tensor& idx) { return layers_.forward(idx); }

int64_t OPTImpl::local_attention_heads() const {
  for (size_t i = 0; i < model->decoder->layers->size(); ++i)
    if (auto attn = model->decoder->layers->ptr<OPTDecoderLayerImpl>(i)->self_attn; attn->q_proj->weight.numel() > 0)
      return attn->local_heads();
  return config_.num_attention_heads;
}

}  // namespace ds::models
