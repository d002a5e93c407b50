// Topology over a real world: each group's communicator holds exactly the ranks DeepSpeed puts in
// that group, in DeepSpeed's order, and its collectives reduce over exactly them. Runs plain (world
// 1), and under mpirun -np 4 (every shape of 4 ranks) and -np 8 (DeepSpeed's (pipe, data, model) =
// (2,2,2), (1,4,2), (2,4,1)).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "comm/single_communicator.h"
#include "parallel/topology.h"
#include "parallel_test_env.h"
#include "util/error.h"

namespace ds::parallel::test {
namespace {

using Lists = std::vector<std::vector<int>>;

// Collectives on every group: all_gather of the global ranks gives the group's list in order, and
// all_reduce sums exactly its members. EXPECT (not ASSERT) so a failing rank keeps issuing the same
// collectives as the others.
void check_groups(const Topology& t) {
  const int r = t.rank();
  EXPECT_EQ(t.grid().rank_of(t.coords()), r);
  for (Group g : kAllGroups) {
    SCOPED_TRACE(std::string(to_string(g)) + " on " + t.describe());
    const std::vector<int>& mine = t.ranks(g);
    const Lists all = t.lists(g);
    EXPECT_NE(std::find(all.begin(), all.end(), mine), all.end());
    comm::Communicator& c = t.comm(g);
    EXPECT_EQ(c.size(), int(mine.size()));
    EXPECT_EQ(c.rank(), int(std::find(mine.begin(), mine.end(), r) - mine.begin()));
    std::vector<int64_t> gathered(mine.size());
    int64_t self = r;
    c.all_gather(comm::ConstBuffer(&self, 1), comm::Buffer(gathered.data(), int64_t(gathered.size())));
    EXPECT_EQ(std::vector<int64_t>(mine.begin(), mine.end()), gathered);
    double sum = r + 1;
    c.all_reduce(comm::Buffer(&sum, 1));
    EXPECT_EQ(sum, std::accumulate(mine.begin(), mine.end(), 0.0) + double(mine.size()));
  }
}

// Async all_reduces on every distinct group communicator, started in opposite orders on even and
// odd ranks: sub-communicators are separate contexts with their own workers, so nothing deadlocks
// and no payload lands in another group's reduction.
void check_independent(const Topology& t) {
  std::vector<comm::Communicator*> distinct;
  std::vector<Group> of;
  for (Group g : kAllGroups) {
    comm::Communicator* c = &t.comm(g);
    if (c->size() > 1 && std::find(distinct.begin(), distinct.end(), c) == distinct.end()) {
      distinct.push_back(c);
      of.push_back(g);
    }
  }
  std::vector<std::vector<float>> bufs(distinct.size());
  std::vector<comm::Work> works(distinct.size());
  std::vector<size_t> order(distinct.size());
  std::iota(order.begin(), order.end(), 0);
  if (t.rank() % 2) std::reverse(order.begin(), order.end());
  for (size_t i : order) {
    bufs[i].assign(1 << 14, float((t.rank() + 1) * (int(i) + 1)));
    works[i] = distinct[i]->all_reduce_async(comm::Buffer(bufs[i].data(), int64_t(bufs[i].size())));
  }
  for (size_t i = 0; i < distinct.size(); ++i) {
    works[i].wait();
    const auto& mine = t.ranks(of[i]);
    const float want = float(int(i) + 1) * float(std::accumulate(mine.begin(), mine.end(), 0) + int(mine.size()));
    EXPECT_EQ(bufs[i].front(), want) << to_string(of[i]);
    EXPECT_EQ(bufs[i].back(), want) << to_string(of[i]);
  }
}

TEST(Topology, AllSizesOneIsTheWorld) {
  auto w = world();
  Topology t(w);
  EXPECT_EQ(&t.data_parallel(), w.get());  // ZeRO gets the very communicator it has today
  EXPECT_EQ(&t.data(), w.get());
  EXPECT_EQ(t.shared_data_parallel(), w);
  EXPECT_TRUE(t.shape().trivial());
  for (Group g : {Group::Pipe, Group::Sequence, Group::Model}) EXPECT_EQ(t.comm(g).size(), 1) << to_string(g);
  check_groups(t);
}

TEST(Topology, WorldOfOne) {
  auto single = std::make_shared<comm::SingleCommunicator>();
  Topology t(single);
  EXPECT_EQ(&t.data_parallel(), single.get());
  EXPECT_EQ(t.describe(), "pipe 1 x data 1 x sequence 1 x model 1, expert 1; rank 0 = pipe 0, data 0, sequence 0, model 0");
  check_groups(t);
  try {
    Topology bad(single, TopologySizes{1, 2, 1, 1});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("tensor_parallel.autotp_size: world 1 is not divisible by autotp_size 2", 0), 0u)
        << e.what();
  }
}

// Every (pipe, tensor, sequence, expert) that fits a world of up to 4 ranks.
TEST(Topology, EveryShapeOfASmallWorld) {
  auto w = world();
  const int n = w->size();
  if (n > 4) GTEST_SKIP() << "world " << n << ": the 8-rank test covers DeepSpeed's shapes";
  int shapes = 0;
  for (int p = 1; p <= n; ++p)
    for (int m = 1; m <= n; ++m)
      for (int s = 1; s <= n; ++s)
        for (int e = 1; e <= n; ++e) {
          if (n % (p * m * s) != 0 || (n / (p * m * s)) % e != 0 || (e > 1 && s > 1)) continue;
          Topology t(w, TopologySizes{p, m, s, e});
          ++shapes;
          EXPECT_EQ(t.shape().data, n / (p * m * s));
          // A group is the world itself when it spans it, and one communicator when its members
          // equal another group's.
          if (s == 1) {
            EXPECT_EQ(&t.data_parallel(), &t.data());
          }
          if (e == 1) {
            EXPECT_EQ(&t.expert_data(), &t.data());
          }
          if (t.shape().data * s == n) {
            EXPECT_EQ(&t.data_parallel(), w.get());
          }
          check_groups(t);
          check_independent(t);
        }
  if (n == 4) {
    EXPECT_EQ(shapes, 14);
  }
}

TEST(Topology, RanksMustAgreeOnTheSizes) {
  auto w = world();
  if (w->size() < 2) GTEST_SKIP() << "needs 2 ranks or more";
  const TopologySizes sizes{1, w->rank() == 1 ? 2 : 1, 1, 1};
  try {
    Topology t(w, sizes);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "the ranks were given different parallel sizes: rank 0 has num_stages 1, autotp_size 1, "
              "sequence_parallel_size 1, ep_size 1, rank 1 has num_stages 1, autotp_size 2, sequence_parallel_size 1, "
              "ep_size 1 (every rank must build the topology from the same config)");
  }
  Topology ok(w);  // the world is still usable
  check_groups(ok);
}

