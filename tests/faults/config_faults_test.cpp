// Issue 22, the config items. Each runs ds-report --config and ds-train as a user would:
//   4. fp16.initial_scale_power 1000 (scale 2.7e300, every step skipped) and static loss scales beyond
//      fp32 were accepted without a word;
//   7. 100,000 nested arrays or objects crashed both tools (SIGSEGV, stack overflow);
//   8. "lr": 1e400 gave nlohmann's raw "number overflow" with no file or line, and an INT64_MAX micro
//      batch LibTorch's "Storage size calculation overflowed";
//  10. the shipped zero3_offload_nvme.json passed ds-report --config but ds-train refused it: every
//      example config (and each rule the engine enforces at start) must pass ds-report iff it trains;
//  14. Hugging Face's all-"auto" template silently turned each "auto" into a default.
#include <regex>
#include <vector>

#include "faults_test_util.h"

namespace ds::faults {
namespace {

RunResult report(const std::string& config) { return run(tool("ds-report") + " --config " + config, 60); }

// Two steps of the tiny model in `dir` (monitors with relative output paths write there).
RunResult train(const std::string& config, const TempDir& dir, const std::string& extra = "") {
  return run("cd " + dir.str() + " && " + tiny_train("--config " + config + " --steps 2 " + extra), 300);
}

bool has(const RunResult& r, const std::string& needle) { return r.output.find(needle) != std::string::npos; }

// A refusal: exit 1 with the tool's "error:" line and the message, never a crash.
void expect_refused(const RunResult& r, const std::vector<std::string>& pieces, const std::string& what) {
  EXPECT_EQ(r.exit_code, 1) << what << "\n" << r.output;
  EXPECT_TRUE(has(r, "error: ")) << what << "\n" << r.output;
  for (const auto& p : pieces) EXPECT_TRUE(has(r, p)) << what << ": missing \"" << p << "\" in\n" << r.output;
}

// ---- Item 4 ------------------------------------------------------------------------------------

TEST(FaultInitialScalePower, AboveTheFp32LimitIsRefusedByReportAndTrain) {
  TempDir dir("cfg_isp");
  const std::string cfg = dir.file("isp.json");
  write_text(cfg, R"({"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "Adam"},
                      "fp16": {"enabled": true, "initial_scale_power": 1000}})");
  const std::vector<std::string> msg = {"fp16.initial_scale_power: 1000 is above the limit 127",
                                        "2^128 and above are inf"};
  expect_refused(report(cfg), msg, "ds-report");
  expect_refused(train(cfg, dir), msg, "ds-train");
}

TEST(FaultInitialScalePower, HighPowerWarnsWithTheSkippedStepsItCosts) {
  TempDir dir("cfg_isp_warn");
  const std::string cfg = dir.file("isp.json");
  write_text(cfg, R"({"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "Adam"},
                      "zero_optimization": {"stage": 1}, "fp16": {"enabled": true, "initial_scale_power": 64}})");
  const RunResult r = report(cfg);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "warnings: 1\n  fp16.initial_scale_power: 64 starts the dynamic loss scale at 2^64")) << r.output;
  EXPECT_TRUE(has(r, "at least 33 skipped steps before it is down to 2^32")) << r.output;  // 32 halvings + hysteresis 2
}

TEST(FaultInitialScalePower, StaticScaleBeyondFp32IsRefusedAndHugeOnesWarn) {
  TempDir dir("cfg_static");
  const std::string bad = dir.file("bad.json"), big = dir.file("big.json");
  write_text(bad, R"({"train_micro_batch_size_per_gpu": 2, "fp16": {"enabled": true, "loss_scale": 1e39}})");
  const std::vector<std::string> msg = {"fp16.loss_scale: expected a number >= 0.0 that is finite in fp32", "1e+39"};
  expect_refused(report(bad), msg, "ds-report");
  expect_refused(train(bad, dir), msg, "ds-train");
  write_text(big, R"({"train_micro_batch_size_per_gpu": 2, "fp16": {"enabled": true, "loss_scale": 1e10}})");
  const RunResult r = report(big);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "fp16.loss_scale: the static scale 10000000000.0 is above 2^32")) << r.output;
  EXPECT_TRUE(has(r, "its step is skipped")) << r.output;
}

// ---- Item 7 ------------------------------------------------------------------------------------

