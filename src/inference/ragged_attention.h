// Attention of a ragged batch over the blocked KV cache: writes the batch's new keys and values into
// their slots, then lets each new token attend to its own sequence's cached positions ≤ its own
// (and, with a sliding window W, > its position − W). Decodes are attended together (their contexts
// gathered into one padded tensor); prompt chunks one by one. Softmax in fp32 as the models do.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>

#include "inference/kv_cache.h"
#include "inference/ragged_batch.h"

namespace ds::inference {

// q [N,H,D], k and v [N,Hkv,D] (H a multiple of Hkv; query head h reads kv head h / (H/Hkv)) for
// the batch's N new tokens → [N,H,D]. Keys and values go to layer `layer` of `cache` first.
torch::Tensor ragged_attention(const RaggedBatch& batch, KvCache& cache, int64_t layer, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v, double scale,
                               std::optional<int64_t> sliding_window = std::nullopt);

}  // namespace ds::inference
