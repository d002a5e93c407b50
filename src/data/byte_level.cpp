// bytes_to_unicode() of GPT-2's encoder.py: printable Latin-1 bytes map to themselves, the other 68
// bytes to U+0100 onwards in byte order.
#include "data/byte_level.h"

#include "data/unicode.h"

namespace ds::data {

ByteLevelAlphabet::ByteLevelAlphabet() {
  byte_of_.fill(-1);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const char32_t cp = printable ? char32_t(b) : next++;
    append_utf8(encoded_[b], cp);
    byte_of_[cp] = int16_t(b);
  }
}

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

std::string ByteLevelAlphabet::encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += encoded_[b];
  return out;
}

bool ByteLevelAlphabet::decode(std::string_view token, std::string& out) const {
  const size_t start = out.size();
  for (size_t i = 0; i < token.size();) {
    const CodePoint c = decode_utf8(token, i);
    if (!c.valid || c.cp >= byte_of_.size() || byte_of_[c.cp] < 0) {
      out.resize(start);
      return false;
    }
    out += char(byte_of_[c.cp]);
    i += c.len;
  }
  return true;
}

}  // namespace ds::data
