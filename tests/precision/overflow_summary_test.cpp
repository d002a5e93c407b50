// OVERFLOW lines (DeepSpeed's wording, reference §8.1) and the warm-up summariser.
#include "precision/overflow_summary.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ds::precision {
namespace {

LossScalerArgs zero_default_args() {
  LossScalerArgs a;
  a.init_scale = std::ldexp(1.0, 32);
  return a;  // window 1000, min 1, hysteresis 1: ZeRO without dynamic keys
}

TEST(OverflowSummaryTest, DeepSpeedOverflowLines) {
  ScaleUpdate dec{true, ScaleEvent::Decreased, 0, 65536, 32768, 1, 1};
  EXPECT_EQ(overflow_message(dec),
            "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768");
  ScaleUpdate hyst{true, ScaleEvent::HysteresisConsumed, 0, 65536, 65536, 2, 1};
  EXPECT_EQ(overflow_message(hyst, 3),
            "[deepspeed] OVERFLOW! Rank 3 Skipping step. Attempted loss scale: 65536, but hysteresis "
            "is 2. Reducing hysteresis to 1");
  ScaleUpdate stat{true, ScaleEvent::None, 0, 138, 138, 1, 1};
  EXPECT_EQ(overflow_message(stat), "[deepspeed] OVERFLOW! Rank 0 Skipping step.");
  ScaleUpdate clean{false, ScaleEvent::Increased, 0, 2, 4, 1, 1};
  EXPECT_EQ(overflow_message(clean), "");
}

TEST(OverflowSummaryTest, FormatScale) {
  EXPECT_EQ(format_scale(4294967296.0), "4294967296");
  EXPECT_EQ(format_scale(std::ldexp(1.0, 70)), "1180591620717411303424");
  EXPECT_EQ(format_scale(0.25), "0.25");
  EXPECT_EQ(format_scale(1), "1");
}

TEST(OverflowSummaryTest, WarmupSkipsFoldIntoOneLine) {
  DynamicLossScaler s(zero_default_args());
  OverflowSummary sum;
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(sum.observe(s.update(true)), std::nullopt) << "skip " << i;
  }
  EXPECT_EQ(sum.warmup_skips(), 12);
  EXPECT_TRUE(sum.in_warmup());
  auto line = sum.observe(s.update(false));
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line,
            "fp16: skipped the first 12 steps while the loss scale fell from 4294967296 to 1048576 "
            "(dynamic loss scaling warm-up)");
  EXPECT_FALSE(sum.in_warmup());
  EXPECT_EQ(sum.observe(s.update(false)), std::nullopt);
  // After the warm-up every skip is reported on its own.
  auto later = sum.observe(s.update(true));
  ASSERT_TRUE(later.has_value());
  EXPECT_EQ(*later,
            "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1048576, reducing to 524288");
  EXPECT_EQ(sum.flush(), std::nullopt);
}

TEST(OverflowSummaryTest, HysteresisInWarmup) {
  LossScalerArgs a;
  a.init_scale = 65536;
  a.delayed_shift = 2;
  DynamicLossScaler s(a);
  OverflowSummary sum;
  EXPECT_EQ(sum.observe(s.update(true)), std::nullopt);  // hysteresis consumed: scale unchanged
  EXPECT_EQ(*sum.observe(s.update(false)),
            "fp16: skipped the first step at loss scale 65536 (hysteresis absorbed the overflows; "
            "dynamic loss scaling warm-up)");
}

TEST(OverflowSummaryTest, SingleSkipAndFlushInsideWarmup) {
  DynamicLossScaler s(zero_default_args());
  OverflowSummary sum;
  EXPECT_EQ(sum.flush(), std::nullopt);  // nothing yet
  sum.observe(s.update(true));
  auto line = sum.flush();
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line,
            "fp16: skipped the first step while the loss scale fell from 4294967296 to 2147483648 "
            "(dynamic loss scaling warm-up)");
  EXPECT_EQ(sum.flush(), std::nullopt);  // reported once
}

TEST(OverflowSummaryTest, CleanStartReportsEveryLaterSkip) {
  DynamicLossScaler s(zero_default_args());
  OverflowSummary sum;
  EXPECT_EQ(sum.observe(s.update(false)), std::nullopt);
  EXPECT_FALSE(sum.in_warmup());
  auto a = sum.observe(s.update(true));
  auto b = sum.observe(s.update(true));
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->find("Attempted loss scale: 4294967296, reducing to 2147483648"), std::string::npos);
  EXPECT_NE(b->find("Attempted loss scale: 2147483648, reducing to 1073741824"), std::string::npos);
}

TEST(OverflowSummaryTest, StaticScalerSkipsAreNotFolded) {
  StaticLossScaler s(138);
  OverflowSummary sum;
  auto line = sum.observe(s.update(true));
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line, "[deepspeed] OVERFLOW! Rank 0 Skipping step.");
  EXPECT_EQ(sum.warmup_skips(), 0);
}

}  // namespace
}  // namespace ds::precision
