// csv_monitor byte for byte. The expected bytes are hard-coded from DeepSpeed's csvMonitor
// (deepspeed/monitor/csv_monitor.py: header "step,<last tag component>" once per file and monitor,
// csv.writer rows ending "\r\n", Python's repr for floats), and, where /usr/bin/python3 exists,
// also produced by deepspeed_csv_reference.py, which restates that code with Python's csv module.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "profiling/csv_monitor.h"
#include "profiling_test_util.h"
#include "util/error.h"

namespace ds::test {
namespace {

// A short run: train_loss at the backward boundary (x = samples before the step), lr and the fp16
// loss scale after it, a timer, then tags that exercise naming, quoting and number text.
std::vector<std::vector<MonitorEvent>> batches() {
  const double inf = std::numeric_limits<double>::infinity();
  return {
      {{"Train/Samples/train_loss", 2.5, 0}},
      {{"Train/Samples/lr", 0.001, 8}, {"Train/Samples/loss_scale", 65536.0, 8, ValueKind::Int}},
      {{"Train/Samples/train_loss", 1.0 / 3.0, 8}},
      {{"Train/Samples/lr", 1e-05, 16},
       {"Train/Samples/loss_scale", 32768.0, 16},
       {"Train/Samples/elapsed_time_ms_forward", 12.345678, 16}},
      {{"My Metric/a b", 10.0, 3}, {"x/a,\"b\"", 0.5, 3}, {"loss", std::nan(""), 4}, {"loss", inf, 5},
       {"loss", -0.0, 6}, {"big", 1e16, 7}, {"big", 1e22, 8}, {"a/b", 1.0, 1}, {"a b", 2.0, 2}},
  };
}

const std::map<std::string, std::string> kExpected = {
    {"Train_Samples_train_loss.csv", "step,train_loss\r\n0,2.5\r\n8,0.3333333333333333\r\n"},
    {"Train_Samples_lr.csv", "step,lr\r\n8,0.001\r\n16,1e-05\r\n"},
    {"Train_Samples_loss_scale.csv", "step,loss_scale\r\n8,65536\r\n16,32768.0\r\n"},
    {"Train_Samples_elapsed_time_ms_forward.csv", "step,elapsed_time_ms_forward\r\n16,12.345678\r\n"},
    {"My_Metric_a_b.csv", "step,a b\r\n3,10.0\r\n"},
    {"x_a,\"b\".csv", "step,\"a,\"\"b\"\"\"\r\n3,0.5\r\n"},
    {"loss.csv", "step,loss\r\n4,nan\r\n5,inf\r\n6,-0.0\r\n"},
    {"big.csv", "step,big\r\n7,1e+16\r\n8,1e+22\r\n"},
    {"a_b.csv", "step,b\r\n1,1.0\r\n2,2.0\r\n"},  // "a/b" and "a b" share a file and one header
};

std::map<std::string, std::string> files_in(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const std::string& name : sorted_entries(dir)) out[name] = read_file(dir + "/" + name);
  return out;
}

CsvMonitorConfig config_in(const TempDir& dir) {
  CsvMonitorConfig c;
  c.enabled = true;
  c.output_path = dir.file("runs");
  c.job_name = "job";
  return c;
}

TEST(CsvMonitor, BytesMatchDeepSpeed) {
  TempDir dir;
  CsvMonitor m(config_in(dir));
  EXPECT_EQ(m.log_dir(), dir.file("runs") + "/job");
  for (const auto& b : batches()) m.write_events(b);
  EXPECT_EQ(files_in(m.log_dir()), kExpected);
}

TEST(CsvMonitor, ARestartedRunAppendsWithANewHeader) {
  TempDir dir;
  { CsvMonitor(config_in(dir)).write_events({{"Train/Samples/lr", 0.001, 8}}); }
  CsvMonitor again(config_in(dir));
  again.write_events({{"Train/Samples/lr", 0.5, 16}});
  again.write_events({{"Train/Samples/lr", 0.25, 24}});
  EXPECT_EQ(read_file(again.log_dir() + "/Train_Samples_lr.csv"),
            "step,lr\r\n8,0.001\r\nstep,lr\r\n16,0.5\r\n24,0.25\r\n");
}

TEST(CsvMonitor, NamesFollowDeepSpeed) {
  EXPECT_EQ(CsvMonitor::file_stem("Train/Samples/train_loss"), "Train_Samples_train_loss");
  EXPECT_EQ(CsvMonitor::file_stem("a b/c"), "a_b_c");
  EXPECT_EQ(CsvMonitor::header_name("Train/Samples/lr"), "lr");
  EXPECT_EQ(CsvMonitor::header_name("plain"), "plain");
  EXPECT_EQ(CsvMonitor::header_name("ends/"), "");
}

TEST(CsvMonitor, LogDirIsOsPathJoinOfOutputPathAndJobName) {
  EXPECT_EQ(monitor_log_dir("", "DeepSpeedJobName"), "DeepSpeedJobName");  // the default: under the cwd
  EXPECT_EQ(monitor_log_dir("runs", "job"), "runs/job");
  EXPECT_EQ(monitor_log_dir("runs/", "job"), "runs/job");
  EXPECT_EQ(monitor_log_dir("runs", "/abs/job"), "/abs/job");
  EXPECT_EQ(monitor_log_dir("runs", ""), "runs/");
}

TEST(CsvMonitor, UnwritableOutputPathFailsAtConstruction) {
  TempDir dir;
  write_file(dir.file("file"), "x");
  CsvMonitorConfig c;
  c.enabled = true;
  c.output_path = dir.file("file");
  try {
    CsvMonitor m(c);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_CONTAINS(e.what(), "csv_monitor: cannot create the log directory '" + dir.file("file") + "/DeepSpeedJobName'");
  }
}

TEST(CsvMonitor, BytesMatchPythonCsvModule) {
  if (!python_has("csv")) GTEST_SKIP() << kPython << " is not installed";
  TempDir dir;
  std::string args = dir.file("ref");
  int i = 0;
  for (const auto& b : batches()) {
    const std::string f = dir.file("batch" + std::to_string(i++) + ".tsv");
    write_events_file(f, b);
    args += " " + f;
  }
  // Then a restart appending to one file, as in ARestartedRunAppendsWithANewHeader.
  const std::vector<MonitorEvent> resumed = {{"Train/Samples/lr", 0.5, 24}};
  write_events_file(dir.file("resumed.tsv"), resumed);
  args += " restart " + dir.file("resumed.tsv");
  const auto [rc, out] = run_python_script(dir, "deepspeed_csv_reference.py", args);
  ASSERT_EQ(rc, 0) << out;

  {
    CsvMonitor m(config_in(dir));
    for (const auto& b : batches()) m.write_events(b);
  }
  CsvMonitor(config_in(dir)).write_events(resumed);
  const auto ours = files_in(dir.file("runs") + "/job"), python = files_in(dir.file("ref"));
  EXPECT_EQ(ours, python);
  EXPECT_EQ(python.at("Train_Samples_lr.csv"), "step,lr\r\n8,0.001\r\n16,1e-05\r\nstep,lr\r\n24,0.5\r\n");
}

}  // namespace
}  // namespace ds::test
