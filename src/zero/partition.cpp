#include "zero/partition.h"

#include <algorithm>

#include "util/error.h"

namespace ds::zero {

FlatPartition::FlatPartition(int64_t numel, int world, int64_t alignment) : numel_(numel), world_(world) {
  DS_ASSERT(world >= 1 && alignment >= 1 && numel >= 0, "bad partition arguments");
  const int64_t unit = alignment * world;
  padded_ = (numel + unit - 1) / unit * unit;
  size_ = padded_ / world;
}

int64_t FlatPartition::padding(int rank) const {
  const int64_t valid = std::clamp<int64_t>(numel_ - begin(rank), 0, size_);
  return size_ - valid;
}

std::vector<Fragment> FlatPartition::fragments(int rank, const std::vector<ParamSlot>& slots) const {
  std::vector<Fragment> out;
  const int64_t lo = begin(rank), hi = end(rank);
  for (size_t i = 0; i < slots.size(); ++i) {
    const int64_t a = std::max(lo, slots[i].offset);
    const int64_t b = std::min(hi, slots[i].offset + slots[i].numel);
    if (a < b) out.push_back({i, a - slots[i].offset, a, b - a});
  }
  return out;
}

ParamShard shard_parameter(int64_t numel, int world) {
  DS_ASSERT(world >= 1 && numel >= 0, "bad shard arguments");
  return {numel, (numel + world - 1) / world, world};
}

int64_t ParamShard::valid(int rank) const {
  return std::clamp<int64_t>(numel - begin(rank), 0, shard_size);
}

}  // namespace ds::zero
