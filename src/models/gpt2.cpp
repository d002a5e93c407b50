// GPT-2 modules, GPT-2 initialisation, and the LayerList that is the model's only forward path.
#include "models/gpt2.h"

#include <cmath>
#include <limits>

#include "models/attention.h"
#include "models/blockwise_attention.h"
#include "models/gpt2_hf.h"
#include "nn/batched_matmul.h"
#include "nn/fused_ops.h"
#include "nn/memory_efficient_linear.h"
#include "parallel/tp_collectives.h"
#include "util/error.h"

namespace ds::models {
namespace {

constexpr double kLayerNormEps = 1e-5;
constexpr double kInitStd = 0.02;

torch::nn::LayerNorm make_layer_norm(int64_t n_embd) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({n_embd}).eps(kLayerNormEps));
}


// Token ids must be int64 [B,T] with 1 ≤ T ≤ n_positions and (checked on CPU, where it is
// cheap) every id in [0, vocab_size).
void check_tokens(const torch::Tensor& idx, const GPT2Config& cfg) {
  DS_CHECK(idx.defined() && idx.dim() == 2, Error,
           "GPT2: expected token ids of shape [batch, seq], got " +
               (idx.defined() ? shape_str(idx.sizes()) : std::string("an undefined tensor")));
  DS_CHECK(idx.scalar_type() == torch::kLong, Error,
           std::string("GPT2: token ids must be int64, got ") + c10::toString(idx.scalar_type()));
  const int64_t t = idx.size(1);
  DS_CHECK(t >= 1 && t <= cfg.n_positions, Error,
           "GPT2: sequence length " + std::to_string(t) + " exceeds n_positions " +
               std::to_string(cfg.n_positions) + " (use a shorter seq_len or a larger model)");
  if (idx.device().is_cpu() && idx.numel() > 0) {
    const int64_t lo = idx.min().item<int64_t>();
    const int64_t hi = idx.max().item<int64_t>();
    DS_CHECK(lo >= 0 && hi < cfg.vocab_size, Error,
             "GPT2: token id " + std::to_string(lo < 0 ? lo : hi) + " outside [0, vocab_size = " +
                 std::to_string(cfg.vocab_size) + ")");
  }
}

std::vector<std::string> prefixed_names(torch::nn::Module& m, const std::string& prefix) {
  std::vector<std::string> names;
  for (const auto& item : m.named_parameters(/*recurse=*/true)) names.push_back(prefix + item.key());
  return names;
}

}  // namespace

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int64_t n_embd, int64_t n_head) : head_dim_(n_embd / n_head) {
  c_attn = register_module("c_attn", LoraLinear(n_embd, 3 * n_embd));
  c_proj = register_module("c_proj", LoraLinear(n_embd, n_embd));
  c_attn->set_shard_unit(head_dim_);  // AutoTP keeps whole heads on each rank
  c_proj->set_shard_unit(head_dim_);
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& blocked) {
  const int64_t b = x.size(0), t = x.size(1);
  const int64_t d = head_dim_;
  // [B,T,3C'] → three [B,T,C'] → [B,H',T,D], C' = H'·D: this rank's heads (all of them without AutoTP).
  auto qkv_all = c_attn(x);
  const int64_t c = qkv_all.size(2) / 3, n_head = c / d;
  auto qkv = qkv_all.split(c, /*dim=*/2);
  // Ulysses: [B,H,T/N,D] → [B,H/N,T,D] (every token, this rank's heads) and back after attention.
  comm::Communicator* sp = sequence->active() ? sequence->comm : nullptr;
  auto heads = [&](const torch::Tensor& z) {
    auto h = z.view({b, t, n_head, d}).transpose(1, 2);
    return sp ? parallel::sequence_to_heads(h, *sp) : h;
  };
  auto q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  const int64_t tq = q.size(2);  // the whole sequence
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  torch::Tensor y;  // [B,H,T,D]
  if (blocked.defined()) {
    // Packed rows: causal and within each document (Ulysses refuses layouts: sp is null here).
    y = causal_attention(q, k, v, scale, std::nullopt, blocked);
  } else if (tq > kBlockwiseAttentionMinTokens) {
    y = blockwise_causal_attention(q, k, v, scale);  // saves O(T), not the O(T²) scores
  } else if (nn::uses_fused_kernels(q)) {
    // scale, mask, softmax fused; the products split over threads by head
    y = nn::batched_matmul(nn::causal_softmax(nn::batched_matmul(q, k.transpose(-2, -1)), scale), v);
  } else {
    // scores [B,H,T,T]; position i may attend to j ≤ i only.
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));  // as HF divides
    auto future = torch::ones({tq, tq}, x.options().dtype(torch::kBool)).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
    y = torch::matmul(torch::softmax(scores, -1), v);
  }
  if (sp) y = parallel::heads_to_sequence(y, *sp);  // [B,H,T/N,D]
  return c_proj(y.transpose(1, 2).contiguous().view({b, t, c}));  // [B,T,C]
}

