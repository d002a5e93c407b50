// LAMB (DeepSpeed FusedLamb semantics) against the same math written here in double, per tensor
// segment, including the trust-ratio clamps, zero norms and the padding between segments.
#include "optim/lamb.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "util/error.h"

namespace ds::optim {
namespace {

double fp32(double x) { return static_cast<float>(x); }

// FusedLamb in double: bias correction only in the step size, the trust ratio from the
// uncorrected update m / (sqrt(v) + eps) + wd * p. Hyperparameters rounded to fp32 first, as the
// kernel's contract says, so only the arithmetic's rounding differs.
std::vector<double> reference_lamb(std::vector<double>& p, const std::vector<double>& g, std::vector<double>& m,
                                   std::vector<double>& v, const std::vector<LambSegment>& segs,
                                   LambHyperparams h, int t) {
  for (double* x : {&h.lr, &h.beta1, &h.beta2, &h.eps, &h.weight_decay, &h.max_coeff, &h.min_coeff}) *x = fp32(*x);
  const double step_size = h.bias_correction
                               ? h.lr * std::sqrt(1 - std::pow(h.beta2, t)) / (1 - std::pow(h.beta1, t))
                               : h.lr;
  std::vector<double> coeffs;
  for (const auto& s : segs) {
    std::vector<double> u(s.numel);
    double w2 = 0, u2 = 0;
    for (std::int64_t k = 0; k < s.numel; ++k) {
      const std::int64_t i = s.offset + k;
      m[i] = h.beta1 * m[i] + (1 - h.beta1) * g[i];
      v[i] = h.beta2 * v[i] + (1 - h.beta2) * g[i] * g[i];
      const double denom = h.eps_inside_sqrt ? std::sqrt(v[i] + h.eps) : std::sqrt(v[i]) + h.eps;
      u[k] = m[i] / denom + h.weight_decay * p[i];
      w2 += p[i] * p[i];
      u2 += u[k] * u[k];
    }
    double coeff = 1;
    if (w2 != 0 && u2 != 0) coeff = std::clamp(std::sqrt(w2) / std::sqrt(u2), h.min_coeff, h.max_coeff);
    for (std::int64_t k = 0; k < s.numel; ++k) p[s.offset + k] -= step_size * coeff * u[k];
    coeffs.push_back(coeff);
  }
  return coeffs;
}

constexpr float kPadding = 42.0f;

// Segments of odd lengths with padding between them; one of zeros (norm 0), one scaled up (trust
// ratio clamped at max_coeff), one scaled down (clamped at min_coeff), one spanning many blocks.
struct Layout {
  std::vector<LambSegment> segs{{0, 1}, {3, 7}, {16, 1001}, {1020, 5}, {1030, 64}, {1100, 64}, {1170, 40000}};
  std::int64_t n = 41180;
};

void run_against_reference(const LambHyperparams& h, int steps) {
  const Layout layout;
  const std::int64_t n = layout.n;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  std::vector<float> p(n, kPadding), m(n, kPadding), v(n, kPadding), g(n);
  std::vector<bool> covered(n, false);
  for (const auto& s : layout.segs) {
    for (std::int64_t i = s.offset; i < s.offset + s.numel; ++i) {
      covered[i] = true;
      p[i] = dist(rng);
      m[i] = v[i] = 0.0f;
    }
  }
  for (std::int64_t i = 1020; i < 1025; ++i) p[i] = 0.0f;     // ||p|| = 0: coefficient 1
  for (std::int64_t i = 1030; i < 1094; ++i) p[i] *= 1e4f;    // huge ratio: clamped to max
  for (std::int64_t i = 1100; i < 1164; ++i) p[i] *= 1e-6f;   // tiny ratio: clamped to min
  std::vector<double> pd(p.begin(), p.end()), md(n, 0.0), vd(n, 0.0);
  LambState state;
  for (int t = 1; t <= steps; ++t) {
    for (auto& x : g) x = dist(rng);
    ++state.step;
    const auto coeffs = lamb_update(p.data(), g.data(), m.data(), v.data(), n, layout.segs, h, state);
    const auto ref = reference_lamb(pd, std::vector<double>(g.begin(), g.end()), md, vd, layout.segs, h, t);
    ASSERT_EQ(coeffs.size(), ref.size());
    for (size_t k = 0; k < ref.size(); ++k) ASSERT_NEAR(coeffs[k], ref[k], 1e-5 * ref[k]) << "t=" << t << " k=" << k;
    if (t == 1) {
      EXPECT_EQ(coeffs[3], 1.0f);
      EXPECT_EQ(coeffs[4], static_cast<float>(h.max_coeff));
      EXPECT_EQ(coeffs[5], static_cast<float>(h.min_coeff));
    }
  }
  for (std::int64_t i = 0; i < n; ++i) {
    if (!covered[i]) {
      ASSERT_EQ(p[i], kPadding) << "padding written at " << i;
      ASSERT_EQ(m[i], kPadding);
      ASSERT_EQ(v[i], kPadding);
      continue;
    }
    // fp32 state against double: a few ulps per step, relative to the parameter's scale.
    ASSERT_NEAR(p[i], pd[i], 2e-5 * std::max(1.0, std::abs(pd[i]))) << "i=" << i;
  }
}

LambHyperparams lamb(double wd, bool bias_correction, bool eps_inside_sqrt) {
  LambHyperparams h;
  h.lr = 1e-2;
  h.weight_decay = wd;
  h.bias_correction = bias_correction;
  h.eps_inside_sqrt = eps_inside_sqrt;
  return h;
}

TEST(LambKernel, MatchesReferenceDefault) { run_against_reference(lamb(0.0, true, false), 20); }
TEST(LambKernel, MatchesReferenceWithWeightDecay) { run_against_reference(lamb(0.01, true, false), 20); }
TEST(LambKernel, MatchesReferenceEpsInsideSqrt) {
  LambHyperparams h = lamb(0.01, true, true);
  h.eps = 1e-3;  // large enough that inside vs outside the sqrt matters
  run_against_reference(h, 20);
}
TEST(LambKernel, MatchesReferenceWithoutBiasCorrection) { run_against_reference(lamb(0.01, false, false), 20); }

TEST(LambKernel, FirstStepTrustRatioUsesTheUncorrectedUpdate) {
  // One tensor, step 1: m = 0.1 g, v = 0.001 g^2, u = m / (sqrt(v) + eps) + wd p. A textbook LAMB
  // (bias-corrected u) would give a different ratio once wd > 0.
  LambHyperparams h = lamb(0.5, true, false);
  std::vector<float> p{3.0f, 4.0f}, g{1.0f, -2.0f}, m(2, 0.0f), v(2, 0.0f);
  const std::vector<LambSegment> segs{{0, 2}};
  const auto coeffs = lamb_update(p.data(), g.data(), m.data(), v.data(), 2, segs, h, LambState{1});
  const double one_minus_b1 = 1 - fp32(0.9), one_minus_b2 = 1 - fp32(0.999), eps = fp32(1e-8);
  const double s = std::sqrt(one_minus_b2);
  const double u0 = one_minus_b1 * 1 / (s * 1 + eps) + 0.5 * 3, u1 = one_minus_b1 * -2 / (s * 2 + eps) + 0.5 * 4;
  const double ratio = 5.0 / std::hypot(u0, u1);
  EXPECT_NEAR(coeffs[0], ratio, 1e-6);
  const double step_size = fp32(1e-2) * std::sqrt(one_minus_b2) / one_minus_b1;
  EXPECT_NEAR(p[0], 3.0 - step_size * ratio * u0, 1e-6);
  EXPECT_NEAR(p[1], 4.0 - step_size * ratio * u1, 1e-6);
}

TEST(LambKernel, ResultDoesNotDependOnTheThreadCount) {
  const Layout layout;
  const LambHyperparams h = lamb(0.01, true, false);
  std::mt19937 rng(9);
  std::normal_distribution<float> dist;
  std::vector<float> p0(layout.n), g(layout.n);
  for (auto& x : p0) x = dist(rng);
  for (auto& x : g) x = dist(rng);
  auto run = [&](int threads) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> p = p0, m(layout.n, 0.0f), v(layout.n, 0.0f);
    std::vector<float> coeffs;
    for (std::int64_t t = 1; t <= 3; ++t) coeffs = lamb_update(p.data(), g.data(), m.data(), v.data(), layout.n,
                                                               layout.segs, h, LambState{t});
    omp_set_num_threads(before);
    p.insert(p.end(), coeffs.begin(), coeffs.end());
    return p;
  };
  EXPECT_EQ(run(1), run(3));
}

TEST(LambKernel, FromConfigCopiesLambKeysAndRejectsAmsgrad) {
  OptimizerParams p = default_optimizer_params(OptimizerType::Lamb);
  p.lr = 0.02;
  p.betas = {0.8, 0.9};
  p.max_coeff = 3.0;
  p.min_coeff = 0.1;
  p.eps_inside_sqrt = true;
  p.bias_correction = false;
  const LambHyperparams h = LambHyperparams::from_config(p);
  EXPECT_EQ(h.lr, 0.02);
  EXPECT_EQ(h.beta1, 0.8);
  EXPECT_EQ(h.beta2, 0.9);
  EXPECT_EQ(h.max_coeff, 3.0);
  EXPECT_EQ(h.min_coeff, 0.1);
  EXPECT_TRUE(h.eps_inside_sqrt);
  EXPECT_FALSE(h.bias_correction);
  p.amsgrad = true;
  EXPECT_THROW(LambHyperparams::from_config(p), ConfigError);
}

}  // namespace
}  // namespace ds::optim
