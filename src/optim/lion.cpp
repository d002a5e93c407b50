#include "optim/lion.h"

#include <cmath>

namespace ds::optim {

LionHyperparams LionHyperparams::from_config(const OptimizerParams& p) {
  LionHyperparams h;
  h.lr = p.lr;
  h.beta1 = p.betas[0];
  h.beta2 = p.betas[1];
  h.weight_decay = p.weight_decay;
  return h;
}

void lion_update(float* p, const float* g, float* m, std::int64_t n, const LionHyperparams& h,
                 const LionState&) {
  const float b1 = static_cast<float>(h.beta1);
  const float b2 = static_cast<float>(h.beta2);
  const float one_minus_b1 = 1.0f - b1;
  const float one_minus_b2 = 1.0f - b2;
  const float alpha = static_cast<float>(h.lr);
  const float wd = static_cast<float>(h.weight_decay);
  const float after_decay = 1.0f - alpha * wd;
  const bool decay = wd > 0.0f;

#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const float grad = g[i];
    const float mi = m[i];
    const float c = std::fma(grad, one_minus_b1, mi * b1);
    const float step = -std::copysign(alpha, c);
    p[i] = decay ? std::fma(p[i], after_decay, step) : p[i] + step;
    m[i] = std::fma(grad, one_minus_b2, mi * b2);
  }
}

}  // namespace ds::optim
