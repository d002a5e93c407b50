// GradientBuckets: takes each parameter's gradient the moment autograd has finished accumulating
// it (a post hook on the parameter's AccumulateGrad node), packs it into its bucket in the
// communication dtype, frees the parameter's .grad, and hands every completed bucket to a reduce
// callback — in bucket order, the same on every rank whatever order autograd ran in (a later
// bucket that completes first waits for the earlier ones). Buckets are fixed at construction:
// parameters in reverse model order (the order backward produces them), `bucket_numel` elements
// each, a larger parameter alone in its own bucket. Full gradients therefore never persist; at
// most the buckets in flight are held (ZeRO stages 2 and 3).
//
// overlap_comm: the reduce callback starts its collective and returns a finisher; up to two
// buckets stay in flight while autograd goes on computing the next gradients, the oldest finished
// when a third would start and all of them at finish(). Without overlap each is finished at once.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace torch::autograd {
struct Node;
}

namespace ds::zero {

struct BucketEntry {
  size_t param = 0;     // index into the constructor's parameter list
  int64_t offset = 0;   // elements into the packed bucket
  int64_t numel = 0;
};

struct Bucket {
  std::vector<BucketEntry> entries;
  int64_t numel = 0;
};

class GradientBuckets {
 public:
  // reduce(index, bucket, packed): packed holds the bucket's gradients [bucket.numel] in `wire` dtype,
  // each rounded through `round_to` first (what a 16-bit gradient carries); it starts the
  // reduction and returns the function that completes it (waits, applies the result). on_taken(param)
  // runs after a parameter's gradient was packed (stage 3 releases the parameter there).
  using Finisher = std::function<void()>;
  using ReduceFn = std::function<Finisher(size_t index, const Bucket&, torch::Tensor packed)>;
  static constexpr size_t kMaxInFlight = 2;
  GradientBuckets(std::vector<torch::Tensor> params, int64_t bucket_numel, torch::ScalarType round_to,
                  torch::ScalarType wire, bool overlap, ReduceFn reduce, std::function<void(size_t)> on_taken = {});
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // End of a backward pass: reduces every bucket not yet reduced, in order; gradients autograd did
  // not produce (unused parameters) count as zeros, on every rank alike.
  void finish();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  int64_t max_bucket_numel() const;
  // Buckets whose memory can be live at once: the one filling plus those in flight.
  size_t max_live_buckets() const { return overlap_ ? kMaxInFlight + 1 : 1; }
  // Elements of the largest max_live_buckets() buckets together: what can be live at once.
  int64_t live_numel_bound() const;

 private:
  void on_gradient(size_t param);
  void launch_ready();
  void drain(size_t keep);  // finishes in-flight reductions until at most `keep` remain

  std::vector<torch::Tensor> params_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> where_;  // param → (bucket, entry)
  torch::ScalarType round_to_, wire_;
  bool overlap_;
  ReduceFn reduce_;
  std::vector<Finisher> in_flight_;     // oldest first
  std::function<void(size_t)> on_taken_;
  std::vector<torch::Tensor> packed_;   // per bucket, allocated at its first gradient, freed when reduced
  std::vector<size_t> pending_;         // per bucket: entries still missing this pass
  size_t next_ = 0;                     // the next bucket to reduce
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
};

// The sum of the `count` largest of `sizes`.
int64_t largest_buckets_numel(std::vector<int64_t> sizes, size_t count);

}  // namespace ds::zero
