// Causal attention whose memory grows with T, not T²: queries run in blocks against the keys they
// may see, only the output and each query's log-sum-exp are kept for backward, and backward
// recomputes each block's probabilities (FlashAttention's algorithm, in LibTorch ops). The saved
// state is O(B·H·T·D) instead of eager attention's O(B·H·T²) scores and probabilities, which is what
// lets a sequence-parallel rank (parallel/ulysses.h) attend over a whole long sequence.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace ds::models {

// Sequences longer than this use blockwise attention in the built-in GPT-2 (shorter ones the eager
// path, whose saved scores are small there); the two agree to rounding.
inline constexpr int64_t kBlockwiseAttentionMinTokens = 256;

// q, k, v [B,H,T,D] (same H) → [B,H,T,D]: softmax(q·kᵀ·scale, causal) · v, computed in query
// blocks of `block` rows; the softmax in fp32 for 16-bit inputs. Differentiable in q, k and v.
torch::Tensor blockwise_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         double scale, int64_t block = 128);

}  // namespace ds::models
