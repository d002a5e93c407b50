// The flat-span kernels against LibTorch's torch::optim on the same random parameters and
// gradients: SGD, Adagrad, Adam (L2 mode) and AdamW, 100 steps, spans of odd lengths. Adagrad and
// Adam run on every SIMD path the CPU has (scalar, AVX2, AVX-512).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "optim/simd_path.h"
#include "util/error.h"

namespace ds::optim {
namespace {

constexpr int kSteps = 100;
// 4099 = many full vectors on every path plus a 3-element scalar tail.
const std::int64_t kSizes[] = {1, 7, 1001, 4099};

// The kernel paths this CPU can run; each must hold the same tolerance as the others.
std::vector<SimdPath> supported_paths() {
  std::vector<SimdPath> out;
  for (SimdPath p : {SimdPath::Scalar, SimdPath::Avx2, SimdPath::Avx512}) {
    if (cpu_supports(p)) out.push_back(p);
  }
  return out;
}

// Runs `ours` (called with p, g, step) and the torch optimizer made by `make_torch` for kSteps
// steps from the same start; returns max |ours - torch| / max(1, |torch|).
using OurStep = std::function<void(float* p, const float* g, int step)>;
using MakeTorch = std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor>)>;

double max_scaled_diff(std::int64_t n, const OurStep& ours, const MakeTorch& make_torch, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> p(n), g(n);
  for (auto& x : p) x = dist(rng);
  torch::Tensor param = torch::from_blob(p.data(), {n}, torch::kFloat).clone().requires_grad_(true);
  auto opt = make_torch({param});
  for (int t = 1; t <= kSteps; ++t) {
    for (auto& x : g) x = dist(rng);
    ours(p.data(), g.data(), t);
    param.mutable_grad() = torch::from_blob(g.data(), {n}, torch::kFloat).clone();
    opt->step();
  }
  const float* ref = param.data_ptr<float>();
  double worst = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::abs(double(p[i]) - double(ref[i])) / std::max(1.0, std::abs(double(ref[i]))));
  }
  return worst;
}

// The measured worst case is printed so the tolerance stays an honest bound.
void expect_within(double diff, double tol, const char* what, std::int64_t n) {
  std::printf("[ parity   ] %-34s n=%-5lld max scaled diff %.3g\n", what, static_cast<long long>(n), diff);
  EXPECT_LE(diff, tol) << what << " n=" << n;
}

// ---- SGD -----------------------------------------------------------------------------------

void check_sgd(const SgdHyperparams& h, const char* what) {
  for (std::int64_t n : kSizes) {
    std::vector<float> buf(n, 0.0f);
    SgdState state;
    auto ours = [&](float* p, const float* g, int) {
      sgd_update(p, g, buf.data(), n, h, state);
      state.has_momentum_buffer = true;  // the step's only span is done
    };
    auto make = [&](std::vector<torch::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
      return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(h.lr)
                                                             .momentum(h.momentum)
                                                             .dampening(h.dampening)
                                                             .weight_decay(h.weight_decay)
                                                             .nesterov(h.nesterov));
    };
    // Same ops, same fp32 scalars, same fused multiply-adds: the runs agree to a few ulps.
    expect_within(max_scaled_diff(n, ours, make, 11), 1e-6, what, n);
  }
}

SgdHyperparams sgd(double lr, double momentum, double dampening, double wd, bool nesterov) {
  SgdHyperparams h;
  h.lr = lr;
  h.momentum = momentum;
  h.dampening = dampening;
  h.weight_decay = wd;
  h.nesterov = nesterov;
  return h;
}

