// SubGroupTracker: lets the CPU optimizer step a sub-group of this rank's span as soon as every
// gradient bucket that feeds it has been reduced on the boundary micro-step, instead of after the
// whole backward (ZeRO-Offload overlap; docs/offload.md says when the engine may use it). Sub-groups
// are `sub_group_size`-element pieces of each group's local span; which buckets touch which
// sub-groups is fixed at start, so the count of outstanding buckets is known.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <utility>
#include <vector>

namespace ds::zero {

class SubGroupTracker {
 public:
  using Ready = std::function<void(size_t group, int64_t begin, int64_t end)>;

  SubGroupTracker(const std::vector<int64_t>& span_numel, int64_t sub_group_size, size_t num_buckets);

  // Setup: bucket `bucket` adds gradients to [begin, end) of group g's span.
  void touches(size_t bucket, size_t g, int64_t begin, int64_t end);

  // Arms the tracker for one backward pass: ready() fires once per sub-group, in completion order.
  void arm(Ready ready);
  bool armed() const { return static_cast<bool>(ready_); }
  // After bucket `bucket`'s gradients were added (no-op when not armed).
  void bucket_done(size_t bucket);
  // End of the armed pass: fires every sub-group not fired yet (those no bucket touches), disarms.
  void finish();

  size_t num_sub_groups() const;

 private:
  struct SubGroup {
    size_t group;
    int64_t begin, end;
    int expected = 0, remaining = 0;
    bool fired = false;
  };
  void fire(SubGroup& sg);

  std::vector<SubGroup> sub_groups_;
  std::vector<std::vector<size_t>> first_of_group_;    // group → its sub-group indices
  std::vector<std::set<size_t>> bucket_sub_groups_;    // bucket → sub-groups it touches
  Ready ready_;
};

}  // namespace ds::zero
