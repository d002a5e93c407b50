// Monitor sections "tensorboard", "csv_monitor", "wandb", "comet" (reference §14.2), plus our
// "jsonl_monitor", and DeepSpeed's "comms_logger". DeepSpeed validates its sections strictly, so an unknown key in them is an
// error; jsonl_monitor follows the same rule.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ds {

// "comms_logger" (DeepSpeed's deepspeed/comm/config.py, validated strictly): times every collective
// and keeps count, latency and bandwidth per operation and message size (comm/comms_logger.h).
struct CommsLoggerConfig {
  bool enabled = false;
  bool verbose = false;   // one line per collective on rank 0
  bool prof_all = true;   // every collective; false: only those named in prof_ops
  bool debug = false;     // record names carry the caller's tag
  std::vector<std::string> prof_ops;
};

struct TensorBoardConfig {
  bool enabled = false;
  std::string output_path;  // "": under the launch directory
  std::string job_name = "DeepSpeedJobName";
};

struct CsvMonitorConfig {
  bool enabled = false;
  std::string output_path;
  std::string job_name = "DeepSpeedJobName";
};

// deepspeed.cpp's extension (not a DeepSpeed key): one JSON object per event and line in
// <output_path>/<job_name>/events.jsonl, for programs that read the metrics back.
struct JsonlMonitorConfig {
  bool enabled = false;
  std::string output_path;
  std::string job_name = "DeepSpeedJobName";
};

// Parsed for compatibility; enabling it warns (no W&B client in deepspeed.cpp).
struct WandbConfig {
  bool enabled = false;
  std::optional<std::string> group;
  std::optional<std::string> team;
  std::string project = "deepspeed";
};

// Parsed for compatibility; enabling it warns (no Comet client in deepspeed.cpp).
struct CometConfig {
  bool enabled = false;
  int64_t samples_log_interval = 100;
  std::optional<std::string> project;
  std::optional<std::string> workspace;
  std::optional<std::string> api_key;
  std::optional<std::string> experiment_name;
  std::optional<std::string> experiment_key;
  std::optional<bool> online;
  std::optional<std::string> mode;
};

}  // namespace ds
