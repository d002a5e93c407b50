// SubGroupTracker alone (no communication): which sub-groups a span is cut into, and that each is
// reported ready exactly once, as soon as the last bucket feeding it is done, in completion order.
#include "zero/sub_group_tracker.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

namespace ds::zero {
namespace {

using Range = std::tuple<size_t, int64_t, int64_t>;

// Group 0 spans 10 elements, group 1 spans 4; sub-groups of 4: g0 [0,4) [4,8) [8,10), g1 [0,4).
// Bucket 0 feeds g0 [6,10) (sub-groups [4,8) and [8,10)), bucket 1 g0 [0,5) ([0,4) and [4,8)),
// bucket 2 g0 [2,3) ([0,4)) and again [3,4) (the same sub-group, counted once). Nothing feeds g1.
SubGroupTracker make_tracker() {
  SubGroupTracker t({10, 4}, 4, 3);
  t.touches(0, 0, 6, 10);
  t.touches(1, 0, 0, 5);
  t.touches(2, 0, 2, 3);
  t.touches(2, 0, 3, 4);
  return t;
}

TEST(SubGroupTracker, ReportsEachRangeOnceWhenItsLastBucketIsDone) {
  SubGroupTracker t = make_tracker();
  EXPECT_EQ(t.num_sub_groups(), 4u);
  std::vector<Range> fired;
  for (int pass = 0; pass < 2; ++pass) {  // re-arming resets the counts
    fired.clear();
    t.arm([&](size_t g, int64_t b, int64_t e) { fired.emplace_back(g, b, e); });
    EXPECT_TRUE(t.armed());
    t.bucket_done(0);
    EXPECT_EQ(fired, (std::vector<Range>{{0, 8, 10}})) << "[4,8) still waits for bucket 1";
    t.bucket_done(1);
    EXPECT_EQ(fired, (std::vector<Range>{{0, 8, 10}, {0, 4, 8}})) << "[0,4) still waits for bucket 2";
    t.bucket_done(2);
    EXPECT_EQ(fired, (std::vector<Range>{{0, 8, 10}, {0, 4, 8}, {0, 0, 4}}));
    t.finish();  // the untouched g1 [0,4) at the end, and nothing twice
    EXPECT_EQ(fired, (std::vector<Range>{{0, 8, 10}, {0, 4, 8}, {0, 0, 4}, {1, 0, 4}})) << "pass " << pass;
    EXPECT_FALSE(t.armed());
  }
}

TEST(SubGroupTracker, BucketsInAnotherOrderFireInTheirCompletionOrder) {
  SubGroupTracker t = make_tracker();
  std::vector<Range> fired;
  t.arm([&](size_t g, int64_t b, int64_t e) { fired.emplace_back(g, b, e); });
  t.bucket_done(2);
  EXPECT_TRUE(fired.empty()) << "[0,4) also needs bucket 1";
  t.bucket_done(1);
  EXPECT_EQ(fired, (std::vector<Range>{{0, 0, 4}}));
  t.bucket_done(0);
  EXPECT_EQ(fired, (std::vector<Range>{{0, 0, 4}, {0, 4, 8}, {0, 8, 10}}));  // bucket 0's two, in index order
  t.finish();
  EXPECT_EQ(fired.size(), 4u);
}

TEST(SubGroupTracker, UnarmedPassesReportNothing) {
  SubGroupTracker t = make_tracker();
  t.bucket_done(0);
  t.bucket_done(1);
  t.finish();
  EXPECT_FALSE(t.armed());
  // A bucket reported twice in one armed pass is a bug in the caller.
  std::vector<Range> fired;
  t.arm([&](size_t g, int64_t b, int64_t e) { fired.emplace_back(g, b, e); });
  t.bucket_done(2);
  t.bucket_done(1);
  EXPECT_ANY_THROW(t.bucket_done(1));
}

TEST(SubGroupTracker, SizeZeroMeansOneSubGroupPerSpan) {
  SubGroupTracker t({10, 4}, 0, 1);
  EXPECT_EQ(t.num_sub_groups(), 2u);
  t.touches(0, 1, 0, 4);
  std::vector<Range> fired;
  t.arm([&](size_t g, int64_t b, int64_t e) { fired.emplace_back(g, b, e); });
  t.bucket_done(0);
  EXPECT_EQ(fired, (std::vector<Range>{{1, 0, 4}}));
  t.finish();
  EXPECT_EQ(fired, (std::vector<Range>{{1, 0, 4}, {0, 0, 10}}));
}

}  // namespace
}  // namespace ds::zero