TEST(SgdTorchParity, Plain) { check_sgd(sgd(0.05, 0, 0, 0, false), "sgd plain"); }
TEST(SgdTorchParity, Momentum) { check_sgd(sgd(0.02, 0.9, 0, 0, false), "sgd momentum"); }
TEST(SgdTorchParity, MomentumWithDampening) { check_sgd(sgd(0.02, 0.9, 0.3, 0, false), "sgd momentum+dampening"); }
TEST(SgdTorchParity, Nesterov) { check_sgd(sgd(0.02, 0.8, 0, 0, true), "sgd nesterov"); }
TEST(SgdTorchParity, WeightDecay) { check_sgd(sgd(0.05, 0, 0, 0.1, false), "sgd weight decay"); }
TEST(SgdTorchParity, Everything) { check_sgd(sgd(0.01, 0.9, 0.1, 0.05, false), "sgd momentum+damp+wd"); }
TEST(SgdTorchParity, NesterovWithDecay) { check_sgd(sgd(0.01, 0.9, 0, 0.05, true), "sgd nesterov+wd"); }

TEST(SgdKernel, FirstStepCopiesGradientIntoBufferIgnoringDampening) {
  // torch: buf = clone(d_p) on the first step; dampening applies only from the second.
  const SgdHyperparams h = sgd(0.1, 0.9, 0.5, 0, false);
  std::vector<float> p{1.0f, 2.0f}, g{0.5f, -1.0f}, buf{123.0f, 456.0f};
  sgd_update(p.data(), g.data(), buf.data(), 2, h, SgdState{});
  EXPECT_FLOAT_EQ(buf[0], 0.5f);
  EXPECT_FLOAT_EQ(buf[1], -1.0f);
  EXPECT_FLOAT_EQ(p[0], 1.0f - 0.1f * 0.5f);
  SgdState later{true};
  sgd_update(p.data(), g.data(), buf.data(), 2, h, later);
  EXPECT_FLOAT_EQ(buf[0], 0.9f * 0.5f + 0.5f * 0.5f);
}

TEST(SgdKernel, FromConfigChecksWhatTorchChecks) {
  OptimizerParams p = default_optimizer_params(OptimizerType::SGD);
  p.lr = 0.1;
  p.momentum = 0.9;
  p.dampening = 0.2;
  p.nesterov = true;
  try {
    SgdHyperparams::from_config(p);
    FAIL() << "nesterov with dampening must be rejected";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "optimizer.params.nesterov");
  }
  p.dampening = 0.0;
  const SgdHyperparams h = SgdHyperparams::from_config(p);
  EXPECT_DOUBLE_EQ(h.momentum, 0.9);
  EXPECT_TRUE(h.nesterov);
  p.momentum = -1.0;
  p.nesterov = false;
  EXPECT_THROW(SgdHyperparams::from_config(p), ConfigError);
}

// ---- Adagrad -------------------------------------------------------------------------------

void check_adagrad(const AdagradHyperparams& h, const char* what, double tol) {
  for (SimdPath path : supported_paths())
  for (std::int64_t n : kSizes) {
    std::vector<float> sum(n);
    adagrad_init_state(sum.data(), n, h);
    AdagradState state;
    auto ours = [&](float* p, const float* g, int) {
      ++state.step;
      adagrad_update(p, g, sum.data(), n, h, state, KernelOptions{path, 0});
    };
    auto make = [&](std::vector<torch::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
      return std::make_unique<torch::optim::Adagrad>(params, torch::optim::AdagradOptions(h.lr)
                                                                 .lr_decay(h.lr_decay)
                                                                 .weight_decay(h.weight_decay)
                                                                 .initial_accumulator_value(h.initial_accumulator_value)
                                                                 .eps(h.eps));
    };
    expect_within(max_scaled_diff(n, ours, make, 23), tol, (std::string(what) + " " + to_string(path)).c_str(), n);
  }
}

AdagradHyperparams adagrad(double lr, double lr_decay, double wd, double init_acc) {
  AdagradHyperparams h;
  h.lr = lr;
  h.lr_decay = lr_decay;
  h.weight_decay = wd;
  h.initial_accumulator_value = init_acc;
  return h;
}