MlpImpl::MlpImpl(int64_t n_embd) {
  c_fc = register_module("c_fc", LoraLinear(n_embd, 4 * n_embd));
  c_proj = register_module("c_proj", LoraLinear(4 * n_embd, n_embd));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  return c_proj(nn::gelu_tanh(c_fc(x)));
}

BlockImpl::BlockImpl(int64_t n_embd, int64_t n_head) {
  // Registration order fixes named_parameters() order: ln_1, attn, ln_2, mlp (as in HF).
  ln_1 = register_module("ln_1", make_layer_norm(n_embd));
  attn = register_module("attn", CausalSelfAttention(n_embd, n_head));
  ln_2 = register_module("ln_2", make_layer_norm(n_embd));
  mlp = register_module("mlp", Mlp(n_embd));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, const torch::Tensor& blocked) {
  auto h = x + attn(nn::layer_norm(ln_1, x), blocked);
  return h + mlp(nn::layer_norm(ln_2, h));
}

GPT2TransformerImpl::GPT2TransformerImpl(const GPT2Config& config, const nn::LayerSelection& selection) {
  wte = register_module("wte", torch::nn::Embedding(config.vocab_size, config.n_embd));
  wpe = register_module("wpe", torch::nn::Embedding(config.n_positions, config.n_embd));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    Block block(config.n_embd, config.n_head);
    if (!selection.keeps(size_t(i) + 1)) nn::make_placeholders(*block);  // one block alive at a time
    h->push_back(block);
  }
  ln_f = register_module("ln_f", make_layer_norm(config.n_embd));
}

GPT2Impl::GPT2Impl(GPT2Config config, const nn::LayerSelection& selection) : config_(config) {
  config_.validate();
  transformer = register_module("transformer", GPT2Transformer(config_, selection));
  for (size_t i = 0; i < transformer->h->size(); ++i) transformer->h->ptr<BlockImpl>(i)->attn->sequence = sp_slot_;
  init_weights();
  build_layers();
  nn::keep_selected_layers(*this, layers_, selection);
}

