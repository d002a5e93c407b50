// CommsLogger (DeepSpeed's comms_logger): its arithmetic against values worked out from DeepSpeed's
// calc_bw_log, trim_mean and convert_size, and what real collectives on the run's communicator record
// (world 1 alone, 2 and 4 under mpirun): one row per operation and message size, DeepSpeed's message
// size (an all-gather's per-rank input), prof_ops filtering and debug names.
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <thread>
#include <vector>

#include "comm/comms_logger.h"
#include "comm_test_env.h"

namespace ds::comm::test {
namespace {

CommsLoggerConfig enabled_config() {
  CommsLoggerConfig c;
  c.enabled = true;
  return c;
}

TEST(CommsLogger, BandwidthIsDeepSpeedsCalcBwLog) {
  // 1 MB in 2 ms at world 4: 500,000 bytes/ms = 4 Gbit/s.
  const int64_t mb = 1000000;
  auto bw = comm_bandwidth(OpKind::AllReduce, mb, 4, 2.0);
  EXPECT_DOUBLE_EQ(bw.algbw_gbps, 8.0);             // 2·size/t
  EXPECT_DOUBLE_EQ(bw.busbw_gbps, 4.0 * 2 * 3 / 4);  // size/t · 2(n-1)/n
  bw = comm_bandwidth(OpKind::AllGather, mb, 4, 2.0);  // per-rank input scaled to the whole
  EXPECT_DOUBLE_EQ(bw.algbw_gbps, 16.0);
  EXPECT_DOUBLE_EQ(bw.busbw_gbps, 12.0);
  bw = comm_bandwidth(OpKind::ReduceScatter, mb, 4, 2.0);
  EXPECT_DOUBLE_EQ(bw.algbw_gbps, 4.0);
  EXPECT_DOUBLE_EQ(bw.busbw_gbps, 3.0);
  bw = comm_bandwidth(OpKind::AllToAll, mb, 4, 2.0);
  EXPECT_DOUBLE_EQ(bw.busbw_gbps, 3.0);
  bw = comm_bandwidth(OpKind::Broadcast, mb, 4, 2.0);
  EXPECT_DOUBLE_EQ(bw.algbw_gbps, 4.0);
  EXPECT_DOUBLE_EQ(bw.busbw_gbps, 4.0);
}

TEST(CommsLogger, TrimmedMeanAndSizesAreDeepSpeeds) {
  EXPECT_EQ(trimmed_mean({}, 0.1), 0.0);
  EXPECT_DOUBLE_EQ(trimmed_mean({5, 1, 3, 2, 4}, 0.1), 3.0);  // round(0.5) = 0: nothing trimmed
  // 15 values: round(1.5) = 2 trimmed at each end.
  EXPECT_DOUBLE_EQ(trimmed_mean({100, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 50}, 0.1), 1.0);
  // 25 values: round(2.5) = 2 (half to even).
  std::vector<double> v(25, 2.0);
  v[0] = v[1] = 1000;
  v[2] = 14;  // kept
  EXPECT_DOUBLE_EQ(trimmed_mean(v, 0.1), (20 * 2.0 + 14) / 21);
  EXPECT_EQ(convert_size(0), "0B");
  EXPECT_EQ(convert_size(4), "4.0 B");
  EXPECT_EQ(convert_size(1536), "1.5 KB");
  EXPECT_EQ(convert_size(711838720), "678.86 MB");
}

TEST(CommsLogger, RecordsEachOperationAndMessageSizeOfRealCollectives) {
  Communicator& c = world();
  const int n = c.size();
  CommsLogger& log = CommsLogger::global();
  log.reset();
  log.configure(enabled_config());
  std::vector<float> x(1024, 1.0f), gathered(1024 * size_t(n));
  for (int i = 0; i < 3; ++i) c.all_reduce(Buffer(x.data(), 1024), ReduceOp::Sum, "grads");
  c.all_reduce(Buffer(x.data(), 256), ReduceOp::Sum, "grads");
  c.all_gather(ConstBuffer(x.data(), 1024), Buffer(gathered.data(), 1024 * n), "params");
  c.barrier("sync");
  auto rows = log.summary();
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].name, "all_reduce");
  EXPECT_EQ(rows[0].msg_bytes, 1024);  // sizes ascending within an operation
  EXPECT_EQ(rows[0].count, 1);
  EXPECT_EQ(rows[1].msg_bytes, 4096);
  EXPECT_EQ(rows[1].count, 3);
  EXPECT_GT(rows[1].total_latency_ms, 0.0);
  EXPECT_EQ(rows[2].name, "all_gather");
  EXPECT_EQ(rows[2].msg_bytes, 4096) << "DeepSpeed logs an all-gather's per-rank input";
  EXPECT_EQ(rows[3].name, "barrier");
  const std::string table = log.format_summary();
  EXPECT_EQ(table.rfind("Comm. Op            Message Size        Count               Total Latency(ms)   ", 0), 0u) << table;
  EXPECT_NE(table.find("\nall_reduce\n                    1.0 KB              1                   "), std::string::npos)
      << table;
  EXPECT_NE(table.find("4.0 KB              3                   "), std::string::npos) << table;

