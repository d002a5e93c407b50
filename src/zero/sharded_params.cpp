#include "zero/sharded_params.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

#include "comm/quantize.h"
#include "comm/work.h"
#include "util/error.h"
#include "util/logging.h"
#include "zero/collectives.h"

namespace ds::zero {
namespace {

// DeepSpeed's folder name: <dtype>params, e.g. "bfloat16params".
std::string dtype_folder_name(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat16: return "float16";
    case torch::kBFloat16: return "bfloat16";
    default: return "float32";
  }
}

}  // namespace

ShardedParameters::ShardedParameters(comm::Communicator& comm, const DtypePlan& plan, const ZeroConfig& zero,
                                     const std::vector<NamedParam>& params, MemoryLedger& ledger, Tier tier,
                                     const AioConfig* aio, comm::Communicator* hpz)
    : comm_(comm), quantized_(zero.zero_quantized_weights && comm.size() > 1), hpz_(hpz), plan_(plan), ledger_(ledger),
      tier_(tier) {
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
  group_ids_.resize(group_numel.size());
  for (size_t id = 0; id < params_.size(); ++id) group_ids_[params_[id].group].push_back(id);
  if (tier_ == Tier::Nvme) {
    DS_ASSERT(aio != nullptr, "stage 3 on NVMe needs the aio section");
    setup_swapper(zero, *aio);
  }
  for (size_t g = 0; g < group_numel.size(); ++g) {
    if (tier_ != Tier::Nvme) storage_.push_back(torch::zeros({group_numel[g]}, torch::TensorOptions().dtype(plan_.model)));
    ledger_.add(tier_, MemKind::Params, group_numel[g] * c10::elementSize(plan_.model));
    layouts_[g].dtype = plan_.model;
    layouts_[g].padded_numel = group_numel[g];
  }
  for (size_t id = 0; id < params_.size(); ++id) {
    ShardedParam& p = params_[id];
    // Replicas start equal (DeepSpeed broadcasts at init), then each keeps its shard.
    auto full = p.param.detach().contiguous();
    broadcast_from_rank0(comm_, full, "broadcast_parameters");
    const int64_t valid = p.shard.valid(rank);
    auto mine = full.reshape({-1}).narrow(0, p.shard.begin(rank), valid);
    if (swapper_) {  // the shard goes to its file; the padded tail is written as zeros
      aio::AlignedBuffer b = swapper_->write_buffer(id);
      torch::from_blob(b.data(), {valid}, torch::TensorOptions().dtype(plan_.model)).copy_(mine);
      swapper_->write_async(id, std::move(b));
    } else if (valid > 0) {
      storage_[p.group].narrow(0, p.offset, valid).copy_(mine);
    }
    FlatGroup& layout = layouts_[p.group];
    layout.slots.push_back({p.name, {valid}, p.offset, valid, {}, p.shard.begin(rank)});
    layout.numel += valid;
    if (hpz_ && !p.persistent) {  // persistent parameters are never released: no secondary needed
      const int64_t h = hpz_->size();
      p.secondary = torch::zeros({(p.numel + h - 1) / h}, torch::TensorOptions().dtype(plan_.model));
      // With the shards on NVMe the secondary stays in host memory (DeepSpeed's NVMe secondary is a TODO).
      ledger_.add(tier_ == Tier::Nvme ? Tier::Cpu : tier_, MemKind::Params, p.secondary.numel() * c10::elementSize(plan_.model));
    }
    if (p.persistent) {
      // The model computes with exactly the rounded values the shards hold.
      set_full(p, full.to(plan_.model).to(plan_.compute));
      ledger_.add(Tier::Device, MemKind::Params, p.numel * c10::elementSize(plan_.compute));  // with the module
    } else {
      set_released(p);
    }
  }
  if (swapper_) {  // the initial shards are on disk; the per-phase report counts training traffic only
    swapper_->flush();
    swapper_->reset_stats();
  }
}

ShardedParameters::~ShardedParameters() = default;

