// qwZ's int8 kernels (comm/quantize.h): DeepSpeed's group search, and quantize / dequantize equal
// to the formula written out element by element.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "comm/quantize.h"
#include "util/error.h"

namespace ds::comm::test {
namespace {

TEST(Quantize, DeepSpeedsGroupCounts) {
  EXPECT_EQ(quant::group_count(8000), 1);
  EXPECT_EQ(quant::group_count(16384), 4);      // ceil(16384 / 8000) = 3 does not give multiples of 8
  EXPECT_EQ(quant::group_count(2048000), 256);  // 8000 each
  EXPECT_EQ(quant::group_count(256 * 7919), 7919);  // a prime number of 256-blocks: groups of 256
  EXPECT_EQ(quant::group_count(8), 1);
  EXPECT_THROW(quant::group_count(12), CommError);
  EXPECT_THROW(quant::group_count(0), CommError);
}

TEST(Quantize, Int8MatchesTheFormulaAndStaysWithinAStep) {
  const int64_t n = 3 * 512, groups = 3;
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(gen);
  std::fill(x.begin() + 512, x.begin() + 1024, 0.0f);  // an all-zero group: scale 1
  std::vector<int8_t> q(static_cast<size_t>(n));
  std::vector<float> inv(static_cast<size_t>(groups)), out(static_cast<size_t>(n));
  quant::quantize_int8(x.data(), n, groups, q.data(), inv.data());
  quant::dequantize_int8(q.data(), n, groups, inv.data(), out.data());
  for (int64_t g = 0; g < groups; ++g) {
    float max = 0;
    for (int64_t i = g * 512; i < (g + 1) * 512; ++i) max = std::max(max, std::abs(x[size_t(i)]));
    const float scale = max == 0 ? 1.0f : 256.0f / (2.0f * max);
    EXPECT_EQ(inv[size_t(g)], 1.0f / scale);
    for (int64_t i = g * 512; i < (g + 1) * 512; ++i) {
      const float want = std::clamp(std::nearbyint(x[size_t(i)] * scale), -128.0f, 127.0f);
      ASSERT_EQ(q[size_t(i)], int8_t(want)) << i;
      EXPECT_EQ(out[size_t(i)], float(q[size_t(i)]) * inv[size_t(g)]);
      EXPECT_LE(std::abs(out[size_t(i)] - x[size_t(i)]), inv[size_t(g)]) << "within one step (the max clamps to 127)";
    }
  }
  EXPECT_EQ(std::count(q.begin() + 512, q.begin() + 1024, int8_t(0)), 512);
}

}  // namespace
}  // namespace ds::comm::test

namespace ds::comm::test {
namespace {

TEST(Quantize, Int4MatchesTheFormulaGroupByGroup) {
  const std::vector<int64_t> len = {7, 16, 1, 9, 32};  // odd lengths start each group on a fresh byte
  int64_t n = 0;
  for (int64_t l : len) n += l;
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(gen);
  std::fill(x.begin() + 24, x.begin() + 33, 0.0f);  // group 3 all zero: scale 1
  ASSERT_EQ(quant::int4_bytes(len), 4 + 8 + 1 + 5 + 16);
  std::vector<uint8_t> packed(static_cast<size_t>(quant::int4_bytes(len)));
  std::vector<float> inv(len.size()), out(static_cast<size_t>(n), 0.5f);
  quant::quantize_int4(x.data(), len, packed.data(), inv.data());
  quant::dequantize_int4_add(packed.data(), len, inv.data(), out.data());
  int64_t at = 0, byte = 0;
  for (size_t g = 0; g < len.size(); ++g) {
    float max = 0;
    for (int64_t i = at; i < at + len[g]; ++i) max = std::max(max, std::abs(x[size_t(i)]));
    const float scale = max == 0 ? 1.0f : 7.0f / max;
    EXPECT_EQ(inv[g], 1.0f / scale);
    for (int64_t i = 0; i < len[g]; ++i) {
      const int want = int(std::clamp(std::nearbyint(x[size_t(at + i)] * scale), -8.0f, 7.0f));
      const int nibble = (packed[size_t(byte + i / 2)] >> (4 * (i % 2))) & 0xF;
      ASSERT_EQ(nibble >= 8 ? nibble - 16 : nibble, want) << "group " << g << " element " << i;
      EXPECT_EQ(out[size_t(at + i)], 0.5f + float(want) * inv[g]) << "dequantize adds";
      EXPECT_LE(std::abs(out[size_t(at + i)] - 0.5f - x[size_t(at + i)]), inv[g] * 0.5001f + 1e-6f)
          << "within half a step: nothing clips";
    }
    at += len[g];
    byte += (len[g] + 1) / 2;
  }
}

}  // namespace
}  // namespace ds::comm::test
