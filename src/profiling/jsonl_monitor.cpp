// The JSON-lines writer: one append of the whole batch per write_events, so readers tailing the
// file see whole lines.
#include "profiling/jsonl_monitor.h"

#include <fcntl.h>

#include <cmath>

#include "format/posix_file.h"
#include "profiling/python_text.h"

namespace ds {

JsonlMonitor::JsonlMonitor(const JsonlMonitorConfig& config)
    : log_dir_(monitor_log_dir(config.output_path, config.job_name)), path_(log_dir_ + "/events.jsonl") {
  make_log_dir(log_dir_, "jsonl_monitor");
}

std::string JsonlMonitor::line(const MonitorEvent& e) {
  const std::string value = std::isfinite(e.value) ? python_value_text(e) : "null";
  return "{\"tag\":" + json_string(e.tag) + ",\"step\":" + std::to_string(e.step) + ",\"value\":" + value + "}";
}

void JsonlMonitor::write_events(const std::vector<MonitorEvent>& events) {
  if (events.empty()) return;
  std::string bytes;
  for (const MonitorEvent& e : events) bytes += line(e) + "\n";
  format::UniqueFd fd = format::open_file(path_, O_WRONLY | O_CREAT | O_APPEND);
  format::write_all(fd.get(), bytes.data(), bytes.size(), path_);
  fd.close(path_);
}

}  // namespace ds
