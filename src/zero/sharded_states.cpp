#include "zero/sharded_states.h"

#include <fmt/format.h>

#include "comm/gradients.h"
#include "util/error.h"
#include "zero/collectives.h"

namespace ds::zero {

ShardedStates::ShardedStates(const ModelStatesOptions& o, const std::vector<NamedParam>& params)
    : config_(*o.config), comm_(*o.comm), plan_(o.plan), layers_(o.layers) {
  DS_CHECK(layers_ != nullptr && !layers_->empty(), NotSupported,
           "zero_optimization.stage: ZeRO stage 3 needs to know when each parameter is used, and LibTorch "
           "modules have no forward hooks. Give the model a ds::nn::LayerList (a `layers()` method returning it, "
           "each layer naming the parameters it reads; see docs/zero.md) or use stage 1 or 2");
  params_ = std::make_unique<ShardedParameters>(comm_, plan_, config_.zero_optimization, params, *o.ledger, o.tier);
  coordinator_ = std::make_shared<ParamCoordinator>(*params_, *layers_, config_.zero_optimization);
  layers_->set_hooks(coordinator_);
  std::vector<torch::Tensor> tensors;
  for (size_t id = 0; id < params_->size(); ++id) tensors.push_back((*params_)[id].param);
  for (size_t g = 0; g < num_groups(); ++g) {
    const int64_t n = params_->storage(g).numel();
    part_accum_.push_back(torch::zeros({n}, torch::TensorOptions().dtype(plan_.grad_accum)));
    o.ledger->add(o.tier, MemKind::Grads, n * c10::elementSize(plan_.grad_accum));
  }
  buckets_ = std::make_unique<GradientBuckets>(
      std::move(tensors), config_.zero_optimization.reduce_bucket_size, plan_.model, plan_.communication,
      [this](const Bucket& b, torch::Tensor& packed) { reduce_bucket(b, packed); },
      [this](size_t id) { coordinator_->param_done(id); });
  // The bucket being filled and its rank-major packing for the reduce-scatter.
  o.ledger->add(o.tier, MemKind::Buffers, 2 * buckets_->max_bucket_numel() * c10::elementSize(plan_.communication));
}

ShardedStates::~ShardedStates() {
  if (layers_ != nullptr && layers_->hooks() == coordinator_.get()) layers_->set_hooks(nullptr);
}

void ShardedStates::after_backward() {
  buckets_->finish();
  coordinator_->end_pass();
}

void ShardedStates::reduce_bucket(const Bucket& bucket, torch::Tensor& packed) {
  const int world = comm_.size(), rank = comm_.rank();
  std::vector<comm::ConstBuffer> inputs;
  std::vector<comm::Buffer> outputs;
  std::vector<torch::Tensor> shards;
  for (const auto& e : bucket.entries) {
    const ShardedParam& p = (*params_)[e.param];
    shards.push_back(torch::empty({p.shard.valid(rank)}, packed.options()));
    inputs.emplace_back(as_buffer(packed.narrow(0, e.offset, e.numel)));
    outputs.push_back(as_buffer(shards.back()));
  }
  if (world > 1) {
    comm::reduce_scatter_coalesced(comm_, inputs, outputs, "reduce_scatter_gradients");
  } else {
    for (size_t k = 0; k < shards.size(); ++k) shards[k].copy_(packed.narrow(0, bucket.entries[k].offset, shards[k].numel()));
  }
  for (size_t k = 0; k < shards.size(); ++k) {
    const ShardedParam& p = (*params_)[bucket.entries[k].param];
    if (shards[k].numel() == 0) continue;
    auto& acc = part_accum_[p.group];
    acc.narrow(0, p.offset, shards[k].numel()).add_(shards[k].to(acc.scalar_type()));
  }
}

torch::Tensor ShardedStates::local_grads(size_t g) const {
  const auto& t = part_accum_[g];
  return t.scalar_type() == torch::kFloat32 ? t : t.to(torch::kFloat32);
}

void ShardedStates::write_back(const std::vector<torch::Tensor>& masters) {
  torch::NoGradGuard no_grad;
  for (size_t g = 0; g < num_groups(); ++g) {
    const auto& mine = params_->storage(g);
    if (mine.data_ptr() != masters[g].data_ptr()) mine.copy_(masters[g]);  // rounds to the model dtype
  }
  // Whatever stays gathered (persistent, unlisted, held by a guard) must show the new values.
  std::vector<size_t> gathered;
  for (size_t id = 0; id < params_->size(); ++id)
    if ((*params_)[id].gathered) gathered.push_back(id);
  params_->refresh(gathered);
}

void ShardedStates::zero_grads() {
  for (auto& t : part_accum_) t.zero_();
}

std::vector<size_t> ShardedStates::ids_of(const std::vector<std::string>& names) const {
  std::vector<size_t> ids;
  if (names.empty()) {
    for (size_t id = 0; id < params_->size(); ++id) ids.push_back(id);
    return ids;
  }
  for (const auto& n : names) {
    auto id = params_->find(n);
    DS_CHECK(id.has_value(), Error, fmt::format("GatheredParameters: '{}' is not a trainable parameter of the model", n));
    ids.push_back(*id);
  }
  return ids;
}

void ShardedStates::hold(const std::vector<std::string>& names) {
  auto ids = ids_of(names);
  params_->gather(ids);
  for (size_t id : ids) (*params_)[id].holds += 1;
}

void ShardedStates::unhold(const std::vector<std::string>& names) {
  for (size_t id : ids_of(names)) {
    auto& p = (*params_)[id];
    if (p.holds > 0) p.holds -= 1;
    params_->release(id);
  }
}

}  // namespace ds::zero
