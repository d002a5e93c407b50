// tokenizer.json's "added_tokens" (special tokens such as <|endoftext|>, <|begin_of_text|>): found in
// the text before normalization and pre-tokenization and emitted whole, leftmost-longest as Hugging
// Face's AddedVocabulary does, with single_word / lstrip / rstrip honoured. Tokens marked
// "normalized" are matched on the raw text too: the normalizers we run (NFC) leave the ASCII
// special tokens of supported models unchanged.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ds::data {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

class AddedTokens {
 public:
  AddedTokens() = default;
  explicit AddedTokens(std::vector<AddedToken> tokens);

  // A piece of the input: plain text for the model (token == nullptr) or one added token.
  struct Segment {
    std::string_view text;
    const AddedToken* token;
  };
  void split(std::string_view text, std::vector<Segment>& out) const;

  const AddedToken* by_id(int32_t id) const;
  const AddedToken* by_content(std::string_view content) const;
  const std::vector<AddedToken>& all() const { return tokens_; }

 private:
  // Whether token t occurs at pos (and, for single_word, stands alone there).
  bool matches_at(std::string_view text, size_t pos, const AddedToken& t) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  std::array<std::vector<size_t>, 256> by_first_byte_;  // token indices, longest first
};

}  // namespace ds::data
