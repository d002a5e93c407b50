// Lion (DeepSpeed CPU Lion arithmetic) against the same math in double, plus its two quirks:
// decay scales the pre-update parameter, and c = +0 moves the parameter by -lr.
#include "optim/lion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace ds::optim {
namespace {

double fp32(double x) { return static_cast<float>(x); }

void reference_lion(std::vector<double>& p, const std::vector<double>& g, std::vector<double>& m,
                    const LionHyperparams& h) {
  const double b1 = fp32(h.beta1), b2 = fp32(h.beta2), lr = fp32(h.lr), wd = fp32(h.weight_decay);
  for (size_t i = 0; i < p.size(); ++i) {
    const double c = b1 * m[i] + (1 - b1) * g[i];
    const double sign = std::signbit(c) ? -1.0 : 1.0;  // DeepSpeed: copysign, so +0 counts as +
    p[i] = p[i] * (1 - lr * wd) - lr * sign;
    m[i] = b2 * m[i] + (1 - b2) * g[i];
  }
}

void run_against_reference(double wd, std::int64_t n) {
  LionHyperparams h;
  h.lr = 1e-3;
  h.weight_decay = wd;
  std::mt19937 rng(13);
  std::normal_distribution<float> dist;
  std::vector<float> p(n), m(n, 0.0f), g(n);
  for (auto& x : p) x = dist(rng);
  std::vector<double> pd(p.begin(), p.end()), md(n, 0.0);
  for (int t = 1; t <= 30; ++t) {
    for (auto& x : g) x = dist(rng);
    lion_update(p.data(), g.data(), m.data(), n, h);
    reference_lion(pd, std::vector<double>(g.begin(), g.end()), md, h);
  }
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(m[i], md[i], 1e-5 * std::max(1.0, std::abs(md[i]))) << "i=" << i;
    ASSERT_NEAR(p[i], pd[i], 1e-5 * std::max(1.0, std::abs(pd[i]))) << "i=" << i;
  }
}

TEST(LionKernel, MatchesReference) {
  for (std::int64_t n : {1, 7, 1001}) run_against_reference(0.0, n);
}
TEST(LionKernel, MatchesReferenceWithDecoupledDecay) {
  for (std::int64_t n : {1, 7, 1001}) run_against_reference(0.5, n);
}

TEST(LionKernel, DecayScalesThePreUpdateParameterAndZeroCountsAsPositive) {
  LionHyperparams h;
  h.lr = 0.25;
  h.weight_decay = 0.5;
  // [0]: c > 0 ; [1]: c < 0 ; [2]: g = m = 0, c = +0: DeepSpeed still steps by -lr.
  std::vector<float> p{2.0f, 2.0f, 2.0f}, g{1.0f, -1.0f, 0.0f}, m(3, 0.0f);
  lion_update(p.data(), g.data(), m.data(), 3, h);
  const float decayed = 2.0f * (1.0f - 0.25f * 0.5f);
  EXPECT_EQ(p[0], decayed - 0.25f);
  EXPECT_EQ(p[1], decayed + 0.25f);
  EXPECT_EQ(p[2], decayed - 0.25f);
  EXPECT_FLOAT_EQ(m[0], 1.0f - static_cast<float>(h.beta2));
}

TEST(LionKernel, FromConfigTakesBetasFromTheConfig) {
  OptimizerParams p = default_optimizer_params(OptimizerType::Lion);
  p.lr = 3e-4;
  p.weight_decay = 0.1;
  const LionHyperparams h = LionHyperparams::from_config(p);
  EXPECT_EQ(h.lr, 3e-4);
  EXPECT_EQ(h.beta1, 0.9);
  EXPECT_EQ(h.beta2, 0.99);
  EXPECT_EQ(h.weight_decay, 0.1);
}

}  // namespace
}  // namespace ds::optim
