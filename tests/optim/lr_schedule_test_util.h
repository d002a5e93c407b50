// Shared by the LR schedule tests: schedulers over simple groups, the path of a ConfigError, and
// a capture of the project's log lines.
#pragma once

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optim/lr_schedules.h"
#include "util/error.h"
#include "util/logging.h"

namespace ds::optim::test_util {

inline std::vector<GroupLr> base_groups(std::vector<double> lrs) {
  std::vector<GroupLr> g;
  for (double lr : lrs) g.push_back({lr, {0.9, 0.999}});
  return g;
}

inline std::unique_ptr<LrScheduler> make(SchedulerType type, const SchedulerParams& p,
                                  std::vector<GroupLr> base = base_groups({0.1})) {
  return LrScheduler::create(SchedulerConfig{type, p}, std::move(base));
}

inline std::string config_error_path(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.path();
  }
  return "<no ConfigError>";
}

// Captures the project's warnings for one test.
class WarningCapture {
 public:
  WarningCapture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(32)) {
    log::logger().sinks().push_back(sink_);
  }
  ~WarningCapture() {
    auto& sinks = log::logger().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  bool saw(const std::string& text) const {
    for (const auto& line : sink_->last_formatted()) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

}  // namespace ds::optim::test_util
