// Lion over flat fp32 spans with DeepSpeed CPU Lion's arithmetic (csrc/lion/cpu_lion_impl.cpp):
//   c = b1*m + (1-b1)*g ;  p = p*(1 - lr*wd) - lr*sign(c) ;  m = b2*m + (1-b2)*g
// Decoupled decay scales the pre-update parameter (only when wd > 0). sign() is DeepSpeed's
// -copysign(lr, c): c = +0 counts as positive (p moves by -lr), unlike the paper's sign(0) = 0.
#pragma once

#include <cstdint>

#include "config/optimizer_config.h"
#include "optim/simd_path.h"

namespace ds::optim {

struct LionHyperparams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double weight_decay = 0.0;

  static LionHyperparams from_config(const OptimizerParams& p);
};

// Lion keeps no per-step scalars (DeepSpeed counts steps but never uses the count).
struct LionState {};

// One Lion update of n elements: p and m (exp_avg) updated in place from g.
void lion_update(float* p, const float* g, float* m, std::int64_t n, const LionHyperparams& h,
                 const LionState& s = {}, const KernelOptions& o = {});

}  // namespace ds::optim
