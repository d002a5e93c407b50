#include "data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include "util/error.h"

namespace ds::data {

SentencePieceTokenizer::SentencePieceTokenizer(const std::filesystem::path& model_file, SentencePieceOptions options)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()), options_(options) {
  const auto status = sp_->Load(model_file.string());
  DS_CHECK(status.ok(), IoError,
           model_file.string() + ": not a loadable SentencePiece model (" + status.ToString() +
               "); point at the model's tokenizer.model or its tokenizer.json");
  SpecialTokens special;
  auto piece = [&](int id) { return id >= 0 ? sp_->IdToPiece(id) : std::string(); };
  special.bos = piece(sp_->bos_id());
  special.eos = piece(sp_->eos_id());
  special.pad = piece(sp_->pad_id());
  special.unk = piece(sp_->unk_id());
  set_special_tokens(special);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  DS_CHECK(status.ok(), Error, "SentencePiece encode failed: " + status.ToString());
  std::vector<int32_t> out(ids.begin(), ids.end());
  return options.add_special_tokens ? add_special_tokens(std::move(out)) : out;
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  std::vector<int> kept;
  kept.reserve(ids.size());
  const int n = sp_->GetPieceSize();
  for (int32_t id : ids) {
    if (id < 0 || id >= n) continue;  // out-of-range ids are skipped, as Hugging Face does
    if (options.skip_special_tokens && (sp_->IsControl(id) || sp_->IsUnknown(id))) continue;
    kept.push_back(id);
  }
  std::string text;
  const auto status = sp_->Decode(kept, &text);
  DS_CHECK(status.ok(), Error, "SentencePiece decode failed: " + status.ToString());
  return text;
}

size_t SentencePieceTokenizer::vocab_size() const { return size_t(sp_->GetPieceSize()); }

std::optional<int32_t> SentencePieceTokenizer::token_to_id(std::string_view token) const {
  const int id = sp_->PieceToId(token);
  if (id == sp_->unk_id() && token != sp_->IdToPiece(id)) return std::nullopt;
  return id;
}

std::optional<std::string> SentencePieceTokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= sp_->GetPieceSize()) return std::nullopt;
  return sp_->IdToPiece(id);
}

size_t SentencePieceTokenizer::num_special_tokens_to_add() const {
  return size_t(options_.add_bos && sp_->bos_id() >= 0) + size_t(options_.add_eos && sp_->eos_id() >= 0);
}

std::vector<int32_t> SentencePieceTokenizer::add_special_tokens(std::vector<int32_t> ids) const {
  if (options_.add_bos && sp_->bos_id() >= 0) ids.insert(ids.begin(), sp_->bos_id());
  if (options_.add_eos && sp_->eos_id() >= 0) ids.push_back(sp_->eos_id());
  return ids;
}

}  // namespace ds::data
