// average_gradients (DeepSpeed §3: postscale / prescale / gradient_predivide_factor) and
// reduce_scatter_coalesced (DeepSpeed's test_coalesced_collectives.py, §16.19).
#include <gtest/gtest.h>

#include <cmath>

#include "comm_test_env.h"
#include "util/error.h"

namespace ds::comm::test {
namespace {

TEST(AverageGradients, PowerOfTwoFactorsAreExactMeans) {
  Communicator& c = world();
  const int w = c.size();
  for (bool prescale : {false, true})
    for (double predivide : {1.0, 2.0, 4.0, double(w)}) {
      std::vector<float> g(1000);
      for (int64_t i = 0; i < 1000; ++i) g[size_t(i)] = float(4 * ((i + c.rank()) % 9));
      average_gradients(c, Buffer(g.data(), 1000), predivide, prescale);
      EXPECT_TRUE(all_equal(1000, [&](int64_t i) { return g[size_t(i)]; },
                            [&](int64_t i) {
                              double s = 0;
                              for (int r = 0; r < w; ++r) s += 4 * ((i + r) % 9);
                              return s / w;
                            }))
          << "prescale=" << prescale << " predivide=" << predivide;
    }
}

// fp16 saturates at 65504: the order of scale and sum is visible. 40000 on every rank:
//   postscale, predivide 1: 40000*N overflows to inf before the 1/N;
//   predivide N: 40000/N summed N times = 40000 (no post-multiply);
//   prescale: 40000/N summed = 40000.
TEST(AverageGradients, ScalingOrderMattersInFp16) {
  Communicator& c = world();
  const int w = c.size();
  auto run = [&](double predivide, bool prescale) {
    uint16_t g[4];
    for (auto& x : g) x = float_to_fp16(40000.0f);
    average_gradients(c, Buffer(g, 4, ElemType::Fp16), predivide, prescale);
    return fp16_to_float(g[3]);
  };
  const float post = run(1.0, false);
  if (w >= 2) EXPECT_TRUE(std::isinf(post)) << "postscale with predivide 1 sums before scaling: " << post;
  else EXPECT_EQ(post, 40000.0f);
  EXPECT_EQ(run(double(w), false), 40000.0f);
  EXPECT_EQ(run(1.0, true), 40000.0f);
}

// With a factor whose reciprocal is inexact, each multiply rounds like torch's mul_(python float):
// x * fp32(1/p), sum, * fp32(p/N).
TEST(AverageGradients, RoundsEachMultiplyInFp32LikeTorch) {
  Communicator& c = world();
  const int w = c.size();
  const float x = 0.7f;  // the same on every rank: the sum of N equal fp32 values
  std::vector<float> g(64, x);
  average_gradients(c, Buffer(g.data(), 64), 3.0, false);
  const float pre = x * float(1.0 / 3.0);
  float sum = pre;
  for (int r = 1; r < w; ++r) sum += pre;  // exact for N <= 2; within 1 ulp-ish otherwise
  const float want = sum * float(3.0 / double(w));
  if (w <= 2) EXPECT_EQ(g[10], want);
  else EXPECT_NEAR(g[10], want, 1e-6);
  EXPECT_THROW(average_gradients(c, Buffer(g.data(), 64), 0.0, false), CommError);
}

TEST(ReduceScatterCoalesced, ShardSizes) {
  EXPECT_EQ(coalesced_shard_size(6, 2), 3);
  EXPECT_EQ(coalesced_shard_size(3, 2), 2);
  EXPECT_EQ(coalesced_shard_count(3, 2, 0), 2);
  EXPECT_EQ(coalesced_shard_count(3, 2, 1), 1);
  EXPECT_EQ(coalesced_shard_count(3, 4, 3), 0);  // a rank can own only padding
  EXPECT_EQ(coalesced_shard_count(0, 4, 0), 0);
}

// DeepSpeed: a 6-element tensor of rank values -> each rank gets its shard of the average
// (0.5 for 2 ranks); two tensors (6 and 3 elements) -> shards (3, 3) and (2, 1), averaged.
TEST(ReduceScatterCoalesced, MatchesDeepSpeedsTest) {
  Communicator& c = world();
  const int w = c.size(), r = c.rank();
  const float mean_rank = float(w - 1) / 2.0f;
  std::vector<float> a(6, float(r));
  std::vector<float> out_a(size_t(coalesced_shard_count(6, w, r)));
  {
    const ConstBuffer ins[] = {ConstBuffer(a.data(), 6)};
    const Buffer outs[] = {Buffer(out_a.data(), int64_t(out_a.size()))};
    reduce_scatter_coalesced(c, ins, outs);
  }
  for (float v : out_a) EXPECT_EQ(v, mean_rank);
  // Two tensors with uneven padding; values carry the element index so misplacement shows.
  std::vector<float> x(6), y(3);
  for (int i = 0; i < 6; ++i) x[size_t(i)] = float(r + 10 * i);
  for (int i = 0; i < 3; ++i) y[size_t(i)] = float(r + 100 * i);
  std::vector<float> ox(size_t(coalesced_shard_count(6, w, r))), oy(size_t(coalesced_shard_count(3, w, r)));
  const ConstBuffer ins[] = {ConstBuffer(x.data(), 6), ConstBuffer(y.data(), 3)};
  const Buffer outs[] = {Buffer(ox.data(), int64_t(ox.size())), Buffer(oy.data(), int64_t(oy.size()))};
  reduce_scatter_coalesced(c, ins, outs);
  if (w == 2) {
    EXPECT_EQ(ox.size(), 3u);
    EXPECT_EQ(oy.size(), r == 0 ? 2u : 1u);
  }
  const int64_t sx = coalesced_shard_size(6, w), sy = coalesced_shard_size(3, w);
  for (size_t k = 0; k < ox.size(); ++k) EXPECT_EQ(ox[k], mean_rank + 10.0f * float(r * sx + int64_t(k))) << k;
  for (size_t k = 0; k < oy.size(); ++k) EXPECT_EQ(oy[k], mean_rank + 100.0f * float(r * sy + int64_t(k))) << k;
  // A wrongly sized output is refused with the sizes named (on every rank, before communicating).
  std::vector<float> wrong(ox.size() + 1);
  const Buffer bad[] = {Buffer(wrong.data(), int64_t(wrong.size())), outs[1]};
  try {
    reduce_scatter_coalesced(c, ins, bad);
    ADD_FAILURE() << "no error for a wrongly sized output";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("output 0 has " + std::to_string(wrong.size())), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ds::comm::test
