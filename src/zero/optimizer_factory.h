// The optimizer over a rank's model states, placed where the ZeRO plan says: aliasing the fp32
// parameters on the device, as a (pinned) host copy stepped by the CPU kernels (ZeRO-Offload), or
// in NVMe swap files streamed sub-group by sub-group (ZeRO-Infinity).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/zero_plan.h"
#include "util/memory_ledger.h"
#include "zero/flat_optimizer.h"
#include "zero/model_states.h"

namespace ds::zero {

struct OptimizerInput {
  const Config* config = nullptr;             // optimizer, offload_optimizer and aio sections
  ZeroPlan plan;
  ModelStates* states = nullptr;              // must outlive the optimizer (NVMe init reads from it)
  std::vector<GroupHyperparams> overrides;    // per param group
  bool pinned = false;                        // host buffers pinned (offload::HostMemoryPlan)
  int rank = 0;                               // world rank: the swap folder rank<R> (DeepSpeed's dist.get_rank())
  comm::Communicator* data_parallel = nullptr; // the 1-bit optimizers' exchange group
  std::vector<std::string> kept_apart;         // a pipeline stage's tied parameters (optim::ParamSpan::apart)
};

// nullptr when the config has no optimizer.
std::unique_ptr<FlatOptimizer> make_flat_optimizer(const OptimizerInput& in, MemoryLedger& ledger);

}  // namespace ds::zero
