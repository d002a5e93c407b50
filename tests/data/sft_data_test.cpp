// Fine-tuning data (src/data/sft_*, distributed_sampler): the three record shapes, -100 exactly on
// prompts / non-assistant text, file:line errors, packing and padding rows, the sharded sampler.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "data/distributed_sampler.h"
#include "data/sft_batching.h"
#include "data/sft_dataset.h"
#include "data_test_util.h"
#include "sft_test_util.h"
#include "util/error.h"

namespace ds::data::test {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kEos = 256, kStart = 257, kEnd = 258, kX = kIgnoreLabel;

Ids bytes(const std::string& s) { return Ids(s.begin(), s.end()); }
Ids cat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
Ids ignored(size_t n) { return Ids(n, kX); }

class SftData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir("sft");
    write_toy_tokenizer(dir_);
    tok_ = load_tokenizer(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  SftDataset read(const std::string& lines, SftReadOptions o = {}) {
    std::ofstream(dir_ / "train.jsonl") << lines;
    return read_sft_jsonl((dir_ / "train.jsonl").string(), *tok_, o);
  }
  std::string error_of(const std::string& lines) {
    try {
      read(lines);
    } catch (const ConfigError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error for " << lines;
    return "";
  }
  fs::path dir_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(SftData, TextRecordTrainsEveryTokenAndEndsWithEos) {
  auto d = read(R"({"text": "abc"})" "\n");
  ASSERT_EQ(d.examples.size(), 1u);
  EXPECT_EQ(d.examples[0].ids, cat({bytes("abc"), {kEos}}));
  EXPECT_EQ(d.examples[0].labels, cat({bytes("abc"), {kEos}}));
}

TEST_F(SftData, PromptCompletionMasksThePromptExactly) {
  auto d = read(R"({"prompt": "Q: 2+2?", "completion": " 4"})" "\n");
  ASSERT_EQ(d.examples.size(), 1u);
  EXPECT_EQ(d.examples[0].ids, cat({bytes("Q: 2+2?"), bytes(" 4"), {kEos}}));
  EXPECT_EQ(d.examples[0].labels, cat({ignored(7), bytes(" 4"), {kEos}}));
}

TEST_F(SftData, ChatTrainsOnlyAssistantTurns) {
  auto d = read(R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"},)"
                R"( {"role": "assistant", "content": "yo"}, {"role": "user", "content": "u2"},)"
                R"( {"role": "assistant", "content": "ok"}]})" "\n");
  ASSERT_EQ(d.examples.size(), 1u);
  const Ids head = cat({{kStart}, bytes("assistant\n")});
  const Ids context1 = cat({{kStart}, bytes("system\nS"), {kEnd}, bytes("\n"), {kStart}, bytes("user\nhi"), {kEnd},
                            bytes("\n"), head});
  const Ids reply1 = cat({bytes("yo"), {kEnd}, bytes("\n")});
  const Ids context2 = cat({{kStart}, bytes("user\nu2"), {kEnd}, bytes("\n"), head});
  const Ids reply2 = cat({bytes("ok"), {kEnd}, bytes("\n")});
  EXPECT_EQ(d.examples[0].ids, cat({context1, reply1, context2, reply2, {kEos}}));
  EXPECT_EQ(d.examples[0].labels,
            cat({ignored(context1.size()), reply1, ignored(context2.size()), reply2, {kEos}}));
  EXPECT_EQ(d.counts[2], 1);
}

TEST_F(SftData, BadLinesNameFileLineAndField) {
  const std::string ok = R"({"text": "fine"})" "\n";
  const std::string path = (dir_ / "train.jsonl").string();
  struct Case {
    std::string line, expect;
  } cases[] = {
      {"{\"text\": \"unterminated\n", "not valid JSON"},
      {"[1, 2]\n", "must be a JSON object"},
      {R"({"prompt": "p"})" "\n", "field 'completion': missing"},
      {R"({"prompt": 3, "completion": "c"})" "\n", "field 'prompt': must be a string, not number"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"content": "b"}]})" "\n", "field 'messages[1].role': missing"},
      {R"({"messages": [{"role": "bot", "content": "b"}]})" "\n", "field 'messages[0].role': 'bot' is not one of"},
      {R"({"messages": [{"role": "user", "content": "b"}]})" "\n", "has no assistant turn"},
      {R"({"messages": "hi"})" "\n", "field 'messages': must be an array, not string"},
      {R"({"input": "x"})" "\n", "needs exactly one of"},
      {R"({"text": "a", "prompt": "b", "completion": "c"})" "\n", "needs exactly one of"},
  };
  for (const auto& c : cases) {
    const std::string what = error_of(ok + "\n" + c.line);  // the bad record is on line 3
    EXPECT_NE(what.find(path + ":3"), std::string::npos) << what;
    EXPECT_NE(what.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << what;
  }
  auto d = read(ok + cases[0].line + ok + cases[2].line, {.skip_bad_lines = true});
  EXPECT_EQ(d.examples.size(), 2u);
  EXPECT_EQ(d.skipped, 2);
  EXPECT_NE(d.first_skip_reason.find(path + ":2"), std::string::npos) << d.first_skip_reason;
}

TEST_F(SftData, LongExamplesAreTruncated) {
  auto d = read(R"({"text": "abcdefghij"})" "\n", {.max_tokens = 4});
  EXPECT_EQ(d.examples[0].ids, bytes("abcd"));
  EXPECT_EQ(d.truncated, 1);
}

std::vector<SftExample> examples_of_lengths(std::initializer_list<int> lengths) {
  std::vector<SftExample> out;
  int32_t next = 1;
  for (int n : lengths) {
    SftExample e;
    for (int i = 0; i < n; ++i) {
      e.ids.push_back(next);
      e.labels.push_back(i == 1 ? kX : next);  // one masked label to follow through
      ++next;
    }
    out.push_back(e);
  }
  return out;
}

TEST(SftBatching, PackingKeepsDocumentsApart) {
  auto ex = examples_of_lengths({3, 4, 2, 5});
  auto items = pack_examples(ex, 8);
  ASSERT_EQ(items, (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}}));
  const std::vector<int64_t> picked = {0, 1};
  auto r = build_rows(ex, items, picked, 8, 0);
  ASSERT_EQ(r.rows, 2);
  ASSERT_EQ(r.seq, 8);
  using V = std::vector<int64_t>;
  // Row 0: doc 0 = ids 1,2,3 ; doc 1 = ids 4..7 ; one pad.
  EXPECT_EQ(V(r.input_ids.begin(), r.input_ids.begin() + 8), (V{1, 2, 3, 4, 5, 6, 7, 0}));
  EXPECT_EQ(V(r.position_ids.begin(), r.position_ids.begin() + 7), (V{0, 1, 2, 0, 1, 2, 3}));
  EXPECT_EQ(V(r.segment_ids.begin(), r.segment_ids.begin() + 8), (V{0, 0, 0, 1, 1, 1, 1, -1}));
  EXPECT_EQ(V(r.attention_mask.begin(), r.attention_mask.begin() + 8), (V{1, 1, 1, 1, 1, 1, 1, 0}));
  // targets[t] = label of t+1 in the same document; -100 at each document's end and on the pad.
  EXPECT_EQ(V(r.targets.begin(), r.targets.begin() + 8), (V{kX, 3, kX, kX, 6, 7, kX, kX}));
  EXPECT_EQ(V(r.segment_ids.begin() + 8, r.segment_ids.end()), (V{0, 0, 1, 1, 1, 1, 1, -1}));
}

