// The hand-written pre-tokenizer patterns on cases whose splits follow from the regexes' text
// (the corpus test checks them against a regex engine at scale).
#include <gtest/gtest.h>

#include "data/split_patterns.h"

namespace ds::data {
namespace {

std::vector<std::string> split(SplitPattern p, std::string_view text) {
  std::vector<std::pair<size_t, size_t>> spans;
  split_with_pattern(p, text, spans);
  std::vector<std::string> out;
  for (auto [b, e] : spans) out.emplace_back(text.substr(b, e - b));
  return out;
}
using V = std::vector<std::string>;

TEST(SplitPatterns, Gpt2) {
  const auto p = SplitPattern::kGpt2;
  EXPECT_EQ(split(p, "Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(split(p, "a  b"), (V{"a", " ", " b"}));          // \s+(?!\S) leaves the last space to " b"
  EXPECT_EQ(split(p, "don't I'M"), (V{"don", "'t", " I", "'", "M"}));  // contractions are case-sensitive
  EXPECT_EQ(split(p, "x   \n"), (V{"x", "   \n"}));          // trailing whitespace stays whole
  EXPECT_EQ(split(p, "123abc !!?"), (V{"123", "abc", " !!?"}));
  EXPECT_EQ(split(p, "café 你好"), (V{"caf\xc3\xa9", " 你好"}));
  EXPECT_EQ(split(p, "½²"), (V{"½²"}));                      // \p{N} includes No
}

TEST(SplitPatterns, Llama3AndQwen2) {
  const auto p = SplitPattern::kLlama3;
  EXPECT_EQ(split(p, "I'M they'LL"), (V{"I", "'M", " they", "'LL"}));  // (?i:...) contractions
  EXPECT_EQ(split(p, "12345"), (V{"123", "45"}));
  EXPECT_EQ(split(SplitPattern::kQwen2, "12345"), (V{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(split(p, "a\n\n b"), (V{"a", "\n\n", " b"}));
  EXPECT_EQ(split(p, "hello.\n\nx"), (V{"hello", ".\n\n", "x"}));  // punctuation keeps its line breaks
  EXPECT_EQ(split(p, "\thello (x)"), (V{"\thello", " (", "x", ")"}));  // any non-letter may lead a word
  EXPECT_EQ(split(p, "  \n  x"), (V{"  \n", " ", " x"}));
}

TEST(SplitPatterns, RecognisedByExactText) {
  for (SplitPattern p : {SplitPattern::kGpt2, SplitPattern::kLlama3, SplitPattern::kQwen2})
    EXPECT_EQ(recognise_split_regex(split_pattern_regex(p)), p);
  EXPECT_FALSE(recognise_split_regex(R"(\p{L}+|\s+)"));
}

TEST(SplitPatterns, InvalidUtf8IsKeptAsBytes) {
  const std::string bad = "ab\xff\xfe cd";
  std::string joined;
  for (const auto& s : split(SplitPattern::kLlama3, bad)) joined += s;
  EXPECT_EQ(joined, bad);
}

}  // namespace
}  // namespace ds::data
