// Helpers shared by the config tests: load a JSON text and expect a ConfigError with given text.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/loader.h"
#include "config/report.h"
#include "util/error.h"

namespace ds::test {

inline Config load(const std::string& text, int world_size = 1) { return load_config_text(text, world_size); }

// The ConfigError message (what()) of loading `text`, or "" when it loads.
inline std::string load_error(const std::string& text, int world_size = 1) {
  try {
    load_config_text(text, world_size);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// The resolved value text and source name of `path`, "<missing>" if not reported.
inline std::string value_of(const Config& c, const std::string& path) {
  const ResolvedValue* v = find_resolved(c, path);
  return v ? v->value : "<missing>";
}
inline std::string source_of(const Config& c, const std::string& path) {
  const ResolvedValue* v = find_resolved(c, path);
  return v ? to_string(v->source) : "<missing>";
}

inline bool has_warning(const Config& c, const std::string& needle) {
  for (const auto& w : c.warnings) {
    if (w.find(needle) != std::string::npos) return true;
  }
  return false;
}

}  // namespace ds::test

// Asserts that `text` fails to load with a message containing every one of the given pieces.
#define EXPECT_CONFIG_ERROR(text, ...)                                                  \
  do {                                                                                  \
    const std::string msg_ = ::ds::test::load_error(text);                              \
    EXPECT_FALSE(msg_.empty()) << "expected a ConfigError for " << (text);             \
    const std::vector<std::string> pieces_{__VA_ARGS__};                              \
    for (const auto& piece_ : pieces_) EXPECT_NE(msg_.find(piece_), std::string::npos)  \
        << "message: " << msg_ << "\n  missing: " << piece_;                            \
  } while (0)
