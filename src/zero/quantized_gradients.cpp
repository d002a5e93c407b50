#include "zero/quantized_gradients.h"

#include <algorithm>

#include "util/logging.h"

namespace ds::zero {

std::unique_ptr<QuantizedGradients> QuantizedGradients::make(const ZeroConfig& zero, comm::Communicator& dp, int node,
                                                             const ShardedParameters& params) {
  if (!zero.zero_quantized_gradients || dp.size() == 1) return nullptr;
  auto nodes = std::make_unique<comm::NodeGroups>(dp, node, "zero_optimization.zero_quantized_gradients");
  if (nodes->layout().nodes == 1) {
    log::info("zero_quantized_gradients: all {} data-parallel ranks are on one node, where qgZ saves nothing; "
              "gradients take the plain reduce-scatter (as in DeepSpeed)", dp.size());
    return nullptr;
  }
  log::info("zero_quantized_gradients (qgZ): int4 gradient reduce-scatter over {} nodes of {} ranks",
            nodes->layout().nodes, nodes->layout().per_node);
  return std::unique_ptr<QuantizedGradients>(new QuantizedGradients(std::move(nodes), params));
}

QuantizedGradients::QuantizedGradients(std::unique_ptr<comm::NodeGroups> nodes, const ShardedParameters& params)
    : nodes_(std::move(nodes)), exchange_(*nodes_), params_(params) {
  const int64_t world = int64_t(nodes_->layout().nodes) * nodes_->layout().per_node;
  for (size_t id = 0; id < params.size(); ++id) {
    const ShardedParam& p = params[id];
    const bool fits = p.shape.size() >= 2 && p.numel % (2 * world) == 0;
    group_len_.push_back(fits ? p.numel / std::max({p.shape[0], p.shape[1], world}) : 0);
  }
}

std::function<void()> QuantizedGradients::reduce(const std::vector<BucketEntry>& entries, const torch::Tensor& packed,
                                                 Add add) {
  const int world = nodes_->layout().nodes * nodes_->layout().per_node;
  // Rank-major fp32 packing, shard q of every gradient in chunk q (sizes divide evenly: no padding),
  // pre-divided by the world like the exact reduce-scatter; each shard cut into its groups.
  std::vector<int64_t> offset, len;
  int64_t chunk = 0;
  for (const auto& e : entries) {
    const ShardedParam& p = params_[e.param];
    const int64_t shard = p.numel / world, g = group_len_[e.param];
    offset.push_back(chunk);
    chunk += shard;
    for (int64_t at = 0; at < shard; at += g) len.push_back(std::min(g, shard - at));
  }
  auto wire = torch::empty({chunk * world}, torch::kFloat32);
  for (int q = 0; q < world; ++q)
    for (size_t k = 0; k < entries.size(); ++k) {
      const int64_t shard = params_[entries[k].param].numel / world;
      wire.narrow(0, q * chunk + offset[k], shard).copy_(packed.narrow(0, entries[k].offset + q * shard, shard));
    }
  wire.div_(world);
  auto mine = torch::empty({chunk}, torch::kFloat32);
  auto finish = exchange_.run_async(wire.data_ptr<float>(), std::move(len), mine.data_ptr<float>());
  return [this, finish, mine, offset, entries, add = std::move(add), world] {
    finish();
    for (size_t k = 0; k < entries.size(); ++k)
      add(entries[k].param, mine.narrow(0, offset[k], params_[entries[k].param].numel / world));
  };
}

}  // namespace ds::zero
