// Bytes per tier and kind that one rank's model states will take, computed from the model's
// parameter sizes and the config without allocating anything — the same layout rules the stages
// use (flat alignment, partition padding, shard sizes, persistence, gradient buckets, offload). The
// engine checks its RAM budget with it at init, `ds-estimate` prints it, and a multi-rank test holds
// it equal to the ledger of real engines. Module buffers (non-parameters) are not included.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.h"
#include "util/memory_ledger.h"
#include "zero/dtype_plan.h"

namespace ds::zero {

struct EstimateInput {
  std::vector<int64_t> param_numels;  // trainable parameters, in model order, one param group
  int world = 1;
  DtypePlan plan;
  const Config* config = nullptr;     // zero_optimization, optimizer type
};

MemoryLedger estimate_model_states(const EstimateInput& in);

// The sizes (elements) of the gradient buckets GradientBuckets forms over these parameters.
std::vector<int64_t> gradient_bucket_sizes(const std::vector<int64_t>& param_numels, int64_t bucket_numel);

// Stage 3's persistent parameters (kept gathered): ShardedParameters' rule in model order, numel at
// most stage3_param_persistence_threshold until stage3_model_persistence_threshold is spent.
std::vector<bool> persistent_params(const std::vector<int64_t>& param_numels, const ZeroConfig& zero);

// fp32 state tensors per parameter the optimizer keeps (Adam 2, SGD with momentum 1, ...).
int optimizer_state_count(const Config& config);

}  // namespace ds::zero
