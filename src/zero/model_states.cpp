#include "zero/model_states.h"

#include "util/error.h"
#include "zero/partitioned_states.h"
#include "zero/replicated_states.h"
#include "zero/sharded_states.h"

namespace ds::zero {

std::unique_ptr<ModelStates> make_model_states(const ModelStatesOptions& o, const std::vector<NamedParam>& params) {
  DS_ASSERT(o.config && o.comm && o.ledger, "model states need a config, a communicator and a ledger");
  switch (o.config->zero_optimization.stage) {
    case 0: return std::make_unique<ReplicatedStates>(o, params);
    case 1:
    case 2: return std::make_unique<PartitionedStates>(o, params);
    case 3: return std::make_unique<ShardedStates>(o, params);
  }
  throw ConfigError("zero_optimization.stage", "must be 0, 1, 2 or 3");
}

}  // namespace ds::zero
