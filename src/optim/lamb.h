// LAMB over flat fp32 spans with DeepSpeed FusedLamb's semantics (deepspeed/ops/lamb/fused_lamb.py,
// csrc/lamb/fused_lamb_cuda_kernel.cu), per parameter TENSOR:
//   m = b1*m + (1-b1)*g ;  v = b2*v + (1-b2)*g*g
//   u = m / (sqrt(v) + eps) + wd*p          (eps_inside_sqrt: m / sqrt(v + eps) + wd*p)
//   coeff = clamp(||p|| / ||u||, min_coeff, max_coeff), 1 when either norm is 0
//   p -= step_size * coeff * u,  step_size = lr * sqrt(1 - b2^t) / (1 - b1^t)  (lr without bias correction)
// Note the trust ratio uses the UNcorrected update: bias correction lives only in step_size.
// Norms are per tensor, so the call takes the flat span plus the tensors' (offset, numel) segments.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "config/optimizer_config.h"

namespace ds::optim {

struct LambHyperparams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool bias_correction = true;
  double max_coeff = 10.0;
  double min_coeff = 0.01;
  bool eps_inside_sqrt = false;

  // From the config's optimizer.params; throws ds::ConfigError for amsgrad (FusedLamb raises).
  static LambHyperparams from_config(const OptimizerParams& p);
};

// One parameter tensor inside the flat span: elements [offset, offset + numel).
struct LambSegment {
  std::int64_t offset = 0;
  std::int64_t numel = 0;
};

// Per-optimizer step count, 1-based once stepping; the caller increments it once per optimizer
// step before the step's update calls (FusedLamb: state['step'] += 1).
struct LambState {
  std::int64_t step = 0;
};

// One LAMB update of the segments of a span of n elements: p, m, v updated in place from g.
// Segments must lie inside [0, n), in increasing order, without overlap; elements outside every
// segment (padding) are left untouched. Returns each segment's trust ratio (FusedLamb's
// lamb_coeffs). The result does not depend on the thread count: norms are summed in double over
// fixed blocks in a fixed order.
std::vector<float> lamb_update(float* p, const float* g, float* m, float* v, std::int64_t n,
                               std::span<const LambSegment> segments, const LambHyperparams& h,
                               const LambState& s);

}  // namespace ds::optim
