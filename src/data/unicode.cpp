// ICU answers the general category (u_charType) and White_Space (u_isUWhiteSpace); an ASCII table
// spares the common case the call.
#include "data/unicode.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <array>

#include "util/error.h"

namespace ds::data {
namespace {

uint8_t classify(char32_t cp) {
  uint8_t c = 0;
  switch (u_charType(UChar32(cp))) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER: c |= kLetter; break;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER: c |= kNumber; break;
    default: break;
  }
  if (u_isUWhiteSpace(UChar32(cp))) c |= kSpace;
  return c;
}

const std::array<uint8_t, 128>& ascii_table() {
  static const std::array<uint8_t, 128> table = [] {
    std::array<uint8_t, 128> t{};
    for (char32_t cp = 0; cp < 128; ++cp) t[cp] = classify(cp);
    return t;
  }();
  return table;
}

}  // namespace

CodePoint decode_utf8(std::string_view s, size_t pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) return {b0, 1};
  // WHATWG's decoder: the lead byte fixes the length and the allowed range of the second byte.
  uint32_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) len = 2;
  else if (b0 >= 0xE0 && b0 <= 0xEF) len = 3, lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
  else if (b0 >= 0xF0 && b0 <= 0xF4) len = 4, lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
  else return {0xFFFD, 1, false};
  char32_t cp = b0 & (0x7F >> len);
  for (uint32_t i = 1; i < len; ++i) {
    if (pos + i >= s.size()) return {0xFFFD, i, false};
    const auto b = static_cast<unsigned char>(s[pos + i]);
    if (b < lo || b > hi) return {0xFFFD, i, false};
    lo = 0x80, hi = 0xBF;
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, len};
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

uint8_t char_class(char32_t cp) { return cp < 128 ? ascii_table()[cp] : classify(cp); }

std::string nfc(std::string_view s) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* norm = icu::Normalizer2::getNFCInstance(status);
  DS_CHECK(U_SUCCESS(status), Error, std::string("ICU: NFC normalizer unavailable: ") + u_errorName(status));
  const auto in = icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), int32_t(s.size())));
  if (norm->isNormalized(in, status) && U_SUCCESS(status)) return utf8_lossy(s);
  icu::UnicodeString out = norm->normalize(in, status);
  DS_CHECK(U_SUCCESS(status), Error, std::string("ICU: NFC normalization failed: ") + u_errorName(status));
  std::string result;
  out.toUTF8String(result);
  return result;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const CodePoint c = decode_utf8(bytes, i);
    if (!c.valid) {
      append_utf8(out, 0xFFFD);
    } else {
      out.append(bytes.substr(i, c.len));
    }
    i += c.len;
  }
  return out;
}

}  // namespace ds::data
