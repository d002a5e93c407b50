// ZeRO's DynamicLossScaler (reference §8.1). Every expected trajectory below was written by hand
// from the reference's rules, not recorded from the code:
//   overflow: if delayed_shift == 1 or cur_hysteresis == 1 → (throw at min) scale = max(scale/2, min)
//             else cur_hysteresis -= 1;  last_overflow_iter = cur_iter
//   clean:    if consecutive: cur_hysteresis = delayed_shift
//             if (cur_iter - last_overflow_iter) % window == 0: (if !consecutive restore) scale *= 2
//   cur_iter += 1
#include "precision/loss_scaler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ds::precision {
namespace {

constexpr bool O = true;   // overflow step
constexpr bool C = false;  // clean step

LossScalerArgs args(double init, int64_t window, double min, int64_t hysteresis, bool consecutive) {
  LossScalerArgs a;
  a.init_scale = init;
  a.scale_window = window;
  a.min_scale = min;
  a.delayed_shift = hysteresis;
  a.consecutive_hysteresis = consecutive;
  return a;
}

struct Step {
  bool overflow;
  double scale;        // after the update
  int64_t hysteresis;  // cur_hysteresis after the update
  ScaleEvent event;
};

void expect_trajectory(LossScaler& s, const std::vector<Step>& steps) {
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE("update at cur_iter " + std::to_string(i));
    const double before = s.scale();
    ScaleUpdate u = s.update(steps[i].overflow);
    EXPECT_EQ(u.iter, static_cast<int64_t>(i));
    EXPECT_EQ(u.overflow, steps[i].overflow);
    EXPECT_EQ(u.scale_before, before);
    EXPECT_EQ(s.scale(), steps[i].scale);
    EXPECT_EQ(u.scale_after, steps[i].scale);
    EXPECT_EQ(s.cur_hysteresis(), steps[i].hysteresis);
    EXPECT_EQ(u.event, steps[i].event);
    EXPECT_EQ(s.last_update().event, steps[i].event);
    EXPECT_EQ(s.cur_iter(), static_cast<int64_t>(i + 1));
  }
}

using E = ScaleEvent;

TEST(DynamicLossScalerTest, CleanRunDoublesEveryWindowFirstAtWindowMinusOne) {
  DynamicLossScaler s(args(256, 4, 1, 1, false));
  EXPECT_TRUE(s.dynamic());
  EXPECT_EQ(s.scale(), 256);
  EXPECT_EQ(s.cur_iter(), 0);
  // (i + 1) % 4 == 0 at i = 3, 7, 11.
  expect_trajectory(s, {{C, 256, 1, E::None},     {C, 256, 1, E::None},   {C, 256, 1, E::None},
                        {C, 512, 1, E::Increased}, {C, 512, 1, E::None},   {C, 512, 1, E::None},
                        {C, 512, 1, E::None},      {C, 1024, 1, E::Increased}, {C, 1024, 1, E::None},
                        {C, 1024, 1, E::None},     {C, 1024, 1, E::None},  {C, 2048, 1, E::Increased}});
}

TEST(DynamicLossScalerTest, AllOverflowHalvesToFloorThenThrows) {
  DynamicLossScaler s(args(16, 1000, 1, 1, false));
  expect_trajectory(s, {{O, 8, 1, E::Decreased},
                        {O, 4, 1, E::Decreased},
                        {O, 2, 1, E::Decreased},
                        {O, 1, 1, E::Decreased}});
  try {
    s.update(true);
    FAIL() << "expected LossScaleUnderflow";
  } catch (const LossScaleUnderflow& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "Current loss scale already at minimum - cannot decrease scale anymore"),
              std::string::npos);
    EXPECT_EQ(e.min_scale(), 1);
    EXPECT_TRUE(e.parameter().empty());
  }
  // DeepSpeed raises before touching its state.
  EXPECT_EQ(s.scale(), 1);
  EXPECT_EQ(s.cur_iter(), 4);
  EXPECT_EQ(s.state().last_overflow_iter, 3);
}

TEST(DynamicLossScalerTest, UnderflowIsADsErrorThatCanNameTheParameter) {
  LossScaleUnderflow e(1, "h.3.attn.c_attn.weight");
  const ds::Error& base = e;
  EXPECT_NE(std::string(base.what()).find("h.3.attn.c_attn.weight"), std::string::npos);
  EXPECT_NE(std::string(base.what()).find("bf16"), std::string::npos);  // the hint
  EXPECT_EQ(e.parameter(), "h.3.attn.c_attn.weight");
}

