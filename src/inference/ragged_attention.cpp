#include "inference/ragged_attention.h"

#include <limits>

namespace ds::inference {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Softmax in fp32 over the last dim of scores with `blocked` (broadcastable) masked out.
torch::Tensor masked_probs(const torch::Tensor& scores, const torch::Tensor& blocked, torch::ScalarType dtype) {
  return torch::softmax(scores.masked_fill(blocked, kNegInf), -1, torch::kFloat).to(dtype);
}

}  // namespace

torch::Tensor ragged_attention(const RaggedBatch& batch, KvCache& cache, int64_t layer, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v, double scale,
                               std::optional<int64_t> sliding_window) {
  auto& keys = cache.keys(layer);  // [slots, Hkv, D]
  auto& values = cache.values(layer);
  keys.index_copy_(0, batch.slots, k.to(keys.scalar_type()));
  values.index_copy_(0, batch.slots, v.to(values.scalar_type()));

  const int64_t h = q.size(1), d = q.size(2), hkv = keys.size(1), rep = h / hkv;
  const auto dtype = q.scalar_type();
  auto out = torch::empty_like(q);

  if (batch.num_decodes > 0) {
    const int64_t s = batch.num_decodes, cmax = batch.decode_slots.size(1);
    auto qd = q.index_select(0, batch.decode_rows).view({s, hkv, rep, d});
    auto flat = batch.decode_slots.reshape({-1});
    auto kd = keys.index_select(0, flat).view({s, cmax, hkv, d}).permute({0, 2, 3, 1});  // [S,Hkv,D,C]
    auto vd = values.index_select(0, flat).view({s, cmax, hkv, d}).permute({0, 2, 1, 3});  // [S,Hkv,C,D]
    auto scores = torch::matmul(qd, kd.to(dtype)) * scale;  // [S,Hkv,rep,C]
    auto col = torch::arange(cmax, batch.decode_positions.options()).unsqueeze(0);  // [1,C]
    auto pos = batch.decode_positions.unsqueeze(1);                                 // [S,1]
    auto blocked = col > pos;
    if (sliding_window) blocked = blocked.logical_or(col <= pos - *sliding_window);
    auto probs = masked_probs(scores, blocked.view({s, 1, 1, cmax}), dtype);
    out.index_copy_(0, batch.decode_rows, torch::matmul(probs, vd.to(dtype)).view({s, h, d}));
  }

  for (const auto& c : batch.chunks) {
    const int64_t ctx = c.start + c.n;
    auto qc = q.narrow(0, c.row, c.n).view({c.n, hkv, rep, d}).permute({1, 2, 0, 3});  // [Hkv,rep,n,D]
    auto kc = keys.index_select(0, c.context_slots).permute({1, 2, 0}).unsqueeze(1);    // [Hkv,1,D,ctx]
    auto vc = values.index_select(0, c.context_slots).permute({1, 0, 2}).unsqueeze(1);  // [Hkv,1,ctx,D]
    auto scores = torch::matmul(qc, kc.to(dtype)) * scale;                              // [Hkv,rep,n,ctx]
    auto i = torch::arange(c.start, ctx, c.context_slots.options()).unsqueeze(1);        // query positions
    auto j = torch::arange(ctx, c.context_slots.options()).unsqueeze(0);                 // key positions
    auto blocked = j > i;
    if (sliding_window) blocked = blocked.logical_or(j <= i - *sliding_window);
    auto y = torch::matmul(masked_probs(scores, blocked, dtype), vc.to(dtype));  // [Hkv,rep,n,D]
    out.narrow(0, c.row, c.n).copy_(y.permute({2, 0, 1, 3}).reshape({c.n, h, d}));
  }
  return out;
}

}  // namespace ds::inference
