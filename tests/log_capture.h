// LogCapture: what ds::log writes while it is alive, for tests that check a warning is said (and how often).
#pragma once

#include <spdlog/sinks/ostream_sink.h>

#include <memory>
#include <sstream>
#include <string>

#include "util/logging.h"

namespace ds::test {

// Captures what ds::log writes while alive.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)) {
    ds::log::logger().sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = ds::log::logger().sinks();
    for (auto it = sinks.begin(); it != sinks.end(); ++it)
      if (*it == sink_) {
        sinks.erase(it);
        break;
      }
  }
  std::string text() const { return out_.str(); }
  bool saw(const std::string& needle) const { return text().find(needle) != std::string::npos; }
  int count(const std::string& needle) const {
    const std::string t = text();
    int n = 0;
    for (size_t pos = t.find(needle); pos != std::string::npos; pos = t.find(needle, pos + 1)) ++n;
    return n;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

}  // namespace ds::test
