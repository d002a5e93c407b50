// Shared by the LR schedule tests: schedulers over simple groups, the path of a ConfigError, and
// a capture of the project's log lines.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../log_capture.h"
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

// Captures the project's log lines for one test.
using WarningCapture = ds::test::LogCapture;

}  // namespace ds::optim::test_util
