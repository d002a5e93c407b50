// Element-wise steps shared by the 1-bit family, written as DeepSpeed's torch expressions round them
// (each op in fp32, its Python-float operand rounded to fp32 first; built with -ffp-contract=off).
#pragma once

#include <cmath>
#include <cstdint>

#include "optim/compressed_optimizer.h"

namespace ds::optim::onebit_math {

// Python floats as torch casts them for an fp32 op.
struct Coeffs {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, neg_lr;
  explicit Coeffs(const CompressedGroup& g)
      : beta1(float(g.beta1)), one_minus_beta1(float(1.0 - g.beta1)), beta2(float(g.beta2)),
        one_minus_beta2(float(1.0 - g.beta2)), eps(float(g.eps)), weight_decay(float(g.weight_decay)),
        neg_lr(float(-g.lr)) {}
};

// exp_avg.mul_(beta1).add_(1 - beta1, grad)
inline float momentum(float m, float g, const Coeffs& c) { return m * c.beta1 + c.one_minus_beta1 * g; }
// exp_avg_sq.mul_(beta2).addcmul_(1 - beta2, grad, grad)
inline float variance(float v, float g, const Coeffs& c) { return v * c.beta2 + c.one_minus_beta2 * g * g; }
// exp_avg / (exp_avg_sq.sqrt() + eps) [+ weight_decay * p]
inline float adam_update(float m, float v, float p, const Coeffs& c) {
  float u = m / (std::sqrt(v) + c.eps);
  if (c.weight_decay > 0.0f) u = u + c.weight_decay * p;
  return u;
}

// The L2 norm of x[0, n), summed in double (independent of threads and order of calls).
double norm(const float* x, int64_t n);

}  // namespace ds::optim::onebit_math
