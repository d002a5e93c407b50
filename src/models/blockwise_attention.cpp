#include "models/blockwise_attention.h"

#include <limits>

#include "util/error.h"

namespace ds::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using torch::indexing::Slice;

// Scores of queries [i0, i1) against keys [0, i1) in fp32, future keys masked: [B,H,i1-i0,i1].
torch::Tensor block_scores(const torch::Tensor& q_blk, const torch::Tensor& k_seen, int64_t i0, double scale) {
  auto s = torch::matmul(q_blk.to(torch::kFloat), k_seen.to(torch::kFloat).transpose(-2, -1)) * scale;
  const int64_t rows = q_blk.size(2), cols = k_seen.size(2);
  auto qi = torch::arange(i0, i0 + rows, torch::TensorOptions().dtype(torch::kLong).device(s.device())).unsqueeze(1);
  auto kj = torch::arange(cols, torch::TensorOptions().dtype(torch::kLong).device(s.device())).unsqueeze(0);
  return s.masked_fill(kj > qi, -std::numeric_limits<float>::infinity());
}

struct BlockwiseAttention : torch::autograd::Function<BlockwiseAttention> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, double scale, int64_t block) {
    const int64_t t = q.size(2);
    torch::Tensor out = torch::empty(q.sizes(), q.options());
    torch::Tensor lse = torch::empty({q.size(0), q.size(1), t}, q.options().dtype(torch::kFloat));
    for (int64_t i0 = 0; i0 < t; i0 += block) {
      const int64_t i1 = std::min(t, i0 + block);
      auto s = block_scores(q.index({Slice(), Slice(), Slice(i0, i1)}), k.index({Slice(), Slice(), Slice(0, i1)}), i0,
                            scale);
      auto m = torch::logsumexp(s, -1, /*keepdim=*/true);  // [B,H,rows,1]
      auto p = torch::exp(s - m);
      out.index_put_({Slice(), Slice(), Slice(i0, i1)},
                     torch::matmul(p, v.index({Slice(), Slice(), Slice(0, i1)}).to(torch::kFloat)).to(q.scalar_type()));
      lse.index_put_({Slice(), Slice(), Slice(i0, i1)}, m.squeeze(-1));
    }
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["block"] = block;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    const int64_t block = ctx->saved_data["block"].toInt(), t = q.size(2);
    const torch::Tensor d_out = grads[0].to(torch::kFloat);
    // delta_i = Σ_d dO·O: the softmax backward's row term.
    const torch::Tensor delta = (d_out * out.to(torch::kFloat)).sum(-1, /*keepdim=*/true);
    torch::Tensor dq = torch::zeros(q.sizes(), q.options().dtype(torch::kFloat));
    torch::Tensor dk = torch::zeros(k.sizes(), k.options().dtype(torch::kFloat));
    torch::Tensor dv = torch::zeros(v.sizes(), v.options().dtype(torch::kFloat));
    const torch::Tensor kf = k.to(torch::kFloat), vf = v.to(torch::kFloat), qf = q.to(torch::kFloat);
    for (int64_t i0 = 0; i0 < t; i0 += block) {
      const int64_t i1 = std::min(t, i0 + block);
      const auto rows = Slice(i0, i1), seen = Slice(0, i1);
      auto q_blk = qf.index({Slice(), Slice(), rows});
      auto k_seen = kf.index({Slice(), Slice(), seen});
      auto p = torch::exp(block_scores(q_blk, k_seen, i0, scale) - lse.index({Slice(), Slice(), rows}).unsqueeze(-1));
      auto do_blk = d_out.index({Slice(), Slice(), rows});
      dv.index({Slice(), Slice(), seen}).add_(torch::matmul(p.transpose(-2, -1), do_blk));
      auto dp = torch::matmul(do_blk, vf.index({Slice(), Slice(), seen}).transpose(-2, -1));
      auto ds = p * (dp - delta.index({Slice(), Slice(), rows})) * scale;
      dq.index({Slice(), Slice(), rows}).copy_(torch::matmul(ds, k_seen));
      dk.index({Slice(), Slice(), seen}).add_(torch::matmul(ds.transpose(-2, -1), q_blk));
    }
    return {dq.to(q.scalar_type()), dk.to(k.scalar_type()), dv.to(v.scalar_type()), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor blockwise_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         double scale, int64_t block) {
  DS_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.sizes() == q.sizes(), Error,
           "blockwise_causal_attention: q, k and v must be [batch, heads, tokens, head_dim] of one shape");
  DS_CHECK(block >= 1, Error, "blockwise_causal_attention: block must be >= 1, got " + std::to_string(block));
  return BlockwiseAttention::apply(q, k, v, scale, block);
}

}  // namespace ds::models