// DeepSpeed's PipeModelDataParallelTopology shapes of issue 14, groups as its ProcessTopology
// (tests/unit/runtime/pipe/test_topology.py for (2,2,2); the same definitions for the others).
TEST(Topology, DeepSpeedShapesOnEightRanks) {
  auto w = world();
  if (w->size() != 8) GTEST_SKIP() << "needs 8 ranks";
  struct Case {
    int pipe, data, model;
    Lists pipe_lists, data_lists, model_lists;
  };
  const Case cases[] = {
      {2, 2, 2, {{0, 4}, {1, 5}, {2, 6}, {3, 7}}, {{0, 2}, {1, 3}, {4, 6}, {5, 7}}, {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
      {1, 4, 2, {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}, {{0, 2, 4, 6}, {1, 3, 5, 7}}, {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
      {2, 4, 1, {{0, 4}, {1, 5}, {2, 6}, {3, 7}}, {{0, 1, 2, 3}, {4, 5, 6, 7}}, {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}},
  };
  const int r = w->rank();
  for (const Case& c : cases) {
    Topology t(w, TopologySizes{c.pipe, c.model, 1, 1});
    SCOPED_TRACE(t.describe());
    EXPECT_EQ(t.shape().data, c.data);
    EXPECT_EQ(t.coords(), (std::vector<int>{r / (c.data * c.model), (r / c.model) % c.data, 0, r % c.model}));
    EXPECT_EQ(t.lists(Group::Pipe), c.pipe_lists);
    EXPECT_EQ(t.lists(Group::Data), c.data_lists);
    EXPECT_EQ(t.lists(Group::Model), c.model_lists);
    EXPECT_EQ(t.lists(Group::SequenceData), c.data_lists);  // ZeRO's group is the data axis
    auto mine = [r](const Lists& l) {
      for (const auto& g : l)
        if (std::find(g.begin(), g.end(), r) != g.end()) return g;
      return std::vector<int>{};
    };
    EXPECT_EQ(t.ranks(Group::Pipe), mine(c.pipe_lists));
    EXPECT_EQ(t.ranks(Group::Data), mine(c.data_lists));
    EXPECT_EQ(t.ranks(Group::Model), mine(c.model_lists));
    check_groups(t);
    check_independent(t);
  }
}

}  // namespace
}  // namespace ds::parallel::test
