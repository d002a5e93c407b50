#include "optim/sgd.h"

#include <cmath>
#include <string>

#include "optim/hyperparam_checks.h"
#include "util/error.h"

namespace ds::optim {


SgdHyperparams SgdHyperparams::from_config(const OptimizerParams& p) {
  require_non_negative(p.lr, "lr", "learning rate", "SGD");
  require_non_negative(p.momentum, "momentum", "momentum value", "SGD");
  require_non_negative(p.weight_decay, "weight_decay", "weight_decay value", "SGD");
  if (p.nesterov && !(p.momentum > 0.0 && p.dampening == 0.0)) {
    throw ConfigError("optimizer.params.nesterov",
                      "Nesterov momentum requires a momentum and zero dampening (got momentum " +
                          std::to_string(p.momentum) + ", dampening " + std::to_string(p.dampening) + ")");
  }
  SgdHyperparams h;
  h.lr = p.lr;
  h.momentum = p.momentum;
  h.dampening = p.dampening;
  h.weight_decay = p.weight_decay;
  h.nesterov = p.nesterov;
  return h;
}

void sgd_update(float* p, const float* g, float* momentum_buffer, std::int64_t n, const SgdHyperparams& h,
                const SgdState& s) {
  // torch passes each Scalar as double and the kernel casts it to float: round the same way,
  // including 1 - dampening computed in double first.
  const float neg_lr = static_cast<float>(-h.lr);
  const float wd = static_cast<float>(h.weight_decay);
  const float mom = static_cast<float>(h.momentum);
  const float one_minus_damp = static_cast<float>(1.0 - h.dampening);
  const bool decay = h.weight_decay != 0.0;
  const bool use_momentum = h.momentum != 0.0;
  const bool has_buf = s.has_momentum_buffer;
  const bool nesterov = h.nesterov;
  DS_ASSERT(!use_momentum || momentum_buffer != nullptr, "SGD with momentum needs a momentum buffer span");

#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    float d = g[i];
    const float param = p[i];
    if (decay) d = std::fma(param, wd, d);  // d_p.add(p, wd)
    if (use_momentum) {
      float buf = d;  // first step: buf = clone(d_p)
      if (has_buf) buf = std::fma(d, one_minus_damp, momentum_buffer[i] * mom);  // buf.mul_(m).add_(d_p, 1-damp)
      momentum_buffer[i] = buf;
      d = nesterov ? std::fma(buf, mom, d) : buf;  // d_p.add(buf, m) or buf
    }
    p[i] = std::fma(d, neg_lr, param);  // p.add_(d_p, -lr)
  }
}

}  // namespace ds::optim
