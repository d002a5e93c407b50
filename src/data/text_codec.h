// Text ↔ token ids for generation (Pipeline::generate_text, ds-generate, ds-serve): the model
// folder's tokenizer (tokenizer.json / tokenizer.model, with its chat template) or, when the folder
// has none, bytes as tokens (byte b is token b, as the built-in tiny models are trained; chat
// prompts rendered in ChatML). StreamDecoder turns the ids a request produces into text pieces that
// never split a UTF-8 character, for streaming. Here, below inference/ and serve/, so both use it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/chat_template.h"
#include "data/tokenizer.h"

namespace ds::data {

class TextCodec {
 public:
  // The tokenizer of `model_dir` when it has one, else bytes. Errors name the file (a chat template
  // nobody recognises only disables chat: chat requests are then refused naming it).
  static TextCodec from_model_dir(const std::filesystem::path& model_dir);
  static TextCodec bytes();

  bool is_bytes() const { return tokenizer_ == nullptr; }
  std::string describe() const;

  std::vector<int64_t> encode(const std::string& text, bool add_special_tokens) const;
  // Full text of `ids` (invalid UTF-8 replaced by U+FFFD).
  std::string decode(const std::vector<int64_t>& ids) const;
  // One token's bytes, for logprobs (bytes as tokens: the byte itself, which may be part of a
  // UTF-8 character; a tokenizer: the token decoded alone).
  std::string token_bytes(int64_t id) const;
  // Whether encode_chat works; if not, chat_error() says why (no template, or one not recognised).
  bool has_chat() const { return chat_.has_value(); }
  const std::string& chat_error() const { return chat_error_; }
  // The chat prompt as ids (template with the generation prompt). NotSupported, naming the reason,
  // when the model has no usable chat template (check has_chat() first).
  std::vector<int64_t> encode_chat(const std::vector<ChatMessage>& messages) const;
  // Ids that end a chat turn besides the model's eos (the tokenizer's eos, Llama-3's <|eot_id|>).
  std::vector<int64_t> chat_stop_ids() const;

 private:
  std::shared_ptr<Tokenizer> tokenizer_;
  std::optional<ChatTemplate> chat_;
  std::string chat_error_;
};

// Feeds output ids, returns the new text. A piece ending in an unfinished character (U+FFFD at the
// end) is held back until the character completes or finish() flushes it.
class StreamDecoder {
 public:
  explicit StreamDecoder(const TextCodec& codec) : codec_(codec) {}
  std::string push(const std::vector<int64_t>& ids);
  std::string finish();
  const std::vector<int64_t>& ids() const { return ids_; }

 private:
  const TextCodec& codec_;
  std::vector<int64_t> ids_;
  size_t emitted_ = 0;  // bytes of the decoded text handed out
};

}  // namespace ds::data
