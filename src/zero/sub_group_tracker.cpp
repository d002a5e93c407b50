#include "zero/sub_group_tracker.h"

#include <algorithm>

#include "util/error.h"

namespace ds::zero {

SubGroupTracker::SubGroupTracker(const std::vector<int64_t>& span_numel, int64_t sub_group_size, size_t num_buckets)
    : first_of_group_(span_numel.size()), bucket_sub_groups_(num_buckets) {
  for (size_t g = 0; g < span_numel.size(); ++g) {
    const int64_t n = span_numel[g];
    const int64_t size = sub_group_size > 0 ? sub_group_size : std::max<int64_t>(n, 1);
    for (int64_t b = 0; b < n; b += size) {
      first_of_group_[g].push_back(sub_groups_.size());
      sub_groups_.push_back({g, b, std::min(b + size, n)});
    }
  }
}

size_t SubGroupTracker::num_sub_groups() const { return sub_groups_.size(); }

void SubGroupTracker::touches(size_t bucket, size_t g, int64_t begin, int64_t end) {
  DS_ASSERT(bucket < bucket_sub_groups_.size() && g < first_of_group_.size(), "bucket and group in range");
  for (size_t idx : first_of_group_[g]) {
    SubGroup& sg = sub_groups_[idx];
    if (sg.begin < end && begin < sg.end && bucket_sub_groups_[bucket].insert(idx).second) sg.expected += 1;
  }
}

void SubGroupTracker::arm(Ready ready) {
  ready_ = std::move(ready);
  for (auto& sg : sub_groups_) {
    sg.remaining = sg.expected;
    sg.fired = false;
  }
}

void SubGroupTracker::fire(SubGroup& sg) {
  sg.fired = true;
  ready_(sg.group, sg.begin, sg.end);
}

void SubGroupTracker::bucket_done(size_t bucket) {
  if (!ready_) return;
  for (size_t idx : bucket_sub_groups_[bucket]) {
    SubGroup& sg = sub_groups_[idx];
    DS_ASSERT(sg.remaining > 0, "a bucket reported twice in one pass");
    if (--sg.remaining == 0) fire(sg);
  }
}

void SubGroupTracker::finish() {
  if (!ready_) return;
  for (auto& sg : sub_groups_)
    if (!sg.fired) fire(sg);
  ready_ = nullptr;
}

}  // namespace ds::zero
