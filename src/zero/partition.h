// How ZeRO splits state across N data-parallel ranks (reference §4.1, §5.1). Pure arithmetic, no
// tensors: stage 1/2 split each flat group (padded to a multiple of alignment·N elements) into N
// equal partitions that may cut parameters; stage 3 shards every parameter on its own
// (ceil(numel / N) elements per rank, the tail of the last shards unused).
#pragma once

#include <cstdint>
#include <vector>

#include "zero/flat_params.h"

namespace ds::zero {

// x rounded up to a multiple of m (m > 0).
inline constexpr int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// The piece of one parameter that lies inside a rank's partition.
struct Fragment {
  size_t slot = 0;            // index into FlatGroup::slots
  int64_t param_offset = 0;   // first element of the piece inside the parameter
  int64_t flat_offset = 0;    // the same element's offset in the flat group buffer
  int64_t numel = 0;
};

// Stage 1/2: one flat group split into `world` equal partitions.
class FlatPartition {
 public:
  // `numel`: the group's elements; padded to a multiple of `alignment · world` (DeepSpeed's
  // nccl_start_alignment_factor = 2 elements, so every partition starts 4-byte aligned in fp16).
  FlatPartition(int64_t numel, int world, int64_t alignment = 2);

  int world() const { return world_; }
  int64_t numel() const { return numel_; }
  int64_t padded_numel() const { return padded_; }
  int64_t partition_size() const { return size_; }
  int64_t begin(int rank) const { return size_ * rank; }  // [begin, end) in the padded group
  int64_t end(int rank) const { return size_ * (rank + 1); }
  // Elements of `rank`'s partition that are padding (non-zero only on the tail ranks).
  int64_t padding(int rank) const;
  // The parameters (in slot order) that intersect `rank`'s partition, cut at its boundaries.
  std::vector<Fragment> fragments(int rank, const std::vector<ParamSlot>& slots) const;
  // The rank that owns flat element `offset`.
  int owner(int64_t offset) const { return static_cast<int>(offset / size_); }

 private:
  int64_t numel_, padded_, size_;
  int world_;
};

// Stage 3: one parameter sharded across `world` ranks.
struct ParamShard {
  int64_t numel = 0;       // the parameter's elements
  int64_t shard_size = 0;  // ceil(numel / world): every rank stores this many
  int world = 1;
  int64_t begin(int rank) const { return shard_size * rank; }
  // Elements of rank's shard that hold parameter values (the rest of the shard is padding).
  int64_t valid(int rank) const;
  int64_t padded_numel() const { return shard_size * world; }
};
ParamShard shard_parameter(int64_t numel, int world);

}  // namespace ds::zero
