#include "zero/partition.h"

#include <gtest/gtest.h>

#include <numeric>

namespace ds::zero {
namespace {

std::vector<ParamSlot> slots(std::vector<int64_t> sizes) {
  std::vector<ParamSlot> out;
  int64_t off = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.push_back({"p" + std::to_string(i), {sizes[i]}, off, sizes[i], {}});
    off += sizes[i];
  }
  return out;
}

TEST(FlatPartition, PadsToTwiceTheWorldAndSplitsEvenly) {
  // 53 elements (DeepSpeed's TestZeroToFP32 size), world 2: padded to 56 (multiple of 2*2), 28 each.
  FlatPartition p(53, 2);
  EXPECT_EQ(p.padded_numel(), 56);
  EXPECT_EQ(p.partition_size(), 28);
  EXPECT_EQ(p.padding(0), 0);
  EXPECT_EQ(p.padding(1), 3);
  // world 4: 56 again (multiple of 8), 14 each; rank 3 holds 11 values and 3 padding.
  FlatPartition q(53, 4);
  EXPECT_EQ(q.padded_numel(), 56);
  EXPECT_EQ(q.padding(3), 3);
  // world 3 with 2 tiny params (DeepSpeed's empty-partition case): some rank owns only padding.
  FlatPartition e(3, 3);
  EXPECT_EQ(e.padded_numel(), 6);
  EXPECT_EQ(e.padding(2), 2);
  EXPECT_EQ(e.fragments(2, slots({2, 1})).size(), 0u);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(q.begin(r) * 2 % 4, 0) << "partitions start 4-byte aligned in fp16";
}

TEST(FlatPartition, FragmentsCutParametersAtPartitionBoundaries) {
  auto s = slots({5, 10, 3});  // 18 elements, world 2 → padded 20, partitions [0,10) [10,20)
  FlatPartition p(18, 2);
  auto f0 = p.fragments(0, s);
  ASSERT_EQ(f0.size(), 2u);
  EXPECT_EQ(f0[1].slot, 1u);
  EXPECT_EQ(f0[1].param_offset, 0);
  EXPECT_EQ(f0[1].numel, 5);  // the first half of p1
  auto f1 = p.fragments(1, s);
  ASSERT_EQ(f1.size(), 2u);
  EXPECT_EQ(f1[0].param_offset, 5);  // the rest of p1 starts at its 6th element
  EXPECT_EQ(f1[0].flat_offset, 10);
  EXPECT_EQ(f1[1].numel, 3);
  // Every element of every parameter is covered exactly once across ranks.
  int64_t covered = 0;
  for (int r = 0; r < 2; ++r)
    for (const auto& f : p.fragments(r, s)) covered += f.numel;
  EXPECT_EQ(covered, 18);
  EXPECT_EQ(p.owner(9), 0);
  EXPECT_EQ(p.owner(10), 1);
}

TEST(ParamShard, CeilDivisionWithUnusedTail) {
  // DeepSpeed's 3x5 weights at world 2: shards of 8, rank 1 holds 7 values + one pad.
  auto s = shard_parameter(15, 2);
  EXPECT_EQ(s.shard_size, 8);
  EXPECT_EQ(s.valid(0), 8);
  EXPECT_EQ(s.valid(1), 7);
  EXPECT_EQ(s.padded_numel(), 16);
  // zero.Init partition size: ceil(12 / W).
  for (int w : {1, 2, 3, 4, 5}) EXPECT_EQ(shard_parameter(12, w).shard_size, (12 + w - 1) / w);
  // 8100 elements over 4 ranks: 2025 each, no padding.
  EXPECT_EQ(shard_parameter(8100, 4).valid(3), 2025);
  // More ranks than elements: trailing ranks hold nothing.
  EXPECT_EQ(shard_parameter(2, 4).valid(3), 0);
}

}  // namespace
}  // namespace ds::zero
