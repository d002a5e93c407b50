// ds::inference::RaggedModel: a model's inference-side forward over a RaggedBatch and the blocked KV
// cache. It reuses the training model's modules and weights (no copy): the adapters read the
// submodules of models::GPT2, models::Llama and models::OPT and call ragged_attention where the training
// forward calls full causal attention. make_ragged_model picks the adapter for a CausalLM.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "inference/kv_cache.h"
#include "inference/ragged_batch.h"
#include "models/causal_lm.h"

namespace ds::inference {

class RaggedModel {
 public:
  virtual ~RaggedModel() = default;

  // Layers, kv heads and head dim of the cache this model needs (block size and count left 0). The
  // heads are this rank's: a model AutoTP cut (tensor_parallel.h) attends with its share only.
  virtual KvCacheShape cache_shape() const = 0;
  virtual int64_t vocab_size() const = 0;
  // The longest sequence (prompt + generated) the model accepts (GPT-2's n_positions, Llama's
  // max_position_embeddings).
  virtual int64_t max_positions() const = 0;
  // Every sequence's next-token logits, fp32 [S,V], read at its last new token; writes the new
  // tokens' keys and values into `cache`. Runs without autograd. An undefined tensor when
  // compute_logits is off.
  virtual torch::Tensor forward(const RaggedBatch& batch, KvCache& cache) = 0;

  // Off on tensor-parallel followers: they run every layer for their heads, but only the leader
  // samples, so they skip the final norm and the [S,V] head.
  void set_compute_logits(bool on) noexcept { compute_logits_ = on; }

  torch::ScalarType dtype() const { return model_->parameters().front().scalar_type(); }
  torch::Device device() const { return model_->parameters().front().device(); }
  const models::CausalLM& model() const { return *model_; }
  std::shared_ptr<models::CausalLM> model_ptr() const { return model_; }

 protected:
  explicit RaggedModel(std::shared_ptr<models::CausalLM> model) : model_(std::move(model)) {}
  // The heads a projection of `out_features` rows holds at `head_dim` (this rank's share once cut).
  static int64_t local_heads(const torch::Tensor& projection_weight, int64_t head_dim, int64_t fused = 1) {
    return projection_weight.size(0) / fused / head_dim;
  }
  std::shared_ptr<models::CausalLM> model_;
  bool compute_logits_ = true;
};

// GPT-2, the Llama family (llama, mistral, qwen2) and OPT; anything else is ds::NotSupported naming
// its model_type.
std::unique_ptr<RaggedModel> make_ragged_model(std::shared_ptr<models::CausalLM> model);

std::unique_ptr<RaggedModel> make_gpt2_ragged(std::shared_ptr<models::CausalLM> model);
std::unique_ptr<RaggedModel> make_llama_ragged(std::shared_ptr<models::CausalLM> model);
std::unique_ptr<RaggedModel> make_opt_ragged(std::shared_ptr<models::CausalLM> model);

}  // namespace ds::inference
