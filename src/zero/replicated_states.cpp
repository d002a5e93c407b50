#include "zero/replicated_states.h"

#include "zero/collectives.h"

namespace ds::zero {

void account_compute_params(const FlatParameters& flat, const DtypePlan& plan, MemoryLedger& ledger, Tier tier) {
  ledger.add(tier, plan.model == plan.compute ? MemKind::Params : MemKind::Buffers, flat.param_bytes());
  ledger.add(tier, MemKind::Grads, flat.grad_bytes());
}

ReplicatedStates::ReplicatedStates(const ModelStatesOptions& o, const std::vector<NamedParam>& params)
    : config_(*o.config), comm_(*o.comm), flat_(FlatParameters::build(params, {})) {
  account_compute_params(flat_, o.plan, *o.ledger, o.tier);
  precision_ = std::make_unique<PrecisionBuffers>(flat_, o.plan, *o.ledger, o.tier);
  torch::NoGradGuard no_grad;
  for (size_t g = 0; g < num_groups(); ++g) {  // DeepSpeed: replicas start equal
    broadcast_from_rank0(comm_, precision_->storage(g), "broadcast_parameters");
    precision_->refresh_compute(g);
  }
}

void ReplicatedStates::reduce_gradients() {
  if (comm_.size() == 1) return;
  torch::NoGradGuard no_grad;
  const Averaging avg{config_.gradient_predivide_factor, config_.prescale_gradients};
  const auto wire_type = precision_->plan().communication;
  for (size_t g = 0; g < num_groups(); ++g) {
    torch::Tensor& acc = precision_->accum(g);
    // DeepSpeed casts to the communication dtype, reduces, and copies back.
    torch::Tensor wire = acc.scalar_type() == wire_type ? acc : acc.to(wire_type);
    allreduce_average(comm_, wire, avg, config_.zero_optimization.reduce_bucket_size, "allreduce_gradients");
    if (!wire.is_same(acc)) acc.copy_(wire);
  }
}

void ReplicatedStates::write_back(const std::vector<torch::Tensor>& masters) {
  for (size_t g = 0; g < num_groups(); ++g) precision_->write_back(g, masters[g]);
}

}  // namespace ds::zero
