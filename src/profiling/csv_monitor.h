// csv_monitor: DeepSpeed's csvMonitor (deepspeed/monitor/csv_monitor.py), byte for byte. One file
// per tag, <output_path>/<job_name>/<tag with '/' and ' ' → '_'>.csv, opened in append mode; the
// header row "step,<last '/' component of the tag>" goes in the first time this monitor writes a
// file (so a restarted run appends a second header, as DeepSpeed does); rows are "step,value"
// with Python's csv line ending "\r\n" and Python's number text.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "config/monitor_config.h"
#include "profiling/monitor.h"

namespace ds {

class CsvMonitor final : public Monitor {
 public:
  // Creates the log directory (os.makedirs(exist_ok=True)); throws IoError if it cannot.
  explicit CsvMonitor(const CsvMonitorConfig& config);

  void write_events(const std::vector<MonitorEvent>& events) override;
  const std::string& log_dir() const override { return log_dir_; }

  // "Train/Samples/lr" → "Train_Samples_lr" (the file name without ".csv").
  static std::string file_stem(const std::string& tag);
  // "Train/Samples/lr" → "lr" (the header's second column).
  static std::string header_name(const std::string& tag);

 private:
  std::string log_dir_;
  std::set<std::string> headed_;  // file stems that got their header from this monitor
};

}  // namespace ds
