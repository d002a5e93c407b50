// has_inf_or_nan / first_non_finite for each floating dtype, unscale+clip (reference §10), and the
// double sum of squares the gradient norm is made of.
#include "precision/overflow.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "precision/gradient_spans.h"
#include "precision/loss_scaler.h"

namespace ds::precision {
namespace {

const torch::ScalarType kFloatTypes[] = {torch::kFloat, torch::kHalf, torch::kBFloat16};
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(OverflowCheckTest, CleanTensorsAreFinite) {
  for (auto dt : kFloatTypes) {
    SCOPED_TRACE(c10::toString(dt));
    auto t = torch::randn({37, 5}).to(dt);
    EXPECT_FALSE(has_inf_or_nan(t));
    EXPECT_FALSE(has_inf_or_nan(torch::zeros({1}, dt)));
  }
}

TEST(OverflowCheckTest, DetectsPlusInfMinusInfAndNanAnywhere) {
  for (auto dt : kFloatTypes) {
    for (double bad : {kInf, -kInf, std::nan("")}) {
      for (int64_t pos : {0, 100, 1022}) {
        SCOPED_TRACE(std::string(c10::toString(dt)) + " value " + std::to_string(bad) + " at " +
                     std::to_string(pos));
        auto t = torch::randn({1023}).to(dt);
        t[pos] = bad;
        EXPECT_TRUE(has_inf_or_nan(t));
      }
    }
  }
}

TEST(OverflowCheckTest, InfAndMinusInfTogetherAndNonContiguous) {
  for (auto dt : kFloatTypes) {
    auto t = torch::zeros({8, 8}, dt);
    t[1][2] = kInf;
    t[5][6] = -kInf;
    EXPECT_TRUE(has_inf_or_nan(t));
    auto col = torch::zeros({8, 8}, dt);
    col[7][3] = std::nan("");
    EXPECT_TRUE(has_inf_or_nan(col.t()));                   // transposed view
    EXPECT_TRUE(has_inf_or_nan(col.select(1, 3)));          // strided column
    EXPECT_FALSE(has_inf_or_nan(col.select(1, 2)));         // clean column of the same tensor
  }
}

TEST(OverflowCheckTest, LargeFiniteValuesAreNotOverflow) {
  // A float sum of these overflows; the check must not call them inf.
  EXPECT_FALSE(has_inf_or_nan(torch::full({1000}, 3.0e38f)));
  EXPECT_FALSE(has_inf_or_nan(torch::full({100000}, 65504.0, torch::kHalf)));
  EXPECT_FALSE(has_inf_or_nan(torch::full({1000}, 3.0e38, torch::kBFloat16)));
  auto mixed = torch::full({1000}, 3.0e38f);
  mixed.slice(0, 0, 500).fill_(-3.0e38f);
  EXPECT_FALSE(has_inf_or_nan(mixed));
}

TEST(OverflowCheckTest, NonFloatingEmptyAndUndefinedAreFinite) {
  EXPECT_FALSE(has_inf_or_nan(torch::Tensor()));
  EXPECT_FALSE(has_inf_or_nan(torch::empty({0})));
  EXPECT_FALSE(has_inf_or_nan(torch::arange(10)));
  EXPECT_FALSE(has_inf_or_nan(torch::ones({3}, torch::kBool)));
}

TEST(OverflowCheckTest, FirstNonFinite) {
  auto clean = [](torch::ScalarType dt) { return torch::randn({16}).to(dt); };
  auto with = [](torch::ScalarType dt, double v) {
    auto t = torch::randn({16}).to(dt);
    t[7] = v;
    return t;
  };
  EXPECT_EQ(first_non_finite({}), std::nullopt);
  EXPECT_EQ(first_non_finite({clean(torch::kFloat), clean(torch::kHalf), clean(torch::kBFloat16)}),
            std::nullopt);
  EXPECT_EQ(first_non_finite({clean(torch::kFloat), clean(torch::kHalf), with(torch::kBFloat16, kInf),
                              with(torch::kFloat, std::nan(""))}),
            std::optional<size_t>(2));
  EXPECT_EQ(first_non_finite({with(torch::kHalf, -kInf), clean(torch::kFloat)}), std::optional<size_t>(0));
  // Undefined (no gradient) and empty tensors are skipped but keep their index.
  EXPECT_EQ(first_non_finite({torch::Tensor(), torch::empty({0}), clean(torch::kHalf),
                              with(torch::kHalf, std::nan(""))}),
            std::optional<size_t>(3));
  EXPECT_EQ(first_non_finite({torch::full({4}, 3.0e38f), torch::full({4}, 65504.0, torch::kHalf)}),
            std::nullopt);
}

TEST(OverflowUnscaleClipTest, ClipsWhenTrueNormExceedsClip) {
  // True gradient [3, 4] (norm 5) and [0, 12] split across two tensors: norm 13. Scale 1024.
  const double S = 1024;
  std::vector<torch::Tensor> g = {torch::tensor({3.0f, 4.0f}) * S, torch::tensor({0.0f, 12.0f}) * S};
  const double scaled_norm = 13.0 * S;
  const double combined = unscale_and_clip(g, S, 1.0, scaled_norm);
  EXPECT_DOUBLE_EQ(combined, (13.0 + 1e-6) * S);
  // g_final = g_true * clip / (norm + 1e-6)
  const double k = 1.0 / (13.0 + 1e-6);
  EXPECT_NEAR(g[0][0].item<float>(), 3 * k, 1e-7);
  EXPECT_NEAR(g[0][1].item<float>(), 4 * k, 1e-7);
  EXPECT_NEAR(g[1][1].item<float>(), 12 * k, 1e-7);
  EXPECT_EQ(g[1][0].item<float>(), 0.0f);
  // Multiplied by the reciprocal, as DeepSpeed's mul_(1. / combined_scale).
  auto expect0 = torch::tensor({3.0f, 4.0f}) * S;
  expect0.mul_(1.0 / combined);
  EXPECT_TRUE(torch::equal(g[0], expect0));
}

TEST(OverflowUnscaleClipTest, OnlyUnscalesUnderTheClipOrWithoutClipping) {
  const double S = 256;
  for (double clip : {0.0, 100.0}) {
    std::vector<torch::Tensor> g = {torch::tensor({3.0f, 4.0f}) * S};
    EXPECT_EQ(unscale_and_clip(g, S, clip, 5.0 * S), S);
    EXPECT_FLOAT_EQ(g[0][0].item<float>(), 3.0f);
    EXPECT_FLOAT_EQ(g[0][1].item<float>(), 4.0f);
  }
}

TEST(OverflowUnscaleClipTest, UnitScaleClipsBf16AndFp32Runs) {
  std::vector<torch::Tensor> g = {torch::tensor({30.0f, 40.0f}), torch::Tensor()};
  EXPECT_DOUBLE_EQ(unscale_and_clip(g, 1.0, 5.0, 50.0), (50.0 + 1e-6) / 5.0);
  EXPECT_NEAR(g[0][0].item<float>(), 30.0 * 5.0 / (50.0 + 1e-6), 1e-6);
  std::vector<torch::Tensor> same = {torch::tensor({30.0f, 40.0f})};
  EXPECT_EQ(unscale_and_clip(same, 1.0, 0.0, 50.0), 1.0);
  EXPECT_TRUE(torch::equal(same[0], torch::tensor({30.0f, 40.0f})));
}

TEST(GradientNormTest, SumOfSquaresIsDeepSpeedsDoubleNormSquaredWhateverTheThreads) {
  // Lengths around the 8-wide inner loop and the 65536-element blocks; the double sum must match
  // torch's g.double().square().sum() to double rounding, and not move with the thread count.
  const int threads = at::get_num_threads();
  for (int64_t n : {int64_t{0}, int64_t{7}, int64_t{65536}, int64_t{65536 * 3 + 5}}) {
    SCOPED_TRACE("n " + std::to_string(n));
    auto g = torch::randn({n}) * 1e3;
    const double want = g.to(torch::kFloat64).square().sum().item<double>();
    at::set_num_threads(1);
    const double one = sum_of_squares(g);
    at::set_num_threads(std::max(2, threads));
    const double many = sum_of_squares(g);
    at::set_num_threads(threads);
    EXPECT_NEAR(one, want, 1e-12 * std::max(1.0, want));
    EXPECT_EQ(one, many);
  }
  // Not contiguous (and not fp32): the torch expression itself.
  auto m = torch::randn({64, 3}, torch::kFloat64).t();
  EXPECT_EQ(sum_of_squares(m), m.square().sum().item<double>());
}

}  // namespace
}  // namespace ds::precision