TEST(FaultDeepJson, HundredThousandLevelsAreRefusedNotACrash) {
  TempDir dir("cfg_deep");
  const std::string arrays = dir.file("arrays.json"), objects = dir.file("objects.json");
  write_text(arrays, "{\"train_micro_batch_size_per_gpu\": 1, \"x\": " + std::string(100000, '[') +
                         std::string(100000, ']') + "}");
  std::string nested;
  for (int i = 0; i < 100000; ++i) nested += "{\"a\":";
  write_text(objects, nested + "1" + std::string(100000, '}'));
  expect_refused(report(arrays), {arrays + ": line 1, column 107: arrays and objects nested deeper than 64 levels"},
                 "ds-report arrays");
  expect_refused(report(objects), {objects + ": line 1, column 321: arrays and objects nested deeper than 64 levels"},
                 "ds-report objects");
  expect_refused(train(arrays, dir), {arrays + ": line 1, column 107", "nested deeper than 64 levels"}, "ds-train");
  expect_refused(train(objects, dir), {objects + ": line 1, column 321", "nested deeper than 64 levels"}, "ds-train");
}

// ---- Item 8 (config) ---------------------------------------------------------------------------

TEST(FaultNumberRange, NumberBeyondADoubleNamesFileLineColumnAndKey) {
  TempDir dir("cfg_1e400");
  const std::string cfg = dir.file("lr.json");
  write_text(cfg, "{\n  \"train_micro_batch_size_per_gpu\": 2,\n  \"optimizer\": {\"type\": \"Adam\", \"params\": "
                  "{\"lr\": 1e400}}\n}\n");
  const std::vector<std::string> msg = {cfg + ": line 3, column 50: optimizer.params.lr: number out of range for a "
                                              "double: 1e400"};
  for (const RunResult& r : {report(cfg), train(cfg, dir)}) {
    expect_refused(r, msg, "1e400");
    EXPECT_FALSE(has(r, "json.exception")) << r.output;
  }
}

TEST(FaultNumberRange, Int64MaxMicroBatchIsRefusedWithTheLimit) {
  TempDir dir("cfg_int64");
  const std::string cfg = dir.file("micro.json");
  write_text(cfg, R"({"train_micro_batch_size_per_gpu": 9223372036854775807, "optimizer": {"type": "Adam"}})");
  const std::vector<std::string> msg = {
      "train_micro_batch_size_per_gpu: 9223372036854775807 is above the limit 2147483647 (2^31 - 1)"};
  for (const RunResult& r : {report(cfg), train(cfg, dir)}) {
    expect_refused(r, msg, "INT64_MAX");
    EXPECT_FALSE(has(r, "Storage size calculation overflowed")) << r.output;
  }
}

// ---- Item 10 -----------------------------------------------------------------------------------

struct Case {
  std::string name;
  std::string text;
};

std::vector<Case> example_configs(const std::string& nvme_dir) {
  std::vector<Case> out;
  for (const auto& e : fs::directory_iterator(source_path("examples/configs"))) {
    if (e.path().extension() != ".json") continue;
    // Need 2 ranks (4): trained by the example_autotp_np2 / example_autotp_vocab_np2 / example_ulysses_np2 /
    // example_pipeline_np2 (example_onebit_lamb_pipeline_np4) ctests.
    const auto name = e.path().filename();
    if (name == "autotp.json" || name == "autotp_vocab_parallel.json" || name == "ulysses.json" ||
        name == "pipeline.json" || name == "onebit_lamb_pipeline.json")
      continue;
    // nvme_path must be a real directory on a real disk (O_DIRECT): a fresh one under /tmp.
    const std::string text = std::regex_replace(read_text(e.path().string()), std::regex(R"("nvme_path"\s*:\s*"[^"]*")"),
                                                "\"nvme_path\": \"" + nvme_dir + "\"");
    out.push_back({e.path().filename().string(), text});
  }
  std::sort(out.begin(), out.end(), [](const Case& a, const Case& b) { return a.name < b.name; });
  return out;
}

// What the engine refuses at start from the config alone: each must fail ds-report as well.
std::vector<Case> engine_refusals(const std::string& nvme_dir) {
  const std::string nvme = "\"" + nvme_dir + "\"";
  return {
      {"nvme_buffer_count_4 (the shipped zero3_offload_nvme.json)",
       R"({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "Adam"}, "zero_optimization": {"stage": 3,
           "offload_optimizer": {"device": "nvme", "nvme_path": )" + nvme +
           R"(, "buffer_count": 4, "pipeline_read": true, "pipeline_write": true}}})"},
      {"partial_offload",
       R"({"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "Adam"},
           "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0.5}}})"},
      {"lamb_under_zero",
       R"({"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "Lamb"}, "zero_allow_untested_optimizer": true,
           "zero_optimization": {"stage": 1}})"},
      {"fp16_master_weights",
       R"({"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "Adam"}, "zero_optimization": {"stage": 2},
           "fp16": {"enabled": true, "fp16_master_weights_and_grads": true}})"},
      {"schedule_without_optimizer",
       R"({"train_micro_batch_size_per_gpu": 2, "scheduler": {"type": "WarmupLR"}})"},
      {"aio_block_size_off_4k",
       R"({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "Adam"}, "zero_optimization": {"stage": 3,
           "offload_param": {"device": "nvme", "nvme_path": )" + nvme + R"(}}, "aio": {"block_size": 1000}})"},
      {"fp16_compute_on_cpu",
       R"({"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "Adam"}, "data_types": {"compute_dtype": "fp16"}})"},
  };
}

