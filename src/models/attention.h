// Causal scaled-dot-product attention as Hugging Face's eager path computes it, shared by the
// Llama family and OPT (and GPT-2 on packed rows): grouped-query heads (repeat_kv), an optional sliding window, softmax in fp32.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>

#include "parallel/ulysses.h"

namespace ds::models {

// q [B,H,T,D], k and v [B,Hkv,T,D] with H a multiple of Hkv (query head h reads kv head
// h / (H/Hkv)) → [B,H,T,D]. Query t attends to keys j ≤ t, and with a window W only to
// t − W < j (W keys including itself: transformers' sliding_window_overlay). `blocked` (bool,
// broadcastable to [B,H,T,T], e.g. SequenceLayout's [B,1,T,T]) masks more keys: packed documents.
// Past kBlockwiseAttentionMinTokens tokens with neither a window nor `blocked`, it runs blockwise
// (models/blockwise_attention.h: O(T) saved instead of O(T²)).
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                               std::optional<int64_t> sliding_window = std::nullopt,
                               const torch::Tensor& blocked = {});

// causal_attention under Ulysses (parallel/ulysses.h) when `sequence` is active: q [B,H,T/N,D] and
// k, v [B,Hkv,T/N,D] hold this rank's tokens; each goes through the all-to-all to the whole sequence
// of H/N (Hkv/N) heads, attention runs there, and the output comes back → [B,H,T/N,D]. Without
// an active group, causal_attention itself. ConfigError naming sequence_parallel_size when N does
// not divide Hkv. `blocked` is refused under Ulysses (packed rows are).
torch::Tensor sequence_parallel_causal_attention(const parallel::SequenceGroup& sequence, const torch::Tensor& q,
                                                 const torch::Tensor& k, const torch::Tensor& v, double scale,
                                                 std::optional<int64_t> sliding_window = std::nullopt,
                                                 const torch::Tensor& blocked = {});

// [T,T] bool, true where query i may NOT attend to key j (the causal and window rule above).
torch::Tensor causal_mask(int64_t t, std::optional<int64_t> sliding_window, torch::Device device);

}  // namespace ds::models
