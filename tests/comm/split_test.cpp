// Communicator::split: sub-communicators by color and key (MPI_Comm_split semantics), their
// collectives over exactly their members, independence from the parent and from siblings, and the
// split's own record in the collective log. Runs at world size 1 (SingleCommunicator) and under
// mpirun -np 2 / 4 (MpiCommunicator).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "comm_test_env.h"
#include "util/error.h"

namespace ds::comm::test {
namespace {

// The global ranks in `comm` (a sub-communicator), in its rank order.
std::vector<int64_t> members(Communicator& comm, int global_rank) {
  std::vector<int64_t> out(size_t(comm.size()));
  int64_t mine = global_rank;
  comm.all_gather(ConstBuffer(&mine, 1), Buffer(out.data(), int64_t(out.size())), "members");
  return out;
}

TEST(Split, ByParityOrderedByKey) {
  Communicator& w = world();
  const int r = w.rank(), n = w.size();
  // Odd and even ranks; within a group, ranked by descending global rank (key = -rank).
  auto sub = w.split(r % 2, -r, "parity");
  ASSERT_NE(sub, nullptr);
  std::vector<int64_t> want;
  for (int g = n - 1; g >= 0; --g)
    if (g % 2 == r % 2) want.push_back(g);
  EXPECT_EQ(sub->size(), int(want.size()));
  EXPECT_EQ(members(*sub, r), want);
  EXPECT_EQ(sub->rank(), int(std::find(want.begin(), want.end(), r) - want.begin()));
  int64_t sum = r;
  sub->all_reduce(Buffer(&sum, 1));
  EXPECT_EQ(sum, std::accumulate(want.begin(), want.end(), int64_t(0)));
  // The parent still works and counts the split as one of its collectives.
  const auto last = w.last_collectives();
  int64_t total = r;
  w.all_reduce(Buffer(&total, 1));
  EXPECT_EQ(total, int64_t(n) * (n - 1) / 2);
  bool logged = false;
  for (const auto& rec : last) logged = logged || (rec.op == OpKind::Split && rec.tag == "parity" &&
                                                   rec.state == CollectiveState::Done);
  EXPECT_TRUE(logged);
  EXPECT_EQ(sub->collective_log().last_seq(), 2u);  // its own numbering: members + all_reduce
}

TEST(Split, NoGroupGetsNullAndTheOthersStillMeet) {
  Communicator& w = world();
  const int r = w.rank(), n = w.size();
  // Rank 0 joins no group; everyone else forms one.
  auto sub = w.split(r == 0 ? Communicator::kNoGroup : 7, r);
  if (r == 0) {
    EXPECT_EQ(sub, nullptr);
  } else {
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->size(), n - 1);
    EXPECT_EQ(sub->rank(), r - 1);
    int64_t x = 1;
    sub->all_reduce(Buffer(&x, 1));
    EXPECT_EQ(x, n - 1);
  }
  EXPECT_THROW(w.split(-2, 0), CommError);  // refused before anything is sent, on every rank
}

TEST(Split, SiblingsAreIndependentContexts) {
  // Two overlapping sub-communicators (the whole world twice, and the parity groups), with async
  // collectives started in opposite orders on even and odd ranks: matching is per communicator, so
  // this must neither deadlock nor mix payloads.
  Communicator& w = world();
  const int r = w.rank(), n = w.size();
  auto all = w.split(0, r, "all");
  auto parity = w.split(r % 2, r, "parity");
  ASSERT_NE(all, nullptr);
  ASSERT_NE(parity, nullptr);
  std::vector<float> a(4096, float(r + 1)), p(4096, float(10 * (r + 1)));
  Work wa, wp;
  if (r % 2 == 0) {
    wa = all->all_reduce_async(Buffer(a.data(), int64_t(a.size())));
    wp = parity->all_reduce_async(Buffer(p.data(), int64_t(p.size())));
  } else {
    wp = parity->all_reduce_async(Buffer(p.data(), int64_t(p.size())));
    wa = all->all_reduce_async(Buffer(a.data(), int64_t(a.size())));
  }
  wa.wait();
  wp.wait();
  float want_p = 0;
  for (int g = r % 2; g < n; g += 2) want_p += float(10 * (g + 1));
  EXPECT_EQ(a.front(), float(n * (n + 1) / 2));
  EXPECT_EQ(a.back(), float(n * (n + 1) / 2));
  EXPECT_EQ(p.front(), want_p);
  EXPECT_EQ(p.back(), want_p);
}

TEST(Split, OutlivesItsParentAndSplitsAgain) {
  Communicator& w = world();
  const int r = w.rank(), n = w.size();
  auto child = w.split(0, n - 1 - r, "reversed");  // the world, ranks reversed
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->rank(), n - 1 - r);
  auto grandchild = child->split(child->rank() / 2, child->rank(), "pairs");
  child.reset();  // the grandchild keeps working without its parent
  ASSERT_NE(grandchild, nullptr);
  std::vector<int64_t> want;
  const int cr = n - 1 - r;
  for (int c = (cr / 2) * 2; c < std::min(n, (cr / 2) * 2 + 2); ++c) want.push_back(n - 1 - c);
  EXPECT_EQ(members(*grandchild, r), want);
}

TEST(Split, SingleBackendSplitsIntoAWorldOfOne) {
  SingleCommunicator c;
  auto sub = c.split(3, 0, "tp");
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->size(), 1);
  EXPECT_EQ(sub->backend(), Backend::Single);
  EXPECT_EQ(c.split(Communicator::kNoGroup, 0), nullptr);
  ASSERT_EQ(c.last_collectives().size(), 2u);
  EXPECT_EQ(format_record(c.last_collectives().front()).rfind("#1 split tag=tp done", 0), 0u)
      << format_record(c.last_collectives().front());
}

}  // namespace
}  // namespace ds::comm::test
