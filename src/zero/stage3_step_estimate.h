// What stage 3 gathers during a step, on top of the model states at rest (zero/memory_estimate.h):
// the ParamCoordinator's rules replayed over the model's layers without running anything. A forward
// gathers layer 0..n-1 and releases each after it unless the trace reuses it within
// stage3_max_reuse_distance; a backward gathers n-1..0 and releases a parameter once its last use has
// its gradient. The first pass keeps nothing (no trace yet); later passes keep what the distance
// allows: with DeepSpeed's default (1e9) a model under a billion parameters holds its whole compute
// copy from forward to backward. A prefetch counts once it lands, when the layer before is released,
// so it adds nothing here (its receive buffer, at most stage3_prefetch_bucket_size, comes on top).
// ds-estimate prints it; a test holds it equal to real engines' peak.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "config/zero_config.h"

namespace ds::zero {

struct Stage3StepInput {
  std::vector<int64_t> param_numels;             // trainable parameters, in model order
  std::vector<std::vector<size_t>> layer_params;  // per LayerList layer: indices into param_numels
};

// The most non-persistent parameter elements gathered at once during a step (ShardedParameters'
// peak_live_numel); times the compute dtype's size it is what the step adds to the at-rest bytes.
int64_t stage3_peak_gathered_numel(const Stage3StepInput& in, const ZeroConfig& zero);

}  // namespace ds::zero
