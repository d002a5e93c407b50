// CollectiveLog (sequence numbers, the ring of the last 16, what a record says) and the Watchdog's
// timing logic with a fake probe (the abort path is tested end to end by the comm_watchdog_np2 entry).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "comm/watchdog.h"
#include "comm_test_env.h"
#include "util/error.h"

namespace ds::comm::test {
namespace {

TEST(CollectiveLog, SequenceNumbersAndRecords) {
  Communicator& c = world();
  const uint64_t first = c.collective_log().last_seq() + 1;
  std::vector<float> x(1024, 1.0f);
  c.all_reduce(Buffer(x.data(), 1024), ReduceOp::Max, "grad_bucket_0");
  Work w = c.broadcast_async(Buffer(x.data(), 1024), 0, "params");
  EXPECT_EQ(w.seq(), first + 1);
  w.wait();
  c.barrier("sync");
  const auto last = c.last_collectives();
  ASSERT_GE(last.size(), 3u);
  const CollectiveRecord& ar = last[last.size() - 3];
  EXPECT_EQ(ar.seq, first);
  EXPECT_EQ(ar.op, OpKind::AllReduce);
  EXPECT_EQ(ar.reduce, ReduceOp::Max);
  EXPECT_EQ(ar.bytes, 4096);
  EXPECT_EQ(ar.type, ElemType::Fp32);
  EXPECT_EQ(ar.tag, "grad_bucket_0");
  EXPECT_EQ(ar.state, CollectiveState::Done);
  EXPECT_EQ(last[last.size() - 2].op, OpKind::Broadcast);
  EXPECT_EQ(last[last.size() - 2].tag, "params");
  EXPECT_EQ(last.back().seq, first + 2);
  EXPECT_EQ(last.back().op, OpKind::Barrier);
  const std::string head = std::string("#").append(std::to_string(first)).append(" all_reduce max 4 KiB fp32 tag=grad_bucket_0 done");
  EXPECT_EQ(format_record(ar).rfind(head, 0), 0u)
      << format_record(ar);
  // Every rank numbers the same collectives the same way.
  int64_t seq = int64_t(c.collective_log().last_seq()), lo = seq, hi = seq;
  c.all_reduce(Buffer(&lo, 1), ReduceOp::Min);
  c.all_reduce(Buffer(&hi, 1), ReduceOp::Max);
  EXPECT_EQ(lo, hi);
}

TEST(CollectiveLog, KeepsTheLastSixteen) {
  CollectiveLog log;
  for (int i = 0; i < 40; ++i) {
    const uint64_t s = log.begin(OpKind::AllGather, i, ElemType::Bf16, ReduceOp::Sum, std::string("t").append(std::to_string(i)));
    EXPECT_EQ(s, uint64_t(i + 1));
    log.mark_running(s);
    if (i != 39) log.finish(s, i % 2 == 0);
  }
  const auto last = log.last();
  ASSERT_EQ(last.size(), CollectiveLog::kCapacity);
  EXPECT_EQ(last.front().seq, 25u);
  EXPECT_EQ(last.back().seq, 40u);
  EXPECT_EQ(last.back().state, CollectiveState::Running);
  EXPECT_EQ(last.front().state, CollectiveState::Done);    // i = 24: even
  EXPECT_EQ(last[1].state, CollectiveState::Failed);       // i = 25: odd
  log.finish(3, true);  // long gone from the ring: ignored
  EXPECT_NE(log.format().find("#40 all_gather 39 B bf16 tag=t39 running"), std::string::npos) << log.format();
}

TEST(Watchdog, FiresOnceWhenACollectiveRunsTooLong) {
  std::atomic<double> running{0.0};
  std::atomic<int> fired{0};
  std::atomic<double> reported{0.0};
  {
    Watchdog dog(
        0.2, [&]() -> std::optional<double> { return running.load() > 0 ? std::optional<double>(running.load()) : std::nullopt; },
        [&](double s) { reported = s; ++fired; });
    running = 0.1;  // under the timeout
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(fired.load(), 0);
    running = 5.0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (fired.load() == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(fired.load(), 1);
  EXPECT_EQ(reported.load(), 5.0);
}

TEST(Watchdog, TimeoutFromEnvironment) {
  const char* saved = std::getenv("DS_COMM_TIMEOUT_S");
  const std::string keep = saved ? saved : "";
  ::setenv("DS_COMM_TIMEOUT_S", "2.5", 1);
  EXPECT_EQ(comm_timeout_from_env(), 2.5);
  ::setenv("DS_COMM_TIMEOUT_S", "soon", 1);
  EXPECT_THROW(comm_timeout_from_env(), CommError);
  ::setenv("DS_COMM_TIMEOUT_S", "-1", 1);
  EXPECT_THROW(comm_timeout_from_env(), CommError);
  ::unsetenv("DS_COMM_TIMEOUT_S");
  EXPECT_EQ(comm_timeout_from_env(), kDefaultCommTimeoutS);
  if (saved) ::setenv("DS_COMM_TIMEOUT_S", keep.c_str(), 1);
}

}  // namespace
}  // namespace ds::comm::test
