#include "zero/model_states.h"

#include "util/error.h"
#include "zero/partitioned_states.h"
#include "zero/replicated_states.h"
#include "zero/sharded_states.h"

namespace ds::zero {

precision::GradientSpans ModelStates::gradient_spans() const {
  precision::GradientSpans grads;
  grads.partitioned = partitioned();
  for (size_t g = 0; g < num_groups(); ++g) {
    grads.flat.push_back(local_grads(g));
    for (const auto& s : local_layout(g).slots) grads.pieces.push_back({s.name, g, s.offset, s.numel});
  }
  return grads;
}

torch::Tensor ModelStates::accumulated_grad(const std::string& name) {
  throw NotSupported("ZeRO stage " + std::to_string(stage()) + " reduces gradients during backward: no accumulated "
                     "gradient of \"" + name + "\" to sum into (pipeline tied parameters need stage 0 or 1)");
}

void ModelStates::write_back_range(size_t g, int64_t offset, const torch::Tensor& master) {
  if (write_back_staging_.empty()) write_back_staging_.resize(num_groups());
  const int64_t n = local_layout(g).padded_numel;
  if (offset == 0 && master.numel() == n) {  // the whole span: no copy needed
    write_back_staging_[g] = master;
    return;
  }
  if (!write_back_staging_[g].defined()) write_back_staging_[g] = torch::zeros({n}, torch::kFloat32);
  write_back_staging_[g].narrow(0, offset, master.numel()).copy_(master);
}

void ModelStates::finish_write_back() {
  if (write_back_staging_.empty()) return;
  auto masters = std::move(write_back_staging_);
  write_back_staging_.clear();
  write_back(masters);
}

std::unique_ptr<ModelStates> make_model_states(const ModelStatesOptions& o, const std::vector<NamedParam>& params) {
  DS_ASSERT(o.config && o.comm && o.ledger, "model states need a config, a communicator and a ledger");
  switch (o.zero.stage) {
    case 0: return std::make_unique<ReplicatedStates>(o, params);
    case 1:
    case 2: return std::make_unique<PartitionedStates>(o, params);
    case 3: return std::make_unique<ShardedStates>(o, params);
  }
  throw ConfigError("zero_optimization.stage", "must be 0, 1, 2 or 3");
}

}  // namespace ds::zero
