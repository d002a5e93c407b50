#include "zero/sharded_params.h"

#include <fmt/format.h>

#include <limits>
#include <map>

#include "comm/work.h"
#include "util/error.h"
#include "zero/collectives.h"

namespace ds::zero {


ShardedParameters::ShardedParameters(comm::Communicator& comm, const DtypePlan& plan, const ZeroConfig& zero,
                                     const std::vector<NamedParam>& params, MemoryLedger& ledger, Tier tier)
    : comm_(comm), plan_(plan), ledger_(ledger), tier_(tier) {
  const int world = comm.size(), rank = comm.rank();
  torch::NoGradGuard no_grad;
  std::map<int, size_t> group_of;  // user param group → optimizer group, in group order
  for (const auto& np : params) group_of.emplace(np.param_group, 0);
  size_t next = 0;
  for (auto& [pg, g] : group_of) g = next++;
  layouts_.resize(group_of.size());
  for (auto& [pg, g] : group_of) layouts_[g].param_group = pg;
  std::vector<int64_t> group_numel(group_of.size(), 0);
  int64_t persistent_total = 0;
  for (const auto& np : params) {
    ShardedParam p;
    p.name = np.name;
    p.param = np.param;
    p.shape = np.param.sizes().vec();
    p.numel = np.param.numel();
    p.shard = shard_parameter(p.numel, world);
    p.group = group_of.at(np.param_group);
    p.offset = group_numel[p.group];
    group_numel[p.group] += p.shard.shard_size;
    // DeepSpeed: persistent when numel <= the threshold, until the model-wide budget is spent.
    p.persistent = p.numel <= zero.param_persistence_threshold &&
                   persistent_total + p.numel <= zero.model_persistence_threshold;
    if (p.persistent) persistent_total += p.numel;
    DS_CHECK(index_.emplace(p.name, params_.size()).second, Error,
             fmt::format("parameter name '{}' appears twice", p.name));
    params_.push_back(std::move(p));
  }
  pending_.assign(params_.size(), false);
  for (size_t g = 0; g < group_numel.size(); ++g) {
    storage_.push_back(torch::zeros({group_numel[g]}, torch::TensorOptions().dtype(plan_.model)));
    ledger_.add(tier_, MemKind::Params, group_numel[g] * c10::elementSize(plan_.model));
    layouts_[g].dtype = plan_.model;
    layouts_[g].padded_numel = group_numel[g];
  }
  for (auto& p : params_) {
    // Replicas start equal (DeepSpeed broadcasts at init), then each keeps its shard.
    auto full = p.param.detach().contiguous();
    broadcast_from_rank0(comm_, full, "broadcast_parameters");
    const int64_t valid = p.shard.valid(rank);
    if (valid > 0)
      storage_[p.group].narrow(0, p.offset, valid).copy_(full.reshape({-1}).narrow(0, p.shard.begin(rank), valid));
    FlatGroup& layout = layouts_[p.group];
    layout.slots.push_back({p.name, {valid}, p.offset, valid, {}, p.shard.begin(rank)});
    layout.numel += valid;
    if (p.persistent) {
      // The model computes with exactly the rounded values the shards hold.
      set_full(p, full.to(plan_.model).to(plan_.compute));
      ledger_.add(tier_, MemKind::Params, p.numel * c10::elementSize(plan_.compute));
    } else {
      set_released(p);
    }
  }
}

ShardedParameters::~ShardedParameters() = default;

std::optional<size_t> ShardedParameters::find(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

int64_t ShardedParameters::numel() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p.numel;
  return n;
}

void ShardedParameters::set_full(ShardedParam& p, torch::Tensor full) {
  p.param.set_data(full.view(p.shape));
  p.gathered = true;
}

void ShardedParameters::set_released(ShardedParam& p) {
  auto nan = torch::full({1}, std::numeric_limits<float>::quiet_NaN(), torch::TensorOptions().dtype(plan_.compute));
  p.param.set_data(nan.expand(p.shape));
  p.gathered = false;
}

std::unique_ptr<ShardedParameters::Pending> ShardedParameters::gather_async(const std::vector<size_t>& ids) {
  auto pending = std::make_unique<Pending>();
  for (size_t id : ids) {
    if (params_[id].gathered || pending_[id]) continue;
    pending->offsets.push_back(pending->chunk);
    pending->chunk += params_[id].shard.shard_size;
    pending->ids.push_back(id);
    pending_[id] = true;
  }
  if (pending->ids.empty()) return pending;
  const int world = comm_.size();
  auto opts = torch::TensorOptions().dtype(plan_.model);
  pending->recv = torch::empty({pending->chunk * world}, opts);
  pending->send = pending->recv.narrow(0, comm_.rank() * pending->chunk, pending->chunk);  // in place
  for (size_t k = 0; k < pending->ids.size(); ++k) {
    const ShardedParam& p = params_[pending->ids[k]];
    pending->send.narrow(0, pending->offsets[k], p.shard.shard_size)
        .copy_(storage_[p.group].narrow(0, p.offset, p.shard.shard_size));
  }
  if (world > 1) pending->work = comm_.all_gather_async(as_buffer(pending->send), as_buffer(pending->recv), "gather_parameters");
  return pending;
}

void ShardedParameters::finish(std::unique_ptr<Pending> pending) {
  if (!pending || pending->ids.empty()) return;
  pending->work.wait();
  torch::NoGradGuard no_grad;
  const int world = comm_.size();
  auto ranks = pending->recv.view({world, pending->chunk});
  for (size_t k = 0; k < pending->ids.size(); ++k) {
    ShardedParam& p = params_[pending->ids[k]];
    pending_[pending->ids[k]] = false;
    // [world, shard] → the parameter's elements in order, without the tail padding.
    auto full = ranks.narrow(1, pending->offsets[k], p.shard.shard_size).reshape({-1}).narrow(0, 0, p.numel);
    full = full.to(plan_.compute, /*non_blocking=*/false, /*copy=*/true).contiguous();
    set_full(p, full);
    if (!p.persistent) {
      live_numel_ += p.numel;
      peak_live_numel_ = std::max(peak_live_numel_, live_numel_);
      ledger_.add(tier_, MemKind::Buffers, p.numel * c10::elementSize(plan_.compute));
    }
  }
}

void ShardedParameters::refresh(const std::vector<size_t>& ids) {
  std::vector<size_t> again;
  for (size_t id : ids) {
    ShardedParam& p = params_[id];
    if (!p.gathered) continue;
    if (!p.persistent) {  // finish() counts it live again
      live_numel_ -= p.numel;
      ledger_.release(tier_, MemKind::Buffers, p.numel * c10::elementSize(plan_.compute));
    }
    p.gathered = false;
    again.push_back(id);
  }
  gather(again);
}

void ShardedParameters::release(size_t id) {
  ShardedParam& p = params_[id];
  if (!p.gathered || p.persistent || p.holds > 0) return;
  set_released(p);
  live_numel_ -= p.numel;
  ledger_.release(tier_, MemKind::Buffers, p.numel * c10::elementSize(plan_.compute));
}

}  // namespace ds::zero
