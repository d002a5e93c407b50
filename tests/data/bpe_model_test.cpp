// BPE merging on a toy vocabulary: rank order, leftmost ties, ignore_merges, byte fallback, unk.
#include <gtest/gtest.h>

#include <chrono>

#include "data/bpe_model.h"
#include "util/error.h"

namespace ds::data {
namespace {

using Ids = std::vector<int32_t>;

Ids encode(const BpeModel& m, std::string_view word) {
  Ids out;
  m.encode_word(word, out);
  return out;
}

TEST(BpeModel, MergesByRank) {
  BpeModel m({{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}}, {{"a", "b"}, {"b", "c"}, {"ab", "c"}}, {});
  EXPECT_EQ(encode(m, "abc"), (Ids{5}));
  EXPECT_EQ(encode(m, "bcab"), (Ids{4, 3}));  // a+b (rank 0) before b+c (rank 1)
  EXPECT_EQ(encode(m, "cba"), (Ids{2, 1, 0}));
}

TEST(BpeModel, LeftmostOnEqualRanks) {
  BpeModel m({{"a", 0}, {"aa", 1}}, {{"a", "a"}}, {});
  EXPECT_EQ(encode(m, "aaa"), (Ids{1, 0}));
  EXPECT_EQ(encode(m, "aaaa"), (Ids{1, 1}));
}

TEST(BpeModel, IgnoreMergesTakesWholeWords) {
  std::unordered_map<std::string, int32_t> vocab{{"a", 0}, {"b", 1}, {"ab", 2}, {"abab", 3}};
  BpeModel plain(vocab, {{"a", "b"}}, {});
  EXPECT_EQ(encode(plain, "abab"), (Ids{2, 2}));
  BpeOptions options;
  options.ignore_merges = true;
  BpeModel ignoring(vocab, {{"a", "b"}}, options);
  EXPECT_EQ(encode(ignoring, "abab"), (Ids{3}));
}

TEST(BpeModel, ByteFallbackAndUnk) {
  std::unordered_map<std::string, int32_t> vocab{{"a", 0}, {"<0xC3>", 1}, {"<0xA9>", 2}, {"<unk>", 3}};
  BpeOptions options;
  options.byte_fallback = true;
  options.unk_id = 3;
  BpeModel fallback(vocab, {}, options);
  EXPECT_EQ(encode(fallback, "a\xc3\xa9"), (Ids{0, 1, 2}));  // é is not in the vocabulary: its bytes are
  EXPECT_EQ(encode(fallback, "a\xe2\x82\xac"), (Ids{0, 3}));  // € has no byte tokens: unk
  options.byte_fallback = false;
  options.fuse_unk = true;
  BpeModel fused(vocab, {}, options);
  EXPECT_EQ(encode(fused, "xya"), (Ids{3, 0}));
  BpeModel dropped(vocab, {}, {});
  EXPECT_EQ(encode(dropped, "xya"), (Ids{0}));  // no unk token: Hugging Face drops the character
}

TEST(BpeModel, MergeNamingMissingTokenIsRefused) {
  try {
    BpeModel m({{"a", 0}, {"b", 1}}, {{"a", "b"}}, {});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.merges"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"a\" \"b\""), std::string::npos) << e.what();
  }
}

// A 200,000-character word (no spaces) merges in O(n log n): well under a second.
TEST(BpeModel, LongWordIsNotQuadratic) {
  std::unordered_map<std::string, int32_t> vocab{{"a", 0}, {"aa", 1}, {"aaaa", 2}};
  BpeModel m(vocab, {{"a", "a"}, {"aa", "aa"}}, {});
  const auto t0 = std::chrono::steady_clock::now();
  const Ids ids = encode(m, std::string(200000, 'a'));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  EXPECT_EQ(ids, Ids(50000, 2));
}

}  // namespace
}  // namespace ds::data
