// libds_sentencepiece.so: Debian's libsentencepiece behind SentencePieceBackend (see
// sentencepiece_backend.h for why it is a plugin).
#include <sentencepiece_processor.h>

#include <memory>

#include "data/sentencepiece_backend.h"

namespace ds::data {
namespace {

class LibrarySentencePiece final : public SentencePieceBackend {
 public:
  sentencepiece::SentencePieceProcessor sp;

  bool encode(std::string_view text, std::vector<int>& ids, std::string& error) const override {
    const auto status = sp.Encode(text, &ids);
    if (!status.ok()) error = status.ToString();
    return status.ok();
  }
  bool decode(const std::vector<int>& ids, std::string& text, std::string& error) const override {
    const auto status = sp.Decode(ids, &text);
    if (!status.ok()) error = status.ToString();
    return status.ok();
  }
  int piece_size() const override { return sp.GetPieceSize(); }
  std::string id_to_piece(int id) const override { return sp.IdToPiece(id); }
  int piece_to_id(std::string_view piece) const override { return sp.PieceToId(piece); }
  bool is_control(int id) const override { return sp.IsControl(id); }
  bool is_unknown(int id) const override { return sp.IsUnknown(id); }
  int bos_id() const override { return sp.bos_id(); }
  int eos_id() const override { return sp.eos_id(); }
  int pad_id() const override { return sp.pad_id(); }
  int unk_id() const override { return sp.unk_id(); }
};

}  // namespace
}  // namespace ds::data

extern "C" __attribute__((visibility("default"))) ds::data::SentencePieceBackend* ds_sentencepiece_open(
    const char* model_file, std::string* error) {
  auto backend = std::make_unique<ds::data::LibrarySentencePiece>();
  const auto status = backend->sp.Load(model_file);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return backend.release();
}
