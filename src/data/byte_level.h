// GPT-2's ByteLevel alphabet: a reversible map from each byte to a printable code point, so that a
// byte-level BPE vocabulary is a set of Unicode strings (tokenizer.json stores "Ġthe" for " the").
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds::data {

class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& get();

  // The UTF-8 text of byte b's code point.
  const std::string& encoded(uint8_t b) const { return encoded_[b]; }
  // bytes → their ByteLevel string (what the vocabulary's keys look like).
  std::string encode(std::string_view bytes) const;
  // A vocabulary string → its bytes. False (out untouched past its old size) when a character is
  // not in the alphabet (an added token such as "<|endoftext|>" is all ASCII and maps to itself).
  bool decode(std::string_view token, std::string& out) const;

 private:
  ByteLevelAlphabet();
  std::array<std::string, 256> encoded_;
  std::array<int16_t, 324> byte_of_;  // code point → byte, -1 when not in the alphabet (max is U+0143)
};

}  // namespace ds::data
