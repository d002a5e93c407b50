#include "models/attention.h"

#include <limits>

#include "models/blockwise_attention.h"
#include "nn/batched_matmul.h"
#include "nn/fused_ops.h"
#include "util/error.h"

namespace ds::models {

torch::Tensor causal_mask(int64_t t, std::optional<int64_t> sliding_window, torch::Device device) {
  auto i = torch::arange(t, torch::TensorOptions().dtype(torch::kLong).device(device)).unsqueeze(1);  // query
  auto j = torch::arange(t, torch::TensorOptions().dtype(torch::kLong).device(device)).unsqueeze(0);  // key
  auto blocked = j > i;
  if (sliding_window) blocked = blocked.logical_or(j <= i - *sliding_window);
  return blocked;
}

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale,
                               std::optional<int64_t> sliding_window, const torch::Tensor& blocked) {
  const int64_t b = k.size(0), hkv = k.size(1), t = k.size(2), d = k.size(3);
  const int64_t rep = q.size(1) / hkv;
  auto repeat_kv = [&](const torch::Tensor& z) {
    if (rep == 1) return z;
    return z.unsqueeze(2).expand({b, hkv, rep, t, d}).reshape({b, hkv * rep, t, d});
  };
  if (!sliding_window && !blocked.defined() && t > kBlockwiseAttentionMinTokens)
    return blockwise_causal_attention(q, repeat_kv(k), repeat_kv(v), scale);
  if (!sliding_window && !blocked.defined() && nn::uses_fused_kernels(q)) {  // scale, mask, softmax fused
    // The rep query heads sharing a kv head are adjacent: as one [rep·Tq, D] block per kv head they
    // multiply k and v directly, without repeated copies of k and v (nor the sums back in backward).
    const int64_t tq = q.size(2);
    auto scores = nn::batched_matmul(q.reshape({b, hkv, rep * tq, d}), k.transpose(2, 3));  // [B,Hkv,rep·Tq,T]
    auto probs = nn::causal_softmax(scores.view({b, hkv, rep, tq, t}), scale);
    return nn::batched_matmul(probs.view({b, hkv, rep * tq, t}), v).view({b, hkv * rep, tq, d});
  }
  auto scores = torch::matmul(q, repeat_kv(k).transpose(2, 3)) * scale;  // [B,H,T,T]
  auto mask = causal_mask(t, sliding_window, q.device());
  if (blocked.defined()) mask = mask.logical_or(blocked);  // [B,1,T,T]: each query still sees itself
  scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
  auto probs = torch::softmax(scores, -1, torch::kFloat).to(q.scalar_type());
  return torch::matmul(probs, repeat_kv(v));  // [B,H,T,D]
}

torch::Tensor sequence_parallel_causal_attention(const parallel::SequenceGroup& sequence, const torch::Tensor& q,
                                                 const torch::Tensor& k, const torch::Tensor& v, double scale,
                                                 std::optional<int64_t> sliding_window, const torch::Tensor& blocked) {
  if (!sequence.active()) return causal_attention(q, k, v, scale, sliding_window, blocked);
  DS_CHECK(!blocked.defined(), NotSupported, "sequence_parallel_size: packed rows are not supported under Ulysses");
  comm::Communicator& sp = *sequence.comm;
  auto y = causal_attention(parallel::sequence_to_heads(q, sp), parallel::sequence_to_heads(k, sp),
                            parallel::sequence_to_heads(v, sp), scale, sliding_window);
  return parallel::heads_to_sequence(y, sp);
}

}  // namespace ds::models
