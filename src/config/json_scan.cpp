// Internal: scans config text outside strings and comments (see json_scan.h). Malformed text is
// scanned as far as it goes; the parser reports its syntax errors afterwards.
#include "config/json_scan.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>

namespace ds::config_detail {
namespace {

// Calls `visit(i, position)` for every byte outside strings and comments, and for each string's
// opening quote; stops when it returns true.
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
    if (c == '"') {  // a string: its opening quote is visited, then skipped to the closing quote
      if (visit(i, pos)) return;
      advance();
      while (i < s.size() && s[i] != '"') {
        if (s[i] == '\\' && i + 1 < s.size()) advance();
        advance();
      }
      if (i < s.size()) advance();
    } else if (c == '#' || (c == '/' && i + 1 < s.size() && s[i + 1] == '/')) {  // a line comment
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

std::string blank_hjson_extras(const std::string& text) {
  std::string out = text;
  // `#` comments: blanked up to the end of the line (scan_structure skips them like //).
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') {  // strings keep their '#'
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
    } else if (text[i] == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (text[i] == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      const size_t end = text.find("*/", i + 2);
      i = end == std::string::npos ? text.size() : end + 1;
    } else if (text[i] == '#') {
      for (; i < text.size() && text[i] != '\n'; ++i) out[i] = ' ';
    }
  }
  // Trailing commas: a ',' whose next significant character is '}' or ']' and whose previous one
  // is a value (not '{', '[' or ','). Comments are already skipped by scan_structure.
  char previous = '\0';
  size_t pending_comma = std::string::npos;
  scan_structure(out, [&](size_t i, const TextPosition&) {
    const char c = out[i];
    if (std::isspace(static_cast<unsigned char>(c))) return false;
    if ((c == '}' || c == ']') && pending_comma != std::string::npos) out[pending_comma] = ' ';
    pending_comma = (c == ',' && previous != '{' && previous != '[' && previous != ',') ? i : std::string::npos;
    previous = c;
    return false;
  });
  return out;
}

}  // namespace ds::config_detail
