// Tensor-parallel linear layers (src/parallel/tp_linear.*, tp_collectives.*) against the full layers
// they are cut from. Built into zero_tests (LibTorch, one world per run): at world 1 the group has
// one rank (every crossing is the identity); under mpirun -np 2 the world is the tensor-parallel
// group, and each rank's outputs, input gradient and weight-slice gradients must equal the full
// model's within fp32 rounding.
#include <gtest/gtest.h>

#include "parallel/tp_collectives.h"
#include "parallel/tp_linear.h"
#include "util/error.h"
#include "../zero/zero_test_env.h"

namespace ds::parallel {
namespace {

comm::Communicator& tp() { return zero::test::topology().world(); }

void expect_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what;
  EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6))
      << what << ": max abs difference " << (got - want).abs().max().item<double>();
}

// The same full layer on every rank (same seed), and an independent copy for the reference.
torch::nn::Linear make_linear(int64_t in, int64_t out, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::nn::Linear(in, out);
}

TEST(TpLinear, ColumnThenRowEqualsTheFullMlp) {
  const int w = tp().size(), r = tp().rank();
  auto fc1 = make_linear(8, 16, 1), fc2 = make_linear(16, 8, 2);
  auto col = column_parallel(fc1, tp(), ColumnParallelOptions{.name = "mlp.fc1"});
  auto row = row_parallel(fc2, tp(), RowParallelOptions{.name = "mlp.fc2"});
  ASSERT_EQ(col->weight.sizes().vec(), (std::vector<int64_t>{16 / w, 8}));
  ASSERT_EQ(row->weight.sizes().vec(), (std::vector<int64_t>{8, 16 / w}));

  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({3, 5, 8});
  torch::Tensor x_full = x.clone().requires_grad_(true), x_tp = x.clone().requires_grad_(true);
  const torch::Tensor y_full = fc2(torch::gelu(fc1(x_full)));
  const torch::Tensor y_tp = row(torch::gelu(col(x_tp)));
  (y_full * y_full).sum().backward();
  (y_tp * y_tp).sum().backward();

  expect_close(y_tp, y_full, "output");
  expect_close(x_tp.grad(), x_full.grad(), "input gradient");  // the column layer's all-reduce backward
  expect_close(col->weight.grad(), fc1->weight.grad().narrow(0, r * 16 / w, 16 / w), "column weight gradient");
  expect_close(col->bias.grad(), fc1->bias.grad().narrow(0, r * 16 / w, 16 / w), "column bias gradient");
  expect_close(row->weight.grad(), fc2->weight.grad().narrow(1, r * 16 / w, 16 / w), "row weight gradient");
  expect_close(row->bias.grad(), fc2->bias.grad(), "row bias gradient (replicated)");
}

TEST(TpLinear, FusedQkvKeepsWholeHeadsPerRank) {
  // q|k|v of 4 heads x 2 dims each: rank r keeps heads [r*4/w, (r+1)*4/w) of q, of k and of v.
  const int w = tp().size(), r = tp().rank();
  auto qkv = make_linear(8, 24, 4);
  auto col = column_parallel(qkv, tp(), ColumnParallelOptions{.name = "attn.c_attn", .parts = 3});
  const int64_t mine = 8 / w;
  for (int part = 0; part < 3; ++part) {
    expect_close(col->weight.narrow(0, part * mine, mine), qkv->weight.narrow(0, part * 8 + r * mine, mine),
                 "block " + std::to_string(part));
  }
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({2, 8});
  const torch::Tensor full = qkv(x), got = col(x);
  for (int part = 0; part < 3; ++part)
    expect_close(got.narrow(1, part * mine, mine), full.narrow(1, part * 8 + r * mine, mine),
                 "output block " + std::to_string(part));
}

TEST(TpLinear, GatheredOutputAndScatteredInputEqualTheFullLayer) {
  auto fc = make_linear(8, 8, 6), fc_row = make_linear(8, 8, 7);
  auto col = column_parallel(fc, tp(), ColumnParallelOptions{.name = "fc", .gather_output = true});
  auto row = row_parallel(fc_row, tp(), RowParallelOptions{.name = "proj", .input_is_parallel = false});
  torch::manual_seed(8);
  const torch::Tensor x = torch::randn({4, 8});
  torch::Tensor x_full = x.clone().requires_grad_(true), x_tp = x.clone().requires_grad_(true);
  const torch::Tensor y_full = fc_row(fc(x_full)), y_tp = row(col(x_tp));
  (y_full.pow(3)).sum().backward();
  (y_tp.pow(3)).sum().backward();
  expect_close(y_tp, y_full, "output");
  expect_close(x_tp.grad(), x_full.grad(), "input gradient (gather and scatter backward)");
}

TEST(TpLinear, OverlappedBackwardEqualsTheFullMlp) {
  // tensor_parallel.tp_overlap_comm: the column layer's input-gradient all-reduce runs during its
  // weight gradient; values as without it.
  const int w = tp().size(), r = tp().rank();
  auto fc1 = make_linear(8, 16, 21), fc2 = make_linear(16, 8, 22);
  auto col = column_parallel(fc1, tp(), ColumnParallelOptions{.name = "mlp.fc1"});
  auto row = row_parallel(fc2, tp(), RowParallelOptions{.name = "mlp.fc2"});
  col->set_overlap_comm(true);
  torch::manual_seed(23);
  const torch::Tensor x = torch::randn({3, 5, 8});
  torch::Tensor x_full = x.clone().requires_grad_(true), x_tp = x.clone().requires_grad_(true);
  const torch::Tensor y_full = fc2(torch::gelu(fc1(x_full))), y_tp = row(torch::gelu(col(x_tp)));
  (y_full * y_full).sum().backward();
  (y_tp * y_tp).sum().backward();
  expect_close(y_tp, y_full, "output");
  expect_close(x_tp.grad(), x_full.grad(), "input gradient (summed over the group during the weight gradient)");
  expect_close(col->weight.grad(), fc1->weight.grad().narrow(0, r * 16 / w, 16 / w), "column weight gradient");
  expect_close(col->bias.grad(), fc1->bias.grad().narrow(0, r * 16 / w, 16 / w), "column bias gradient");
}

TEST(TpLinear, SizesThatDoNotSplitNameTheLayerAndTheKey) {
  auto odd = make_linear(8, 10, 9);  // 10 outputs into 3 fused blocks: never whole
  try {
    auto col = column_parallel(odd, tp(), ColumnParallelOptions{.name = "h.0.attn.c_attn", .parts = 3});
    FAIL() << "a fused layer whose blocks do not divide was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tensor_parallel.autotp_size"), std::string::npos) << what;
    EXPECT_NE(what.find("h.0.attn.c_attn"), std::string::npos) << what;
    EXPECT_NE(what.find("out_features 10"), std::string::npos) << what;
  }
  EXPECT_THROW(column_parallel(make_linear(8, 8, 10), tp(), ColumnParallelOptions{.name = "qkv", .parts = 2, .gather_output = true}),
               NotSupported);
}

}  // namespace
}  // namespace ds::parallel
