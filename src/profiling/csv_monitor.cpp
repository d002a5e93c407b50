// The CSV writer. DeepSpeed opens, appends and closes the file for every event; so do we, which
// keeps its behaviour when a file is removed mid-run (the next event recreates it, headerless).
#include "profiling/csv_monitor.h"

#include <fcntl.h>

#include "format/posix_file.h"
#include "profiling/python_text.h"

namespace ds {

CsvMonitor::CsvMonitor(const CsvMonitorConfig& config)
    : log_dir_(monitor_log_dir(config.output_path, config.job_name)) {
  make_log_dir(log_dir_, "csv_monitor");
}

std::string CsvMonitor::file_stem(const std::string& tag) {
  std::string s = tag;
  for (char& c : s) {
    if (c == '/' || c == ' ') c = '_';
  }
  return s;
}

std::string CsvMonitor::header_name(const std::string& tag) {
  const size_t slash = tag.rfind('/');
  return slash == std::string::npos ? tag : tag.substr(slash + 1);  // "a/" → "", like split('/')[-1]
}

void CsvMonitor::write_events(const std::vector<MonitorEvent>& events) {
  for (const MonitorEvent& e : events) {
    const std::string stem = file_stem(e.tag);
    const std::string path = log_dir_ + "/" + stem + ".csv";  // DeepSpeed joins with '/' by hand
    std::string bytes;
    if (headed_.insert(stem).second) bytes += "step," + csv_field(header_name(e.tag)) + "\r\n";
    bytes += std::to_string(e.step) + "," + python_value_text(e) + "\r\n";
    format::UniqueFd fd = format::open_file(path, O_WRONLY | O_CREAT | O_APPEND);
    format::write_all(fd.get(), bytes.data(), bytes.size(), path);
    fd.close(path);
  }
}

}  // namespace ds
