// Internal: scans config text outside strings and comments (see json_scan.h). Malformed text is
// scanned as far as it goes; the parser reports its syntax errors afterwards.
#include "config/json_scan.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>

namespace ds::config_detail {
namespace {

// Calls `visit(i, position)` for every byte outside strings and comments; stops when it returns true.
void scan_structure(const std::string& s, const std::function<bool(size_t, const TextPosition&)>& visit) {
  TextPosition pos;
  size_t i = 0;
  auto advance = [&] {
    if (s[i] == '\n') {
      ++pos.line;
      pos.column = 1;
    } else {
      ++pos.column;
    }
    ++i;
  };
  while (i < s.size()) {
    const char c = s[i];
    if (c == '"') {  // a string: up to the closing quote, escapes skipped
      advance();
      while (i < s.size() && s[i] != '"') {
        if (s[i] == '\\' && i + 1 < s.size()) advance();
        advance();
      }
      if (i < s.size()) advance();
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {  // a line comment
      while (i < s.size() && s[i] != '\n') advance();
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {  // a block comment
      advance();
      advance();
      while (i < s.size() && !(s[i] == '*' && i + 1 < s.size() && s[i + 1] == '/')) advance();
      if (i < s.size()) advance(), advance();
    } else {
      if (visit(i, pos)) return;
      advance();
    }
  }
}

bool starts_number(char c) { return c == '-' || (c >= '0' && c <= '9'); }
bool in_number(char c) { return starts_number(c) || c == '+' || c == '.' || c == 'e' || c == 'E'; }

}  // namespace

std::optional<TextPosition> find_nesting_deeper_than(const std::string& text, int limit) {
  std::optional<TextPosition> found;
  int depth = 0;
  scan_structure(text, [&](size_t i, const TextPosition& at) {
    const char c = text[i];
    if (c == '[' || c == '{') {
      if (++depth > limit) found = at;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
    return found.has_value();
  });
  return found;
}

std::optional<NumberToken> find_overflowing_number(const std::string& text) {
  std::optional<NumberToken> found;
  size_t token_end = 0;  // bytes before this belong to the number just checked
  scan_structure(text, [&](size_t i, const TextPosition& at) {
    if (i < token_end || !starts_number(text[i])) return false;
    if (i > 0 && (in_number(text[i - 1]) || std::isalpha(static_cast<unsigned char>(text[i - 1])))) return false;
    size_t end = i;
    while (end < text.size() && in_number(text[end])) ++end;
    token_end = end;
    const std::string token = text.substr(i, end - i);
    // strtod in the "C" locale (the tools never change it) overflows to HUGE_VAL exactly where
    // nlohmann's parser (which uses strtod too) reports "number overflow".
    if (std::isinf(std::strtod(token.c_str(), nullptr))) found = NumberToken{at, token};
    return found.has_value();
  });
  return found;
}

}  // namespace ds::config_detail