void ShardedParameters::setup_swapper(const ZeroConfig& zero, const AioConfig& aio) {
  const OffloadParamConfig& c = zero.offload_param;
  if (!c.nvme_path) throw ConfigError("zero_optimization.offload_param.nvme_path", "required when device is \"nvme\"");
  offload::ParamSwapperOptions o;
  o.nvme_path = *c.nvme_path;
  o.rank = comm_.rank();
  o.dtype_name = dtype_folder_name(plan_.model);
  o.element_size = static_cast<int64_t>(c10::elementSize(plan_.model));
  o.buffer_count = c.buffer_count;
  o.buffer_size = c.buffer_size;
  for (const auto& p : params_) {
    o.names.push_back(p.name);
    o.shard_numel.push_back(p.shard.shard_size);
  }
  aio_ = std::make_unique<aio::AioEngine>(aio::AioOptions::from_config(aio));
  swapper_ = std::make_unique<offload::ParamSwapper>(*aio_, std::move(o));
  log::info("ZeRO-Infinity: {} parameter shard(s) of this rank on NVMe under {} (aio backend {})", params_.size(),
            swapper_->directory(), aio::to_string(aio_->backend()));
}

int64_t ShardedParameters::slot_align() const {
  return swapper_ ? aio::kAlignment / static_cast<int64_t>(c10::elementSize(plan_.model)) : 1;
}

torch::Tensor ShardedParameters::storage(size_t g) const { return read_range(g, 0, layouts_[g].padded_numel); }

torch::Tensor ShardedParameters::read_range(size_t g, int64_t offset, int64_t n) const {
  if (!swapper_) return storage_[g].narrow(0, offset, n);
  const auto opts = torch::TensorOptions().dtype(plan_.model);
  auto out = torch::zeros({n}, opts);
  for (size_t id : group_ids_[g]) {
    const ShardedParam& p = params_[id];
    const int64_t lo = std::max(offset, p.offset), hi = std::min(offset + n, p.offset + p.shard.shard_size);
    if (lo >= hi) continue;
    aio::AlignedBuffer b(swapper_->shard_bytes(id));
    swapper_->wait_read(swapper_->read_async(id, b.data()));
    out.narrow(0, lo - offset, hi - lo)
        .copy_(torch::from_blob(b.data(), {p.shard.shard_size}, opts).narrow(0, lo - p.offset, hi - lo));
  }
  return out;
}

void ShardedParameters::write_range(size_t g, int64_t offset, const torch::Tensor& master) {
  torch::NoGradGuard no_grad;
  const int64_t n = master.numel();
  if (!swapper_) {
    auto dst = storage_[g].narrow(0, offset, n);
    if (dst.data_ptr() != master.data_ptr()) dst.copy_(master);  // rounds to the model dtype
    return;
  }
  const int rank = comm_.rank();
  for (size_t id : group_ids_[g]) {
    const ShardedParam& p = params_[id];
    const int64_t valid = p.shard.valid(rank);
    const int64_t lo = std::max(offset, p.offset), hi = std::min(offset + n, p.offset + valid);
    if (lo >= hi) continue;
    PartialWrite& w = partial_[id];
    if (w.buffer.empty()) w.buffer = swapper_->write_buffer(id);
    torch::from_blob(w.buffer.data(), {p.shard.shard_size}, torch::TensorOptions().dtype(plan_.model))
        .narrow(0, lo - p.offset, hi - lo)
        .copy_(master.narrow(0, lo - offset, hi - lo));
    w.filled += hi - lo;
    if (w.filled == valid) {  // complete: write it while the optimizer goes on
      swapper_->write_async(id, std::move(w.buffer));
      partial_.erase(id);
    }
  }
}

void ShardedParameters::finish_writes() {
  for (auto& p : params_) p.secondary_valid = false;  // the shards changed: gathers go to them again
  if (!swapper_) return;
  DS_ASSERT(partial_.empty(), "stage 3 on NVMe: a write-back left parameter shards incomplete");
  swapper_->flush();
}

std::optional<offload::ParamSwapStats> ShardedParameters::swap_stats() const {
  if (!swapper_) return std::nullopt;
  return swapper_->stats();
}

void ShardedParameters::reset_swap_stats() {
  if (swapper_) swapper_->reset_stats();
}

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
  if (!p.placeholder.defined())
    p.placeholder = torch::full({1}, std::numeric_limits<float>::quiet_NaN(), torch::TensorOptions().dtype(plan_.compute));
  p.param.set_data(p.placeholder.expand(p.shape));
  p.gathered = false;
}

