// The monitor interface: DeepSpeed's (name, value, step) events and the writers that record them
// (deepspeed/monitor/monitor.py). The engine builds events on rank 0 and hands them to a
// MonitorMaster, which fans them out to the enabled writers (CSV, TensorBoard, JSON lines).
// Plain C++ on purpose: no LibTorch, so it builds fast and links into tools.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds {

// How a value was typed in Python DeepSpeed, which decides its text in the CSV and JSONL files:
// Python's csv module writes a float as repr() ("2.0", "0.001", "1e-05") and an int as str()
// ("65536"). Nearly every event is a float; the fp16 loss scale is a Python int until its first
// change (2**initial_scale_power, then cur_scale / 2.0 or * 2.0 makes it a float), and a static
// loss_scale written as an integer in the JSON stays an int.
enum class ValueKind : uint8_t { Float, Int };

// One scalar, as DeepSpeed's engine builds them: tag "Train/Samples/lr", step = global samples.
struct MonitorEvent {
  std::string tag;
  double value = 0.0;
  int64_t step = 0;
  ValueKind kind = ValueKind::Float;
};

// A destination for events. write_events is called with every batch the engine produces (a few
// per optimizer step); implementations write through to the OS before returning, so a crash loses
// nothing already logged. Failures to write throw ds::IoError.
class Monitor {
 public:
  virtual ~Monitor() = default;
  virtual void write_events(const std::vector<MonitorEvent>& events) = 0;
  // The directory this monitor writes into (for messages and the docs' "where are my logs").
  virtual const std::string& log_dir() const = 0;
};

// DeepSpeed's log directory rule: os.path.join(output_path, job_name). With the default
// output_path "" that is job_name itself, relative to the working directory; an absolute
// job_name replaces output_path, and no separator is doubled.
std::string monitor_log_dir(const std::string& output_path, const std::string& job_name);

// os.makedirs(dir, exist_ok=True); throws IoError naming the directory and the cause.
void make_log_dir(const std::string& dir, const std::string& config_key);

}  // namespace ds
