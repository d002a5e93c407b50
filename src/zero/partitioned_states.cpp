#include "zero/partitioned_states.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>

#include "util/error.h"
#include "zero/collectives.h"
#include "zero/replicated_states.h"

namespace ds::zero {
namespace {

// Every partition starts 2-element aligned (DeepSpeed's nccl_start_alignment_factor) and each
// group stays 16-element aligned as at stage 0.
int64_t group_alignment(int world) { return std::lcm<int64_t>(16, 2 * int64_t(world)); }

// round_robin_gradients (DeepSpeed's _round_robin_reorder): within each param group, the i-th
// parameter goes to subset i % world and the subsets are laid out one after another, so the equal
// partitions cut from that buffer each hold about every world-th parameter. Backward then produces
// gradients for every rank's partition in turn, and the bucket reductions use every rank's link at
// once instead of one partition's owner after another.
std::vector<NamedParam> flat_order(const std::vector<NamedParam>& params, bool round_robin, int world) {
  if (!round_robin || world == 1) return params;
  std::vector<int> groups;  // in first-appearance order
  for (const auto& p : params)
    if (std::find(groups.begin(), groups.end(), p.param_group) == groups.end()) groups.push_back(p.param_group);
  std::vector<NamedParam> out;
  for (int g : groups) {
    std::vector<std::vector<const NamedParam*>> subsets(world);
    size_t i = 0;
    for (const auto& p : params)
      if (p.param_group == g) subsets[i++ % world].push_back(&p);
    for (const auto& subset : subsets)
      for (const NamedParam* p : subset) out.push_back(*p);
  }
  return out;
}

}  // namespace

FlatGroup partition_layout(const FlatGroup& group, const FlatPartition& partition, int rank) {
  FlatGroup out;
  out.param_group = group.param_group;
  out.dtype = group.dtype;
  out.padded_numel = partition.partition_size();
  const int64_t begin = partition.begin(rank);
  for (const auto& f : partition.fragments(rank, group.slots)) {
    ParamSlot s;
    s.name = group.slots[f.slot].name;
    s.shape = {f.numel};
    s.offset = f.flat_offset - begin;
    s.numel = f.numel;
    s.param_offset = f.flat_offset - group.slots[f.slot].offset;
    out.numel += f.numel;
    out.slots.push_back(std::move(s));
  }
  return out;
}

PartitionedStates::PartitionedStates(const ModelStatesOptions& o, const std::vector<NamedParam>& params)
    : config_(*o.config), comm_(*o.comm), stage_(o.zero.stage), plan_(o.plan),
      offload_(o.offload_gradients),
      flat_(FlatParameters::build(flat_order(params, o.config->zero_optimization.round_robin_gradients, o.comm->size()),
                                  {group_alignment(o.comm->size()), /*gradient_buffer=*/stage_ == 1})) {
  const int world = comm_.size(), rank = comm_.rank();
  account_compute_params(flat_, plan_, *o.ledger, o.tier);
  precision_ = std::make_unique<PrecisionBuffers>(flat_, plan_, *o.ledger, o.tier);
  torch::NoGradGuard no_grad;
  for (size_t g = 0; g < num_groups(); ++g) {
    const FlatGroup& fg = flat_.groups()[g];
    broadcast_from_rank0(comm_, precision_->storage(g), "broadcast_parameters");
    precision_->refresh_compute(g);
    partitions_.emplace_back(fg.padded_numel, world);
    DS_ASSERT(partitions_.back().padded_numel() == fg.padded_numel, "group padding covers the partition padding");
    layouts_.push_back(partition_layout(fg, partitions_.back(), rank));
  }
  reduced_.resize(num_groups());
  if (config_.zero_overlap_param_gather && world > 1) {
    if (o.layers == nullptr)
      throw ConfigError("zero_overlap_param_gather",
                        "true needs a model that exposes a ds::nn::LayerList (a layers() method returning it): before "
                        "each layer runs, its hooks wait for that layer's gathered parameters. Give the model one, or "
                        "set it false");
    if (o.layers->hooks() != nullptr)
      throw ConfigError("zero_overlap_param_gather",
                        "true needs the model's LayerList hooks, and something else already installed hooks on it");
    layers_ = o.layers;
    gather_comm_ = comm_.split(0, rank, "split_param_gather");
    gather_ = std::make_shared<OverlappedParamGather>(*gather_comm_, flat_, *precision_, *layers_,
                                                      config_.zero_optimization.allgather_bucket_size);
    layers_->set_hooks(gather_);
    o.ledger->add(o.tier, MemKind::Buffers, gather_->staging_bytes());
  } else {
    streamed_ = std::make_unique<StreamedParamGather>(comm_, *precision_, partitions_,
                                                      config_.zero_optimization.allgather_bucket_size);
  }
  if (!config_.zero_optimization.ignore_unused_parameters) {
    std::vector<std::string> names;
    std::vector<torch::Tensor> tensors;
    for (const auto& p : params) {
      names.push_back(p.name);
      tensors.push_back(p.param);
    }
    unused_ = std::make_unique<UnusedParameterCheck>(std::move(names), tensors);
  }
  if (stage_ == 1) {
    for (size_t g = 0; offload_ && g < num_groups(); ++g) {
      host_grads_.push_back(offload::host_zeros(partitions_[g].partition_size(), torch::kFloat32, o.host));
      o.ledger->add(Tier::Cpu, MemKind::Grads, partitions_[g].partition_size() * sizeof(float));
    }
    return;
  }
  for (size_t g = 0; g < num_groups(); ++g) {
    const int64_t n = partitions_[g].partition_size();
    if (offload_) {  // accumulated in fp32 on the host as buckets are reduced (DeepSpeed's CPU offload)
      part_accum_.push_back(offload::host_zeros(n, torch::kFloat32, o.host));
      o.ledger->add(Tier::Cpu, MemKind::Grads, n * sizeof(float));
    } else {
      part_accum_.push_back(torch::zeros({n}, torch::TensorOptions().dtype(plan_.grad_accum)));
      o.ledger->add(o.tier, MemKind::Grads, n * c10::elementSize(plan_.grad_accum));
    }
  }
  // Buckets follow the model's order (reversed: backward's), whatever the flat layout: param groups
  // and round_robin_gradients interleave it, and a bucket waiting for gradients from all over the
  // model would be reduced only at the end of backward.
  std::unordered_map<std::string, std::pair<size_t, size_t>> slot_named;
  for (size_t g = 0; g < num_groups(); ++g)
    for (size_t s = 0; s < flat_.groups()[g].slots.size(); ++s) slot_named.emplace(flat_.groups()[g].slots[s].name, std::pair{g, s});
  std::vector<torch::Tensor> ordered;
  for (const auto& p : params) {
    const auto [g, s] = slot_named.at(p.name);
    ordered.push_back(flat_.groups()[g].slots[s].param);
    slot_of_.emplace_back(g, s);
  }
  buckets_ = std::make_unique<GradientBuckets>(
      std::move(ordered), config_.zero_optimization.reduce_bucket_size, plan_.model, plan_.communication,
      config_.zero_optimization.overlap_comm,
      [this](size_t i, const Bucket& b, const torch::Tensor& packed) { return reduce_bucket(i, b, packed); });
  if (o.sub_group_steps > 0) {
    std::vector<int64_t> spans;
    for (const auto& part : partitions_) spans.push_back(part.partition_size());
    tracker_ = std::make_unique<SubGroupTracker>(spans, o.sub_group_steps, buckets_->buckets().size());
    for (size_t b = 0; b < buckets_->buckets().size(); ++b) {
      const auto pieces = pieces_of(buckets_->buckets()[b]);  // named: a range-for would not extend it
      for (const auto& p : pieces[comm_.rank()]) tracker_->touches(b, p.group, p.part_offset, p.part_offset + p.numel);
    }
  }
  // Each live bucket: its packed gradients and their per-rank packing for the reduce-scatter.
  o.ledger->add(o.tier, MemKind::Buffers,
                2 * buckets_->live_numel_bound() * c10::elementSize(plan_.communication));
}

PartitionedStates::~PartitionedStates() {
  // The LayerList belongs to the model, which may outlive the states.
  if (layers_ != nullptr && layers_->hooks() == gather_.get()) layers_->set_hooks(nullptr);
}

std::vector<const comm::Communicator*> PartitionedStates::own_communicators() const {
  if (gather_comm_) return {gather_comm_.get()};
  return {};
}

void PartitionedStates::settle_params() {
  if (gather_) gather_->finish();
}

torch::Tensor PartitionedStates::accumulated_grad(const std::string& name) {
  if (stage_ != 1) return ModelStates::accumulated_grad(name);
  return precision_->accum_of(name);
}

void PartitionedStates::after_backward() {
  if (stage_ == 1) {
    precision_->accumulate();
    return;
  }
  buckets_->finish();
  if (tracker_) tracker_->finish();
}

std::vector<std::vector<PartitionedStates::Piece>> PartitionedStates::pieces_of(const Bucket& bucket) const {
  const int world = comm_.size();
  std::vector<std::vector<Piece>> pieces(world);
  for (const auto& e : bucket.entries) {
    auto [g, s] = slot_of_[e.param];
    const ParamSlot& slot = flat_.groups()[g].slots[s];
    const FlatPartition& part = partitions_[g];
    for (int q = 0; q < world; ++q) {
      const int64_t lo = std::max(slot.offset, part.begin(q)), hi = std::min(slot.offset + slot.numel, part.end(q));
      if (lo < hi) pieces[q].push_back({g, lo - part.begin(q), e.offset + (lo - slot.offset), hi - lo});
    }
  }
  return pieces;
}

bool PartitionedStates::arm_sub_group_steps(std::function<void(size_t, int64_t, int64_t)> ready) {
  if (!tracker_) return false;
  tracker_->arm(std::move(ready));
  return true;
}

GradientBuckets::Finisher PartitionedStates::reduce_bucket(size_t index, const Bucket& bucket, const torch::Tensor& packed) {
  // Cut every gradient in the bucket at the partition boundaries; rank q's pieces can be packed
  // into chunk q (zero-padded to the longest chunk) and the chunks reduce-scattered, so each rank
  // receives only the averaged pieces of its own partition. A bucket inside one rank's partition
  // (most of them: partitions are long contiguous ranges) is instead reduced to that rank, as
  // DeepSpeed's average_tensor does: only the others send, and nothing is padded.
  const int world = comm_.size(), rank = comm_.rank();
  auto pieces = pieces_of(bucket);
  std::vector<int64_t> chunk_len(world, 0);
  for (int q = 0; q < world; ++q)
    for (const auto& p : pieces[q]) chunk_len[q] += p.numel;
  const int64_t len = *std::max_element(chunk_len.begin(), chunk_len.end());
  if (len == 0) return [this, index] {
      if (tracker_) tracker_->bucket_done(index);
    };
  const Averaging avg{config_.gradient_predivide_factor, config_.prescale_gradients};
  const auto owner = std::find_if(chunk_len.begin(), chunk_len.end(), [](int64_t n) { return n > 0; });
  const bool one_owner = std::count(chunk_len.begin(), chunk_len.end(), int64_t{0}) == world - 1;
  // Otherwise a reduce-scatter of the per-rank packing moves (world-1)·len elements per rank, an
  // all-reduce of the bucket 2·(world-1)/world·numel. All give every owner the same averaged values.
  const bool to_owner = config_.zero_optimization.reduce_scatter && one_owner;
  const bool scatter = config_.zero_optimization.reduce_scatter && !to_owner && len * world <= 2 * bucket.numel;
  torch::Tensor wire = packed;
  if (scatter) {
    wire = torch::zeros({len * world}, packed.options());
    for (int q = 0; q < world; ++q) {
      int64_t at = q * len;
      for (auto& p : pieces[q]) {
        wire.narrow(0, at, p.numel).copy_(packed.narrow(0, p.bucket_offset, p.numel));
        p.bucket_offset = at;  // where the piece now lives in `wire`
        at += p.numel;
      }
    }
  }
  GradientBuckets::Finisher reduced =
      to_owner  ? reduce_average_async(comm_, wire, static_cast<int>(owner - chunk_len.begin()), avg, "reduce_gradients")
      : scatter ? reduce_scatter_average_async(comm_, wire, avg, "reduce_scatter_gradients")
                : allreduce_average_async(comm_, wire, avg, "allreduce_gradients");
  return [this, index, wire, reduced, mine = std::move(pieces[rank])] {
    if (reduced) reduced();
    torch::NoGradGuard no_grad;
    for (const auto& p : mine) {  // empty on the ranks a reduce to its owner left out
      auto& acc = part_accum_[p.group];
      acc.narrow(0, p.part_offset, p.numel).add_(wire.narrow(0, p.bucket_offset, p.numel).to(acc.scalar_type()));
    }
    if (tracker_) tracker_->bucket_done(index);
  };
}

void PartitionedStates::reduce_gradients() {
  if (unused_) unused_->verify(comm_);  // before the optimizer steps anything
  if (stage_ != 1) return;
  torch::NoGradGuard no_grad;
  const Averaging avg{config_.gradient_predivide_factor, config_.prescale_gradients};
  for (size_t g = 0; g < num_groups(); ++g) {
    torch::Tensor& acc = precision_->accum(g);
    torch::Tensor wire = acc.scalar_type() == plan_.communication ? acc : acc.to(plan_.communication);
    reduce_scatter_average(comm_, wire, avg, config_.zero_optimization.reduce_bucket_size, "reduce_scatter_gradients");
    const FlatPartition& part = partitions_[g];
    reduced_[g] = wire.narrow(0, part.begin(comm_.rank()), part.partition_size());
    if (offload_) reduced_[g] = host_grads_[g].copy_(reduced_[g]);  // device → host, as fp32
  }
}

torch::Tensor PartitionedStates::local_params(size_t g) const {
  const FlatPartition& part = partitions_[g];
  return precision_->storage(g).narrow(0, part.begin(comm_.rank()), part.partition_size());
}

torch::Tensor PartitionedStates::local_grads(size_t g) const {
  const torch::Tensor& t = stage_ == 1 ? reduced_[g] : part_accum_[g];
  DS_ASSERT(t.defined(), "gradients are reduced before they are read");
  return t.scalar_type() == torch::kFloat32 ? t : t.to(torch::kFloat32);
}

void PartitionedStates::write_back(const std::vector<torch::Tensor>& masters) {
  for (size_t g = 0; g < num_groups(); ++g) write_back_range(g, 0, masters[g]);
  finish_write_back();
}

std::vector<int64_t> PartitionedStates::write_back_pieces() const {
  std::vector<int64_t> pieces(num_groups(), 0);
  for (size_t g = 0; streamed_ && g < num_groups(); ++g) pieces[g] = streamed_->chunk(g);
  return pieces;
}

void PartitionedStates::write_back_range(size_t g, int64_t offset, const torch::Tensor& master) {
  torch::NoGradGuard no_grad;
  settle_params();  // the last step's gather, if no forward waited for it
  auto mine = local_params(g).narrow(0, offset, master.numel());
  if (mine.data_ptr() != master.data_ptr()) mine.copy_(master);  // rounds to the model dtype
  if (streamed_) return streamed_->updated(g, offset, master.numel());
  // zero_overlap_param_gather: the others' partitions arrive behind the next forward.
  precision_->refresh_compute(g, partitions_[g].begin(comm_.rank()) + offset, master.numel());
}

void PartitionedStates::finish_write_back() {
  if (streamed_) return streamed_->finish();
  gather_->start();
}

void PartitionedStates::zero_grads() {
  precision_->zero_grads();
  for (auto& t : part_accum_) t.zero_();
  for (auto& t : reduced_) t = torch::Tensor();
}

}  // namespace ds::zero
