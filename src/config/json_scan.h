// Internal: a light scan of config text (strings and comments skipped) for what nlohmann's parser
// cannot report well or does not accept: nesting so deep that recursion over the parsed value would
// overflow the stack, the place of a number too large for a double (its exception carries no
// position), and the two pieces of hjson syntax DeepSpeed's loader accepts that JSON does not.
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

// DeepSpeed reads config files with hjson, which also takes `#` line comments and a comma before a
// closing bracket ({"a": 1,}). Returns `text` with each `#` comment and each such trailing comma
// replaced by spaces (newlines kept), so nlohmann's parser (which takes // and /* */ comments)
// accepts it and every line:column it reports is still the file's. A comma after an opening
// bracket or another comma ({,} or [1,,]) is kept, so those stay syntax errors, as in hjson.
std::string blank_hjson_extras(const std::string& text);

}  // namespace ds::config_detail
