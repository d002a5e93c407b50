// ds-report --config refuses what the engine would refuse on this machine (issue 14 item 4): an NVMe
// swap folder that does not exist and a monitor folder that cannot be written are named, with the
// key, before any training starts.
#include <gtest/gtest.h>

#include "faults_test_util.h"

namespace ds::faults {

TEST(ReportConfig, MissingNvmeFolderIsRefusedNamingTheKey) {
  TempDir dir("report_nvme");
  const std::string cfg = dir.file("c.json");
  write_text(cfg, R"({"train_batch_size": 1, "optimizer": {"type": "AdamW"},
      "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": ")" +
                      dir.file("absent") + R"("}}})");
  const auto r = run(tool("ds-report") + " --config " + cfg);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("zero_optimization.offload_optimizer.nvme_path"), std::string::npos) << r.output;
  fs::create_directories(dir.file("absent"));
  const auto ok = run(tool("ds-report") + " --config " + cfg);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("ZeRO plan:"), std::string::npos) << ok.output;
}

TEST(ReportConfig, UnwritableMonitorFolderIsRefusedNamingTheKey) {
  TempDir dir("report_monitor");
  write_text(dir.file("a_file"), "x");  // a folder cannot be made under a file, even as root
  const std::string cfg = dir.file("c.json");
  write_text(cfg, R"({"train_batch_size": 1, "csv_monitor": {"enabled": true, "output_path": ")" +
                      dir.file("a_file") + R"(/logs"}})");
  const auto r = run(tool("ds-report") + " --config " + cfg);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("csv_monitor.output_path"), std::string::npos) << r.output;
}

}  // namespace ds::faults
