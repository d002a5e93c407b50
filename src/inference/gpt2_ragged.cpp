// GPT-2's ragged forward: the training model's modules (transformer.wte/wpe/h.i/ln_f, tied head)
// with learned positions indexed per token and attention over the blocked KV cache.
#include <cmath>

#include "inference/ragged_attention.h"
#include "inference/ragged_model.h"
#include "models/gpt2.h"
#include "nn/fused_ops.h"
#include "util/error.h"

namespace ds::inference {
namespace {

class Gpt2Ragged final : public RaggedModel {
 public:
  Gpt2Ragged(std::shared_ptr<models::CausalLM> model, models::GPT2Impl& gpt2)
      : RaggedModel(std::move(model)), gpt2_(gpt2), cfg_(gpt2.config()), d_(cfg_.n_embd / cfg_.n_head) {
    const auto& block = *gpt2.transformer->h->ptr<models::BlockImpl>(0);
    heads_ = local_heads(block.attn->c_attn->weight, d_, 3);  // q|k|v fused
  }

  KvCacheShape cache_shape() const override {
    return {.num_layers = cfg_.n_layer, .kv_heads = heads_, .head_dim = d_,
            .block_size = 0, .num_blocks = 0};
  }
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  int64_t max_positions() const override { return cfg_.n_positions; }

  torch::Tensor forward(const RaggedBatch& batch, KvCache& cache) override {
    torch::NoGradGuard no_grad;
    auto& t = *gpt2_.transformer;
    const int64_t n = batch.num_tokens(), heads = heads_, d = d_, c = heads * d;  // c: this rank's width
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    auto x = t.wte->forward(batch.token_ids) + t.wpe->forward(batch.positions);  // [N,C]
    for (int64_t l = 0; l < cfg_.n_layer; ++l) {
      auto& block = *t.h->ptr<models::BlockImpl>(static_cast<size_t>(l));
      auto qkv = block.attn->c_attn(nn::layer_norm(block.ln_1, x)).split(c, 1);  // 3 × [N,C]
      auto y = ragged_attention(batch, cache, l, qkv[0].view({n, heads, d}), qkv[1].view({n, heads, d}),
                                qkv[2].view({n, heads, d}), scale);
      x = x + block.attn->c_proj(y.view({n, c}));
      x = x + block.mlp(nn::layer_norm(block.ln_2, x));
    }
    if (!compute_logits_) return {};
    auto last = nn::layer_norm(t.ln_f, x.index_select(0, batch.last_rows));           // [S,C]
    return torch::linear(last, t.wte->weight).to(torch::kFloat);      // [S,V]
  }

 private:
  models::GPT2Impl& gpt2_;
  models::GPT2Config cfg_;
  int64_t d_ = 0, heads_ = 0;
};

}  // namespace

std::unique_ptr<RaggedModel> make_gpt2_ragged(std::shared_ptr<models::CausalLM> model) {
  auto* gpt2 = dynamic_cast<models::GPT2Impl*>(model.get());
  DS_CHECK(gpt2 != nullptr, NotSupported, "inference: model_type gpt2 but not a ds::models::GPT2");
  return std::make_unique<Gpt2Ragged>(std::move(model), *gpt2);
}

}  // namespace ds::inference