  // prof_all false: only what prof_ops names (DeepSpeed's spelling or a caller's tag); debug names the caller.
  log.reset();
  log.configure({true, false, /*prof_all=*/false, /*debug=*/true, {"all_gather_into_tensor", "sync"}});
  c.all_reduce(Buffer(x.data(), 1024), ReduceOp::Sum, "grads");
  c.all_gather(ConstBuffer(x.data(), 1024), Buffer(gathered.data(), 1024 * n), "params");
  c.barrier("sync");
  rows = log.summary();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "all_gather | [Caller: params]");
  EXPECT_EQ(rows[1].name, "barrier | [Caller: sync]");

  log.configure({});  // off: nothing more is recorded
  log.reset();
  c.all_reduce(Buffer(x.data(), 1024), ReduceOp::Sum, "grads");
  EXPECT_TRUE(log.summary().empty());
}

// show_straggler: a rank that arrives late makes the others wait inside the collective; the
// breakdown puts that wait in the straggler columns and keeps the fastest rank's time as the
// operation's. A row not every rank has (here: recorded on rank 0 alone) is not compared.
TEST(CommsLogger, StragglerBreakdownSeparatesTheWaitFromTheOperation) {
  Communicator& c = world();
  if (c.size() < 2) GTEST_SKIP() << "needs a rank to wait for";
  CommsLogger& log = CommsLogger::global();
  log.reset();
  log.configure(enabled_config());
  std::vector<float> x(1024, 1.0f);
  c.barrier("start");
  log.reset();
  for (int i = 0; i < 3; ++i) {
    if (c.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(40));
    c.all_reduce(Buffer(x.data(), 1024), ReduceOp::Sum, "grads");
  }
  if (c.rank() == 0) log.record(OpKind::AllGather, "params", 4096, c.size(), 0.001);
  const std::string table = log.format_straggler_summary(c);
  ASSERT_NE(table.find("Breakdown with straggler effect"), std::string::npos) << table;
  EXPECT_NE(table.find("Comm. Op            Message Size        Count               Total comm lat(ms)  "
                       "Total straggler(ms) Avg comm lat(ms)    Avg straggler(ms)"),
            std::string::npos)
      << table;
  const size_t row = table.find("\nall_reduce\n");
  ASSERT_NE(row, std::string::npos) << table;
  std::istringstream fields(table.substr(row + 12, table.find('\n', row + 12) - row - 12));
  std::string size, unit;
  int64_t count = 0;
  double op_total = 0, wait_total = 0;
  fields >> size >> unit >> count >> op_total >> wait_total;
  EXPECT_EQ(size + " " + unit, "4.0 KB") << table;
  EXPECT_EQ(count, 3);
  if (c.rank() == 0) {  // waited ~40 ms three times for rank 1
    EXPECT_GT(wait_total, 90.0) << table;
    EXPECT_LT(op_total, wait_total) << table;
  }
  if (c.rank() == 1) {
    EXPECT_LT(wait_total, 30.0) << "the late rank waits for nobody\n" << table;
  }
  if (c.rank() == 0) {
    EXPECT_NE(table.find("not run alike on every rank"), std::string::npos) << "rank 0's own row\n" << table;
  }
  log.configure({});
  log.reset();
}

}  // namespace
}  // namespace ds::comm::test
