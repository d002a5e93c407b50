// Merging uses a min-heap of candidate pairs keyed by (rank, position) over a linked list of
// symbols, so a long word (a line of one script with no spaces) costs O(n log n), not O(n^2).
#include "data/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "data/unicode.h"
#include "util/error.h"

namespace ds::data {

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options)
    : vocab_(std::move(vocab)), options_(options) {
  int32_t max_id = -1;
  for (const auto& [tok, id] : vocab_) {
    if (id < 0) throw ConfigError("model.vocab", "token \"" + tok + "\" has a negative id " + std::to_string(id));
    max_id = std::max(max_id, id);
  }
  tokens_.resize(size_t(max_id + 1));
  for (const auto& [tok, id] : vocab_) {
    tokens_[size_t(id)] = tok;
    const CodePoint c = tok.empty() ? CodePoint{0, 0, false} : decode_utf8(tok, 0);
    if (c.valid && c.len == tok.size()) char_ids_[c.cp] = id;
  }
  merges_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    const auto ia = vocab_.find(a), ib = vocab_.find(b), io = vocab_.find(a + b);
    if (ia == vocab_.end() || ib == vocab_.end() || io == vocab_.end())
      throw ConfigError("model.merges", "merge " + std::to_string(r) + " (\"" + a + "\" \"" + b +
                                            "\") names a token missing from model.vocab");
    merges_.try_emplace(pair_key(ia->second, ib->second), Merge{int32_t(r), io->second});
  }
  byte_fallback_ids_.assign(256, -1);
  if (options_.byte_fallback) {
    char name[8];
    for (int b = 0; b < 256; ++b) {
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      if (auto it = vocab_.find(name); it != vocab_.end()) byte_fallback_ids_[size_t(b)] = it->second;
    }
  }
}

std::optional<int32_t> BpeModel::id(std::string_view token) const {
  const auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::token(int32_t id) const {
  if (id < 0 || size_t(id) >= tokens_.size() || tokens_[size_t(id)].empty()) return nullptr;
  return &tokens_[size_t(id)];
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& syms) const {
  bool last_unk = false;
  for (size_t i = 0; i < word.size();) {
    const CodePoint c = decode_utf8(word, i);
    const auto it = c.valid ? char_ids_.find(c.cp) : char_ids_.end();
    if (it != char_ids_.end()) {
      syms.push_back(it->second);
      last_unk = false;
    } else {
      bool fell_back = options_.byte_fallback;
      for (size_t k = 0; fell_back && k < c.len; ++k) fell_back = byte_fallback_ids_[uint8_t(word[i + k])] >= 0;
      if (fell_back) {
        for (size_t k = 0; k < c.len; ++k) syms.push_back(byte_fallback_ids_[uint8_t(word[i + k])]);
        last_unk = false;
      } else if (options_.unk_id) {  // without an unk token the character is dropped, as HF does
        if (!(options_.fuse_unk && last_unk)) syms.push_back(*options_.unk_id);
        last_unk = true;
      }
    }
    i += c.len;
  }
}

void BpeModel::merge(std::vector<int32_t>& syms) const {
  const int n = int(syms.size());
  if (n < 2) return;
  std::vector<int> prev(syms.size()), next(syms.size());
  for (int i = 0; i < n; ++i) prev[size_t(i)] = i - 1, next[size_t(i)] = i + 1 < n ? i + 1 : -1;
  struct Candidate {
    int32_t rank;
    int pos;
    int32_t left, right;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int pos) {
    const int r = next[size_t(pos)];
    if (r < 0) return;
    const auto it = merges_.find(pair_key(syms[size_t(pos)], syms[size_t(r)]));
    if (it != merges_.end()) heap.push({it->second.rank, pos, syms[size_t(pos)], syms[size_t(r)]});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  std::vector<bool> dead(syms.size(), false);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const int r = next[size_t(c.pos)];
    // Stale: the left symbol was merged away or changed, or its right neighbour is not the pair's.
    if (dead[size_t(c.pos)] || r < 0 || syms[size_t(c.pos)] != c.left || syms[size_t(r)] != c.right) continue;
    syms[size_t(c.pos)] = merges_.at(pair_key(c.left, c.right)).new_id;
    dead[size_t(r)] = true;
    next[size_t(c.pos)] = next[size_t(r)];
    if (next[size_t(r)] >= 0) prev[size_t(next[size_t(r)])] = c.pos;
    if (prev[size_t(c.pos)] >= 0) push(prev[size_t(c.pos)]);
    push(c.pos);
  }
  size_t w = 0;
  for (int i = 0; i >= 0 && i < n; i = next[size_t(i)]) syms[w++] = syms[size_t(i)];
  syms.resize(w);
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges)
    if (auto it = vocab_.find(std::string(word)); it != vocab_.end()) return out.push_back(it->second);
  const bool cacheable = word.size() <= kCacheMaxWordBytes;
  std::string key;
  if (cacheable) {
    key.assign(word);
    std::lock_guard lock(cache_mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> syms;
  syms.reserve(word.size());
  initial_symbols(word, syms);
  merge(syms);
  out.insert(out.end(), syms.begin(), syms.end());
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() >= kCacheEntries) cache_.clear();
    cache_.emplace(std::move(key), std::move(syms));
  }
}

}  // namespace ds::data
