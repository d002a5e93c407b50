// jsonl_monitor (deepspeed.cpp's extension): every event as one line of compact JSON,
// {"tag":"Train/Samples/lr","step":64,"value":0.001}, appended to
// <output_path>/<job_name>/events.jsonl. Values use Python's repr (so they equal the CSV column);
// a non-finite value (a diverged loss) is written as null, since JSON has no NaN or Infinity.
#pragma once

#include <string>
#include <vector>

#include "config/monitor_config.h"
#include "profiling/monitor.h"

namespace ds {

class JsonlMonitor final : public Monitor {
 public:
  // Creates the log directory; throws IoError if it cannot.
  explicit JsonlMonitor(const JsonlMonitorConfig& config);

  void write_events(const std::vector<MonitorEvent>& events) override;
  const std::string& log_dir() const override { return log_dir_; }
  const std::string& file_path() const { return path_; }

  // The line for one event, without the trailing '\n'.
  static std::string line(const MonitorEvent& e);

 private:
  std::string log_dir_;
  std::string path_;
};

}  // namespace ds
