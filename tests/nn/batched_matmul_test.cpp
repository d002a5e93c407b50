// nn/batched_matmul.h: the batch-parallel products equal torch::matmul's to fp32 rounding, forward
// and backward, for the layouts attention feeds them (a transposed operand, a head view, 5-D).
#include "nn/batched_matmul.h"

#include <gtest/gtest.h>

namespace {

using torch::Tensor;

double product_rel_err(const Tensor& got, const Tensor& ref) {
  return (got - ref).abs().max().item<double>() / std::max(ref.abs().max().item<double>(), 1e-30);
}

void expect_matches_matmul(const Tensor& a0, const Tensor& b0, const std::function<Tensor(const Tensor&)>& view_b) {
  const Tensor a1 = a0.clone().requires_grad_(true), b1 = b0.clone().requires_grad_(true);
  const Tensor a2 = a0.clone().requires_grad_(true), b2 = b0.clone().requires_grad_(true);
  const Tensor ours = ds::nn::batched_matmul(a1, view_b(b1));
  const Tensor ref = torch::matmul(a2, view_b(b2));
  ASSERT_EQ(ours.sizes(), ref.sizes());
  EXPECT_LT(product_rel_err(ours, ref), 1e-6);
  const Tensor up = torch::randn(ref.sizes());
  ours.backward(up);
  ref.backward(up);
  EXPECT_LT(product_rel_err(a1.grad(), a2.grad()), 1e-6);
  EXPECT_LT(product_rel_err(b1.grad(), b2.grad()), 1e-6);
}

TEST(BatchedMatmul, MatchesMatmulForwardAndBackward) {
  torch::manual_seed(11);
  // q · kᵀ with k transposed in place, then probs · v: [B, H, T, D].
  expect_matches_matmul(torch::randn({2, 3, 17, 8}), torch::randn({2, 3, 17, 8}),
                        [](const Tensor& k) { return k.transpose(-2, -1); });
  expect_matches_matmul(torch::randn({2, 3, 17, 17}), torch::randn({2, 3, 17, 8}), [](const Tensor& v) { return v; });
  // A head view of a [B, T, H·D] projection (not flattenable without a copy), 5-D batch.
  expect_matches_matmul(torch::randn({2, 5, 3 * 8}).view({2, 5, 3, 8}).transpose(1, 2), torch::randn({2, 3, 8, 4}),
                        [](const Tensor& b) { return b; });
  expect_matches_matmul(torch::randn({2, 2, 3, 6, 4}), torch::randn({2, 2, 3, 4, 6}), [](const Tensor& b) { return b; });
}

}  // namespace
