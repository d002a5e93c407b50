// GradientBuckets on the run's data-parallel group (one rank alone, two under mpirun -np 2): which
// parameter lands in which bucket, the reduce order whatever order autograd produces gradients in,
// the averaged values after a real collective, unused parameters as zeros, and the in-flight limit.
#include "zero/gradient_buckets.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "zero/collectives.h"
#include "zero_test_env.h"

namespace ds::zero {
namespace {

using test::dp;

// Six parameters; with 5-element buckets, packed in reverse model order, a bucket closing only when
// the next parameter would overflow it (bucket 0 is filled exactly) and an 8-element parameter
// alone in its own:
//   bucket 0: p5 @0, p4 @2   bucket 1: p3 @0   bucket 2: p2 @0, p1 @1   bucket 3: p0 @0
const std::vector<int64_t> kSizes = {2, 3, 1, 8, 3, 2};
constexpr int64_t kBucketNumel = 5;
const std::vector<std::vector<std::pair<size_t, int64_t>>> kLayout = {
    {{5, 0}, {4, 2}}, {{3, 0}}, {{2, 0}, {1, 1}}, {{0, 0}}};

std::vector<torch::Tensor> make_params() {
  std::vector<torch::Tensor> out;
  for (int64_t n : kSizes) out.push_back(torch::zeros({n}, torch::requires_grad()));
  return out;
}

// Parameter k's gradient on rank r is (r + 1) · coef(k): integers, so every sum and mean is exact.
torch::Tensor coef(size_t k) { return torch::arange(kSizes[k], torch::kFloat32) + float(10 * (k + 1)); }

torch::Tensor loss_of(const std::vector<torch::Tensor>& params, const std::vector<size_t>& used) {
  auto loss = torch::zeros({});
  for (size_t k : used) loss = loss + (params[k] * coef(k)).sum();
  return loss * float(dp().rank() + 1);
}

// The mean over W ranks of (r + 1) · coef(k) is (W + 1) / 2 · coef(k).
torch::Tensor mean_grad(size_t k) { return coef(k) * (float(dp().size() + 1) / 2.0f); }

// Records the reduce calls and finishes; each bucket is averaged over the ranks for real.
struct Recorder {
  std::vector<std::string> events;
  std::map<size_t, torch::Tensor> reduced;
  GradientBuckets::ReduceFn fn() {
    return [this](size_t index, const Bucket&, torch::Tensor packed) -> GradientBuckets::Finisher {
      events.push_back("s" + std::to_string(index));
      auto done = allreduce_average_async(dp(), packed, {}, "test_bucket");
      return [this, index, packed, done] {
        if (done) done();  // empty on a world of one
        events.push_back("f" + std::to_string(index));
        reduced[index] = packed;
      };
    };
  }
  std::vector<size_t> order() const {
    std::vector<size_t> out;
    for (const auto& e : events)
      if (e[0] == 's') out.push_back(std::stoul(e.substr(1)));
    return out;
  }
};

torch::Tensor expected_bucket(size_t b, const std::vector<size_t>& unused = {}) {
  std::vector<torch::Tensor> pieces;
  for (auto [k, offset] : kLayout[b]) {
    const bool zero = std::find(unused.begin(), unused.end(), k) != unused.end();
    pieces.push_back(zero ? torch::zeros({kSizes[k]}) : mean_grad(k));
  }
  return torch::cat(pieces);
}

TEST(GradientBuckets, PacksParametersInReverseOrderUpToTheBucketSize) {
  auto params = make_params();
  Recorder rec;
  GradientBuckets buckets(params, kBucketNumel, torch::kFloat32, torch::kFloat32, false, rec.fn());
  ASSERT_EQ(buckets.buckets().size(), kLayout.size());
  for (size_t b = 0; b < kLayout.size(); ++b) {
    const Bucket& bucket = buckets.buckets()[b];
    ASSERT_EQ(bucket.entries.size(), kLayout[b].size()) << "bucket " << b;
    int64_t numel = 0;
    for (size_t e = 0; e < kLayout[b].size(); ++e) {
      EXPECT_EQ(bucket.entries[e].param, kLayout[b][e].first) << "bucket " << b << " entry " << e;
      EXPECT_EQ(bucket.entries[e].offset, kLayout[b][e].second) << "bucket " << b << " entry " << e;
      EXPECT_EQ(bucket.entries[e].numel, kSizes[kLayout[b][e].first]);
      numel += kSizes[kLayout[b][e].first];
    }
    EXPECT_EQ(bucket.numel, numel);
  }
  EXPECT_EQ(buckets.max_bucket_numel(), 8);
  EXPECT_EQ(buckets.max_live_buckets(), 1u);
  EXPECT_EQ(buckets.live_numel_bound(), 8);  // without overlap one bucket is live: the largest
  GradientBuckets overlapped(params, kBucketNumel, torch::kFloat32, torch::kFloat32, true, rec.fn());
  EXPECT_EQ(overlapped.max_live_buckets(), 3u);
  EXPECT_EQ(overlapped.live_numel_bound(), 8 + 5 + 4);  // the three largest buckets: 8, 5 and 4
  EXPECT_TRUE(rec.events.empty());
}

TEST(GradientBuckets, ReducesEveryBucketInOrderToTheMeanOverRanks) {
  auto params = make_params();
  Recorder rec;
  std::vector<size_t> taken;
  GradientBuckets buckets(params, kBucketNumel, torch::kFloat32, torch::kFloat32, false, rec.fn(),
                          [&](size_t k) { taken.push_back(k); });
  for (int pass = 0; pass < 2; ++pass) {  // the second pass reuses the buckets after finish()
    rec = Recorder{};
    taken.clear();
    loss_of(params, {0, 1, 2, 3, 4, 5}).backward();
    EXPECT_EQ(rec.order(), (std::vector<size_t>{0, 1, 2, 3})) << "pass " << pass;
    buckets.finish();
    EXPECT_EQ(rec.order(), (std::vector<size_t>{0, 1, 2, 3})) << "finish() reduces nothing twice";
    std::sort(taken.begin(), taken.end());
    EXPECT_EQ(taken, (std::vector<size_t>{0, 1, 2, 3, 4, 5})) << "on_taken once per parameter";
    for (size_t b = 0; b < kLayout.size(); ++b)
      EXPECT_TRUE(torch::equal(rec.reduced.at(b), expected_bucket(b))) << "bucket " << b << " pass " << pass << ": "
                                                                       << rec.reduced.at(b);
    for (const auto& p : params) EXPECT_FALSE(p.grad().defined()) << "the full gradient is not kept";
  }
}

TEST(GradientBuckets, ALaterBucketCompletedFirstWaitsForTheEarlierOnes) {
  auto params = make_params();
  Recorder rec;
  GradientBuckets buckets(params, kBucketNumel, torch::kFloat32, torch::kFloat32, false, rec.fn());
  loss_of(params, {0}).backward();  // completes bucket 3 only
  EXPECT_TRUE(rec.events.empty()) << "bucket 3 must wait for buckets 0-2";
  loss_of(params, {1, 2, 3, 4, 5}).backward();
  EXPECT_EQ(rec.order(), (std::vector<size_t>{0, 1, 2, 3}));
  buckets.finish();
  for (size_t b = 0; b < kLayout.size(); ++b) EXPECT_TRUE(torch::equal(rec.reduced.at(b), expected_bucket(b)));
}

TEST(GradientBuckets, UnusedParametersAreReducedAsZerosAtFinish) {
  auto params = make_params();
  Recorder rec;
  GradientBuckets buckets(params, kBucketNumel, torch::kFloat32, torch::kFloat32, false, rec.fn());
  loss_of(params, {0, 2, 4, 5}).backward();  // p3 (bucket 1) and p1 (bucket 2) get no gradient
  EXPECT_EQ(rec.order(), (std::vector<size_t>{0})) << "bucket 1 is incomplete, so 2 and 3 wait";
  buckets.finish();
  EXPECT_EQ(rec.order(), (std::vector<size_t>{0, 1, 2, 3}));
  for (size_t b = 0; b < kLayout.size(); ++b)
    EXPECT_TRUE(torch::equal(rec.reduced.at(b), expected_bucket(b, {1, 3}))) << "bucket " << b << ": "
                                                                             << rec.reduced.at(b);
}

TEST(GradientBuckets, OverlapKeepsAtMostTwoReductionsInFlight) {
  for (bool overlap : {false, true}) {
    auto params = make_params();
    Recorder rec;
    GradientBuckets buckets(params, kBucketNumel, torch::kFloat32, torch::kFloat32, overlap, rec.fn());
    loss_of(params, {0, 1, 2, 3, 4, 5}).backward();
    buckets.finish();
    const std::vector<std::string> expected =
        overlap ? std::vector<std::string>{"s0", "s1", "f0", "s2", "f1", "s3", "f2", "f3"}
                : std::vector<std::string>{"s0", "f0", "s1", "f1", "s2", "f2", "s3", "f3"};
    EXPECT_EQ(rec.events, expected) << "overlap " << overlap;
    for (size_t b = 0; b < kLayout.size(); ++b) EXPECT_TRUE(torch::equal(rec.reduced.at(b), expected_bucket(b)));
  }
}

TEST(GradientBuckets, GradientsAreRoundedThroughTheModelDtypeBeforePacking) {
  auto p = torch::zeros({3}, torch::requires_grad());
  std::vector<torch::Tensor> packed;
  GradientBuckets buckets({p}, 16, torch::kBFloat16, torch::kFloat32, false,
                          [&](size_t, const Bucket&, torch::Tensor t) -> GradientBuckets::Finisher {
                            packed.push_back(t.clone());
                            return {};
                          });
  // bf16 keeps 8 significant bits: 1 + 2^-8 rounds to 1 (ties to even), 1 + 3·2^-8 to 1 + 2^-6.
  (p * torch::tensor({1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 3.0f})).sum().backward();
  buckets.finish();
  ASSERT_EQ(packed.size(), 1u);
  EXPECT_EQ(packed[0].scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(packed[0], torch::tensor({1.0f, 1.0f + 4.0f / 256, 3.0f}))) << packed[0];
}

}  // namespace
}  // namespace ds::zero
