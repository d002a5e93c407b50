// ShardedParameters (stage 3 storage) on the run's data-parallel group (one rank alone, two under
// mpirun -np 2): shard sizes and padding, the broadcast of rank 0's values, gather/release
// round trips bit-identical to the original values, persistence thresholds, and a write-back
// followed by refresh.
#include "zero/sharded_params.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "zero_test_env.h"

namespace ds::zero {
namespace {

using test::dp;

int64_t shard_of(int64_t numel) { return (numel + dp().size() - 1) / dp().size(); }  // ceil(numel / world)

// Parameter values: distinct non-integers, plus 100·rank so that a missing broadcast shows.
torch::Tensor values(int64_t numel, float base, int rank) {
  return torch::arange(numel, torch::kFloat32) * 0.25f + base + 100.0f * float(rank);
}

// a [5] and c [1] in param group 0, b [2,3] in param group 1.
struct Model {
  std::vector<NamedParam> params;
  std::vector<torch::Tensor> rank0;  // what every rank must see once gathered
  Model() {
    const int r = dp().rank();
    params.push_back({"a", values(5, 1.0f, r).requires_grad_(), 0});
    params.push_back({"b", values(6, 2.0f, r).view({2, 3}).requires_grad_(), 1});
    params.push_back({"c", values(1, 3.0f, r).requires_grad_(), 0});
    rank0 = {values(5, 1.0f, 0), values(6, 2.0f, 0).view({2, 3}), values(1, 3.0f, 0)};
  }
};

ZeroConfig thresholds(int64_t param, int64_t model = std::numeric_limits<int64_t>::max()) {
  ZeroConfig z;
  z.stage = 3;
  z.param_persistence_threshold = param;
  z.model_persistence_threshold = model;
  return z;
}

bool released(const torch::Tensor& p) { return p.isnan().all().item<bool>(); }

TEST(ShardedParameters, ShardsArePaddedCeilingsHoldingThisRanksSliceOfRankZerosValues) {
  Model m;
  MemoryLedger ledger;
  ShardedParameters sp(dp(), DtypePlan{}, thresholds(1), m.params, ledger, Tier::Device);
  const int rank = dp().rank();
  ASSERT_EQ(sp.size(), 3u);
  ASSERT_EQ(sp.num_groups(), 2u);
  // World 1: shards of 5, 6, 1. World 2: 3, 3, 1 — a's second shard has one padding element, and
  // c's second shard is all padding.
  const std::vector<int64_t> numel = {5, 6, 1};
  for (size_t id = 0; id < 3; ++id) {
    EXPECT_EQ(sp[id].shard.shard_size, shard_of(numel[id])) << sp[id].name;
    EXPECT_EQ(sp[id].shard.padded_numel(), shard_of(numel[id]) * dp().size());
  }
  // Group 0 stores a's shard then c's; group 1 b's. Padding is zero.
  auto slice = [&](const torch::Tensor& full, int64_t shard) {
    auto out = torch::zeros({shard});
    const int64_t begin = std::min<int64_t>(rank * shard, full.numel());
    const int64_t n = std::min<int64_t>(shard, full.numel() - begin);
    if (n > 0) out.narrow(0, 0, n).copy_(full.reshape({-1}).narrow(0, begin, n));
    return out;
  };
  auto g0 = torch::cat({slice(m.rank0[0], shard_of(5)), slice(m.rank0[2], shard_of(1))});
  auto g1 = slice(m.rank0[1], shard_of(6));
  EXPECT_TRUE(torch::equal(sp.storage(0), g0)) << sp.storage(0) << " vs " << g0;
  EXPECT_TRUE(torch::equal(sp.storage(1), g1)) << sp.storage(1) << " vs " << g1;
  EXPECT_EQ(sp[2].offset, shard_of(5));
  EXPECT_EQ(sp.layout(0).padded_numel, shard_of(5) + shard_of(1));
  // Values (not padding) this rank holds of an n-element parameter: n - rank · shard, within [0, shard].
  auto valid = [&](int64_t n) { return std::clamp<int64_t>(n - rank * shard_of(n), 0, shard_of(n)); };
  EXPECT_EQ(sp.layout(0).numel, valid(5) + valid(1));
  EXPECT_EQ(sp.layout(1).numel, valid(6));
  EXPECT_EQ(sp.numel(), 12);
}

TEST(ShardedParameters, QuantizedWeightsRoundComputeGathersOnlyWithinOneStep) {
  // qwZ: a layer's gather (Compute) moves int8; a guard's or a save's (Exact) stays bit-identical.
  Model m;
  MemoryLedger ledger;
  ZeroConfig z = thresholds(0);
  z.zero_quantized_weights = true;
  ShardedParameters sp(dp(), DtypePlan{}, z, m.params, ledger, Tier::Device);
  sp.gather({0, 1, 2}, GatherFor::Forward);
  bool rounded = false;
  for (size_t id = 0; id < 3; ++id) {
    const auto want = m.rank0[id];
    // One int8 step of a group (here one rank's whole padded chunk) is 2 max|x| / 256, and the
    // largest value gathered is b's 3.25. Rounding moves a value by half a step; the maximum itself
    // (128 clamped to 127) by a whole one, give or take fp32's rounding of 127 x step.
    const double step = 2.0 * 3.25 / 256.0 * (1 + 1e-5);
    EXPECT_LE((m.params[id].param - want).abs().max().item<double>(), step) << sp[id].name;
    rounded = rounded || !torch::equal(m.params[id].param, want);
  }
  EXPECT_EQ(rounded, dp().size() > 1) << "rounded exactly when something is gathered";
  for (size_t id = 0; id < 3; ++id) sp.release(id);
  sp.gather({0, 1, 2}, GatherFor::Exact);
  for (size_t id = 0; id < 3; ++id) EXPECT_TRUE(torch::equal(m.params[id].param, m.rank0[id])) << sp[id].name;
}

TEST(ShardedParameters, GatherAndReleaseRoundTripBitIdentically) {
  Model m;
  MemoryLedger ledger;
  ShardedParameters sp(dp(), DtypePlan{}, thresholds(1), m.params, ledger, Tier::Device);
  // c (1 element <= threshold 1) persists, gathered from the start; a and b are released: NaN of
  // their shape.
  EXPECT_TRUE(sp[2].persistent);
  EXPECT_TRUE(torch::equal(m.params[2].param, m.rank0[2]));
  for (size_t id : {0, 1}) {
    EXPECT_FALSE(sp[id].gathered);
    EXPECT_EQ(m.params[id].param.sizes(), m.rank0[id].sizes());
    EXPECT_TRUE(released(m.params[id].param)) << sp[id].name;
  }
  EXPECT_EQ(sp.live_numel(), 0);
  for (int round = 0; round < 2; ++round) {
    sp.gather({0, 1, 2});
    for (size_t id = 0; id < 3; ++id) EXPECT_TRUE(torch::equal(m.params[id].param, m.rank0[id])) << sp[id].name;
    EXPECT_EQ(sp.live_numel(), 11) << "a and b; the persistent c does not count";
    sp.release(0);
    EXPECT_TRUE(released(m.params[0].param));
    EXPECT_TRUE(torch::equal(m.params[1].param, m.rank0[1]));
    EXPECT_EQ(sp.live_numel(), 6);
    sp.release(2);  // persistent: stays
    EXPECT_TRUE(torch::equal(m.params[2].param, m.rank0[2]));
    sp.release(1);
    EXPECT_EQ(sp.live_numel(), 0);
  }
  EXPECT_EQ(sp.peak_live_numel(), 11);
  // The asynchronous form, and a hold that outlives release().
  auto pending = sp.gather_async({1});
  EXPECT_EQ(pending->ids, (std::vector<size_t>{1}));
  EXPECT_TRUE(sp.gather_async({1})->ids.empty()) << "already pending: not gathered twice";
  sp.finish(std::move(pending));
  EXPECT_TRUE(torch::equal(m.params[1].param, m.rank0[1]));
  sp[1].holds = 1;
  sp.release(1);
  EXPECT_TRUE(torch::equal(m.params[1].param, m.rank0[1])) << "held";
  sp[1].holds = 0;
  sp.release(1);
  EXPECT_TRUE(released(m.params[1].param));
}

TEST(ShardedParameters, ModelPersistenceBudgetStopsAtItsTotal) {
  // Each of three parameters is under the per-parameter threshold (2); the model-wide budget of 2
  // elements admits p0 (1) and p1 (total 2) but not p2 (total would be 4).
  std::vector<NamedParam> params = {{"p0", torch::ones({1}).requires_grad_(), 0},
                                    {"p1", torch::ones({1}).requires_grad_(), 0},
                                    {"p2", torch::ones({2}).requires_grad_(), 0}};
  MemoryLedger ledger;
  ShardedParameters sp(dp(), DtypePlan{}, thresholds(2, 2), params, ledger, Tier::Device);
  EXPECT_TRUE(sp[0].persistent);
  EXPECT_TRUE(sp[1].persistent);
  EXPECT_FALSE(sp[2].persistent);
  EXPECT_TRUE(released(params[2].param));
  EXPECT_FALSE(released(params[0].param));
}

TEST(ShardedParameters, SixteenBitShardsGatherTheRoundedValues) {
  // bf16 storage, fp32 compute: 1 + 2^-8 is stored (and gathered) as 1, 1 + 2^-7 exactly.
  std::vector<NamedParam> params = {{"w", torch::tensor({1.0f + 1.0f / 256, 1.0f + 1.0f / 128, -3.0f}).requires_grad_(), 0}};
  DtypePlan plan;
  plan.model = torch::kBFloat16;
  MemoryLedger ledger;
  ShardedParameters sp(dp(), plan, thresholds(0), params, ledger, Tier::Device);
  EXPECT_EQ(sp.storage(0).scalar_type(), torch::kBFloat16);
  sp.gather({0});
  EXPECT_EQ(params[0].param.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(params[0].param, torch::tensor({1.0f, 1.0f + 1.0f / 128, -3.0f}))) << params[0].param;
}

TEST(ShardedParameters, WrittenShardsAreWhatTheNextGatherReturns) {
  Model m;
  MemoryLedger ledger;
  ShardedParameters sp(dp(), DtypePlan{}, thresholds(0), m.params, ledger, Tier::Device);
  sp.gather({0, 1, 2});
  // The optimizer's new values for every parameter: -2 · the old ones. Each rank writes only its
  // own shards (fp32 masters of its span), in two pieces per group.
  const int rank = dp().rank();
  for (size_t g = 0; g < sp.num_groups(); ++g) {
    auto master = torch::zeros({sp.layout(g).padded_numel});
    for (size_t id = 0; id < 3; ++id) {
      if (sp[id].group != g) continue;
      const int64_t valid = sp[id].shard.valid(rank);
      if (valid > 0)
        master.narrow(0, sp[id].offset, valid)
            .copy_(m.rank0[id].reshape({-1}).narrow(0, sp[id].shard.begin(rank), valid) * -2.0f);
    }
    const int64_t half = master.numel() / 2;
    sp.write_range(g, half, master.narrow(0, half, master.numel() - half));
    sp.write_range(g, 0, master.narrow(0, 0, half));
  }
  sp.finish_writes();
  for (size_t id = 0; id < 3; ++id) EXPECT_TRUE(torch::equal(m.params[id].param, m.rank0[id])) << "not yet refreshed";
  sp.refresh({0, 1, 2});
  for (size_t id = 0; id < 3; ++id)
    EXPECT_TRUE(torch::equal(m.params[id].param, m.rank0[id] * -2.0f)) << sp[id].name << ": " << m.params[id].param;
  EXPECT_EQ(sp.live_numel(), 12);
}

}  // namespace
}  // namespace ds::zero
