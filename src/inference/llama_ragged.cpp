// The Llama family's ragged forward (llama, mistral, qwen2): the training model's modules with
// rotary embeddings taken per token position, GQA and per-layer sliding windows over the blocked
// KV cache. Positions stop at max_position_embeddings, where every rope_scaling type (dynamic too)
// uses the frequencies of the model's configured length, so cached keys never need re-rotating.
#include <cmath>

#include "inference/ragged_attention.h"
#include "inference/ragged_model.h"
#include "models/llama.h"
#include "models/rope.h"
#include "util/error.h"

namespace ds::inference {
namespace {

class LlamaRagged final : public RaggedModel {
 public:
  LlamaRagged(std::shared_ptr<models::CausalLM> model, models::LlamaImpl& llama)
      : RaggedModel(std::move(model)), llama_(llama), cfg_(llama.config()) {
    inv_freq_ = models::rope_inv_freq(cfg_.head_dim, cfg_.rope_theta, cfg_.rope_scaling,
                                      cfg_.max_position_embeddings, 0);
    const auto& attn = *llama.model->layers->ptr<models::LlamaDecoderLayerImpl>(0)->self_attn;
    heads_ = local_heads(attn.q_proj->weight, cfg_.head_dim);
    kv_heads_ = local_heads(attn.k_proj->weight, cfg_.head_dim);
  }

  KvCacheShape cache_shape() const override {
    return {.num_layers = cfg_.num_hidden_layers, .kv_heads = kv_heads_, .head_dim = cfg_.head_dim,
            .block_size = 0, .num_blocks = 0};
  }
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  int64_t max_positions() const override { return cfg_.max_position_embeddings; }

  torch::Tensor forward(const RaggedBatch& batch, KvCache& cache) override {
    torch::NoGradGuard no_grad;
    auto& m = *llama_.model;
    const int64_t n = batch.num_tokens(), h = heads_, hkv = kv_heads_, d = cfg_.head_dim;
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    auto x = torch::embedding(m.embed_tokens->weight, batch.token_ids);  // [N,C]
    // cos/sin [N,1,D] per token position, computed in fp32 as RotaryEmbedding does, then cast.
    auto freqs = torch::outer(batch.positions.to(torch::kFloat), inv_freq_.to(x.device()));
    auto emb = torch::cat({freqs, freqs}, -1);
    auto cos = emb.cos().to(x.scalar_type()).unsqueeze(1), sin = emb.sin().to(x.scalar_type()).unsqueeze(1);
    for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
      auto& layer = *m.layers->ptr<models::LlamaDecoderLayerImpl>(static_cast<size_t>(l));
      auto& attn = *layer.self_attn;
      auto hs = layer.input_layernorm(x);
      auto q = models::apply_rotary(attn.q_proj(hs).view({n, h, d}), cos, sin);
      auto k = models::apply_rotary(attn.k_proj(hs).view({n, hkv, d}), cos, sin);
      auto v = attn.v_proj(hs).view({n, hkv, d});
      auto y = ragged_attention(batch, cache, l, q, k, v, scale, cfg_.window_of_layer(l));
      x = x + attn.o_proj(y.reshape({n, h * d}));
      x = x + layer.mlp(layer.post_attention_layernorm(x));
    }
    if (!compute_logits_) return {};
    auto last = m.norm(x.index_select(0, batch.last_rows));  // [S,C]
    const auto& head = llama_.lm_head ? llama_.lm_head->weight : m.embed_tokens->weight;
    return torch::linear(last, head).to(torch::kFloat);  // [S,V]
  }

 private:
  models::LlamaImpl& llama_;
  models::LlamaConfig cfg_;
  torch::Tensor inv_freq_;
  int64_t heads_ = 0, kv_heads_ = 0;  // this rank's
};

}  // namespace

std::unique_ptr<RaggedModel> make_llama_ragged(std::shared_ptr<models::CausalLM> model) {
  auto* llama = dynamic_cast<models::LlamaImpl*>(model.get());
  DS_CHECK(llama != nullptr, NotSupported,
           "inference: model_type " + model->model_type() + " but not a ds::models::Llama");
  return std::make_unique<LlamaRagged>(std::move(model), *llama);
}

}  // namespace ds::inference
