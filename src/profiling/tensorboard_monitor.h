// tensorboard: DeepSpeed's TensorBoardMonitor (deepspeed/monitor/tensorboard.py) without Python.
// It writes what torch.utils.tensorboard.SummaryWriter would: a file
//   <output_path>/<job_name>/events.out.tfevents.<%010d unix seconds>.<hostname>.<pid>.<n>
// (n counts writers in this process, from 0; we take the first free n) whose first record is an
// Event{wall_time, file_version "brain.Event:2"}, then one Event{wall_time, step, summary{value
// {tag, simple_value}}} per scalar, as add_scalar does. Each write_events ends with the bytes in
// the kernel (DeepSpeed flushes after every batch too), so a crash keeps what was logged.
#pragma once

#include <string>
#include <vector>

#include "format/posix_file.h"
#include "config/monitor_config.h"
#include "profiling/monitor.h"

namespace ds {

class TensorBoardMonitor final : public Monitor {
 public:
  // Creates the directory and the event file; throws IoError if either cannot be made.
  explicit TensorBoardMonitor(const TensorBoardConfig& config);

  void write_events(const std::vector<MonitorEvent>& events) override;
  const std::string& log_dir() const override { return log_dir_; }
  const std::string& file_path() const { return path_; }

 private:
  void append(const std::string& bytes);

  std::string log_dir_;
  std::string path_;
  format::UniqueFd fd_;
};

// The host name as Python's socket.gethostname() reports it ("localhost" if it cannot be read).
std::string host_name();

}  // namespace ds
