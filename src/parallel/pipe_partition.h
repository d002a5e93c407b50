// How a PipelineModule's layers are cut into stages, with DeepSpeed's arithmetic
// (deepspeed/runtime/utils.py partition_uniform / partition_balanced, pipe/module.py
// _partition_layers), so a model splits at the same layer boundaries here as there.
// A partition is DeepSpeed's `parts`: num_parts + 1 ascending boundaries, stage s owning the items
// [parts[s], parts[s + 1]). No LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ds::parallel {

// Equal counts, the first (num_items % num_parts) parts one item larger; with fewer items than
// parts, one item per part and the rest empty. Throws ds::Error for num_parts < 1 or num_items < 0.
std::vector<int> partition_uniform(int num_items, int num_parts);

// The contiguous split that minimises (heaviest part - lightest part), DeepSpeed's dynamic
// programme including its tie-breaking (the last best cut wins); partition_uniform when there are
// no more items than parts. Throws ds::Error for num_parts < 1 or a negative weight.
std::vector<int> partition_balanced(const std::vector<double>& weights, int num_parts);

// One layer as the partitioner sees it.
struct PartitionItem {
  std::string name;         // what "type:<regex>" is matched against (case-insensitive search)
  int64_t num_params = 0;   // trainable elements the layer uses (a tied parameter in every user)
};

// PipelineModule's partition_method: "parameters" (balanced on num_params), "uniform" (balanced on
// layer count), "type:<regex>" (balanced on the layers whose name matches). Throws ds::ConfigError
// naming `pipeline.partition` for an unknown method, a bad regex, or a regex that matches nothing.
std::vector<int> partition_layers(std::string_view method, const std::vector<PartitionItem>& layers, int num_stages);

}  // namespace ds::parallel
