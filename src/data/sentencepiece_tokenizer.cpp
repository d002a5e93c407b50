#include "data/sentencepiece_tokenizer.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "data/sentencepiece_backend.h"
#include "util/error.h"

namespace ds::data {
namespace {

// dlopen's own scope (RTLD_LOCAL) keeps the library's protobuf symbols away from everyone else's,
// and RTLD_DEEPBIND makes the library bind to its own copy first.
SentencePieceOpenFn open_plugin() {
  static std::once_flag once;
  static SentencePieceOpenFn open = nullptr;
  static std::string tried;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("DS_SENTENCEPIECE_PLUGIN"); env && *env) candidates.push_back(env);
    candidates.push_back(DS_SENTENCEPIECE_PLUGIN_BUILD);
    candidates.push_back(DS_SENTENCEPIECE_PLUGIN_INSTALL);
    candidates.push_back("libds_sentencepiece.so");
    for (const auto& path : candidates) {
      if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND)) {
        open = reinterpret_cast<SentencePieceOpenFn>(dlsym(handle, kSentencePieceOpenSymbol));
        if (open) return;
        tried += "\n  " + path + ": no symbol " + kSentencePieceOpenSymbol;
      } else {
        tried += "\n  " + path + ": " + dlerror();
      }
    }
  });
  DS_CHECK(open != nullptr, IoError,
           "SentencePiece models are read through the plugin libds_sentencepiece.so (built and installed with "
           "deepspeed.cpp; set DS_SENTENCEPIECE_PLUGIN to its path), which did not load:" + tried);
  return open;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::filesystem::path& model_file, SentencePieceOptions options)
    : options_(options) {
  std::string error;
  sp_.reset(open_plugin()(model_file.string().c_str(), &error));
  DS_CHECK(sp_ != nullptr, IoError,
           model_file.string() + ": not a loadable SentencePiece model (" + error +
               "); point at the model's tokenizer.model or its tokenizer.json");
  SpecialTokens special;
  auto piece = [&](int id) { return id >= 0 ? sp_->id_to_piece(id) : std::string(); };
  special.bos = piece(sp_->bos_id());
  special.eos = piece(sp_->eos_id());
  special.pad = piece(sp_->pad_id());
  special.unk = piece(sp_->unk_id());
  set_special_tokens(special);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int> ids;
  std::string error;
  DS_CHECK(sp_->encode(text, ids, error), Error, "SentencePiece encode failed: " + error);
  std::vector<int32_t> out(ids.begin(), ids.end());
  return options.add_special_tokens ? add_special_tokens(std::move(out)) : out;
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  std::vector<int> kept;
  kept.reserve(ids.size());
  const int n = sp_->piece_size();
  for (int32_t id : ids) {
    if (id < 0 || id >= n) continue;  // out-of-range ids are skipped, as Hugging Face does
    if (options.skip_special_tokens && (sp_->is_control(id) || sp_->is_unknown(id))) continue;
    kept.push_back(id);
  }
  std::string text, error;
  DS_CHECK(sp_->decode(kept, text, error), Error, "SentencePiece decode failed: " + error);
  return text;
}

size_t SentencePieceTokenizer::vocab_size() const { return size_t(sp_->piece_size()); }

std::optional<int32_t> SentencePieceTokenizer::token_to_id(std::string_view token) const {
  const int id = sp_->piece_to_id(token);
  if (id == sp_->unk_id() && token != sp_->id_to_piece(id)) return std::nullopt;
  return id;
}

std::optional<std::string> SentencePieceTokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= sp_->piece_size()) return std::nullopt;
  return sp_->id_to_piece(id);
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