TEST(SftBatching, PaddingPadsToTheLongestRow) {
  auto ex = examples_of_lengths({3, 5});
  auto items = one_per_row(ex);
  const std::vector<int64_t> picked = {1, 0};
  auto r = build_rows(ex, items, picked, 0, 9);
  ASSERT_EQ(r.seq, 5);
  using V = std::vector<int64_t>;
  EXPECT_EQ(V(r.input_ids.begin() + 5, r.input_ids.end()), (V{1, 2, 3, 9, 9}));
  EXPECT_EQ(V(r.attention_mask.begin() + 5, r.attention_mask.end()), (V{1, 1, 1, 0, 0}));
  EXPECT_EQ(V(r.targets.begin() + 5, r.targets.end()), (V{kX, 3, kX, kX, kX}));
}

TEST(DistributedSamplerTest, ShardsAreDisjointAndCoverTheData) {
  for (auto [n, w] : std::vector<std::pair<int64_t, int64_t>>{{10, 3}, {7, 2}, {8, 4}, {5, 1}, {3, 4}, {101, 8}}) {
    for (bool drop_last : {false, true}) {
      if (drop_last && n < w) continue;
      std::vector<int64_t> all;
      for (int64_t r = 0; r < w; ++r) {
        DistributedSampler s(n, {.world_size = w, .rank = r, .seed = 7, .drop_last = drop_last});
        auto mine = s.indices(3);
        EXPECT_EQ(static_cast<int64_t>(mine.size()), drop_last ? n / w : (n + w - 1) / w) << n << "/" << w;
        all.insert(all.end(), mine.begin(), mine.end());
      }
      std::set<int64_t> distinct(all.begin(), all.end());
      if (drop_last) {  // disjoint: no item twice, n % w items left out
        EXPECT_EQ(distinct.size(), all.size()) << n << "/" << w;
        EXPECT_EQ(static_cast<int64_t>(all.size()), n - n % w);
      } else {  // every item, and only the padding (n rounded up to w) repeats
        EXPECT_EQ(static_cast<int64_t>(distinct.size()), n) << n << "/" << w;
        EXPECT_EQ(static_cast<int64_t>(all.size()), (n + w - 1) / w * w);
      }
      for (int64_t i : all) EXPECT_TRUE(i >= 0 && i < n);
    }
  }
}

