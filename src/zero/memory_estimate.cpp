#include "zero/memory_estimate.h"

#include <algorithm>
#include <numeric>

#include "aio/aligned_buffer.h"
#include "config/zero_plan.h"
#include "zero/gradient_buckets.h"
#include "zero/partition.h"

namespace ds::zero {
namespace {

uint64_t size_of(torch::ScalarType t) { return c10::elementSize(t); }

}  // namespace

std::vector<int64_t> gradient_bucket_sizes(const std::vector<int64_t>& numels, int64_t bucket_numel) {
  // GradientBuckets: parameters in reverse order, a new bucket when the next would overflow.
  bucket_numel = std::max<int64_t>(1, bucket_numel);
  std::vector<int64_t> sizes;
  for (auto it = numels.rbegin(); it != numels.rend(); ++it) {
    if (sizes.empty() || (sizes.back() > 0 && sizes.back() + *it > bucket_numel)) sizes.push_back(0);
    sizes.back() += *it;
  }
  return sizes;
}

namespace {
// Elements of gradient buckets live at once (GradientBuckets::live_numel_bound): each live bucket
// holds its packed gradients and their per-rank packing (hence the callers' factor 2).
int64_t live_buckets(const std::vector<int64_t>& numels, const ZeroConfig& z) {
  return largest_buckets_numel(gradient_bucket_sizes(numels, z.reduce_bucket_size),
                               z.overlap_comm ? GradientBuckets::kMaxInFlight + 1 : 1);
}
}  // namespace

int optimizer_state_count(const Config& c) {
  if (!c.optimizer) return 0;
  switch (c.optimizer->type) {
    case OptimizerType::Adam:
    case OptimizerType::AdamW:
    case OptimizerType::Lamb: return 2;
    case OptimizerType::SGD: return c.optimizer->params.momentum != 0.0 ? 1 : 0;
    case OptimizerType::Adagrad:
    case OptimizerType::Lion: return 1;
    // The 1-bit family: both moments and a worker error buffer (+ the server's 1/p share, rounded
    // up here); 0/1 Adam adds its momentum accumulator, 1-bit LAMB its fresh variance.
    case OptimizerType::OneBitAdam: return 3;
    case OptimizerType::ZeroOneAdam:
    case OptimizerType::OneBitLamb: return 4;
  }
  return 0;
}

std::vector<bool> persistent_params(const std::vector<int64_t>& param_numels, const ZeroConfig& zero) {
  std::vector<bool> out;
  int64_t total = 0;
  for (int64_t numel : param_numels) {
    const bool p = numel <= zero.param_persistence_threshold && total + numel <= zero.model_persistence_threshold;
    if (p) total += numel;
    out.push_back(p);
  }
  return out;
}

MemoryLedger estimate_model_states(const EstimateInput& in) {
  MemoryLedger m;
  const Config& c = *in.config;
  const auto& z = c.zero_optimization;
  const DtypePlan& p = in.plan;
  const int n = std::max(1, in.world);
  const ZeroPlan plan = resolve_zero_plan(c);
  const int stage = plan.stage;
  const bool offload = plan.offloaded();
  const int64_t psi = std::accumulate(in.param_numels.begin(), in.param_numels.end(), int64_t{0});
  const uint64_t cs = size_of(p.compute), ms = size_of(p.model), as = size_of(p.grad_accum),
                 ws = size_of(p.communication);
  const Tier dev = Tier::Device, opt_tier = offload ? Tier::Cpu : Tier::Device;

  int64_t local = 0;  // elements of this rank's optimizer span
  bool master_aliases = false;
  if (stage <= 2) {
    // Flat group (compute dtype), 16-bit storage when the dtypes differ (PrecisionBuffers).
    const int64_t padded = round_up(psi, stage == 0 ? 16 : std::lcm<int64_t>(16, 2 * int64_t(n)));
    m.add(dev, p.model == p.compute ? MemKind::Params : MemKind::Buffers, padded * cs);
    if (p.model != p.compute) m.add(dev, MemKind::Params, padded * ms);
    if (stage <= 1) {  // the full gradient buffer (64-byte aligned) and the accumulation buffer
      m.add(dev, MemKind::Grads, round_up(padded * int64_t(cs), 64));
      const bool accum_aliases = p.grad_accum == p.compute && p.model == p.compute;
      if (!accum_aliases) m.add(dev, MemKind::Grads, padded * as);
      if (stage == 1 && offload) m.add(Tier::Cpu, MemKind::Grads, padded / n * 4);
    } else {
      m.add(offload ? Tier::Cpu : dev, MemKind::Grads, padded / n * (offload ? 4 : as));
      m.add(dev, MemKind::Buffers, 2 * live_buckets(in.param_numels, z) * ws);
    }
    local = stage == 0 ? padded : padded / n;
    master_aliases = !offload && p.model == torch::kFloat32;
  } else {
    int64_t shards = 0;
    const std::vector<bool> persistent = persistent_params(in.param_numels, z);
    for (size_t i = 0; i < in.param_numels.size(); ++i) {
      shards += shard_parameter(in.param_numels[i], n).shard_size;
      if (persistent[i]) m.add(dev, MemKind::Params, in.param_numels[i] * cs);  // kept gathered, in the compute dtype
    }
    // offload_param: the shards in host memory or in NVMe swap files.
    m.add(plan.params == Placement::Nvme ? Tier::Nvme : plan.params == Placement::Cpu ? Tier::Cpu : dev,
          MemKind::Params, shards * ms);
    m.add(offload ? Tier::Cpu : dev, MemKind::Grads, shards * (offload ? 4 : as));
    m.add(dev, MemKind::Buffers, 2 * live_buckets(in.param_numels, z) * ws);
    local = shards;
    master_aliases = !offload && p.model == torch::kFloat32;
  }
  if (c.optimizer) {
    const bool nvme = plan.optimizer == Placement::Nvme;
    const Tier state_tier = nvme ? Tier::Nvme : opt_tier;
    if (!master_aliases || nvme) m.add(state_tier, MemKind::Master, local * 4);
    m.add(state_tier, MemKind::OptimizerState, local * 4 * optimizer_state_count(c));
    if (nvme) {  // OptimizerSwapper: (1 + pipelined sub-groups) × states buffers of the largest sub-group
      const auto& off = z.offload_optimizer;
      const int64_t in_flight = 1 + (off.pipeline_read ? 1 : 0) + (off.pipeline_write ? 1 : 0);
      const int64_t largest = std::min(z.sub_group_size > 0 ? z.sub_group_size : local, local);
      const int64_t buffer = aio::align_up(std::max<int64_t>(largest * 4, 1));  // as AlignedBuffer sizes it
      m.add(Tier::Cpu, MemKind::Buffers, uint64_t(in_flight * (1 + optimizer_state_count(c)) * buffer));
    }
  }
  return m;
}

}  // namespace ds::zero
