#include "optim/adagrad.h"

#include <cmath>
#include <string>

#include "optim/hyperparam_checks.h"
#include "util/error.h"

namespace ds::optim {


AdagradHyperparams AdagradHyperparams::from_config(const OptimizerParams& p) {
  require_non_negative(p.lr, "lr", "learning rate", "Adagrad");
  require_non_negative(p.lr_decay, "lr_decay", "lr_decay value", "Adagrad");
  require_non_negative(p.weight_decay, "weight_decay", "weight_decay value", "Adagrad");
  require_non_negative(p.initial_accumulator_value, "initial_accumulator_value", "initial_accumulator_value", "Adagrad");
  require_non_negative(p.eps, "eps", "epsilon value", "Adagrad");
  AdagradHyperparams h;
  h.lr = p.lr;
  h.lr_decay = p.lr_decay;
  h.weight_decay = p.weight_decay;
  h.initial_accumulator_value = p.initial_accumulator_value;
  h.eps = p.eps;
  return h;
}

void adagrad_init_state(float* sum, std::int64_t n, const AdagradHyperparams& h) {
  const float init = static_cast<float>(h.initial_accumulator_value);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) sum[i] = init;
}

void adagrad_update(float* p, const float* g, float* sum, std::int64_t n, const AdagradHyperparams& h,
                    const AdagradState& s) {
  DS_ASSERT(s.step >= 1, "adagrad_update: increment AdagradState::step before the step's updates");
  // clr in double as torch computes it, then rounded to fp32 when it becomes the addcdiv Scalar.
  const double clr = h.lr / (1.0 + static_cast<double>(s.step - 1) * h.lr_decay);
  const float neg_clr = static_cast<float>(-clr);
  const float wd = static_cast<float>(h.weight_decay);
  const float eps = static_cast<float>(h.eps);
  const bool decay = h.weight_decay != 0.0;

#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    float grad = g[i];
    const float param = p[i];
    if (decay) grad = std::fma(param, wd, grad);  // grad.add(p, wd)
    const float acc = sum[i] + grad * grad;       // sum.addcmul_(grad, grad, 1)
    const float std_dev = std::sqrt(acc) + eps;   // sum.sqrt().add_(eps)
    p[i] = param + neg_clr * grad / std_dev;      // p.addcdiv_(grad, std, -clr)
    sum[i] = acc;
  }
}

}  // namespace ds::optim
