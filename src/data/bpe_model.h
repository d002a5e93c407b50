// The BPE model of tokenizer.json ("model": {"type": "BPE"}): a vocabulary, merges applied by rank
// (lowest first, leftmost on ties, as Hugging Face's tokenizers does), ignore_merges (Llama-3: a
// word that is itself in the vocabulary is one token), byte_fallback (<0xXX> tokens for a character
// outside the vocabulary), unk_token / fuse_unk. Words are strings of the vocabulary's alphabet
// (ByteLevel strings for GPT-2-style models). A cache of recent words makes repeated words free.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ds::data {

struct BpeOptions {
  bool ignore_merges = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
  std::optional<int32_t> unk_id = std::nullopt;
};

class BpeModel {
 public:
  // merges: pairs of vocabulary strings, in rank order. Throws ConfigError naming a merge whose
  // parts or result are not in the vocabulary.
  BpeModel(std::unordered_map<std::string, int32_t> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
           BpeOptions options);
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  // Appends the ids of one pre-tokenized word. Thread-safe.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> id(std::string_view token) const;
  const std::string* token(int32_t id) const;  // nullptr when not in the vocabulary
  size_t vocab_size() const { return vocab_.size(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  void initial_symbols(std::string_view word, std::vector<int32_t>& syms) const;
  void merge(std::vector<int32_t>& syms) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> tokens_;                  // id → string ("" for ids the vocabulary skips)
  std::unordered_map<char32_t, int32_t> char_ids_;   // single-character tokens, the initial symbols
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<int32_t> byte_fallback_ids_;           // <0x00>..<0xFF>, -1 when absent
  BpeOptions options_;

  static constexpr size_t kCacheEntries = 1 << 17;   // cleared when full
  static constexpr size_t kCacheMaxWordBytes = 128;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace ds::data