TEST(DynamicLossScalerTest, FloorThatIsNotAPowerOfTwoClampsThenThrows) {
  DynamicLossScaler s(args(16, 1000, 3, 1, false));
  expect_trajectory(s, {{O, 8, 1, E::Decreased}, {O, 4, 1, E::Decreased}, {O, 3, 1, E::Decreased}});
  EXPECT_THROW(s.update(true), LossScaleUnderflow);
}

TEST(DynamicLossScalerTest, NoRaiseAtMinStaysAtFloor) {
  DynamicLossScaler s(args(2, 1000, 1, 1, false), /*raise_error_at_min_scale=*/false);
  expect_trajectory(s, {{O, 1, 1, E::Decreased}, {O, 1, 1, E::Decreased}, {O, 1, 1, E::Decreased}});
}

TEST(DynamicLossScalerTest, MixedSequenceNextDoublingIsWindowAfterOverflow) {
  DynamicLossScaler s(args(1024, 3, 1, 1, false));
  expect_trajectory(s, {{C, 1024, 1, E::None},       // i0: (0+1)%3
                        {C, 1024, 1, E::None},       // i1: 2%3
                        {C, 2048, 1, E::Increased},  // i2: 3%3 == 0
                        {O, 1024, 1, E::Decreased},  // i3: last = 3
                        {C, 1024, 1, E::None},       // i4: 1
                        {C, 1024, 1, E::None},       // i5: 2
                        {C, 2048, 1, E::Increased},  // i6: 3 (= k + window)
                        {C, 2048, 1, E::None},       // i7: 4
                        {O, 1024, 1, E::Decreased},  // i8: last = 8
                        {O, 512, 1, E::Decreased},   // i9: last = 9
                        {C, 512, 1, E::None},        // i10: 1
                        {C, 512, 1, E::None},        // i11: 2
                        {C, 1024, 1, E::Increased}});  // i12: 3
}

TEST(DynamicLossScalerTest, Hysteresis2NonConsecutiveRestoresOnlyOnDoubling) {
  DynamicLossScaler s(args(1024, 3, 1, 2, false));
  EXPECT_EQ(s.cur_hysteresis(), 2);
  expect_trajectory(s, {{O, 1024, 1, E::HysteresisConsumed},  // i0
                        {O, 512, 1, E::Decreased},            // i1
                        {O, 256, 1, E::Decreased},            // i2: last = 2
                        {C, 256, 1, E::None},                 // i3: 1
                        {C, 256, 1, E::None},                 // i4: 2
                        {O, 128, 1, E::Decreased},            // i5: clean steps did not restore
                        {C, 128, 1, E::None},                 // i6: 1
                        {C, 128, 1, E::None},                 // i7: 2
                        {C, 256, 2, E::Increased},            // i8: 3 → restore to 2
                        {O, 256, 1, E::HysteresisConsumed},   // i9
                        {C, 256, 1, E::None},                 // i10
                        {O, 128, 1, E::Decreased}});          // i11
}

TEST(DynamicLossScalerTest, Hysteresis2ConsecutiveRestoresOnEveryCleanStep) {
  DynamicLossScaler s(args(1024, 3, 1, 2, true));
  expect_trajectory(s, {{O, 1024, 1, E::HysteresisConsumed},  // i0
                        {O, 512, 1, E::Decreased},            // i1
                        {O, 256, 1, E::Decreased},            // i2: last = 2
                        {C, 256, 2, E::None},                 // i3: restored
                        {C, 256, 2, E::None},                 // i4
                        {O, 256, 1, E::HysteresisConsumed},   // i5: last = 5
                        {C, 256, 2, E::None},                 // i6: 1
                        {C, 256, 2, E::None},                 // i7: 2
                        {C, 512, 2, E::Increased},            // i8: 3
                        {O, 512, 1, E::HysteresisConsumed},   // i9
                        {C, 512, 2, E::None},                 // i10
                        {O, 512, 1, E::HysteresisConsumed}});  // i11
}

