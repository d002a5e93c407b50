// The SentencePiece calls the tokenizer makes, behind an interface. Debian's libsentencepiece
// carries its own copy of protobuf-lite and exports it; loaded into a process that also has
// LibTorch's libprotobuf, one copy's symbols bind to the other's and the process dies before main.
// So the library lives in a plugin (libds_sentencepiece.so, sentencepiece_plugin.cpp) that
// SentencePieceTokenizer dlopens with its own symbol scope, and is reached only through this class.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ds::data {

class SentencePieceBackend {
 public:
  virtual ~SentencePieceBackend() = default;
  // false with `error` set when encoding or decoding fails.
  virtual bool encode(std::string_view text, std::vector<int>& ids, std::string& error) const = 0;
  virtual bool decode(const std::vector<int>& ids, std::string& text, std::string& error) const = 0;
  virtual int piece_size() const = 0;
  virtual std::string id_to_piece(int id) const = 0;
  virtual int piece_to_id(std::string_view piece) const = 0;
  virtual bool is_control(int id) const = 0;
  virtual bool is_unknown(int id) const = 0;
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;
  virtual int pad_id() const = 0;
  virtual int unk_id() const = 0;
};

// The plugin's one exported symbol: a loaded model, or null with `error` set.
using SentencePieceOpenFn = SentencePieceBackend* (*)(const char* model_file, std::string* error);
inline constexpr const char* kSentencePieceOpenSymbol = "ds_sentencepiece_open";

}  // namespace ds::data
