// jsonl_monitor: exact lines, and every line parses as JSON with the logged tag, step and value.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "profiling/jsonl_monitor.h"
#include "profiling_test_util.h"

namespace ds::test {
namespace {

TEST(JsonlMonitor, OneCompactObjectPerEvent) {
  TempDir dir;
  JsonlMonitorConfig c;
  c.enabled = true;
  c.output_path = dir.path();
  c.job_name = "job";
  JsonlMonitor m(c);
  EXPECT_EQ(m.file_path(), dir.path() + "/job/events.jsonl");
  m.write_events({{"Train/Samples/train_loss", 2.5, 0}});
  m.write_events({{"Train/Samples/lr", 1e-05, 8}, {"Train/Samples/loss_scale", 65536, 8, ValueKind::Int}});
  m.write_events({{"odd \"tag\"\n", std::nan(""), 16}});
  EXPECT_EQ(read_file(m.file_path()),
            "{\"tag\":\"Train/Samples/train_loss\",\"step\":0,\"value\":2.5}\n"
            "{\"tag\":\"Train/Samples/lr\",\"step\":8,\"value\":1e-05}\n"
            "{\"tag\":\"Train/Samples/loss_scale\",\"step\":8,\"value\":65536}\n"
            "{\"tag\":\"odd \\\"tag\\\"\\n\",\"step\":16,\"value\":null}\n");

  std::istringstream lines(read_file(m.file_path()));
  std::string line;
  std::vector<nlohmann::json> parsed;
  while (std::getline(lines, line)) parsed.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(parsed.size(), 4u);
  EXPECT_EQ(parsed[1]["tag"], "Train/Samples/lr");
  EXPECT_EQ(parsed[1]["step"], 8);
  EXPECT_EQ(parsed[1]["value"].get<double>(), 1e-05);
  EXPECT_TRUE(parsed[2]["value"].is_number_integer());
  EXPECT_EQ(parsed[3]["tag"], "odd \"tag\"\n");
  EXPECT_TRUE(parsed[3]["value"].is_null());
}

TEST(JsonlMonitor, AppendsAcrossRuns) {
  TempDir dir;
  JsonlMonitorConfig c;
  c.enabled = true;
  c.output_path = dir.path();
  JsonlMonitor(c).write_events({{"a", 1.0, 1}});
  JsonlMonitor(c).write_events({{"a", 2.0, 2}});
  EXPECT_EQ(read_file(dir.path() + "/DeepSpeedJobName/events.jsonl"),
            "{\"tag\":\"a\",\"step\":1,\"value\":1.0}\n{\"tag\":\"a\",\"step\":2,\"value\":2.0}\n");
}

}  // namespace
}  // namespace ds::test
