// Async collectives: Work handles (wait, is_completed, RAII wait on destruction, errors), issue
// order with blocking calls, real progress in the background, and two communicators at once.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <thread>

#include "comm_test_env.h"
#include "util/error.h"

namespace ds::comm::test {
namespace {

TEST(Async, TwoOpsOverlapWithWorkThenWait) {
  for (const Variant& v : variants()) {
    Communicator& c = *v.comm;
    const int w = c.size(), r = c.rank();
    std::vector<float> grads(300001, float(r + 1));
    std::vector<float> shard(1001, float(r)), gathered(size_t(1001 * w));
    Work a = c.all_reduce_async(Buffer(grads.data(), int64_t(grads.size())), ReduceOp::Sum, "grads");
    Work b = c.all_gather_async(ConstBuffer(shard.data(), 1001), Buffer(gathered.data(), 1001 * w), "params");
    EXPECT_EQ(b.seq(), a.seq() + 1) << v.name;
    // Work on the caller's thread while the collectives run.
    std::vector<double> busy(200000);
    std::iota(busy.begin(), busy.end(), 0.0);
    volatile double sink = std::accumulate(busy.begin(), busy.end(), 0.0);
    (void)sink;
    b.wait();
    a.wait();
    EXPECT_TRUE(a.is_completed() && b.is_completed());
    const float want = float(w * (w + 1) / 2);
    EXPECT_TRUE(all_equal(int64_t(grads.size()), [&](int64_t i) { return grads[size_t(i)]; }, [&](int64_t) { return want; }))
        << v.name;
    EXPECT_TRUE(all_equal(1001 * w, [&](int64_t i) { return gathered[size_t(i)]; }, [&](int64_t i) { return double(i / 1001); }))
        << v.name;
  }
}

TEST(Async, ProgressesWithoutTheCallerCallingIntoTheCommunicator) {
  Communicator& c = world();
  std::vector<float> x(1 << 20, 1.0f);
  Work work = c.all_reduce_async(Buffer(x.data(), int64_t(x.size())));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!work.is_completed() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(work.is_completed()) << "an async all_reduce made no progress while the caller slept";
  work.wait();
  EXPECT_EQ(x[12345], float(c.size()));
}

TEST(Async, DestroyingAnUnfinishedWorkWaitsForIt) {
  Communicator& c = world();
  std::vector<float> x(200000, 2.0f);
  { Work dropped = c.all_reduce_async(Buffer(x.data(), int64_t(x.size())), ReduceOp::Sum, "dropped"); }
  EXPECT_EQ(x[0], 2.0f * float(c.size()));  // finished before the handle's scope ended
  EXPECT_EQ(x[199999], 2.0f * float(c.size()));
  Work moved = c.barrier_async();
  Work target = std::move(moved);
  EXPECT_TRUE(moved.is_completed());  // a moved-from handle is empty
  target.wait();
  Work empty;
  EXPECT_TRUE(empty.is_completed());
  empty.wait();
}

TEST(Async, AsyncThenBlockingKeepIssueOrder) {
  for (const Variant& v : variants()) {
    Communicator& c = *v.comm;
    std::vector<int64_t> a(5000, c.rank()), b(5000, 1);
    Work wa = c.all_reduce_async(Buffer(a.data(), 5000), ReduceOp::Max);
    c.all_reduce(Buffer(b.data(), 5000));  // queued behind wa on every rank
    EXPECT_TRUE(wa.is_completed()) << v.name << ": the blocking call overtook an earlier async one";
    wa.wait();
    EXPECT_EQ(a[4999], c.size() - 1);
    EXPECT_EQ(b[0], c.size());
  }
}

TEST(Async, FailedCollectiveRethrowsFromWait) {
  if (world().size() != 2) GTEST_SKIP() << "uses a deliberate size mismatch between exactly 2 ranks";
  const Variant* ring = nullptr;
  for (const Variant& v : variants())
    if (v.name == "mpi/ring") ring = &v;
  ASSERT_NE(ring, nullptr);
  Communicator& c = *ring->comm;
  const int64_t chunk = c.rank() == 0 ? 2 : 5;
  std::vector<float> in(size_t(2 * chunk)), out(static_cast<size_t>(chunk));
  Work work = c.reduce_scatter_async(ConstBuffer(in.data(), 2 * chunk), Buffer(out.data(), chunk));
  if (c.rank() == 0) EXPECT_THROW(work.wait(), CommError);
  else EXPECT_NO_THROW(work.wait());
  c.barrier();
}

TEST(Async, TwoCommunicatorsOnTwoThreads) {
  if (variants().size() < 3) GTEST_SKIP() << "needs the MPI communicators";
  Communicator& c1 = *variants()[1].comm;
  Communicator& c2 = *variants()[2].comm;
  std::vector<float> x(100000, 1.0f), y(100000, 2.0f);
  std::thread t([&] { for (int i = 0; i < 5; ++i) c2.all_reduce(Buffer(y.data(), 100000), ReduceOp::Max); });
  for (int i = 0; i < 5; ++i) c1.all_reduce(Buffer(x.data(), 100000), ReduceOp::Max);
  t.join();
  EXPECT_EQ(x[777], 1.0f);
  EXPECT_EQ(y[777], 2.0f);
}

}  // namespace
}  // namespace ds::comm::test
