// MonitorMaster: DeepSpeed's MonitorMaster (deepspeed/monitor/monitor.py). Built once by the
// engine from the parsed config; on global rank 0 it opens every enabled writer (tensorboard,
// csv_monitor, jsonl_monitor) and fans each batch of events out to them; on other ranks it holds
// nothing and write_events does nothing. wandb and comet have no C++ client: enabling them gives
// one warning each with the way to upload the TensorBoard or CSV logs instead.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/monitor_config.h"
#include "profiling/monitor.h"

namespace ds {

struct Config;

struct MonitorOptions {
  TensorBoardConfig tensorboard;
  CsvMonitorConfig csv_monitor;
  JsonlMonitorConfig jsonl_monitor;
  WandbConfig wandb;
  CometConfig comet;
  int rank = 0;  // global rank; only rank 0 writes (DeepSpeed: dist.get_rank() == 0)
};

// The monitor sections of a loaded config, for `rank`.
MonitorOptions monitor_options(const Config& config, int rank);

class MonitorMaster {
 public:
  MonitorMaster() = default;  // no monitors: enabled() is false
  // Opens the writers (directories and files are created here, so a bad output_path fails at
  // engine construction, not at the first step). Throws IoError.
  explicit MonitorMaster(const MonitorOptions& options);

  MonitorMaster(MonitorMaster&&) noexcept = default;
  MonitorMaster& operator=(MonitorMaster&&) noexcept = default;

  // True when this rank writes somewhere: the engine builds events only then.
  bool enabled() const { return !monitors_.empty(); }

  // Every writer gets the whole batch, in the order tensorboard, csv_monitor, jsonl_monitor.
  void write_events(const std::vector<MonitorEvent>& events);

  const std::vector<std::unique_ptr<Monitor>>& monitors() const { return monitors_; }
  // The warnings given at construction (already logged), for tests and reports.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::vector<std::unique_ptr<Monitor>> monitors_;
  std::vector<std::string> warnings_;
};

}  // namespace ds