TEST(DistributedSamplerTest, SeedAndEpochDecideTheOrder) {
  DistributedSampler a(50, {.seed = 1}), b(50, {.seed = 1}), c(50, {.seed = 2});
  EXPECT_EQ(a.indices(0), b.indices(0));
  EXPECT_NE(a.indices(0), a.indices(1));
  EXPECT_NE(a.indices(0), c.indices(0));
  auto sorted = a.indices(4);
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
  DistributedSampler plain(5, {.shuffle = false});
  EXPECT_EQ(plain.indices(9), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(DistributedSamplerTest, BatchesWalkEpochsAndResumeAtAnyStep) {
  DistributedSampler s(11, {.world_size = 2, .rank = 1, .seed = 3});  // 6 items per rank
  SampledBatches keep(s, 4, false), drop(s, 4, true);
  EXPECT_EQ(keep.batches_per_epoch(), 2);  // 4 + 2
  EXPECT_EQ(drop.batches_per_epoch(), 1);  // the short batch dropped
  std::vector<int64_t> walked;
  for (int64_t k = 0; k < 4; ++k) {
    auto b = keep.batch(k);
    EXPECT_EQ(b.size(), k % 2 == 0 ? 4u : 2u);
    walked.insert(walked.end(), b.begin(), b.end());
  }
  auto e0 = s.indices(0), e1 = s.indices(1);
  e0.insert(e0.end(), e1.begin(), e1.end());
  EXPECT_EQ(walked, e0);
  SampledBatches resumed(s, 4, false);  // a fresh one asked for batch 3 directly: the same batch
  EXPECT_EQ(resumed.batch(3), keep.batch(3));
  EXPECT_EQ(drop.batch(1), std::vector<int64_t>(e1.begin(), e1.begin() + 4));
}

}  // namespace
}  // namespace ds::data::test
