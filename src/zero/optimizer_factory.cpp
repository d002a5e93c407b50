#include "zero/optimizer_factory.h"

namespace ds::zero {

std::unique_ptr<FlatOptimizer> make_flat_optimizer(const OptimizerInput& in, MemoryLedger& ledger) {
  const Config& c = *in.config;
  if (!c.optimizer) return nullptr;
  const ZeroPlan& plan = in.plan;
  ModelStates& states = *in.states;
  const bool nvme = plan.optimizer == Placement::Nvme;
  // Parameters and optimizer both on NVMe: the master is initialised sub-group by sub-group from
  // the parameter files (read_params below), never the whole partition in RAM.
  const bool streamed_init = nvme && states.params_on_nvme();
  std::vector<FlatGroup> layout;
  std::vector<torch::Tensor> storage;
  for (size_t g = 0; g < states.num_groups(); ++g) {
    layout.push_back(states.local_layout(g));
    storage.push_back(streamed_init ? torch::Tensor() : states.local_params(g));
  }
  MasterPlacement placement;
  placement.alias_fp32 = !plan.offloaded();
  placement.pinned = plan.offloaded() && in.pinned;
  placement.sub_group_size = plan.sub_group_size;
  if (nvme) {
    placement.nvme = &c.zero_optimization.offload_optimizer;
    placement.aio = c.aio;
    placement.zero_stage = plan.stage;
    placement.rank = in.rank;
    if (streamed_init)
      placement.read_params = [s = &states](size_t g, int64_t offset, int64_t numel) {
        return s->local_params_range(g, offset, numel);
      };
  }
  auto optimizer = std::make_unique<FlatOptimizer>(*c.optimizer, in.overrides, layout, storage, ledger,
                                                   plan.offloaded() ? Tier::Cpu : Tier::Device, plan.kernel_calls,
                                                   placement, in.data_parallel, in.kept_apart);
  states.reset_param_swap_stats();  // the optimizer's initial reads of the parameters are not training traffic
  return optimizer;
}

}  // namespace ds::zero