TEST(AdagradTorchParity, Plain) { check_adagrad(adagrad(0.05, 0, 0, 0), "adagrad plain", 1e-6); }
TEST(AdagradTorchParity, LrDecay) { check_adagrad(adagrad(0.05, 0.01, 0, 0), "adagrad lr_decay", 1e-6); }
TEST(AdagradTorchParity, WeightDecay) { check_adagrad(adagrad(0.05, 0, 0.1, 0), "adagrad weight decay", 1e-6); }
TEST(AdagradTorchParity, InitialAccumulator) {
  check_adagrad(adagrad(0.05, 0, 0, 0.5), "adagrad initial accumulator", 1e-6);
}
TEST(AdagradTorchParity, Everything) { check_adagrad(adagrad(0.1, 0.02, 0.05, 0.1), "adagrad all options", 1e-6); }

TEST(AdagradKernel, FirstStepMatchesHandMath) {
  // sum = init + g^2 ; p -= lr * g / (sqrt(sum) + eps); lr_decay starts at step 2.
  const AdagradHyperparams h = adagrad(0.1, 0.5, 0, 1.0);
  std::vector<float> p{1.0f}, g{2.0f}, sum(1);
  adagrad_init_state(sum.data(), 1, h);
  AdagradState s{1};
  adagrad_update(p.data(), g.data(), sum.data(), 1, h, s);
  EXPECT_FLOAT_EQ(sum[0], 5.0f);
  EXPECT_NEAR(p[0], 1.0 - 0.1 * 2.0 / std::sqrt(5.0), 1e-6);
  s.step = 3;  // clr = 0.1 / (1 + 2 * 0.5)
  adagrad_update(p.data(), g.data(), sum.data(), 1, h, s);
  EXPECT_NEAR(p[0], 1.0 - 0.1 * 2.0 / std::sqrt(5.0) - 0.05 * 2.0 / 3.0, 1e-6);
}

// ---- Adam / AdamW (the existing DeepSpeed-arithmetic kernel) --------------------------------

void check_adam(bool adamw, double wd, const char* what, double tol = 1e-6, double lr = 1e-2) {
  AdamHyperparams h;
  h.lr = lr;
  h.weight_decay = wd;
  h.adamw_mode = adamw;
  for (SimdPath path : supported_paths())
  for (std::int64_t n : kSizes) {
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    AdamStepState state;
    auto ours = [&](float* p, const float* g, int t) {
      state.advance(t, h.beta1, h.beta2);
      adam_update(p, g, m.data(), v.data(), n, h, state, KernelOptions{path, 0});
    };
    auto make = [&](std::vector<torch::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
      if (adamw) {
        return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(h.lr).weight_decay(wd));
      }
      return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(h.lr).weight_decay(wd));
    };
    // DeepSpeed's arithmetic differs from torch's in rounding only (fp32 beta^t and 1 - beta,
    // 1/sqrt(bc2) as a multiply, fused decay): measured <= 6.4e-7 over 100 steps without decay.
    expect_within(max_scaled_diff(n, ours, make, 37), tol, (std::string(what) + " " + to_string(path)).c_str(), n);
  }
}

TEST(AdamTorchParity, AdamNoDecay) { check_adam(false, 0.0, "adam (L2 mode) wd=0"); }
TEST(AdamTorchParity, AdamL2DecayMatchesTorchAdam) { check_adam(false, 0.1, "adam (L2 mode) wd=0.1"); }
// torch's AdamW decays with p.mul_(1 - lr*wd): 1 - 0.01*0.1 = 0.999 becomes the fp32 0.99900001287,
// 1.29e-8 too large, and that bias compounds to 100 * 1.29e-8 = 1.3e-6 relative after 100 steps.
// DeepSpeed's fma(p, -lr*wd, p) has no such bias. Measured: 2.3e-6 (n = 1001); tolerance 3e-6.
TEST(AdamTorchParity, AdamWMatchesTorchAdamW) { check_adam(true, 0.1, "adamw wd=0.1", 3e-6); }
// The same with a decay factor fp32 holds exactly (lr*wd = 2^-10): back within 1e-6.
TEST(AdamTorchParity, AdamWExactDecayFactorWithin1e6) {
  check_adam(true, 0.125, "adamw lr=2^-7 wd=2^-3", 1e-6, 0.0078125);
}
TEST(AdamTorchParity, AdamWNoDecay) { check_adam(true, 0.0, "adamw wd=0"); }

}  // namespace
}  // namespace ds::optim
