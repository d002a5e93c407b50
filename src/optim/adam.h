// Adam / AdamW over flat fp32 spans with DeepSpeed's CPU-Adam arithmetic (reference §6.2, §19):
// hyperparameters rounded to fp32, beta^t kept as fp32 state, eps outside the sqrt, explicit FMAs.
// The update runs on the SIMD path simd_path.h picks (scalar, AVX2 or AVX-512, bit-identical) over
// OpenMP tiles (tiles.h), one pass over memory; the copy-out variant also writes the new parameters
// as bf16/fp16 in that same pass.
#pragma once

#include <cstdint>

#include "optim/half_type.h"
#include "optim/simd_path.h"

namespace ds::optim {

struct AdamHyperparams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool adamw_mode = true;       // decoupled weight decay (AdamW) vs L2 added to the gradient
  bool bias_correction = true;
};

// Per-optimizer step state: the step count and fp32 beta powers, advanced by one fp32 multiply per
// step as DeepSpeed does; recomputed with pow() when the step jumps or the betas change.
class AdamStepState {
 public:
  // Advances to `step` (1-based) for these betas; returns nothing, read beta1_t()/beta2_t().
  void advance(std::int64_t step, double beta1, double beta2);
  std::int64_t step() const { return step_; }
  float beta1_t() const { return beta1_t_; }
  float beta2_t() const { return beta2_t_; }

  // Checkpoints carry the exact fp32 powers so a resumed run continues the same multiply chain.
  struct Snapshot {
    std::int64_t step = 0;
    float beta1 = 0.0f, beta2 = 0.0f, beta1_t = 1.0f, beta2_t = 1.0f;
  };
  Snapshot snapshot() const { return {step_, beta1_, beta2_, beta1_t_, beta2_t_}; }
  void restore(const Snapshot& s) {
    step_ = s.step;
    beta1_ = s.beta1;
    beta2_ = s.beta2;
    beta1_t_ = s.beta1_t;
    beta2_t_ = s.beta2_t;
  }

 private:
  std::int64_t step_ = 0;
  float beta1_ = 0.0f, beta2_ = 0.0f;
  float beta1_t_ = 1.0f, beta2_t_ = 1.0f;
};

// One Adam update of n elements: p, m, v updated in place from g. Threads split the span.
void adam_update(float* p, const float* g, float* m, float* v, std::int64_t n,
                 const AdamHyperparams& h, const AdamStepState& s, const KernelOptions& o = {});

// The same update, also writing each new p to out.data[i] as bf16 (c10::BFloat16's rounding) or
// fp16 (c10::Half's) in the same pass: the 16-bit model copy without a second sweep over p.
void adam_update_copy_out(float* p, const float* g, float* m, float* v, std::int64_t n,
                          const AdamHyperparams& h, const AdamStepState& s, HalfSpan out,
                          const KernelOptions& o = {});

}  // namespace ds::optim
