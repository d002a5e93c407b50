#include "zero/sharded_states.h"

#include <fmt/format.h>

#include "comm/work.h"
#include "util/error.h"
#include "util/logging.h"
#include "zero/collectives.h"

namespace ds::zero {
namespace {

// ZeRO++ hpZ: the secondary partition's group, `size` consecutive ranks of `dp` (DeepSpeed's
// _create_zero_param_parallel_group), or nullptr when off. Collective over dp when on.
std::unique_ptr<comm::Communicator> make_hpz_group(int64_t size, comm::Communicator& dp) {
  if (size <= 1 || dp.size() == 1) return nullptr;
  if (size > dp.size() || dp.size() % size != 0)
    throw ConfigError("zero_optimization.zero_hpz_partition_size",
                      fmt::format("{} does not divide the {} data-parallel ranks into equal groups; use a divisor of "
                                  "{} (usually the ranks per node)",
                                  size, dp.size(), dp.size()));
  log::info("zero_hpz_partition_size (hpZ): a secondary parameter partition over groups of {} ranks; backward "
            "gathers stay inside them", size);
  return dp.split(int(dp.rank() / size), int(dp.rank() % size), "split_hpz");
}

// zero_optimization.memory_efficient_linear: the model's TpLinear layers (every projection of the
// built-in families) compute through nn::memory_efficient_linear, so a released weight is freed.
std::vector<std::shared_ptr<parallel::TpLinearImpl>> use_memory_efficient_linear(torch::nn::Module& module) {
  std::vector<std::shared_ptr<parallel::TpLinearImpl>> out;
  for (const auto& m : module.modules(/*include_self=*/false))
    if (auto linear = std::dynamic_pointer_cast<parallel::TpLinearImpl>(m); linear && !linear->memory_efficient()) {
      linear->set_memory_efficient(true);
      out.push_back(std::move(linear));
    }
  return out;
}

}  // namespace

ShardedStates::ShardedStates(const ModelStatesOptions& o, const std::vector<NamedParam>& params)
    : config_(*o.config), comm_(*o.comm), plan_(o.plan), layers_(o.layers) {
  DS_CHECK(layers_ != nullptr && !layers_->empty(), NotSupported,
           "zero_optimization.stage: ZeRO stage 3 needs to know when each parameter is used, and LibTorch "
           "modules have no forward hooks. Give the model a ds::nn::LayerList (a `layers()` method returning it, "
           "each layer naming the parameters it reads; see docs/zero.md) or use stage 1 or 2");
  // offload_param: the shards in host memory or in NVMe swap files instead of with the module.
  const Placement where = o.zero.params;
  const Tier shard_tier = where == Placement::Nvme ? Tier::Nvme : where == Placement::Cpu ? Tier::Cpu : o.tier;
  hpz_ = make_hpz_group(config_.zero_optimization.zero_hpz_partition_size, comm_);
  params_ = std::make_unique<ShardedParameters>(comm_, plan_, config_.zero_optimization, params, *o.ledger, shard_tier,
                                                &config_.aio, hpz_.get());
  qgz_ = QuantizedGradients::make(config_.zero_optimization, comm_, o.node, *params_);
  coordinator_ = std::make_shared<ParamCoordinator>(*params_, *layers_, config_.zero_optimization);
  layers_->set_hooks(coordinator_);
  if (config_.zero_optimization.memory_efficient_linear && o.module != nullptr)
    efficient_linears_ = use_memory_efficient_linear(*o.module);
  first_forward_watch_ = std::make_unique<ReleasedReadWatch>(*params_, [c = coordinator_.get()] { return c->running_layer(); });
  std::vector<torch::Tensor> tensors;
  for (size_t id = 0; id < params_->size(); ++id) tensors.push_back((*params_)[id].param);
  for (size_t g = 0; g < num_groups(); ++g) {
    const int64_t n = params_->layout(g).padded_numel;
    if (o.offload_gradients) {  // fp32 host partition, accumulated as buckets are reduced
      part_accum_.push_back(offload::host_zeros(n, torch::kFloat32, o.host));
      o.ledger->add(Tier::Cpu, MemKind::Grads, n * sizeof(float));
    } else {
      part_accum_.push_back(torch::zeros({n}, torch::TensorOptions().dtype(plan_.grad_accum)));
      o.ledger->add(o.tier, MemKind::Grads, n * c10::elementSize(plan_.grad_accum));
    }
  }
  buckets_ = std::make_unique<GradientBuckets>(
      std::move(tensors), config_.zero_optimization.reduce_bucket_size, plan_.model, plan_.communication,
      config_.zero_optimization.overlap_comm,
      [this](size_t i, const Bucket& b, const torch::Tensor& packed) { return reduce_bucket(i, b, packed); },
      [this](size_t id) { coordinator_->param_done(id); });
  if (o.sub_group_steps > 0) {
    std::vector<int64_t> spans;
    for (size_t g = 0; g < num_groups(); ++g) spans.push_back(params_->layout(g).padded_numel);
    tracker_ = std::make_unique<SubGroupTracker>(spans, o.sub_group_steps, buckets_->buckets().size());
    for (size_t b = 0; b < buckets_->buckets().size(); ++b)
      for (const auto& e : buckets_->buckets()[b].entries) {
        const ShardedParam& p = (*params_)[e.param];
        const int64_t valid = p.shard.valid(comm_.rank());
        if (valid > 0) tracker_->touches(b, p.group, p.offset, p.offset + valid);
      }
  }
  // Each live bucket: its packed gradients and their rank-major packing (≈ the same size).
  o.ledger->add(o.tier, MemKind::Buffers,
                2 * buckets_->live_numel_bound() * c10::elementSize(plan_.communication));
}

std::vector<const comm::Communicator*> ShardedStates::own_communicators() const {
  std::vector<const comm::Communicator*> out;
  if (qgz_) out = {&qgz_->nodes().local(), &qgz_->nodes().cross()};
  if (hpz_) out.push_back(hpz_.get());
  return out;
}

void ShardedStates::forward_started() {
  if (first_forward_watch_) first_forward_watch_->start();
}

void ShardedStates::forward_finished() {
  if (!first_forward_watch_) return;
  auto watch = std::move(first_forward_watch_);  // one forward is checked, whatever it finds
  watch->stop_and_check();
}

ShardedStates::~ShardedStates() {
  for (const auto& linear : efficient_linears_) linear->set_memory_efficient(false);
  if (layers_ != nullptr && layers_->hooks() == coordinator_.get()) layers_->set_hooks(nullptr);
}

void ShardedStates::after_backward() {
  buckets_->finish();
  if (tracker_) tracker_->finish();
  coordinator_->end_pass();
}

bool ShardedStates::arm_sub_group_steps(std::function<void(size_t, int64_t, int64_t)> ready) {
  if (!tracker_) return false;
  tracker_->arm(std::move(ready));
  return true;
}

GradientBuckets::Finisher ShardedStates::reduce_bucket(size_t index, const Bucket& bucket, const torch::Tensor& packed) {
  std::vector<BucketEntry> exact, quantized;
  for (const auto& e : bucket.entries) (qgz_ && qgz_->covers(e.param) ? quantized : exact).push_back(e);
  std::vector<GradientBuckets::Finisher> parts;
  if (!exact.empty()) parts.push_back(reduce_exact(exact, packed));
  if (!quantized.empty())
    parts.push_back(qgz_->reduce(quantized, packed, [this](size_t id, const torch::Tensor& g) { add_grad(id, g); }));
  return [this, index, parts = std::move(parts)] {
    for (const auto& finish : parts) finish();
    if (tracker_) tracker_->bucket_done(index);
  };
}

GradientBuckets::Finisher ShardedStates::reduce_exact(const std::vector<BucketEntry>& entries, const torch::Tensor& packed) {
  const int world = comm_.size(), rank = comm_.rank();
  // Rank-major packing: chunk q holds shard q of every gradient (zero tails).
  std::vector<int64_t> offset;  // of each entry's shard inside a chunk
  int64_t chunk = 0;
  for (const auto& e : entries) {
    offset.push_back(chunk);
    chunk += (*params_)[e.param].shard.shard_size;
  }
  auto wire = torch::zeros({chunk * world}, packed.options());
  for (int q = 0; q < world; ++q)
    for (size_t k = 0; k < entries.size(); ++k) {
      const auto& e = entries[k];
      const ParamShard& sh = (*params_)[e.param].shard;
      const int64_t valid = sh.valid(q);
      if (valid > 0) wire.narrow(0, q * chunk + offset[k], valid).copy_(packed.narrow(0, e.offset + sh.begin(q), valid));
    }
  auto mine = wire.narrow(0, rank * chunk, chunk);
  std::shared_ptr<comm::Work> work;
  if (world > 1) {
    wire.div_(world);  // DeepSpeed pre-divides the packed buffer by the world size
    work = std::make_shared<comm::Work>(comm_.reduce_scatter_async(as_buffer(wire), as_buffer(mine),
                                                                   comm::ReduceOp::Sum, "reduce_scatter_gradients"));
  }
  return [this, work, wire, mine, offset, entries, rank] {
    if (work) work->wait();
    for (size_t k = 0; k < entries.size(); ++k) {
      const int64_t valid = (*params_)[entries[k].param].shard.valid(rank);
      if (valid > 0) add_grad(entries[k].param, mine.narrow(0, offset[k], valid));
    }
  };
}

void ShardedStates::add_grad(size_t id, const torch::Tensor& shard) {
  torch::NoGradGuard no_grad;
  const ShardedParam& p = (*params_)[id];
  auto& acc = part_accum_[p.group];
  acc.narrow(0, p.offset, shard.numel()).add_(shard.to(acc.scalar_type()));
}

torch::Tensor ShardedStates::local_grads(size_t g) const {
  const auto& t = part_accum_[g];
  return t.scalar_type() == torch::kFloat32 ? t : t.to(torch::kFloat32);
}

void ShardedStates::write_back(const std::vector<torch::Tensor>& masters) {
  for (size_t g = 0; g < num_groups(); ++g) params_->write_range(g, 0, masters[g]);
  finish_write_back();
}

void ShardedStates::write_back_range(size_t g, int64_t offset, const torch::Tensor& master) {
  params_->write_range(g, offset, master);
}

void ShardedStates::finish_write_back() {
  params_->finish_writes();
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
