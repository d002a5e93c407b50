// OPT's ragged forward: the training model's modules (embed_tokens, learned positions at OPT's offset
// of 2, pre- or post-LN decoder layers, project_in / project_out, tied or separate head) with
// attention over the blocked KV cache.
#include <cmath>

#include "inference/ragged_attention.h"
#include "inference/ragged_model.h"
#include "models/hf_layers.h"
#include "models/opt.h"
#include "nn/fused_ops.h"
#include "util/error.h"

namespace ds::inference {
namespace {

class OptRagged final : public RaggedModel {
 public:
  OptRagged(std::shared_ptr<models::CausalLM> model, models::OPTImpl& opt)
      : RaggedModel(std::move(model)), opt_(opt), cfg_(opt.config()), d_(cfg_.hidden_size / cfg_.num_attention_heads) {
    heads_ = local_heads(opt.model->decoder->layers->ptr<models::OPTDecoderLayerImpl>(0)->self_attn->q_proj->weight, d_);
  }

  KvCacheShape cache_shape() const override {
    return {.num_layers = cfg_.num_hidden_layers, .kv_heads = heads_, .head_dim = d_, .block_size = 0, .num_blocks = 0};
  }
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  int64_t max_positions() const override { return cfg_.max_position_embeddings; }

  torch::Tensor forward(const RaggedBatch& batch, KvCache& cache) override {
    torch::NoGradGuard no_grad;
    auto& dec = *opt_.model->decoder;
    const int64_t n = batch.num_tokens(), heads = heads_, d = d_, c = heads * d;  // c: this rank's width
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    const bool pre_ln = cfg_.do_layer_norm_before;
    const int64_t pad = models::hf::padding_row(cfg_.pad_token_id, cfg_.vocab_size).value_or(-1);
    auto x = torch::embedding(dec.embed_tokens->weight, batch.token_ids, pad);  // [N,E]
    if (dec.project_in) x = dec.project_in(x);                                   // [N,C]
    x = x + dec.embed_positions(batch.positions + models::OPTConfig::kPositionOffset);
    for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
      auto& layer = *dec.layers->ptr<models::OPTDecoderLayerImpl>(static_cast<size_t>(l));
      auto& attn = *layer.self_attn;
      const auto in = pre_ln ? nn::layer_norm(layer.self_attn_layer_norm, x) : x;
      auto y = ragged_attention(batch, cache, l, attn.q_proj(in).view({n, heads, d}), attn.k_proj(in).view({n, heads, d}),
                                attn.v_proj(in).view({n, heads, d}), scale);
      x = x + attn.out_proj(y.reshape({n, c}));
      if (!pre_ln) x = nn::layer_norm(layer.self_attn_layer_norm, x);
      x = x + layer.fc2(torch::relu(layer.fc1(pre_ln ? nn::layer_norm(layer.final_layer_norm, x) : x)));
      if (!pre_ln) x = nn::layer_norm(layer.final_layer_norm, x);
    }
    if (!compute_logits_) return {};
    auto last = x.index_select(0, batch.last_rows);  // [S,C]
    if (dec.final_layer_norm) last = nn::layer_norm(dec.final_layer_norm, last);
    if (dec.project_out) last = dec.project_out(last);
    const auto& head = opt_.lm_head ? opt_.lm_head->weight : dec.embed_tokens->weight;
    return torch::linear(last, head).to(torch::kFloat);  // [S,V]
  }

 private:
  models::OPTImpl& opt_;
  models::OPTConfig cfg_;
  int64_t d_ = 0, heads_ = 0;  // heads: this rank's
};

}  // namespace

std::unique_ptr<RaggedModel> make_opt_ragged(std::shared_ptr<models::CausalLM> model) {
  auto* opt = dynamic_cast<models::OPTImpl*>(model.get());
  DS_CHECK(opt != nullptr, NotSupported, "inference: model_type opt but not a ds::models::OPT");
  return std::make_unique<OptRagged>(std::move(model), *opt);
}

}  // namespace ds::inference
