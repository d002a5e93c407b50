// A Hugging Face tokenizer.json with a byte-level BPE model (GPT-2, OPT, Llama-3, Qwen2), run as the
// tokenizers library runs it: added tokens split out first, then per remaining piece the normalizer
// (none or NFC), the pre-tokenizer (a split pattern, then ByteLevel's byte → character map), the BPE
// model per word, and the post-processor's special tokens; decode maps tokens back through ByteLevel.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "data/added_tokens.h"
#include "data/bpe_model.h"
#include "data/split_patterns.h"
#include "data/tokenizer.h"

namespace ds::data {

enum class Normalizer { kNone, kNfc };

struct ByteLevelPreTokenizer {
  std::optional<SplitPattern> split;  // none: each added-token-free piece is one word
  bool add_prefix_space = false;
  bool prefix_each_piece = false;  // ByteLevel after a Split prefixes every piece, not the segment
};

// The single-sequence template: prefix ids, the text's ids, suffix ids.
struct PostProcessor {
  std::vector<int32_t> prefix, suffix;
};

struct HfTokenizerParts {
  Normalizer normalizer = Normalizer::kNone;
  ByteLevelPreTokenizer pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  AddedTokens added;
  PostProcessor post;
};

// Parses tokenizer.json text into parts. ConfigError for malformed content (naming the key);
// NotSupported naming the component for a model kind (WordPiece, Unigram, ...), normalizer,
// pre-tokenizer, split regex, post-processor or decoder this implementation does not run.
HfTokenizerParts parse_tokenizer_json(std::string_view json_text);

class HfTokenizer : public Tokenizer {
 public:
  explicit HfTokenizer(HfTokenizerParts parts);
  // Reads and parses a tokenizer.json file; errors are prefixed with its path.
  static std::unique_ptr<HfTokenizer> from_file(const std::filesystem::path& file);

  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const override;
  std::string decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const override;
  size_t vocab_size() const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::optional<std::string> id_to_token(int32_t id) const override;
  size_t num_special_tokens_to_add() const override;
  std::vector<int32_t> add_special_tokens(std::vector<int32_t> ids) const override;

 private:
  void encode_plain(std::string_view text, std::vector<int32_t>& ids) const;

  HfTokenizerParts parts_;
};

}  // namespace ds::data
