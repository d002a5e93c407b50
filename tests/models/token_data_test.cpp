// TokenDataset (text bytes, llm.c token files, errors) and BatchSampler (determinism, splits,
// shifted targets).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "models/token_data.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;
using ds::models::BatchSampler;
using ds::models::TokenDataset;

class TokenDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ds_token_data_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write_bytes(const std::string& name, const std::string& bytes) {
    const auto path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  // Expects from_file(path) to throw ds::IoError whose message contains every fragment.
  static void expect_io_error(const std::string& path, std::vector<std::string> fragments) {
    try {
      TokenDataset::from_file(path);
      FAIL() << "expected ds::IoError for " << path;
    } catch (const ds::IoError& e) {
      for (const auto& f : fragments)
        EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what() << " lacks " << f;
    }
  }

  fs::path dir_;
};

TEST_F(TokenDataTest, TextFileIsOneTokenPerByte) {
  const std::string text = "Hello, GPT-2!\n\xc3\xa9t\xc3\xa9";  // includes UTF-8 bytes > 127
  auto d = TokenDataset::from_file(write_bytes("corpus.bin", text));  // extension is ignored
  EXPECT_EQ(d.format(), TokenDataset::Format::kBytes);
  EXPECT_EQ(d.vocab_size(), 256);
  ASSERT_EQ(d.size(), static_cast<int64_t>(text.size()));
  std::string back(d.tokens().begin(), d.tokens().end());
  EXPECT_EQ(back, text);
  EXPECT_EQ(d.tokens()[14], 0xC3);
  auto t = d.to_tensor();
  EXPECT_EQ(t.scalar_type(), torch::kLong);
  EXPECT_EQ(t[14].item<int64_t>(), 0xC3);
  EXPECT_EQ(TokenDataset::from_text(text).tokens(), d.tokens());
}

TEST_F(TokenDataTest, LlmcFileRoundTrip) {
  std::vector<uint16_t> tokens = {50256, 15496, 11, 995, 0, 1, 65535, 42};
  const auto path = (dir_ / "train.txt").string();  // format chosen by magic, not extension
  ds::models::write_llmc_tokens(path, tokens);
  EXPECT_EQ(fs::file_size(path), 1024u + 2 * tokens.size());
  auto d = TokenDataset::from_file(path);
  EXPECT_EQ(d.format(), TokenDataset::Format::kLlmc);
  EXPECT_EQ(d.tokens(), tokens);
  EXPECT_EQ(d.vocab_size(), 65536);

  // Hand-built header, independent of write_llmc_tokens: little-endian int32 and uint16.
  std::string b(1024 + 4, '\0');
  const int32_t head[3] = {20240520, 1, 2};
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 4; ++k) b[4 * i + k] = static_cast<char>((head[i] >> (8 * k)) & 0xFF);
  b[1024] = 0x34; b[1025] = 0x12;  // 0x1234
  b[1026] = 0x07; b[1027] = 0x00;  // 7
  auto h = TokenDataset::from_file(write_bytes("hand.bin", b));
  EXPECT_EQ(h.tokens(), (std::vector<uint16_t>{0x1234, 7}));
  EXPECT_EQ(h.vocab_size(), 0x1235);
}

TEST_F(TokenDataTest, MissingFileNamesPathAndReason) {
  const auto path = (dir_ / "nope.bin").string();
  expect_io_error(path, {path, "No such file or directory"});
}

TEST_F(TokenDataTest, BadMagicIsRefused) {
  std::string b(1024 + 8, '\0');
  b[0] = 0x01; b[1] = 0x02;  // magic 513: binary, but not llm.c
  expect_io_error(write_bytes("bad.bin", b), {"bad magic 513", "20240520"});
}

