#include "optim/adam.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace ds::optim {
namespace {

// Textbook Adam/AdamW in double: the kernel must agree to fp32 rounding.
void reference_adam(std::vector<double>& p, const std::vector<double>& g, std::vector<double>& m,
                    std::vector<double>& v, const AdamHyperparams& h, int t) {
  for (size_t i = 0; i < p.size(); ++i) {
    double grad = g[i];
    if (!h.adamw_mode) grad += h.weight_decay * p[i];
    m[i] = h.beta1 * m[i] + (1 - h.beta1) * grad;
    v[i] = h.beta2 * v[i] + (1 - h.beta2) * grad * grad;
    double mhat = m[i] / (1 - std::pow(h.beta1, t));
    double vhat = v[i] / (1 - std::pow(h.beta2, t));
    if (h.adamw_mode) p[i] -= h.lr * h.weight_decay * p[i];
    p[i] -= h.lr * mhat / (std::sqrt(vhat) + h.eps);
  }
}

void run_against_reference(bool adamw, std::int64_t n) {
  AdamHyperparams h;
  h.lr = 1e-2;
  h.weight_decay = 0.1;
  h.adamw_mode = adamw;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  std::vector<float> p(n), m(n, 0.f), v(n, 0.f), g(n);
  for (auto& x : p) x = dist(rng);
  std::vector<double> pd(p.begin(), p.end()), md(n, 0.0), vd(n, 0.0);
  AdamStepState s;
  for (int t = 1; t <= 10; ++t) {
    for (auto& x : g) x = dist(rng);
    s.advance(t, h.beta1, h.beta2);
    adam_update(p.data(), g.data(), m.data(), v.data(), n, h, s);
    reference_adam(pd, std::vector<double>(g.begin(), g.end()), md, vd, h, t);
  }
  for (std::int64_t i = 0; i < n; ++i) ASSERT_NEAR(p[i], pd[i], 1e-5 * (1 + std::abs(pd[i]))) << "i=" << i;
}

TEST(Adam, AdamWMatchesTextbookMath) { run_against_reference(true, 1001); }
TEST(Adam, L2ModeMatchesTextbookMath) { run_against_reference(false, 37); }

TEST(Adam, FirstStepMovesEachParameterByLr) {
  // With bias correction the first update is lr * g/|g| (eps aside) for every element.
  AdamHyperparams h;
  h.lr = 0.5;
  AdamStepState s;
  s.advance(1, h.beta1, h.beta2);
  std::vector<float> p{1.f, 1.f, 1.f}, g{3.f, -0.25f, 1e-3f}, m(3, 0.f), v(3, 0.f);
  adam_update(p.data(), g.data(), m.data(), v.data(), 3, h, s);
  EXPECT_NEAR(p[0], 0.5f, 1e-6);
  EXPECT_NEAR(p[1], 1.5f, 1e-6);
  EXPECT_NEAR(p[2], 0.5f, 1e-4);
}

TEST(Adam, BetaPowersAdvanceByMultiplyAndRecomputeOnJump) {
  AdamStepState s;
  s.advance(1, 0.9, 0.999);
  s.advance(2, 0.9, 0.999);
  EXPECT_EQ(s.beta1_t(), 0.9f * 0.9f);  // fp32 multiply, as DeepSpeed
  s.advance(10, 0.9, 0.999);           // jump: recomputed with pow
  EXPECT_FLOAT_EQ(s.beta1_t(), static_cast<float>(std::pow(0.9, 10)));
  EXPECT_EQ(s.step(), 10);
}

}  // namespace
}  // namespace ds::optim
