// Internal: a light scan of config text (strings and comments skipped) for what nlohmann's parser
// cannot report well: nesting so deep that recursion over the parsed value would overflow the stack,
// and the place of a number too large for a double (its exception carries no position).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace ds::config_detail {

// Deeper nesting is refused before parsing. DeepSpeed configs nest fewer than 10 levels.
inline constexpr int kMaxJsonDepth = 64;

struct TextPosition {
  size_t line = 1;    // 1-based
  size_t column = 1;  // 1-based, in bytes
};

// Where the first '[' or '{' that opens level `limit + 1` is, if any.
std::optional<TextPosition> find_nesting_deeper_than(const std::string& text, int limit);

struct NumberToken {
  TextPosition at;
  std::string text;  // as written, e.g. "1e400"
};

// The first number literal whose value is not a finite double, if any.
std::optional<NumberToken> find_overflowing_number(const std::string& text);

}  // namespace ds::config_detail