TEST(FaultExampleConfigs, PassReportIffTrains) {
  TempDir dir("cfg_examples");
  const std::string nvme = dir.file("nvme");
  fs::create_directories(nvme);
  auto check = [&](const Case& c, bool must_train) {
    const std::string path = dir.file("case.json");
    write_text(path, c.text);
    const RunResult r = report(path);
    const RunResult t = train(path, dir);
    EXPECT_LT(r.exit_code, 2) << c.name << " crashed ds-report:\n" << r.output;
    EXPECT_LT(t.exit_code, 2) << c.name << " crashed ds-train:\n" << t.output;
    EXPECT_EQ(r.exit_code == 0, t.exit_code == 0)
        << c.name << ": ds-report --config " << (r.exit_code == 0 ? "passes" : "refuses") << " it but ds-train "
        << (t.exit_code == 0 ? "trains" : "refuses") << " it\n--- ds-report:\n" << r.output.substr(0, 2000)
        << "\n--- ds-train:\n" << t.output.substr(t.output.size() > 3000 ? t.output.size() - 3000 : 0);
    if (must_train) EXPECT_EQ(t.exit_code, 0) << c.name << " is shipped as an example but does not train:\n" << t.output;
    else EXPECT_NE(t.exit_code, 0) << c.name << " should be refused";
  };
  const auto examples = example_configs(nvme);
  ASSERT_GE(examples.size(), 20u);
  for (const Case& c : examples) check(c, /*must_train=*/true);
  for (const Case& c : engine_refusals(nvme)) check(c, /*must_train=*/false);
}

// ---- Item 14 ("auto") --------------------------------------------------------------------------

// Hugging Face's DeepSpeed template (docs "ds_config_zero2.json") with the micro batch the Trainer
// would have filled in.
constexpr const char* kHuggingFaceTemplate = R"({
  "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
           "hysteresis": 2, "min_loss_scale": 1},
  "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
  "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                               "warmup_num_steps": "auto"}},
  "zero_optimization": {"stage": 2, "allgather_partitions": true, "allgather_bucket_size": 2e8,
                        "overlap_comm": true, "reduce_scatter": true, "reduce_bucket_size": "auto",
                        "contiguous_gradients": true},
  "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "steps_per_print": 2000,
  "train_batch_size": "auto", "train_micro_batch_size_per_gpu": 2, "wall_clock_breakdown": false
})";

TEST(FaultAutoValues, HuggingFaceTemplateSaysWhatEachAutoBecame) {
  TempDir dir("cfg_auto");
  const std::string cfg = dir.file("hf.json");
  write_text(cfg, kHuggingFaceTemplate);
  const RunResult r = report(cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "warnings: 1\n  \"auto\" values are filled in by Hugging Face's Trainer")) << r.output;
  for (const char* item : {"fp16.enabled = false", "optimizer.params.lr = 0.001", "optimizer.params.betas = [0.9,0.999]",
                           "optimizer.params.eps = 1e-08", "optimizer.params.weight_decay = 0.0",
                           "scheduler.params.warmup_num_steps = 1000", "gradient_clipping = 1.0",
                           "zero_optimization.reduce_bucket_size = 500000000",
                           "Set each to the value you want to silence this warning"}) {
    EXPECT_TRUE(has(r, item)) << item << "\n" << r.output;
  }
  // The ones with a meaning outside the Trainer are resolved, not listed: the batch triple as
  // micro x GAS x world, warmup_max_lr as the optimizer's lr.
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(train_batch_size \.+ 2  \(auto\))"))) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(scheduler\.params\.warmup_max_lr \.+ 0\.001  \(auto\))")))
      << r.output;
  const RunResult t = train(cfg, dir);
  EXPECT_EQ(t.exit_code, 0) << t.output;
  EXPECT_TRUE(has(t, "\"auto\" values are filled in by Hugging Face's Trainer")) << t.output;
}

TEST(FaultAutoValues, AutoMicroBatchSaysTheTrainerFillsIt) {
  TempDir dir("cfg_auto_micro");
  const std::string cfg = dir.file("hf.json");
  write_text(cfg, R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
                      "gradient_accumulation_steps": "auto"})");
  expect_refused(report(cfg), {"Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided",
                               "Hugging Face's Trainer fills these in; without it, give train_micro_batch_size_per_gpu"},
                 "ds-report");
}

}  // namespace
}  // namespace ds::faults