TEST_F(TokenDataTest, TruncatedAndBadHeaders) {
  const auto path = (dir_ / "t.bin").string();
  ds::models::write_llmc_tokens(path, std::vector<uint16_t>(100, 7));
  fs::resize_file(path, 1024 + 150);  // 75 of 100 tokens
  expect_io_error(path, {"truncated", "100 tokens", "1174 bytes"});
  fs::resize_file(path, 600);         // inside the header
  expect_io_error(path, {"truncated", "1024-byte header"});

  ds::models::write_llmc_tokens(path, std::vector<uint16_t>(4, 7));
  std::string b;
  {
    std::ifstream f(path, std::ios::binary);
    b.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  b[4] = 2;  // version 2
  expect_io_error(write_bytes("v2.bin", b), {"version 2", "expected 1"});
  b[4] = 1;
  expect_io_error(write_bytes("extra.bin", b + "xy"), {"2 bytes after"});
}

TEST_F(TokenDataTest, SamplerNeedsSeqPlusOneTokens) {
  auto d = TokenDataset::from_text("0123456789");  // 10 tokens
  EXPECT_NO_THROW(BatchSampler(d, 9, 0));
  try {
    BatchSampler(d, 10, 0);
    FAIL() << "expected ds::Error";
  } catch (const ds::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("has 10 tokens"), std::string::npos) << msg;
    EXPECT_NE(msg.find("seq_len + 1 = 11"), std::string::npos) << msg;
  }
}

std::string long_text() {
  std::string s;
  for (int i = 0; i < 5000; ++i) s += static_cast<char>('a' + (i * 7 + i / 26) % 26);
  return s;
}

TEST_F(TokenDataTest, BatchesAreDeterministicAndSplittable) {
  auto d = TokenDataset::from_text(long_text());
  BatchSampler s(d, 32, 42);
  auto full = s.batch(0, 8);
  EXPECT_EQ(full.inputs.sizes(), torch::IntArrayRef({8, 32}));
  EXPECT_EQ(full.inputs.scalar_type(), torch::kLong);

  BatchSampler again(d, 32, 42);
  EXPECT_TRUE(torch::equal(again.batch(0, 8).inputs, full.inputs));
  auto a = s.batch(0, 4), b = s.batch(4, 4);
  EXPECT_TRUE(torch::equal(torch::cat({a.inputs, b.inputs}), full.inputs));
  EXPECT_TRUE(torch::equal(torch::cat({a.targets, b.targets}), full.targets));
  EXPECT_TRUE(torch::equal(s.batch(5, 1).inputs[0], full.inputs[5]));

  BatchSampler other(d, 32, 43);
  EXPECT_FALSE(torch::equal(other.batch(0, 8).inputs, full.inputs));
  // Samples differ from each other (offsets are spread, not constant).
  std::set<int64_t> offsets;
  for (int i = 0; i < 64; ++i) offsets.insert(s.offset(i));
  EXPECT_GT(offsets.size(), 50u);
}

TEST_F(TokenDataTest, TargetsAreInputsShiftedByOne) {
  auto d = TokenDataset::from_text(long_text());
  BatchSampler s(d, 16, 7);
  auto batch = s.batch(3, 5);
  auto all = d.to_tensor();
  using torch::indexing::Slice;
  for (int64_t i = 0; i < 5; ++i) {
    const int64_t off = s.offset(3 + i);
    ASSERT_GE(off, 0);
    ASSERT_LE(off + 16, d.size() - 1);
    EXPECT_TRUE(torch::equal(batch.inputs[i], all.index({Slice(off, off + 16)})));
    EXPECT_TRUE(torch::equal(batch.targets[i], all.index({Slice(off + 1, off + 17)})));
  }
}

TEST_F(TokenDataTest, EveryWindowFitsWhenDataIsMinimal) {
  auto d = TokenDataset::from_text("abcde");  // 5 tokens, seq 4: exactly one window
  BatchSampler s(d, 4, 99);
  auto batch = s.batch(0, 3);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s.offset(i), 0);
    EXPECT_TRUE(torch::equal(batch.inputs[i], torch::tensor({97, 98, 99, 100}, torch::kLong)));
    EXPECT_TRUE(torch::equal(batch.targets[i], torch::tensor({98, 99, 100, 101}, torch::kLong)));
  }
}

}  // namespace
