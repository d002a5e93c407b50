// A SentencePiece model file (Llama-2's and Mistral's tokenizer.model) through Debian's
// libsentencepiece, loaded as a plugin (data/sentencepiece_backend.h says why): encode/decode are the library's; BOS/EOS follow tokenizer_config.json's
// add_bos_token / add_eos_token (LlamaTokenizer's defaults: BOS yes, EOS no).
#pragma once

#include <filesystem>
#include <memory>

#include "data/tokenizer.h"

namespace ds::data {

class SentencePieceBackend;

struct SentencePieceOptions {
  bool add_bos = true;
  bool add_eos = false;
};

class SentencePieceTokenizer : public Tokenizer {
 public:
  // IoError naming the file when it is missing or not a SentencePiece model, or naming the plugin
  // (libds_sentencepiece.so; DS_SENTENCEPIECE_PLUGIN overrides where it is looked for) when it cannot load.
  SentencePieceTokenizer(const std::filesystem::path& model_file, SentencePieceOptions options = {});
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const override;
  std::string decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const override;
  size_t vocab_size() const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::optional<std::string> id_to_token(int32_t id) const override;
  size_t num_special_tokens_to_add() const override;
  std::vector<int32_t> add_special_tokens(std::vector<int32_t> ids) const override;

 private:
  std::unique_ptr<SentencePieceBackend> sp_;
  SentencePieceOptions options_;
};

}  // namespace ds::data