TEST(DynamicLossScalerTest, Hysteresis3NonConsecutive) {
  DynamicLossScaler s(args(64, 2, 1, 3, false));
  expect_trajectory(s, {{O, 64, 2, E::HysteresisConsumed},  // i0
                        {O, 64, 1, E::HysteresisConsumed},  // i1
                        {O, 32, 1, E::Decreased},           // i2
                        {O, 16, 1, E::Decreased},           // i3: last = 3
                        {C, 16, 1, E::None},                // i4: 1 % 2
                        {C, 32, 3, E::Increased},           // i5: 2 % 2 → restore 3
                        {O, 32, 2, E::HysteresisConsumed},  // i6
                        {O, 32, 1, E::HysteresisConsumed},  // i7
                        {O, 16, 1, E::Decreased},           // i8: last = 8
                        {C, 16, 1, E::None},                // i9: 1
                        {O, 8, 1, E::Decreased},            // i10
                        {O, 4, 1, E::Decreased}});          // i11
}

TEST(DynamicLossScalerTest, Hysteresis3Consecutive) {
  DynamicLossScaler s(args(64, 2, 1, 3, true));
  expect_trajectory(s, {{O, 64, 2, E::HysteresisConsumed},  // i0
                        {O, 64, 1, E::HysteresisConsumed},  // i1: last = 1
                        {C, 64, 3, E::None},                // i2: restore; 1 % 2
                        {O, 64, 2, E::HysteresisConsumed},  // i3
                        {O, 64, 1, E::HysteresisConsumed},  // i4
                        {O, 32, 1, E::Decreased},           // i5: last = 5
                        {C, 32, 3, E::None},                // i6: 1
                        {C, 64, 3, E::Increased},           // i7: 2 % 2
                        {O, 64, 2, E::HysteresisConsumed}});  // i8
}

TEST(DynamicLossScalerTest, HysteresisDefersTheUnderflowError) {
  // At the floor, the first overflow only consumes hysteresis; the second one raises.
  DynamicLossScaler s(args(1, 1000, 1, 2, false));
  expect_trajectory(s, {{O, 1, 1, E::HysteresisConsumed}});
  EXPECT_THROW(s.update(true), LossScaleUnderflow);
}

TEST(DynamicLossScalerTest, DeepSpeedFusedCaseParametersOnZeroVariant) {
  // initial_scale_power 8, window 2 on ZeRO's scaler: doubles at i = 1, 3, 5 (one step earlier than
  // the non-ZeRO optimizers, see legacy_loss_scaler_test.cpp).
  DynamicLossScaler s(args(256, 2, 1, 1, false));
  expect_trajectory(s, {{C, 256, 1, E::None},
                        {C, 512, 1, E::Increased},
                        {C, 512, 1, E::None},
                        {C, 1024, 1, E::Increased},
                        {C, 1024, 1, E::None},
                        {C, 2048, 1, E::Increased}});
}

TEST(DynamicLossScalerTest, RejectsArgumentsThatBreakTheArithmetic) {
  EXPECT_THROW(DynamicLossScaler(args(256, 0, 1, 1, false)), ConfigError);
  EXPECT_THROW(DynamicLossScaler(args(256, 10, 0, 1, false)), ConfigError);
  EXPECT_THROW(DynamicLossScaler(args(256, 10, 1, 0, false)), ConfigError);
  EXPECT_THROW(DynamicLossScaler(args(0, 10, 1, 1, false)), ConfigError);
  EXPECT_THROW(DynamicLossScaler(args(INFINITY, 10, 1, 1, false)), ConfigError);
}

TEST(DynamicLossScalerTest, CombinedUnscaleFactorMatchesHandComputation) {
  // True norm 5 at scale 1024 (scaled norm 5120).
  EXPECT_DOUBLE_EQ(combined_unscale_factor(1024, 1.0, 5120), (5.0 + 1e-6) * 1024);
  EXPECT_DOUBLE_EQ(combined_unscale_factor(1024, 2.0, 5120), (5.0 + 1e-6) / 2.0 * 1024);
  EXPECT_EQ(combined_unscale_factor(1024, 10.0, 5120), 1024);  // under the clip: just unscale
  EXPECT_EQ(combined_unscale_factor(1024, 0.0, 5120), 1024);   // clipping off
  EXPECT_EQ(combined_unscale_factor(1, 0.0, 7), 1);            // bf16/fp32 without clipping
  EXPECT_DOUBLE_EQ(combined_unscale_factor(1, 1.0, 7), 7 + 1e-6);
  EXPECT_EQ(combined_unscale_factor(1024, 1.0, -1), 1024);     // norm -1 marks inf/NaN: no clip
}

}  // namespace
}  // namespace ds::precision