std::optional<size_t> ShardedParameters::released_at(const void* data) const {
  for (size_t id = 0; id < params_.size(); ++id) {
    const ShardedParam& p = params_[id];
    if (!p.gathered && p.placeholder.defined() && p.placeholder.data_ptr() == data) return id;
  }
  return std::nullopt;
}

std::unique_ptr<ShardedParameters::Pending> ShardedParameters::gather_async(const std::vector<size_t>& ids,
                                                                           GatherFor purpose) {
  auto pending = std::make_unique<Pending>();
  for (size_t id : ids) {
    if (params_[id].gathered || pending_[id]) continue;
    pending->ids.push_back(id);
    pending_[id] = true;
  }
  if (pending->ids.empty()) return pending;
  // hpZ: a backward gather stays inside the hpZ group when every parameter has its secondary.
  bool secondary = hpz_ != nullptr && purpose == GatherFor::Backward;
  for (size_t id : pending->ids) secondary = secondary && params_[id].secondary_valid;
  pending->comm = secondary ? hpz_ : &comm_;
  const bool from_disk = swapper_ && !secondary && !(quantized_ && purpose != GatherFor::Exact);
  const int64_t align = from_disk ? slot_align() : 1;
  for (size_t id : pending->ids) {
    const ShardedParam& p = params_[id];
    pending->offsets.push_back(pending->chunk);
    pending->sizes.push_back(secondary ? p.secondary.numel() : p.shard.shard_size);
    pending->chunk += round_up(pending->sizes.back(), align);
  }
  const int world = pending->comm->size();
  auto opts = torch::TensorOptions().dtype(plan_.model);
  if (quantized_ && purpose != GatherFor::Exact) return gather_quantized_async(std::move(pending));
  if (from_disk) {  // 4 KiB-aligned slots, so each shard is read from disk into its place
    auto buf = std::make_shared<aio::AlignedBuffer>(pending->chunk * world * int64_t(c10::elementSize(plan_.model)));
    pending->recv = torch::from_blob(buf->data(), {pending->chunk * world}, [buf](void*) {}, opts);
  } else {
    pending->recv = torch::empty({pending->chunk * world}, opts);
  }
  pending->send = pending->recv.narrow(0, pending->comm->rank() * pending->chunk, pending->chunk);  // in place
  for (size_t k = 0; k < pending->ids.size(); ++k) {
    auto slot = pending->send.narrow(0, pending->offsets[k], pending->sizes[k]);
    if (from_disk) {
      pending->swapper = swapper_.get();
      pending->reads.push_back(swapper_->read_async(pending->ids[k], slot.data_ptr()));
    }
    else slot.copy_(source(*pending, k));
  }
  // From disk the all-gather starts when the reads have landed (finish).
  if (world > 1 && !from_disk)
    pending->work = pending->comm->all_gather_async(as_buffer(pending->send), as_buffer(pending->recv),
                                                    secondary ? "gather_parameters_hpz" : "gather_parameters");
  return pending;
}

torch::Tensor ShardedParameters::source(const Pending& pending, size_t k) const {
  const ShardedParam& p = params_[pending.ids[k]];
  if (pending.comm != &comm_) return p.secondary;  // gathered inside the hpZ group
  // On NVMe (qwZ) the shard is read here, before it is quantized: no prefetch overlap with the disk.
  return read_range(p.group, p.offset, p.shard.shard_size);
}

void ShardedParameters::keep_secondary(ShardedParam& p) {
  if (!p.secondary.defined() || p.secondary_valid) return;
  torch::NoGradGuard no_grad;
  const int64_t size = p.secondary.numel(), begin = hpz_->rank() * size;
  const int64_t n = std::clamp<int64_t>(p.numel - begin, 0, size);
  if (n > 0) p.secondary.narrow(0, 0, n).copy_(p.param.detach().reshape({-1}).narrow(0, begin, n));
  p.secondary_valid = true;
}

