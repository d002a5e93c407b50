// The vocab-parallel embedding and cross-entropy (src/parallel/vocab_parallel.*, vocab_range.*)
// against the full embedding, tied head and torch's cross_entropy. Built into zero_tests: at world 1
// the group has one rank; under mpirun -np 2 the world is the tensor-parallel group and an 11-row
// vocabulary splits unevenly (6 + 5). Each rank's loss, input gradient and gradient of its rows must
// equal the full model's within fp32 rounding.
#include <gtest/gtest.h>

#include "parallel/tp_collectives.h"
#include "parallel/vocab_parallel.h"
#include "util/error.h"
#include "../zero/zero_test_env.h"

namespace ds::parallel {
namespace {

comm::Communicator& vocab_group() { return zero::test::topology().world(); }

void expect_near(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what;
  EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6)) << what << ": max abs difference "
                                                      << (got - want).abs().max().item<double>();
}

TEST(VocabRange, WholeRowsFirstRanksHoldOneMore) {
  const VocabRange a = vocab_range(50257, 2, 0), b = vocab_range(50257, 2, 1);
  EXPECT_EQ(a.begin, 0);
  EXPECT_EQ(a.size(), 25129);
  EXPECT_EQ(b.begin, 25129);
  EXPECT_EQ(b.end, 50257);
  int64_t next = 0;
  for (int r = 0; r < 4; ++r) {  // 11 over 4: 3, 3, 3, 2, back to back
    const VocabRange x = vocab_range(11, 4, r);
    EXPECT_EQ(x.begin, next);
    EXPECT_EQ(x.size(), r < 3 ? 3 : 2);
    next = x.end;
  }
  EXPECT_EQ(next, 11);
  try {
    vocab_range(3, 4, 0);
    ADD_FAILURE() << "3 rows were split over 4 ranks";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "tensor_parallel.vocab_parallel");
  }
}

TEST(VocabParallel, EmbeddingTiedHeadAndLossEqualTheFullOnes) {
  constexpr int64_t kVocab = 11, kWidth = 6;
  comm::Communicator& tp = vocab_group();
  const VocabRange mine = vocab_range(kVocab, tp.size(), tp.rank());
  torch::manual_seed(11);
  const torch::Tensor table = torch::randn({kVocab, kWidth});
  const torch::Tensor ids = torch::randint(kVocab, {3, 5}, torch::kLong);
  torch::Tensor targets = torch::randint(kVocab, {3, 5}, torch::kLong);
  targets[0][1] = -100;  // ignored, as in torch
  targets[2][4] = -100;
  const torch::Tensor mix = torch::randn({kWidth, kWidth});  // a layer between the embedding and the head

  // The full model: embed, mix, tied head, mean cross-entropy.
  torch::Tensor full = table.clone().requires_grad_(true);
  torch::Tensor h_full = torch::embedding(full, ids).matmul(mix);
  h_full.retain_grad();
  const torch::Tensor loss_full = torch::nn::functional::cross_entropy(
      h_full.matmul(full.t()).reshape({-1, kVocab}), targets.reshape({-1}));
  loss_full.backward();

  // The split one: this rank's rows only.
  torch::Tensor rows = table.narrow(0, mine.begin, mine.size()).clone().requires_grad_(true);
  torch::Tensor h = vocab_parallel_embedding(ids, rows, mine, tp).matmul(mix);
  h.retain_grad();
  const torch::Tensor logits = copy_to_tp_region(h, tp).matmul(rows.t());  // [3, 5, rows]
  ASSERT_EQ(logits.size(-1), mine.size());
  const torch::Tensor flat_targets = targets.reshape({-1});
  const torch::Tensor sum = vocab_parallel_cross_entropy_sum(logits.reshape({-1, mine.size()}), flat_targets, mine, tp);
  const torch::Tensor loss = sum / double((flat_targets != -100).sum().item<int64_t>());
  loss.backward();

  EXPECT_NEAR(loss.item<double>(), loss_full.item<double>(), 1e-5);
  expect_near(h.detach(), h_full.detach(), "embedding output (after the sum over the group)");
  expect_near(h.grad(), h_full.grad(), "the head's input gradient (all-reduced over the group)");
  expect_near(rows.grad(), full.grad().narrow(0, mine.begin, mine.size()), "gradient of this rank's rows");
}

TEST(VocabParallel, SixteenBitLogitsGiveAnFp32LossAndTheirOwnGradientType) {
  constexpr int64_t kVocab = 9;
  comm::Communicator& tp = vocab_group();
  const VocabRange mine = vocab_range(kVocab, tp.size(), tp.rank());
  torch::manual_seed(12);
  const torch::Tensor all = torch::randn({7, kVocab}).to(torch::kBFloat16);
  const torch::Tensor targets = torch::randint(kVocab, {7}, torch::kLong);
  const torch::Tensor want = torch::nn::functional::cross_entropy(
      all.to(torch::kFloat), targets, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
  torch::Tensor local = all.narrow(1, mine.begin, mine.size()).clone().requires_grad_(true);
  const torch::Tensor got = vocab_parallel_cross_entropy_sum(local, targets, mine, tp);
  EXPECT_EQ(got.scalar_type(), torch::kFloat);
  EXPECT_NEAR(got.item<double>(), want.item<double>(), 1e-4);
  got.backward();
  EXPECT_EQ(local.grad().scalar_type(), torch::kBFloat16);
}

}  // namespace
}  // namespace ds::parallel
