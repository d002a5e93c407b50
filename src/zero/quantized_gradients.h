// ZeRO++ qgZ at stage 3 (zero_optimization.zero_quantized_gradients): the gradients of a bucket's
// matrices are reduce-scattered as int4 in two all-to-all hops, inside each node then across nodes
// (comm/quantized_reduce_scatter.h), instead of one fp32/16-bit reduce-scatter. As in DeepSpeed
// (all_to_all_quant_reduce): only parameters of two or more dimensions whose size divides by
// 2 x world are quantized, in groups of numel / max(dim0, dim1, world) elements; vectors (biases,
// norms) and the rest take the exact reduce-scatter; and with a single node there is nothing to
// gain, so qgZ stays off (DeepSpeed falls back the same way).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <vector>

#include "comm/node_groups.h"
#include "comm/quantized_reduce_scatter.h"
#include "config/zero_config.h"
#include "zero/gradient_buckets.h"
#include "zero/sharded_params.h"

namespace ds::zero {

class QuantizedGradients {
 public:
  // Collective over `dp` when the key is set and dp has several ranks (nodes are found with one
  // all-gather); nullptr when qgZ does not apply. `node`: this rank's node id.
  static std::unique_ptr<QuantizedGradients> make(const ZeroConfig& zero, comm::Communicator& dp, int node,
                                                  const ShardedParameters& params);

  // Whether parameter `id`'s gradient goes quantized.
  bool covers(size_t id) const { return group_len_[id] > 0; }
  // Starts reducing the gradients of `entries` (all covered) found in `packed` at their bucket
  // offsets; the finisher calls add(id, this rank's averaged shard) for each.
  using Add = std::function<void(size_t id, const torch::Tensor& shard)>;
  std::function<void()> reduce(const std::vector<BucketEntry>& entries, const torch::Tensor& packed, Add add);
  const comm::NodeGroups& nodes() const { return *nodes_; }

 private:
  QuantizedGradients(std::unique_ptr<comm::NodeGroups> nodes, const ShardedParameters& params);

  std::unique_ptr<comm::NodeGroups> nodes_;
  comm::QuantizedReduceScatter exchange_;
  const ShardedParameters& params_;
  std::vector<int64_t> group_len_;  // per parameter: its quantization group (0: not quantized)
};

}  // namespace ds::zero
