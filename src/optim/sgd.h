// SGD over flat fp32 spans with torch.optim.SGD's semantics (what DeepSpeed runs for "type": "SGD"):
// L2 weight decay added to the gradient, momentum with dampening (the first step copies the
// gradient into the buffer), Nesterov. Hyperparameters are rounded to fp32 as torch's CPU kernels
// do with their Scalar arguments; each `add(x, alpha)` is one fused multiply-add, as torch's
// vectorized add.
#pragma once

#include <cstdint>

#include "config/optimizer_config.h"

namespace ds::optim {

struct SgdHyperparams {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;

  // From the config's optimizer.params; throws ds::ConfigError where torch.optim.SGD's constructor
  // raises (negative values, Nesterov without momentum or with dampening).
  static SgdHyperparams from_config(const OptimizerParams& p);
};

// Per-optimizer state besides the momentum buffer span. has_momentum_buffer is false until one
// full step has run: that step copies d_p into the buffer (torch: buf = clone(d_p)). One optimizer
// step may cover several spans (sub-groups, partitions), so the CALLER sets the flag after the
// last span of the step; the kernel only reads it.
struct SgdState {
  bool has_momentum_buffer = false;
};

// One SGD update of n elements: p (and momentum_buffer when momentum != 0; may be null otherwise)
// updated in place from g. Threads split the span.
void sgd_update(float* p, const float* g, float* momentum_buffer, std::int64_t n, const SgdHyperparams& h,
                const SgdState& s);

}  // namespace ds::optim
