// PartitionedStates (stages 1 and 2) on the run's data-parallel group (one rank alone, two under
// mpirun -np 2): after two micro-steps each rank's local_grads is the mean over ranks of the
// summed gradients, cut to this rank's partition of the padded flat group — the same at stage 1
// (reduce-scatter at the boundary) and stage 2 (bucketed as autograd completes) — and with
// sub-group steps armed, each range of the partition is reported once, already final.
#include "zero/partitioned_states.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <tuple>
#include <vector>

#include "util/error.h"
#include "zero_test_env.h"

namespace ds::zero {
namespace {

using test::dp;

// Group 0: p0 [3,4], p1 [5], p2 [7] (24 elements); group 1: p3 [3]. Each group is padded to a
// multiple of lcm(16, 2·world) = 16 (worlds 1 and 2): 32 and 16 elements. At world 2 the group-0
// partition boundary (16) cuts p1, and rank 1's group-1 partition is all padding.
const std::vector<std::vector<int64_t>> kShapes = {{3, 4}, {5}, {7}, {3}};
const std::vector<int> kGroup = {0, 0, 0, 1};

torch::Tensor coef(size_t k) {
  return torch::arange(std::accumulate(kShapes[k].begin(), kShapes[k].end(), int64_t{1}, std::multiplies<>()),
                       torch::kFloat32)
             .view(kShapes[k]) - float(3 * k);
}

std::vector<NamedParam> make_params() {
  std::vector<NamedParam> out;
  for (size_t k = 0; k < kShapes.size(); ++k)  // rank-dependent: rank 0's values must win
    out.push_back({"p" + std::to_string(k), (coef(k) * 0.5f + float(dp().rank())).requires_grad_(), kGroup[k]});
  return out;
}

// Micro-step m on rank r: gradient (r + 1 + m) · coef(k), integers, so sums and means are exact.
void backward(const std::vector<NamedParam>& params, int micro) {
  auto loss = torch::zeros({});
  for (size_t k = 0; k < params.size(); ++k) loss = loss + (params[k].param * coef(k)).sum();
  (loss * float(dp().rank() + 1 + micro)).backward();
}

// What local_grads(g) must be: the mean over ranks r of sum over micro-steps of (r + 1 + m)·coef,
// flattened in parameter order, zero-padded to 32 / 16 and cut to this rank's partition.
torch::Tensor expected_grads(size_t g, int micro_steps) {
  const int world = dp().size();
  float factor = 0;
  for (int r = 0; r < world; ++r)
    for (int m = 0; m < micro_steps; ++m) factor += float(r + 1 + m);
  factor /= float(world);
  std::vector<torch::Tensor> flat;
  for (size_t k = 0; k < kShapes.size(); ++k)
    if (size_t(kGroup[k]) == g) flat.push_back(coef(k).reshape({-1}) * factor);
  auto full = torch::cat(flat);
  const int64_t padded = g == 0 ? 32 : 16, part = padded / world;
  full = torch::cat({full, torch::zeros({padded - full.numel()})});
  return full.narrow(0, dp().rank() * part, part);
}

torch::Tensor expected_params(size_t g) {
  const int world = dp().size();
  std::vector<torch::Tensor> flat;
  for (size_t k = 0; k < kShapes.size(); ++k)
    if (size_t(kGroup[k]) == g) flat.push_back(coef(k).reshape({-1}) * 0.5f);  // rank 0's values
  auto full = torch::cat(flat);
  const int64_t padded = g == 0 ? 32 : 16, part = padded / world;
  full = torch::cat({full, torch::zeros({padded - full.numel()})});
  return full.narrow(0, dp().rank() * part, part);
}

struct States {
  Config config;
  MemoryLedger ledger;
  std::vector<NamedParam> params = make_params();
  std::unique_ptr<PartitionedStates> states;
  States(int stage, int64_t sub_group_steps = 0, bool ignore_unused_parameters = true) {
    config.zero_optimization.stage = stage;
    config.zero_optimization.ignore_unused_parameters = ignore_unused_parameters;
    config.zero_optimization.reduce_bucket_size = 8;  // p3 | p2 | p1 | p0: four buckets at stage 2
    ModelStatesOptions o;
    o.config = &config;
    o.zero.stage = stage;
    o.comm = &dp();
    o.ledger = &ledger;
    o.sub_group_steps = sub_group_steps;
    states = std::make_unique<PartitionedStates>(o, params);
  }
  // Micro-steps [first, first + n); the accumulation boundary after the last.
  void run(int first, int n) {
    for (int m = first; m < first + n; ++m) {
      states->before_forward();
      backward(params, m);
      states->after_backward();
    }
    states->reduce_gradients();
  }
};

TEST(PartitionedStates, LocalGradsAreTheMeanOverRanksOfThisRanksPartition) {
  std::vector<std::vector<torch::Tensor>> by_stage;
  for (int stage : {1, 2}) {
    States s(stage);
    ASSERT_EQ(s.states->num_groups(), 2u);
    for (size_t g = 0; g < 2; ++g) {
      EXPECT_EQ(s.states->partition(g).padded_numel(), g == 0 ? 32 : 16);
      EXPECT_TRUE(torch::equal(s.states->local_params(g), expected_params(g)))
          << "stage " << stage << " group " << g << ": " << s.states->local_params(g);
    }
    s.run(0, 2);
    std::vector<torch::Tensor> grads;
    for (size_t g = 0; g < 2; ++g) {
      grads.push_back(s.states->local_grads(g).clone());
      EXPECT_TRUE(torch::equal(grads[g], expected_grads(g, 2)))
          << "stage " << stage << " group " << g << ": " << grads[g] << " expected " << expected_grads(g, 2);
    }
    by_stage.push_back(grads);
    // The next accumulation starts from zero: one micro-step (m = 0) alone.
    s.states->zero_grads();
    s.run(0, 1);
    for (size_t g = 0; g < 2; ++g)
      EXPECT_TRUE(torch::equal(s.states->local_grads(g), expected_grads(g, 1))) << "stage " << stage << " group " << g;
  }
  for (size_t g = 0; g < 2; ++g) EXPECT_TRUE(torch::equal(by_stage[0][g], by_stage[1][g])) << "stage 1 vs 2, group " << g;
}

TEST(PartitionedStates, WriteBackGathersEveryRanksUpdatedPartition) {
  for (int stage : {1, 2}) {
    States s(stage);
    // Every rank's optimizer writes 10 + its partition offsets; afterwards every rank's full
    // parameters hold all ranks' values.
    std::vector<torch::Tensor> masters;
    for (size_t g = 0; g < 2; ++g) {
      const auto& part = s.states->partition(g);
      masters.push_back(torch::arange(part.begin(dp().rank()), part.end(dp().rank()), torch::kFloat32) + 10.0f);
    }
    s.states->write_back(masters);
    int64_t offset = 0;
    for (size_t k = 0; k < kShapes.size(); ++k) {
      if (k == 3) offset = 0;  // group 1 starts over
      const auto& p = s.params[k].param;
      auto want = (torch::arange(offset, offset + p.numel(), torch::kFloat32) + 10.0f).view(p.sizes());
      EXPECT_TRUE(torch::equal(p, want)) << "stage " << stage << " p" << k << ": " << p;
      offset += p.numel();
    }
  }
}

TEST(PartitionedStates, WriteBackStartsEachChunksGatherOnceItIsUpdated) {
  // One group of 300 + 200 elements, padded to 512: partitions of 512 / world. With
  // allgather_bucket_size 64 · world each rank's partition is gathered in chunks of 64 elements,
  // and a chunk's all-gather starts the moment the optimizer's pieces cover it, before the rest of
  // the partition is written; pieces of any size, in order, give the same parameters.
  Config config;
  const int world = dp().size(), rank = dp().rank();
  config.zero_optimization.stage = 2;
  config.zero_optimization.allgather_bucket_size = 64 * world;
  MemoryLedger ledger;
  std::vector<NamedParam> params = {{"a", torch::zeros({300}).requires_grad_(), 0},
                                    {"b", torch::zeros({20, 10}).requires_grad_(), 0}};
  ModelStatesOptions o;
  o.config = &config;
  o.zero.stage = 2;
  o.comm = &dp();
  o.ledger = &ledger;
  PartitionedStates states(o, params);
  const FlatPartition& part = states.partition(0);
  ASSERT_EQ(part.padded_numel(), 512);
  const int64_t chunk = world == 1 ? part.partition_size() : 64;
  EXPECT_EQ(states.write_back_pieces(), std::vector<int64_t>{chunk});
  auto master = torch::arange(part.begin(rank), part.end(rank), torch::kFloat32) + 7.0f;
  const auto gathers = [&] {
    int64_t n = 0;
    for (const auto& t : dp().collective_log().totals())
      if (t.tag == "allgather_parameters") n = t.calls;
    return n;
  };
  const int64_t before = gathers();
  states.write_back_range(0, 0, master.narrow(0, 0, 70));  // covers the first chunk (at world > 1)
  EXPECT_EQ(gathers() - before, world == 1 ? 0 : 1) << "the first chunk's all-gather started before the rest";
  states.write_back_range(0, 70, master.narrow(0, 70, 3));
  states.write_back_range(0, 73, master.narrow(0, 73, master.numel() - 73));
  states.finish_write_back();
  EXPECT_EQ(gathers() - before, world == 1 ? 0 : part.partition_size() / chunk);
  auto want = torch::arange(0, 500, torch::kFloat32) + 7.0f;
  EXPECT_TRUE(torch::equal(params[0].param, want.narrow(0, 0, 300))) << params[0].param;
  EXPECT_TRUE(torch::equal(params[1].param, want.narrow(0, 300, 200).view({20, 10}))) << params[1].param;
}

// ignore_unused_parameters false: a parameter is used when some micro-step of the window reached it;
// one missed on any rank stops every rank at the boundary, each naming it.
TEST(PartitionedStates, UnusedParameterStopsEveryRankAtTheBoundaryNamingIt) {
  const int world = dp().size(), rank = dp().rank();
  for (int stage : {1, 2}) {
    SCOPED_TRACE(stage);
    States s(stage, 0, /*ignore_unused_parameters=*/false);
    auto micro_step = [&](const std::vector<size_t>& used) {
      s.states->before_forward();
      auto loss = torch::zeros({});
      for (size_t k : used) loss = loss + (s.params[k].param * coef(k)).sum();
      loss.backward();
      s.states->after_backward();
    };
    auto boundary = [&]() -> std::string {
      try {
        s.states->reduce_gradients();
      } catch (const ConfigError& e) {
        EXPECT_EQ(e.path(), "zero_optimization.ignore_unused_parameters");
        s.states->zero_grads();
        return e.what();
      }
      s.states->zero_grads();
      return "";
    };
    micro_step({0, 1, 3});
    micro_step({0, 1, 2, 3});
    EXPECT_EQ(boundary(), "") << "p2 took part in the second micro-step";
    micro_step({0, 1});
    micro_step(rank == 0 ? std::vector<size_t>{0, 1, 2} : std::vector<size_t>{0, 1});
    const std::string what = boundary();
    EXPECT_NE(what.find(fmt::format("p3 (on {0} of {0} ranks)", world)), std::string::npos) << what;
    if (world > 1) {
      EXPECT_NE(what.find("2 trainable parameters got no gradient"), std::string::npos) << what;
      EXPECT_NE(what.find(fmt::format("p2 (on {} of {} ranks)", world - 1, world)), std::string::npos) << what;
    } else {
      EXPECT_NE(what.find("1 trainable parameter got no gradient"), std::string::npos) << what;
    }
    micro_step({0, 1, 2, 3});
    EXPECT_EQ(boundary(), "") << "each window starts afresh";
  }
}

TEST(PartitionedStates, SubGroupStepsSeeFinalGradientsOnceEach) {
  // Stage 2 with 5-element sub-groups of this rank's partitions (16 and 8 elements at world 2, 32
  // and 16 alone). A range is reported during backward iff it holds parameter values of this rank
  // (a bucket feeds it), at the end of the pass otherwise (padding only); either way it is reported
  // once, and what local_grads holds for it then is already final.
  States s(2, 5);
  using Range = std::tuple<size_t, int64_t, int64_t>;
  std::vector<Range> fired, fired_in_backward;
  std::vector<torch::Tensor> at_fire;
  bool in_backward = false;
  s.states->before_forward();
  backward(s.params, 0);
  s.states->after_backward();  // micro-step 0: not armed
  ASSERT_TRUE(s.states->arm_sub_group_steps([&](size_t g, int64_t b, int64_t e) {
    fired.emplace_back(g, b, e);
    if (in_backward) fired_in_backward.emplace_back(g, b, e);
    at_fire.push_back(s.states->local_grads(g).narrow(0, b, e - b).clone());
  }));
  s.states->before_forward();
  in_backward = true;
  backward(s.params, 1);
  in_backward = false;
  s.states->after_backward();
  s.states->reduce_gradients();

  const int world = dp().size(), rank = dp().rank();
  std::set<Range> want, want_early;
  for (size_t g = 0; g < 2; ++g) {
    const int64_t part = (g == 0 ? 32 : 16) / world, real = (g == 0 ? 24 : 3);
    const int64_t mine_end = std::clamp<int64_t>(real - rank * part, 0, part);  // values in [0, mine_end)
    for (int64_t b = 0; b < part; b += 5) {
      want.emplace(g, b, std::min<int64_t>(b + 5, part));
      if (b < mine_end) want_early.emplace(g, b, std::min<int64_t>(b + 5, part));
    }
  }
  EXPECT_EQ(fired.size(), want.size()) << "each range once";
  EXPECT_EQ(std::set<Range>(fired.begin(), fired.end()), want);
  EXPECT_EQ(std::set<Range>(fired_in_backward.begin(), fired_in_backward.end()), want_early);
  for (size_t i = 0; i < fired.size(); ++i) {
    auto [g, b, e] = fired[i];
    EXPECT_TRUE(torch::equal(at_fire[i], expected_grads(g, 2).narrow(0, b, e - b)))
        << "group " << g << " [" << b << ", " << e << ") was reported before its gradients were final";
  }
}

}  // namespace
}  // namespace ds::zero
