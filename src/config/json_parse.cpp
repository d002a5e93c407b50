// Config text → JSON with the hjson extras DeepSpeed's loader accepts (// /* */ and # comments,
// trailing commas), duplicate keys rejected (as DeepSpeed's loader does), syntax errors, nesting
// past kMaxJsonDepth and numbers too large for a double reported with the line and column.
#include "config/json_parse.h"

#include <memory>
#include <set>
#include <vector>

#include "config/json_scan.h"
#include "util/error.h"

namespace ds {
namespace {

using Json = nlohmann::json;

// Tracks where the parser is, so a duplicate key can be named by its full path. The state is
// shared with the caller (the parser keeps a copy of the callback), which names the key whose
// number overflowed after the parser has thrown.
class KeyTracker {
 public:
  explicit KeyTracker(std::string origin) : origin_(std::move(origin)) {}

  bool operator()(int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start: frames_.push_back(Frame{true, {}, {}, 0}); break;
      case Json::parse_event_t::array_start: frames_.push_back(Frame{false, {}, {}, 0}); break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        frames_.pop_back();
        element_done();
        break;
      case Json::parse_event_t::key: {
        Frame& f = frames_.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second) {
          throw ConfigError(path(), "duplicate key in one object of " + origin_ +
                                        " (DeepSpeed rejects duplicate keys; keep one)");
        }
        break;
      }
      case Json::parse_event_t::value: element_done(); break;
    }
    return true;
  }

  // The JSON path of the value being read ("optimizer.params.lr", "x[2]").
  std::string path() const {
    std::string p;
    for (const Frame& f : frames_) {
      if (f.is_object) {
        p += (p.empty() ? "" : ".") + f.key;
      } else {
        p += '[';
        p += std::to_string(f.index);
        p += ']';
      }
    }
    return p;
  }

 private:
  struct Frame {
    bool is_object;
    std::set<std::string> keys;
    std::string key;
    size_t index = 0;
  };

  void element_done() {
    if (!frames_.empty() && !frames_.back().is_object) ++frames_.back().index;
  }

  std::string origin_;
  std::vector<Frame> frames_;
};

std::string at_text(const std::string& origin, size_t line, size_t column) {
  return origin + ": line " + std::to_string(line) + ", column " + std::to_string(column);
}

}  // namespace

Json parse_config_json(const std::string& raw_text, const std::string& origin) {
  // Same length and line breaks as the file: every position below is the file's.
  const std::string text = config_detail::blank_hjson_extras(raw_text);
  // Nesting first: the parser and every later walk over the value recurse once per level, so
  // 100,000 nested arrays would overflow the stack (a SIGSEGV) before any message.
  if (const auto deep = config_detail::find_nesting_deeper_than(text, config_detail::kMaxJsonDepth)) {
    throw ConfigError("", at_text(origin, deep->line, deep->column) + ": arrays and objects nested deeper than " +
                              std::to_string(config_detail::kMaxJsonDepth) +
                              " levels (the limit; a DeepSpeed config nests fewer than 10)");
  }
  auto tracker = std::make_shared<KeyTracker>(origin);
  try {
    return Json::parse(
        text, [tracker](int depth, Json::parse_event_t event, Json& parsed) { return (*tracker)(depth, event, parsed); },
        /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const Json::out_of_range& e) {
    // nlohmann's "number overflow" (1e400) has no position: find the literal, name the key.
    const auto number = config_detail::find_overflowing_number(text);
    const std::string key = tracker->path();
    if (!number) throw ConfigError(key, origin + ": " + e.what());
    throw ConfigError("", at_text(origin, number->at.line, number->at.column) + ": " + (key.empty() ? "" : key + ": ") +
                              "number out of range for a double: " + number->text +
                              " (the largest double is about 1.8e308)");
  } catch (const Json::parse_error& e) {
    // e.byte is the 1-based offset of the last character read.
    const size_t at = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < at; ++i) {
      if (text[i] == '\n') ++line, line_start = i + 1;
    }
    const size_t column = at - line_start + 1;
    std::string reason = e.what();
    const size_t col_pos = reason.find("column ");
    const size_t colon = reason.find(": ", col_pos == std::string::npos ? 0 : col_pos);
    if (colon != std::string::npos) reason = reason.substr(colon + 2);
    throw ConfigError("", origin + ": invalid JSON at line " + std::to_string(line) + ", column " +
                              std::to_string(column) + ": " + reason);
  } catch (const Json::exception& e) {  // any other parser failure: still a ConfigError naming the file
    throw ConfigError("", origin + ": invalid JSON: " + e.what());
  }
}

}  // namespace ds
