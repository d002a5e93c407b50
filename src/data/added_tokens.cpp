#include "data/added_tokens.h"

#include <algorithm>

#include "data/unicode.h"

namespace ds::data {
namespace {

bool is_word_char(char32_t cp) { return cp == '_' || is_letter(cp) || is_number(cp); }

// Where the code point that ends just before pos starts (continuation bytes skipped backwards).
size_t prev_char_start(std::string_view s, size_t pos) {
  size_t i = pos - 1;
  while (i > 0 && (uint8_t(s[i]) & 0xC0) == 0x80) --i;
  return i;
}
char32_t char_before(std::string_view s, size_t pos) { return decode_utf8(s, prev_char_start(s, pos)).cp; }

}  // namespace

AddedTokens::AddedTokens(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    by_id_[tokens_[i].id] = i;
    by_content_[tokens_[i].content] = i;
    if (!tokens_[i].content.empty()) by_first_byte_[uint8_t(tokens_[i].content[0])].push_back(i);
  }
  for (auto& list : by_first_byte_)
    std::stable_sort(list.begin(), list.end(),
                     [&](size_t a, size_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
}

const AddedToken* AddedTokens::by_id(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedTokens::by_content(std::string_view content) const {
  const auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

bool AddedTokens::matches_at(std::string_view text, size_t pos, const AddedToken& t) const {
  if (text.compare(pos, t.content.size(), t.content) != 0) return false;
  if (!t.single_word) return true;
  const size_t end = pos + t.content.size();
  if (pos > 0 && is_word_char(char_before(text, pos))) return false;
  return end >= text.size() || !is_word_char(decode_utf8(text, end).cp);
}

void AddedTokens::split(std::string_view text, std::vector<Segment>& out) const {
  if (tokens_.empty()) {
    if (!text.empty()) out.push_back({text, nullptr});
    return;
  }
  size_t plain_begin = 0;  // start of the text not yet emitted
  for (size_t pos = 0; pos < text.size(); ++pos) {
    const auto& candidates = by_first_byte_[uint8_t(text[pos])];
    const AddedToken* hit = nullptr;
    for (size_t idx : candidates)
      if (matches_at(text, pos, tokens_[idx])) {
        hit = &tokens_[idx];
        break;
      }
    if (!hit) continue;
    size_t begin = pos, end = pos + hit->content.size();
    if (hit->lstrip)
      while (begin > plain_begin && is_space(char_before(text, begin))) begin = prev_char_start(text, begin);
    if (hit->rstrip)
      while (end < text.size() && is_space(decode_utf8(text, end).cp)) end += decode_utf8(text, end).len;
    if (begin > plain_begin) out.push_back({text.substr(plain_begin, begin - plain_begin), nullptr});
    out.push_back({text.substr(begin, end - begin), hit});
    plain_begin = end;
    pos = end - 1;
  }
  if (plain_begin < text.size()) out.push_back({text.substr(plain_begin), nullptr});
}

}  // namespace ds::data
