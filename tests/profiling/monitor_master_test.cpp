// MonitorMaster: fan-out to every enabled writer on rank 0, nothing at all on other ranks, and one
// warning each for wandb and comet that says how to get the metrics there instead.
#include <gtest/gtest.h>

#include <filesystem>

#include "config/loader.h"
#include "profiling/event_file_reader.h"
#include "profiling/monitor_master.h"
#include "profiling_test_util.h"
#include "util/error.h"

namespace ds::test {
namespace {

MonitorOptions all_enabled(const TempDir& dir, int rank) {
  MonitorOptions o;
  o.rank = rank;
  o.tensorboard = {true, dir.file("tb"), "job"};
  o.csv_monitor = {true, dir.file("csv"), "job"};
  o.jsonl_monitor = {true, dir.file("jsonl"), "job"};
  return o;
}

const std::vector<MonitorEvent> kEvents = {{"Train/Samples/lr", 0.001, 8}, {"Train/Samples/train_loss", 1.5, 8}};

TEST(MonitorMaster, RankZeroFansOutToEveryEnabledWriter) {
  TempDir dir;
  MonitorMaster m(all_enabled(dir, 0));
  ASSERT_TRUE(m.enabled());
  ASSERT_EQ(m.monitors().size(), 3u);
  EXPECT_TRUE(m.warnings().empty());
  m.write_events(kEvents);
  EXPECT_EQ(read_file(dir.file("csv") + "/job/Train_Samples_lr.csv"), "step,lr\r\n8,0.001\r\n");
  EXPECT_EQ(read_file(dir.file("jsonl") + "/job/events.jsonl"),
            "{\"tag\":\"Train/Samples/lr\",\"step\":8,\"value\":0.001}\n"
            "{\"tag\":\"Train/Samples/train_loss\",\"step\":8,\"value\":1.5}\n");
  const auto tb = find_tf_event_files(dir.file("tb") + "/job");
  ASSERT_EQ(tb.size(), 1u);
  EXPECT_EQ(scalar_points(read_tf_event_file(tb[0])).size(), 2u);
}

TEST(MonitorMaster, OtherRanksCreateAndWriteNothing) {
  TempDir dir;
  MonitorOptions o = all_enabled(dir, 1);
  o.wandb.enabled = true;
  MonitorMaster m(o);
  EXPECT_FALSE(m.enabled());
  EXPECT_TRUE(m.warnings().empty());
  m.write_events(kEvents);
  EXPECT_TRUE(sorted_entries(dir.path()).empty());
}

TEST(MonitorMaster, NothingEnabledIsDisabled) {
  TempDir dir;
  MonitorMaster m(MonitorOptions{});
  EXPECT_FALSE(m.enabled());
  m.write_events(kEvents);
  EXPECT_FALSE(MonitorMaster().enabled());
}

TEST(MonitorMaster, WandbAndCometWarnOnceWithTheUploadRecipe) {
  TempDir dir;
  MonitorOptions o = all_enabled(dir, 0);
  o.wandb.enabled = true;
  o.comet.enabled = true;
  MonitorMaster m(o);
  EXPECT_EQ(m.monitors().size(), 3u);  // training goes on with the writers we do have
  ASSERT_EQ(m.warnings().size(), 2u);
  EXPECT_CONTAINS(m.warnings()[0], "wandb: enabled, but deepspeed.cpp has no Weights & Biases client");
  EXPECT_CONTAINS(m.warnings()[0], "wandb sync --sync-tensorboard " + dir.file("tb") + "/job");
  EXPECT_CONTAINS(m.warnings()[1], "comet: enabled, but deepspeed.cpp has no Comet client");
  EXPECT_CONTAINS(m.warnings()[1], "TensorBoard logs: " + dir.file("tb") + "/job");

  MonitorOptions only_wandb;
  only_wandb.wandb.enabled = true;
  MonitorMaster w(only_wandb);
  EXPECT_FALSE(w.enabled());
  ASSERT_EQ(w.warnings().size(), 1u);
  EXPECT_CONTAINS(w.warnings()[0], "Enable \"tensorboard\" and upload its directory with: wandb sync --sync-tensorboard");
}

TEST(MonitorMaster, BuiltFromALoadedConfig) {
  TempDir dir;
  const std::string text = R"({"train_batch_size": 8,
    "tensorboard": {"enabled": true, "output_path": ")" + dir.file("tb") + R"(", "job_name": "j"},
    "csv_monitor": {"enabled": false},
    "jsonl_monitor": {"enabled": true, "output_path": ")" + dir.file("jl") + R"(", "job_name": "j"}})";
  const Config cfg = load_config_text(text, 1, "test");
  EXPECT_TRUE(cfg.jsonl_monitor.enabled);
  MonitorMaster m(monitor_options(cfg, 0));
  EXPECT_EQ(m.monitors().size(), 2u);
  EXPECT_EQ(m.monitors()[0]->log_dir(), dir.file("tb") + "/j");
  EXPECT_EQ(m.monitors()[1]->log_dir(), dir.file("jl") + "/j");
}

TEST(MonitorMaster, JsonlSectionIsStrictLikeItsSiblings) {
  try {
    load_config_text(R"({"train_batch_size": 8, "jsonl_monitor": {"enabled": true, "outptu_path": "x"}})", 1, "test");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_CONTAINS(e.what(), "jsonl_monitor.outptu_path: unknown key");
  }
}

}  // namespace
}  // namespace ds::test