void GPT2Impl::init_weights() {
  // GPT-2 init: N(0, 0.02) for Linear weights and both embeddings, zero biases, LayerNorm (1, 0);
  // residual projections N(0, 0.02/sqrt(2L)) so the residual stream's variance does not grow
  // with depth. Draws in named_parameters() order from the global generator.
  torch::NoGradGuard no_grad;
  const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  for (auto& item : named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    auto ends_with = [&](const std::string& suffix) {
      return name.size() >= suffix.size() &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    const bool is_layer_norm = name.find(".ln_") != std::string::npos;
    if (ends_with(".bias")) {
      nn::init_fill_(p, 0.0);
    } else if (is_layer_norm) {
      nn::init_fill_(p, 1.0);
    } else if (ends_with("c_proj.weight")) {
      nn::init_normal_(p, 0.0, residual_std);
    } else {
      nn::init_normal_(p, 0.0, kInitStd);  // wte, wpe, c_attn, c_fc
    }
  }
}

void GPT2Impl::build_layers() {
  // The lambdas hold the submodules' shared handles, so they stay valid when parameters move
  // (Module::to swaps tensor data in place). Cloning a GPT2 is not supported.
  auto wte = transformer->wte.ptr();
  auto wpe = transformer->wpe.ptr();
  const GPT2Config cfg = config_;
  parallel::SequenceGroupSlot sp = sp_slot_;
  parallel::VocabGroupSlot vp = vp_slot_;
  auto slot = layout_slot_;
  layers_.add(
      "embed",
      [wte, wpe, cfg, sp, vp, slot](const torch::Tensor& idx) {
        check_tokens(idx, cfg);
        // Ulysses: this rank's block of tokens, at their global positions.
        const torch::Tensor tokens = sp->active() ? parallel::shard_sequence(idx, *sp->comm) : idx;
        torch::Tensor pos = sp->active() ? parallel::sequence_positions(idx.size(1), *sp->comm, idx.device())
                                         : torch::arange(idx.size(1), idx.options());  // [T]
        if (auto* l = current_layout(slot, idx.size(0), idx.size(1))) pos = l->position_ids;  // [B,T]: per document
        const torch::Tensor tok = vp->active() ? parallel::vocab_parallel_embedding(tokens, wte->weight, vp->range, *vp->comm)
                                               : wte->forward(tokens);
        return tok + wpe->forward(pos);  // [B,T,C] + [T,C] (or [B,T,C])
      },
      {"transformer.wte.weight", "transformer.wpe.weight"});

  for (int64_t i = 0; i < config_.n_layer; ++i) {
    auto block = transformer->h->ptr<BlockImpl>(static_cast<size_t>(i));
    const std::string name = "h." + std::to_string(i);
    layers_.add(nn::Layer{
        name,
        [block, slot](const torch::Tensor& x) {
          auto* l = current_layout(slot, x.size(0), x.size(1));
          return block->forward(x, l ? l->blocked : torch::Tensor());
        },
        prefixed_names(*block, "transformer." + name + "."), int(i) + 1, int(config_.n_layer)});
  }

  auto ln_f = transformer->ln_f.ptr();
  std::vector<std::string> head_params = prefixed_names(*ln_f, "transformer.ln_f.");
  head_params.push_back("transformer.wte.weight");  // tied: also listed in "embed"
  layers_.add(
      "head",
      [ln_f, wte, vp](const torch::Tensor& x) {
        torch::Tensor h = nn::layer_norm(torch::nn::LayerNorm(ln_f), x);
        // Vocab-parallel: every rank reads h whole for its rows of wte, so h's gradient sums over the group.
        if (vp->active()) h = parallel::copy_to_tp_region(h, *vp->comm);
        // [B,T,C] @ [V,C]ᵀ → [B,T,V]; saving the parameter, not a view of it (stage 3 frees the gathered copy)
        return nn::memory_efficient_linear(h, wte->weight);
      },
      std::move(head_params));
}

torch::Tensor GPT2Impl::forward(const torch::Tensor& idx) { return layers_.forward(idx); }

torch::Tensor GPT2Impl::forward(const torch::Tensor& idx, const torch::Tensor& targets) {
  DS_CHECK(targets.defined() && targets.sizes() == idx.sizes(), Error,
           "GPT2: targets " + (targets.defined() ? shape_str(targets.sizes()) : std::string("undefined")) +
               " must have the shape of the inputs " + shape_str(idx.sizes()));
  return token_loss(forward(idx), targets);
}

int64_t GPT2Impl::local_attention_heads() const {
  for (size_t i = 0; i < transformer->h->size(); ++i)
    if (auto attn = transformer->h->ptr<BlockImpl>(i)->attn; attn->c_attn->weight.numel() > 0) return attn->local_heads();
  return config_.n_head;
}

nlohmann::json GPT2Impl::hf_config() const { return hf_config_json(config_); }

bool GPT2Impl::hf_transposed(const std::string& name) const { return is_conv1d_weight(name); }

bool GPT2Impl::hf_ignorable(const std::string& name) const {
  return name == "lm_head.weight" || name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

}  // namespace ds::models
