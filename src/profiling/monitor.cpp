// Shared helpers of the monitors: DeepSpeed's log directory rule and directory creation.
#include "profiling/monitor.h"

#include <filesystem>
#include <system_error>

#include "util/error.h"

namespace ds {

std::string monitor_log_dir(const std::string& output_path, const std::string& job_name) {
  // posixpath.join: an absolute second part restarts the path; otherwise one '/' between parts
  // unless the first is empty or already ends with one.
  if (!job_name.empty() && job_name.front() == '/') return job_name;
  if (output_path.empty() || output_path.back() == '/') return output_path + job_name;
  return output_path + "/" + job_name;
}

void make_log_dir(const std::string& dir, const std::string& config_key) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw IoError(config_key + ": cannot create the log directory '" + dir + "': " + ec.message() +
                  " (set " + config_key + ".output_path to a writable directory)");
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    throw IoError(config_key + ": '" + dir + "' exists and is not a directory (set " + config_key +
                  ".output_path or .job_name to another name)");
  }
}

}  // namespace ds
