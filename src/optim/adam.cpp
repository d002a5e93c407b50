#include "optim/adam.h"

#include <omp.h>

#include <cmath>

namespace ds::optim {

void AdamStepState::advance(std::int64_t step, double beta1, double beta2) {
  const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
  if (step == step_ + 1 && b1 == beta1_ && b2 == beta2_) {
    beta1_t_ *= b1;
    beta2_t_ *= b2;
  } else {
    beta1_t_ = static_cast<float>(std::pow(beta1, static_cast<double>(step)));
    beta2_t_ = static_cast<float>(std::pow(beta2, static_cast<double>(step)));
  }
  step_ = step;
  beta1_ = b1;
  beta2_ = b2;
}

void adam_update(float* p, const float* g, float* m, float* v, std::int64_t n,
                 const AdamHyperparams& h, const AdamStepState& s) {
  const float lr = static_cast<float>(h.lr);
  const float b1 = static_cast<float>(h.beta1);
  const float b2 = static_cast<float>(h.beta2);
  const float eps = static_cast<float>(h.eps);
  const float wd = static_cast<float>(h.weight_decay);
  const float one_minus_b1 = 1.0f - b1;
  const float one_minus_b2 = 1.0f - b2;
  float bc1 = 1.0f, bc2 = 1.0f;
  if (h.bias_correction) {
    bc1 = 1.0f - s.beta1_t();
    bc2 = 1.0f / std::sqrt(1.0f - s.beta2_t());
  }
  const float step_size = -lr / bc1;
  const float decay = -lr * wd;
  const bool adamw_decay = h.adamw_mode && wd > 0.0f;
  const bool l2_decay = !h.adamw_mode && wd > 0.0f;

#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    float grad = g[i];
    float param = p[i];
    if (l2_decay) grad = std::fma(param, wd, grad);
    float mi = std::fma(grad, one_minus_b1, m[i] * b1);
    float vi = std::fma(grad * grad, one_minus_b2, v[i] * b2);
    float denom = std::fma(std::sqrt(vi), bc2, eps);
    if (adamw_decay) param = std::fma(param, decay, param);
    p[i] = std::fma(mi / denom, step_size, param);
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace ds::optim
