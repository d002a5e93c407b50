// UTF-8 decoding and the Unicode classes the pre-tokenizer regexes use (\p{L}, \p{N}, \s as
// Oniguruma reads them: the White_Space property), from ICU's property tables; NFC normalization.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ds::data {

// One decoded code point and its length in bytes. Invalid UTF-8 decodes as U+FFFD over its maximal
// subpart (WHATWG / Rust from_utf8_lossy); user input may be anything, we never read past the end.
struct CodePoint {
  char32_t cp;
  uint32_t len;
  bool valid = true;
};
CodePoint decode_utf8(std::string_view s, size_t pos);
void append_utf8(std::string& out, char32_t cp);

// Character classes, one bit each, with an ASCII fast path.
enum CharClass : uint8_t { kLetter = 1, kNumber = 2, kSpace = 4 };
uint8_t char_class(char32_t cp);
inline bool is_letter(char32_t cp) { return char_class(cp) & kLetter; }
inline bool is_number(char32_t cp) { return char_class(cp) & kNumber; }
inline bool is_space(char32_t cp) { return char_class(cp) & kSpace; }

// Unicode NFC (Qwen2's normalizer). Invalid UTF-8 is replaced by U+FFFD as ICU does.
std::string nfc(std::string_view s);

// Replaces invalid UTF-8 sequences by U+FFFD (what a decoder returns for a cut multi-byte char).
std::string utf8_lossy(std::string_view bytes);

}  // namespace ds::data
