// Adagrad over flat fp32 spans with torch.optim.Adagrad's semantics (what DeepSpeed runs for
// "type": "Adagrad" without offload): L2 weight decay added to the gradient, lr decayed per step as
// clr = lr / (1 + (step - 1) * lr_decay), sum += g*g, p -= clr * g / (sqrt(sum) + eps).
// Dense gradients only. Scalars are rounded to fp32 as torch's CPU kernels round them.
#pragma once

#include <cstdint>

#include "config/optimizer_config.h"
#include "optim/simd_path.h"

namespace ds::optim {

struct AdagradHyperparams {
  double lr = 1e-2;
  double lr_decay = 0.0;
  double weight_decay = 0.0;
  double initial_accumulator_value = 0.0;
  double eps = 1e-10;

  // From the config's optimizer.params; throws ds::ConfigError where torch.optim.Adagrad raises.
  static AdagradHyperparams from_config(const OptimizerParams& p);
};

// Per-optimizer state besides the `sum` span: the step count, 1-based once stepping. The caller
// increments it once per optimizer step, before the step's update calls (torch: state.step += 1).
struct AdagradState {
  std::int64_t step = 0;
};

// Fills a fresh `sum` span with initial_accumulator_value (torch does this when it creates state).
void adagrad_init_state(float* sum, std::int64_t n, const AdagradHyperparams& h);

// One Adagrad update of n elements at s.step (>= 1): p and sum updated in place from g.
void adagrad_update(float* p, const float* g, float* sum, std::int64_t n, const AdagradHyperparams& h,
                    const AdagradState& s, const KernelOptions& o = {});

}  // namespace ds::optim
