// comm/half.h: fp32 <-> bf16 / fp16 conversions (round to nearest even, inf and NaN kept), checked
// exhaustively over the 16-bit patterns and against an exact reference on many fp32 values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "comm/half.h"

namespace ds::comm {
namespace {

// The correctly rounded 16-bit neighbour of f: the candidates are the truncation t and t + 1 (in
// magnitude); pick the nearer one, ties to the even pattern. `to` maps a pattern to its value.
template <class ToFloat>
uint16_t nearest(float f, uint16_t t, ToFloat to) {
  const double x = std::fabs(double(f));
  const uint16_t sign = t & 0x8000u;
  const uint16_t a = t & 0x7fffu;
  const uint16_t b = uint16_t(a + 1);
  const double da = std::fabs(x - std::fabs(double(to(a))));
  double vb = std::fabs(double(to(b)));
  if (std::isinf(vb)) {  // past the largest finite value: rounding treats inf as max + 1 ulp
    const double va = std::fabs(double(to(a)));
    vb = va + (va - std::fabs(double(to(uint16_t(a - 1)))));
  }
  const double db = std::fabs(vb - x);
  uint16_t pick = da < db ? a : db < da ? b : ((a & 1u) ? b : a);
  return uint16_t(sign | pick);
}

TEST(Half, Bf16RoundTripsEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_float(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f)))) << h;
    } else {
      ASSERT_EQ(float_to_bf16(f), h) << "pattern " << h;
    }
  }
}

TEST(Half, Fp16RoundTripsEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_float(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(f)))) << h;
      EXPECT_EQ(float_to_fp16(f) & 0x8000u, h & 0x8000u) << "NaN sign kept";
    } else {
      ASSERT_EQ(float_to_fp16(f), h) << "pattern " << h;
    }
  }
}

TEST(Half, Fp16DecodesKnownValues) {
  EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_float(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_float(0x0001), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(fp16_to_float(0x0400), 0x1p-14f);  // smallest normal
  EXPECT_TRUE(std::isinf(fp16_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(fp16_to_float(0x7e00)));
  EXPECT_EQ(std::bit_cast<uint32_t>(fp16_to_float(0x8000)), 0x80000000u);  // -0
}

TEST(Half, RoundsHalfwayCasesToEven) {
  // bf16 keeps 8 significant bits: 1 + 2^-8 is half-way between 1 and 1 + 2^-7.
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), float_to_bf16(1.0f));
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-7f + 0x1p-8f), float_to_bf16(1.0f + 0x1p-6f));  // odd -> up
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), float_to_bf16(1.0f + 0x1p-7f));  // above half
  // fp16 keeps 11: 1 + 2^-11 is half-way.
  EXPECT_EQ(float_to_fp16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(float_to_fp16(1.0f + 0x1p-10f + 0x1p-11f), 0x3c02);
  // Overflow: 65520 is half-way between 65504 and 65536 (not representable) -> inf.
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  // Subnormal fp16: half of the smallest subnormal rounds to 0 (even), 1.5x rounds to 2.
  EXPECT_EQ(float_to_fp16(0x1p-25f), 0x0000);
  EXPECT_EQ(float_to_fp16(0x1.8p-24f), 0x0002);
  EXPECT_EQ(float_to_fp16(0x1.ffcp-15f), 0x0400);  // rounds up into the smallest normal
}

TEST(Half, KeepsInfinityAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(float_to_bf16(inf), 0x7f80);
  EXPECT_EQ(float_to_bf16(-inf), 0xff80);
  EXPECT_EQ(float_to_fp16(inf), 0x7c00);
  EXPECT_EQ(float_to_fp16(-inf), 0xfc00);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(nan))));
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(nan))));
  // A signalling NaN whose payload sits only in the low bits must not become infinity.
  const float snan = std::bit_cast<float>(0x7f800001u);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(snan))));
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(snan))));
}

TEST(Half, MatchesExactReferenceOnRandomFloats) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> bits;
  int checked = 0;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = bits(rng);
    // Bias half the samples into fp16's range (exponents 100..145) where its rounding is subtle.
    if (i & 1) u = (u & 0x807fffffu) | ((100u + (u >> 23) % 46u) << 23);
    const float f = std::bit_cast<float>(u);
    if (std::isnan(f) || std::isinf(f)) continue;
    const uint16_t tb = uint16_t(u >> 16);  // bf16 truncation
    ASSERT_EQ(float_to_bf16(f), nearest(f, tb, bf16_to_float)) << std::hexfloat << f;
    if (std::fabs(f) < 65504.0f) {
      // fp16 truncation: the largest pattern whose magnitude does not exceed |f|.
      uint16_t lo = 0, hi = 0x7bff;
      while (lo < hi) {
        const uint16_t mid = uint16_t((lo + hi + 1) / 2);
        if (fp16_to_float(mid) <= std::fabs(f)) lo = mid; else hi = uint16_t(mid - 1);
      }
      const uint16_t tf = uint16_t(lo | (std::signbit(f) ? 0x8000u : 0u));
      ASSERT_EQ(float_to_fp16(f), nearest(f, tf, fp16_to_float)) << std::hexfloat << f;
    }
    ++checked;
  }
  EXPECT_GT(checked, 1900000);
}

}  // namespace
}  // namespace ds::comm
