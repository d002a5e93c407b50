// The engine's monitor events: the tags DeepSpeed writes (Train/Samples/train_loss, lr,
// loss_scale, elapsed_time_ms_*), x = global samples, values equal to what the engine reports;
// read back from the CSV files and the TensorBoard event file.
#include <deepspeed/deepspeed.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../log_capture.h"
#include "models/gpt2.h"
#include "models/token_data.h"
#include "profiling/event_file_reader.h"

namespace ds {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> lines_of(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(line);
  }
  return out;
}

TEST(EngineMonitors, WriteDeepSpeedsTagsPerStep) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("ds_monitors_{}", ::getpid());
  fs::remove_all(dir);
  std::string text;
  for (int i = 0; i < 100; ++i) text += "the early bird catches the worm " + std::to_string(i) + ". ";
  auto data = models::TokenDataset::from_text(text);
  models::BatchSampler sampler(data, 16, 1);
  torch::manual_seed(1);
  auto engine = initialize(models::GPT2(models::GPT2Config::preset("tiny")), nlohmann::json::parse(fmt::format(R"({{
      "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "wall_clock_breakdown": true,
      "optimizer": {{"type": "Adam", "params": {{"lr": 1e-3}}}},
      "tensorboard": {{"enabled": true, "output_path": "{0}", "job_name": "tb"}},
      "csv_monitor": {{"enabled": true, "output_path": "{0}", "job_name": "csv"}} }})", dir.string())));
  std::vector<double> losses;
  for (int s = 0; s < 3; ++s) {
    for (int m = 0; m < 2; ++m) {
      auto b = sampler.batch((s * 2 + m) * 2, 2);
      engine.backward(engine.forward(b.inputs, b.targets));
      engine.step();
    }
    losses.push_back(engine.last_loss());
  }
  auto loss_csv = lines_of(dir / "csv" / "Train_Samples_train_loss.csv");
  ASSERT_EQ(loss_csv.size(), 4u);
  EXPECT_EQ(loss_csv[0], "step,train_loss");
  for (int s = 0; s < 3; ++s) {
    std::istringstream row(loss_csv[s + 1]);
    std::string step, value;
    std::getline(row, step, ',');
    std::getline(row, value);
    EXPECT_EQ(std::stoll(step), s * 4) << "x = samples before the step";
    EXPECT_NEAR(std::stod(value), losses[s], 1e-12);
  }
  auto lr_csv = lines_of(dir / "csv" / "Train_Samples_lr.csv");
  ASSERT_EQ(lr_csv.size(), 4u);
  EXPECT_EQ(lr_csv[1], "4,0.001");
  EXPECT_TRUE(fs::exists(dir / "csv" / "Train_Samples_elapsed_time_ms_forward.csv"));
  auto files = find_tf_event_files((dir / "tb").string());
  ASSERT_EQ(files.size(), 1u);
  std::map<std::string, int> count;
  for (const auto& p : scalar_points(read_tf_event_file(files[0]))) count[p.tag] += 1;
  for (const char* tag : {"Train/Samples/train_loss", "Train/Samples/lr", "Train/Samples/elapsed_time_ms_forward",
                          "Train/Samples/elapsed_time_ms_backward", "Train/Samples/elapsed_time_ms_step"})
    EXPECT_EQ(count[tag], 3) << tag;
  fs::remove_all(dir);
}

// memory_breakdown (DeepSpeed's see_memory_usage lines): a memory line with every steps_per_print
// progress line, the model states' bytes per tier from the ledger; none without it.
TEST(EngineMonitors, MemoryBreakdownLogsAMemoryLinePerProgressLine) {
  for (bool breakdown : {true, false}) {
    auto data = models::TokenDataset::from_text("the early bird catches the worm, the second mouse gets the cheese. ");
    models::BatchSampler sampler(data, 8, 1);
    auto engine = initialize(models::GPT2(models::GPT2Config::preset("tiny")),
                             nlohmann::json::parse(fmt::format(R"({{"train_micro_batch_size_per_gpu": 2,
        "steps_per_print": 2, "memory_breakdown": {}, "optimizer": {{"type": "Adam"}}}})", breakdown)));
    ds::test::LogCapture log;
    for (int s = 0; s < 4; ++s) {
      auto b = sampler.batch(s * 2, 2);
      engine.backward(engine.forward(b.inputs, b.targets));
      engine.step();
    }
    EXPECT_EQ(log.count(", skipped="), 2);  // the progress lines
    EXPECT_EQ(log.count("memory: RSS"), breakdown ? 2 : 0);
    EXPECT_EQ(log.count("RunningAvgSamplesPerSec="), 2);  // DeepSpeed's throughput timer, on by default
    if (breakdown) {
      const double mb = double(engine.memory().tier_total(Tier::Device)) / (1024.0 * 1024.0);
      EXPECT_NE(log.text().find(fmt::format("model states device {:.1f} MB", mb)), std::string::npos) << log.text();
    }
  }
}

// "timers": {"throughput": {"enabled": false}} silences DeepSpeed's throughput line, nothing else.
TEST(EngineMonitors, ThroughputTimerOffDropsOnlyTheThroughputLine) {
  auto data = models::TokenDataset::from_text("the early bird catches the worm, the second mouse gets the cheese. ");
  models::BatchSampler sampler(data, 8, 1);
  auto engine = initialize(models::GPT2(models::GPT2Config::preset("tiny")),
                           nlohmann::json::parse(R"({"train_micro_batch_size_per_gpu": 2, "steps_per_print": 2,
      "timers": {"throughput": {"enabled": false}}, "optimizer": {"type": "Adam"}})"));
  ds::test::LogCapture log;
  for (int s = 0; s < 4; ++s) {
    auto b = sampler.batch(s * 2, 2);
    engine.backward(engine.forward(b.inputs, b.targets));
    engine.step();
  }
  EXPECT_EQ(log.count(", skipped="), 2);
  EXPECT_EQ(log.count("RunningAvgSamplesPerSec="), 0) << log.text();
}

}  // namespace
}  // namespace ds
