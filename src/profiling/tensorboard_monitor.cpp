// The event-file writer: names and creates the file, then appends framed Event records.
#include "profiling/tensorboard_monitor.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

#include "profiling/tf_event.h"
#include "profiling/tf_record.h"

namespace ds {
namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

TensorBoardMonitor::TensorBoardMonitor(const TensorBoardConfig& config)
    : log_dir_(monitor_log_dir(config.output_path, config.job_name)) {
  make_log_dir(log_dir_, "tensorboard");
  const double now = unix_seconds();
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%010lld", static_cast<long long>(now));
  const std::string stem = log_dir_ + "/events.out.tfevents." + stamp + "." + host_name() + "." +
                           std::to_string(getpid()) + ".";
  // Python numbers its writers with a process-wide counter; we have no global state, so we take
  // the first number whose file does not exist yet (O_EXCL), which gives the same ".0" for the
  // usual single writer and never appends to another writer's file.
  for (int n = 0;; ++n) {
    path_ = stem + std::to_string(n);
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      fd_ = format::UniqueFd(fd);
      break;
    }
    if (errno != EEXIST) format::throw_errno(path_, "open", errno, " (tensorboard.output_path must be writable)");
  }
  TfEvent first;
  first.wall_time = now;
  first.file_version = "brain.Event:2";
  append(encode_tfrecord(encode_tf_event(first)));
}

void TensorBoardMonitor::write_events(const std::vector<MonitorEvent>& events) {
  if (events.empty()) return;
  std::string bytes;
  for (const MonitorEvent& e : events) {
    TfEvent ev;
    ev.wall_time = unix_seconds();
    ev.step = e.step;
    ev.values.push_back({e.tag, static_cast<float>(e.value)});  // simple_value is a float32
    bytes += encode_tfrecord(encode_tf_event(ev));
  }
  append(bytes);
}

void TensorBoardMonitor::append(const std::string& bytes) {
  // One write(2) per batch straight to the kernel: nothing sits in a user-space buffer.
  format::write_all(fd_.get(), bytes.data(), bytes.size(), path_);
}

}  // namespace ds
