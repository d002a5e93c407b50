// Each matcher returns the length (in characters) of the match at character i, trying the regex's
// alternatives in order as a backtracking engine would (the first alternative that matches wins).
// \s is Unicode White_Space, \p{L} and \p{N} the general categories (data/unicode.h).
#include "data/split_patterns.h"

#include <string>

#include "data/unicode.h"

namespace ds::data {
namespace {

constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr uint8_t kAny = kLetter | kNumber | kSpace;

// The text decoded once: code point and class per character, byte offset of each (n + 1 entries).
struct Chars {
  std::vector<char32_t> cp;
  std::vector<uint8_t> cls;
  std::vector<size_t> off;
  size_t n = 0;

  void load(std::string_view s) {
    cp.clear(), cls.clear(), off.clear();
    for (size_t i = 0; i < s.size();) {
      const CodePoint c = decode_utf8(s, i);
      cp.push_back(c.cp);
      cls.push_back(c.valid ? char_class(c.cp) : 0);  // an invalid byte is "other", like U+FFFD
      off.push_back(i);
      i += c.len;
    }
    off.push_back(s.size());
    n = cp.size();
  }
  size_t run(size_t k, uint8_t cls_mask) const {  // end of the run of characters in the class
    while (k < n && (cls[k] & cls_mask)) ++k;
    return k;
  }
  size_t run_other(size_t k) const {  // [^\s\p{L}\p{N}]+
    while (k < n && !(cls[k] & kAny)) ++k;
    return k;
  }
  bool newline(size_t k) const { return cp[k] == '\r' || cp[k] == '\n'; }
};

char32_t fold(char32_t c) {  // ASCII case folding, plus U+017F (long s), which Unicode folds to 's'
  if (c >= 'A' && c <= 'Z') return c + 32;
  return c == 0x17F ? U's' : c;
}

// 's|'t|'re|'ve|'m|'ll|'d, optionally case-insensitive: the match length or 0.
size_t contraction(const Chars& c, size_t i, bool ignore_case) {
  if (c.cp[i] != '\'' || i + 1 >= c.n) return 0;
  auto at = [&](size_t k) { return ignore_case ? fold(c.cp[k]) : c.cp[k]; };
  const char32_t a = at(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= c.n) return 0;
  const char32_t b = at(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// \s+(?!\S)|\s+ at a whitespace character: a run followed by a non-space gives back its last
// character (so " word" keeps its space), unless the run is a single character.
size_t whitespace(const Chars& c, size_t i) {
  const size_t k = c.run(i, kSpace);
  if (k == c.n || k - i == 1) return k - i;
  return k - 1 - i;
}

size_t match_gpt2(const Chars& c, size_t i) {
  if (size_t m = contraction(c, i, false)) return m;
  const size_t j = (c.cp[i] == ' ' && i + 1 < c.n) ? i + 1 : i;  // the optional leading space
  if (c.cls[j] & kLetter) return c.run(j, kLetter) - i;
  if (c.cls[j] & kNumber) return c.run(j, kNumber) - i;
  if (!(c.cls[j] & kAny)) return c.run_other(j) - i;
  return whitespace(c, i);
}

size_t match_llama3(const Chars& c, size_t i, size_t max_digits) {
  if (size_t m = contraction(c, i, true)) return m;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c.cls[i] & kLetter) return c.run(i, kLetter) - i;
  if (!c.newline(i) && !(c.cls[i] & kNumber) && i + 1 < c.n && (c.cls[i + 1] & kLetter)) return c.run(i + 1, kLetter) - i;
  // \p{N}{1,max_digits}
  if (c.cls[i] & kNumber) {
    size_t k = i;
    while (k < c.n && k - i < max_digits && (c.cls[k] & kNumber)) ++k;
    return k - i;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  const size_t j = (c.cp[i] == ' ' && i + 1 < c.n) ? i + 1 : i;
  if (!(c.cls[j] & kAny)) {
    size_t k = c.run_other(j);
    while (k < c.n && c.newline(k)) ++k;
    return k - i;
  }
  // \s*[\r\n]+ : the whitespace run up to and including its last line break.
  const size_t k = c.run(i, kSpace);
  for (size_t p = k; p > i; --p)
    if (c.newline(p - 1)) return p - i;
  return whitespace(c, i);
}

}  // namespace

std::string_view split_pattern_regex(SplitPattern p) {
  switch (p) {
    case SplitPattern::kGpt2: return kGpt2Regex;
    case SplitPattern::kLlama3: return kLlama3Regex;
    case SplitPattern::kQwen2: return kQwen2Regex;
  }
  return {};
}

std::string_view split_pattern_name(SplitPattern p) {
  switch (p) {
    case SplitPattern::kGpt2: return "gpt2";
    case SplitPattern::kLlama3: return "llama3";
    case SplitPattern::kQwen2: return "qwen2";
  }
  return {};
}

std::optional<SplitPattern> recognise_split_regex(std::string_view regex) {
  for (SplitPattern p : {SplitPattern::kGpt2, SplitPattern::kLlama3, SplitPattern::kQwen2})
    if (regex == split_pattern_regex(p)) return p;
  return std::nullopt;
}

void split_with_pattern(SplitPattern p, std::string_view text, std::vector<std::pair<size_t, size_t>>& out) {
  thread_local Chars c;
  c.load(text);
  for (size_t i = 0; i < c.n;) {
    const size_t len = p == SplitPattern::kGpt2 ? match_gpt2(c, i) : match_llama3(c, i, p == SplitPattern::kLlama3 ? 3 : 1);
    out.emplace_back(c.off[i], c.off[i + len]);
    i += len;
  }
}

}  // namespace ds::data
