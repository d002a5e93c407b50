#include <random>

#include "data_test_util.h"

namespace ds::data::test {

std::vector<std::string> test_corpus(const std::vector<std::string>& special_tokens) {
  std::vector<std::string> lines;
  const fs::path devil = fs::path(DS_SOURCE_DIR) / "data/devils_dictionary.txt";
  std::ifstream in(devil);
  EXPECT_TRUE(in) << devil << " is missing: scripts/setup.sh fetches it";
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  // Pieces chosen for the pre-tokenizer's edge cases: each Unicode class (letters of many scripts,
  // combining marks, digits of other scripts, No/Nl numbers), emoji sequences (ZWJ, skin tones,
  // flags), contractions in both cases, Unicode spaces (NBSP, ideographic, NEL), line breaks.
  const std::vector<std::string> pieces = {
      "Hello", " world", "don't", "I'M", "they'LL", "we've", "'s", "''", "O'Neil", "ſ", "'ſ",
      "Straße", "naïve", "café", "e\u0301", "Ångström", "Привет", " мир", "Γειά σου", "שלום", "مرحبا",
      "नमस्ते", "こんにちは", "你好，世界", "안녕하세요", "ไทย", "ᚠᛇᚻ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "Ⅻ", "½", "²³", "٣٤٥",
      "१२३", "1234567", "3.14159", "-42", "1,000,000", "0x1F", "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇺🇳", "🏳️‍🌈", "✨🚀",
      "    ", "\t", "\t\t ", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2003", "\u0085", "  \u00a0x",
      "!!!", "...", "?!", "(a)", "[b]", "{c}", "#tag", "@user", "$5", "100%", "a_b", "e-mail",
      "https://example.com/a?b=c", "C++", "->", "=>", "~~", "\u200b", "\ufeff", "\u200d",
      "ﬁ", "Ａ", "①", "㎏", "ｶ", "ḱ", "Å", "Å", "\u1e9b\u0323", "  ", " "};
  std::mt19937 rng(1234);
  std::uniform_int_distribution<size_t> pick(0, pieces.size() - 1), len(1, 12);
  std::uniform_int_distribution<size_t> pick_special(0, special_tokens.empty() ? 0 : special_tokens.size() - 1);
  for (int i = 0; i < 2000; ++i) {
    std::string line;
    const size_t n = len(rng);
    for (size_t k = 0; k < n; ++k) {
      if (!special_tokens.empty() && rng() % 11 == 0) {
        line += special_tokens[pick_special(rng)];
      } else {
        line += pieces[pick(rng)];
        if (rng() % 3 == 0) line += ' ';
      }
    }
    lines.push_back(line);
  }
  return lines;
}

}  // namespace ds::data::test
