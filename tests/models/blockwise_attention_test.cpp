// Blockwise causal attention (models/blockwise_attention.h) against the eager formula: outputs and
// the gradients of q, k and v within 1e-5 for blocks that do and do not divide T, and inside GPT-2,
// where sequences past kBlockwiseAttentionMinTokens switch to it: causality makes the first 256
// logits of a 300-token sequence (blockwise) those of its 256-token prefix (eager).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "models/blockwise_attention.h"
#include "models/gpt2.h"

namespace ds::models {
namespace {

torch::Tensor eager_causal(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale) {
  const int64_t t = q.size(2);
  auto s = torch::matmul(q, k.transpose(-2, -1)) * scale;
  s = s.masked_fill(torch::ones({t, t}, torch::kBool).triu(1), -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(s, -1), v);
}

TEST(BlockwiseAttention, OutputsAndGradientsMatchEagerAttention) {
  torch::manual_seed(7);
  const double scale = 1.0 / std::sqrt(8.0);
  for (int64_t block : {1, 64, 100, 128, 512}) {
    auto q = torch::randn({2, 3, 300, 8}, torch::requires_grad());
    auto k = torch::randn({2, 3, 300, 8}, torch::requires_grad());
    auto v = torch::randn({2, 3, 300, 8}, torch::requires_grad());
    auto w = torch::randn({2, 3, 300, 8});  // a loss that weighs every output differently
    auto got = blockwise_causal_attention(q, k, v, scale, block);
    auto want = eager_causal(q, k, v, scale);
    EXPECT_LE((got - want).abs().max().item<double>(), 1e-5) << "block " << block;
    auto g = torch::autograd::grad({(got * w).sum()}, {q, k, v});
    auto e = torch::autograd::grad({(want * w).sum()}, {q, k, v});
    for (int i = 0; i < 3; ++i)
      EXPECT_LE((g[i] - e[i]).abs().max().item<double>(), 1e-5) << "block " << block << " gradient " << "qkv"[i];
  }
}

TEST(BlockwiseAttention, SixteenBitInputsKeepTheirDtypeWithAnFp32Softmax) {
  torch::manual_seed(8);
  auto q = torch::randn({1, 2, 130, 16}), k = torch::randn({1, 2, 130, 16}), v = torch::randn({1, 2, 130, 16});
  auto got = blockwise_causal_attention(q.to(torch::kBFloat16), k.to(torch::kBFloat16), v.to(torch::kBFloat16), 0.25, 32);
  EXPECT_EQ(got.scalar_type(), torch::kBFloat16);
  EXPECT_LE((got.to(torch::kFloat) - eager_causal(q, k, v, 0.25)).abs().max().item<double>(), 0.05);
}

TEST(BlockwiseAttention, Gpt2SwitchesToItForLongSequencesWithTheSameLogits) {
  GPT2Config c = GPT2Config::preset("tiny");
  c.n_positions = 320;
  torch::manual_seed(9);
  GPT2 model(c);
  auto ids = torch::randint(0, c.vocab_size, {1, 300}, torch::kLong);
  torch::NoGradGuard no_grad;
  const int64_t eager = kBlockwiseAttentionMinTokens;
  auto prefix = model->forward(ids.narrow(1, 0, eager));                   // eager attention
  auto whole = model->forward(ids).narrow(1, 0, eager);                    // blockwise
  EXPECT_LE((whole - prefix).abs().max().item<double>(), 1e-5);
}

}  // namespace
}  // namespace ds::models