std::unique_ptr<ShardedParameters::Pending> ShardedParameters::gather_quantized_async(std::unique_ptr<Pending> pending) {
  // The chunk is padded (zeros) to a multiple of 256 elements, so DeepSpeed's group search finds
  // groups of 256-8000 elements.
  pending->quantized = true;
  pending->chunk = round_up(pending->chunk, 256);
  pending->send = torch::zeros({pending->chunk}, torch::TensorOptions().dtype(plan_.model));
  for (size_t k = 0; k < pending->ids.size(); ++k)
    pending->send.narrow(0, pending->offsets[k], pending->sizes[k]).copy_(source(*pending, k));
  const int64_t world = pending->comm->size(), n = pending->chunk;
  pending->groups = comm::quant::group_count(n);
  const torch::Tensor values = pending->send.to(torch::kFloat32).contiguous();
  pending->qsend = torch::empty({n}, torch::kInt8);
  pending->scales = torch::empty({pending->groups}, torch::kFloat32);
  comm::quant::quantize_int8(values.data_ptr<float>(), n, pending->groups, pending->qsend.data_ptr<int8_t>(),
                             pending->scales.data_ptr<float>());
  pending->qrecv = torch::empty({n * world}, torch::kInt8);
  pending->scales_recv = torch::empty({pending->groups * world}, torch::kFloat32);
  const bool secondary = pending->comm != &comm_;
  pending->work = pending->comm->all_gather_async(
      comm::ConstBuffer(pending->qsend.data_ptr(), n, comm::ElemType::UInt8),
      comm::Buffer(pending->qrecv.data_ptr(), n * world, comm::ElemType::UInt8),
      secondary ? "gather_parameters_hpz_int8" : "gather_parameters_int8");
  pending->scale_work = pending->comm->all_gather_async(as_buffer(pending->scales), as_buffer(pending->scales_recv),
                                                        secondary ? "gather_parameters_hpz_scales" : "gather_parameters_scales");
  return pending;
}

void ShardedParameters::finish(std::unique_ptr<Pending> pending) {
  if (!pending || pending->ids.empty()) return;
  const int world = pending->comm->size();
  if (pending->quantized) {  // every rank's values, this one's included, as dequantized from the int8 gather
    pending->work.wait();
    pending->scale_work.wait();
    const int64_t n = pending->chunk * world;
    pending->recv = torch::empty({n}, torch::kFloat32);
    comm::quant::dequantize_int8(pending->qrecv.data_ptr<int8_t>(), n, pending->groups * world,
                                 pending->scales_recv.data_ptr<float>(), pending->recv.data_ptr<float>());
  }
  if (pending->swapper != nullptr) {
    while (!pending->reads.empty()) {  // popped first: each handle is waited exactly once
      const aio::IoHandle h = pending->reads.back();
      pending->reads.pop_back();
      swapper_->wait_read(h);
    }
    if (world > 1)
      pending->work = pending->comm->all_gather_async(as_buffer(pending->send), as_buffer(pending->recv), "gather_parameters");
  }
  pending->work.wait();
  torch::NoGradGuard no_grad;
  for (size_t k = 0; k < pending->ids.size(); ++k) {
    ShardedParam& p = params_[pending->ids[k]];
    pending_[pending->ids[k]] = false;
    // Rank r sent the parameter's elements [r·size, (r+1)·size) (the last one padded): one
    // contiguous copy per rank, straight into the compute-dtype tensor.
    auto full = torch::empty({p.numel}, torch::TensorOptions().dtype(plan_.compute));
    const int64_t size = pending->sizes[k];
    for (int r = 0; r < world; ++r) {
      const int64_t begin = r * size, n = std::clamp<int64_t>(p.numel - begin, 0, size);
      if (n > 0) full.narrow(0, begin, n).copy_(pending->recv.narrow(0, r * pending->chunk + pending->offsets[k], n));
    }
    set_full(p, full);
    if (!p.persistent) {
      live_numel_ += p.numel;
      peak_live_numel_ = std::max(peak_live_numel_, live_numel_);
      ledger_.add(Tier::Device, MemKind::Buffers, p.numel * c10::elementSize(plan_.compute));
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
      ledger_.release(Tier::Device, MemKind::Buffers, p.numel * c10::elementSize(plan_.compute));
    }
    p.gathered = false;
    again.push_back(id);
  }
  gather(again);
}

void ShardedParameters::release(size_t id) {
  ShardedParam& p = params_[id];
  if (!p.gathered || p.persistent || p.holds > 0) return;
  if (hpz_) keep_secondary(p);
  set_released(p);
  live_numel_ -= p.numel;
  ledger_.release(Tier::Device, MemKind::Buffers, p.numel * c10::elementSize(plan_.compute));
}

}  // namespace ds::zero
