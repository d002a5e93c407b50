// The tokenizer interface the text pipeline uses, whatever the file: Hugging Face tokenizer.json
// (byte-level BPE: GPT-2, OPT, Llama-3, Qwen2) or a SentencePiece tokenizer.model (Llama-2,
// Mistral). load_tokenizer() picks the implementation from a model directory or a file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ds::data {

struct EncodeOptions {
  bool add_special_tokens = true;  // the post-processor's BOS/EOS (tokenizer.json) or add_bos_token
};

struct DecodeOptions {
  bool skip_special_tokens = false;
};

enum class Padding { kNone, kLongest, kMaxLength };
enum class Side { kRight, kLeft };

struct BatchOptions {
  bool add_special_tokens = true;
  size_t max_length = 0;  // 0: no limit (kMaxLength padding and truncation need one)
  bool truncation = false;
  Side truncation_side = Side::kRight;
  Padding padding = Padding::kNone;
  Side padding_side = Side::kRight;
  std::optional<int32_t> pad_id = std::nullopt;  // default: the tokenizer's pad token, else its eos token
};

// Rows of equal length when padded; attention_mask is 1 on tokens, 0 on padding.
struct BatchEncoding {
  std::vector<std::vector<int32_t>> input_ids;
  std::vector<std::vector<int32_t>> attention_mask;
};

// The named special tokens (tokenizer_config.json, else the tokenizer file's own).
struct SpecialTokens {
  std::string bos, eos, pad, unk;  // "" when the model has none
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const = 0;
  virtual std::string decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const = 0;
  virtual size_t vocab_size() const = 0;  // including added tokens
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual std::optional<std::string> id_to_token(int32_t id) const = 0;
  // How many ids encode() adds around the text when add_special_tokens is set (for truncation).
  virtual size_t num_special_tokens_to_add() const = 0;
  // Wraps text ids as encode() with add_special_tokens does.
  virtual std::vector<int32_t> add_special_tokens(std::vector<int32_t> ids) const = 0;

  // Encodes each text, truncating and padding as options say (errors name the option).
  BatchEncoding encode_batch(std::span<const std::string> texts, const BatchOptions& options = {}) const;

  const SpecialTokens& special_tokens() const { return special_; }
  std::optional<int32_t> special_id(const std::string& token) const;
  // tokenizer_config.json's chat_template ("" when there is none); see data/chat_template.h.
  const std::string& chat_template() const { return chat_template_; }

  void set_special_tokens(SpecialTokens special) { special_ = std::move(special); }
  void set_chat_template(std::string jinja) { chat_template_ = std::move(jinja); }

 private:
  SpecialTokens special_;
  std::string chat_template_;
};

// A model directory (tokenizer.json preferred, else tokenizer.model) or one of those files; reads
// tokenizer_config.json beside it when present (special tokens, chat_template, add_bos_token).
// Errors name the path and what is missing or unsupported.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& path);

}  // namespace ds::data
