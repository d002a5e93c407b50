// BlockAllocator: pool accounting, exhaustion, reference counts, and prefix-cache publication,
// lookup and eviction of cached blocks (least recently released first).
#include <gtest/gtest.h>

#include <set>

#include "inference/block_allocator.h"
#include "util/error.h"

namespace {

using ds::inference::BlockAllocator;
using ds::inference::BlockKey;

TEST(BlockAllocator, HandsOutEveryBlockOnceAndTakesThemBack) {
  BlockAllocator a(4);
  std::set<int32_t> got;
  for (int i = 0; i < 4; ++i) got.insert(*a.allocate());
  EXPECT_EQ(got.size(), 4u);
  EXPECT_EQ(a.num_free(), 0);
  EXPECT_FALSE(a.allocate().has_value());
  for (int32_t b : got) a.release(b);
  EXPECT_EQ(a.num_free(), 4);
  EXPECT_EQ(a.num_used(), 0);
}

TEST(BlockAllocator, RefusesAnEmptyPool) { EXPECT_THROW(BlockAllocator(0), ds::ConfigError); }

TEST(BlockAllocator, PublishedBlocksAreFoundSharedAndCachedAfterRelease) {
  BlockAllocator a(3);
  const int32_t b = *a.allocate();
  const uint64_t id = a.publish(b, BlockKey{0, {1, 2}});
  EXPECT_NE(id, 0u);
  auto hit = a.lookup(BlockKey{0, {1, 2}});
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->first, b);
  EXPECT_EQ(hit->second, id);
  EXPECT_EQ(a.ref_count(b), 2);
  EXPECT_FALSE(a.lookup(BlockKey{0, {1, 3}}).has_value());
  EXPECT_FALSE(a.lookup(BlockKey{id, {1, 2}}).has_value());  // same tokens, other parent
  a.release(b);
  a.release(b);
  EXPECT_EQ(a.num_cached(), 1);
  EXPECT_EQ(a.num_free(), 3);                          // cached blocks count as free
  EXPECT_TRUE(a.lookup(BlockKey{0, {1, 2}}).has_value());  // revived from the cache
  EXPECT_EQ(a.num_cached(), 0);
  a.release(b);
}

TEST(BlockAllocator, EvictsTheLeastRecentlyReleasedCachedBlock) {
  BlockAllocator a(2);
  const int32_t x = *a.allocate(), y = *a.allocate();
  a.publish(x, BlockKey{0, {1}});
  a.publish(y, BlockKey{0, {2}});
  a.release(x);
  a.release(y);
  const int32_t z = *a.allocate();  // evicts x (released first)
  EXPECT_EQ(z, x);
  EXPECT_FALSE(a.lookup(BlockKey{0, {1}}).has_value());
  EXPECT_TRUE(a.lookup(BlockKey{0, {2}}).has_value());
}

TEST(BlockAllocator, DuplicateContentKeepsTheFirstBlock) {
  BlockAllocator a(2);
  const int32_t x = *a.allocate(), y = *a.allocate();
  const uint64_t id = a.publish(x, BlockKey{0, {5}});
  EXPECT_EQ(a.publish(y, BlockKey{0, {5}}), id);  // y stays private
  a.release(y);
  EXPECT_EQ(a.num_cached(), 0);  // y went straight back to the free list
  a.release(x);
  EXPECT_EQ(a.num_cached(), 1);
}

}  // namespace
