// Non-ZeRO fp16 scaler (reference §8.2), static scaler, make_loss_scaler's defaults (§1.4) and
// checkpoint state. Expected values written by hand from the reference:
//   legacy overflow: scale = max(scale/2, min), last_overflow_iter = cur_iter (never throws)
//   legacy clean:    stable = cur_iter - last_overflow_iter - 1; double if stable > 0 && stable % window == 0
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "config/loader.h"
#include "precision/loss_scaler.h"

namespace ds::precision {
namespace {

void expect_scales(LossScaler& s, const std::vector<bool>& overflow, const std::vector<double>& scale) {
  ASSERT_EQ(overflow.size(), scale.size());
  const int64_t start = s.cur_iter();
  for (size_t i = 0; i < overflow.size(); ++i) {
    s.update(overflow[i]);
    EXPECT_EQ(s.scale(), scale[i]) << "update " << i;
    EXPECT_EQ(s.cur_iter(), start + static_cast<int64_t>(i) + 1) << "update " << i;
  }
}

Fp16Config fp16_with_keys(int64_t power, int64_t window) {
  Fp16Config c;
  c.enabled = true;
  c.initial_scale_power = power;
  c.loss_scale_window = window;
  c.dynamic_args_given = true;
  return c;
}

// DeepSpeed's test_dynamic_loss_scale.py::TestFused/TestUnfused::test_no_overflow.
TEST(LegacyLossScalerTest, DeepSpeedNoOverflowPower8Window2) {
  for (auto flavor : {ScalerFlavor::FusedFp16, ScalerFlavor::UnfusedFp16}) {
    auto s = make_loss_scaler(fp16_with_keys(8, 2), flavor);
    EXPECT_EQ(s->kind(), ScalerKind::LegacyDynamic);
    EXPECT_EQ(s->scale(), 256);
    EXPECT_EQ(s->state().scale_window, 2);
    // stable = cur_iter: doubles at i = 2, 4, 6, 8.
    expect_scales(*s, std::vector<bool>(10, false),
                  {256, 256, 512, 512, 1024, 1024, 2048, 2048, 4096, 4096});
  }
}

// DeepSpeed's test_all_overflow: inf, -inf then NaN gradients, power 4, floor 1, no exception.
TEST(LegacyLossScalerTest, DeepSpeedAllOverflowPower4HalvesToFloor) {
  for (auto flavor : {ScalerFlavor::FusedFp16, ScalerFlavor::UnfusedFp16}) {
    auto s = make_loss_scaler(fp16_with_keys(4, 2), flavor);
    EXPECT_EQ(s->scale(), 16);
    expect_scales(*s, std::vector<bool>(8, true), {8, 4, 2, 1, 1, 1, 1, 1});
    EXPECT_EQ(s->last_update().event, ScaleEvent::Decreased);
  }
}

// DeepSpeed's test_some_overflow: two overflows, window+1 clean steps double once, one overflow.
TEST(LegacyLossScalerTest, DeepSpeedSomeOverflowThenContinue) {
  auto s = make_loss_scaler(fp16_with_keys(8, 2), ScalerFlavor::FusedFp16);
  // i0,i1 overflow (last = 1); i2 stable 0, i3 stable 1, i4 stable 2 → double; i5 overflow (last = 5);
  // i6..i10 stable 0..4 → doubles at i8 and i10.
  expect_scales(*s, {true, true, false, false, false, true, false, false, false, false, false},
                {128, 64, 64, 64, 128, 64, 64, 64, 128, 128, 256});
}

TEST(LegacyLossScalerTest, IgnoresHysteresis) {
  Fp16Config c = fp16_with_keys(8, 1000);
  c.hysteresis = 4;
  c.consecutive_hysteresis = true;
  auto s = make_loss_scaler(c, ScalerFlavor::FusedFp16);
  expect_scales(*s, {true, true}, {128, 64});  // ZeRO would hold 256 for three overflows
  EXPECT_EQ(s->state().delayed_shift, 1);
  EXPECT_FALSE(s->state().consecutive_hysteresis);
}

TEST(LegacyLossScalerTest, UnfusedDefaultFloorIsQuarter) {
  Fp16Config c;
  c.enabled = true;  // no dynamic key given
  auto s = make_loss_scaler(c, ScalerFlavor::UnfusedFp16);
  for (int i = 0; i < 18; ++i) s->update(true);  // 2^16 / 2^18
  EXPECT_EQ(s->scale(), 0.25);
  s->update(true);
  s->update(true);
  EXPECT_EQ(s->scale(), 0.25);
  EXPECT_EQ(s->cur_iter(), 20);
}

TEST(StaticLossScalerTest, ConstantAndUpdateChangesNothing) {
  StaticLossScaler s(138);
  EXPECT_FALSE(s.dynamic());
  EXPECT_EQ(s.kind(), ScalerKind::Static);
  const LossScalerState before = s.state();
  for (bool o : {true, false, true, true, false}) {
    ScaleUpdate u = s.update(o);
    EXPECT_EQ(u.event, ScaleEvent::None);
    EXPECT_EQ(u.overflow, o);
    EXPECT_EQ(u.scale_after, 138);
  }
  EXPECT_EQ(s.scale(), 138);
  EXPECT_EQ(s.state(), before);
  EXPECT_THROW(StaticLossScaler(0), ConfigError);
  EXPECT_THROW(StaticLossScaler(-2), ConfigError);
}

TEST(MakeLossScalerTest, ZeroWithoutDynamicKeysUsesConstructorDefaults) {
  Fp16Config c;
  c.enabled = true;
  c.hysteresis = 2;  // the config default, but not "given": ZeRO uses hysteresis 1
  auto s = make_loss_scaler(c, ScalerFlavor::Zero);
  const LossScalerState st = s->state();
  EXPECT_EQ(st.kind, ScalerKind::Dynamic);
  EXPECT_EQ(st.cur_scale, 4294967296.0);
  EXPECT_EQ(st.scale_window, 1000);
  EXPECT_EQ(st.min_scale, 1);
  EXPECT_EQ(st.delayed_shift, 1);
  EXPECT_EQ(st.cur_hysteresis, 1);
  EXPECT_FALSE(st.consecutive_hysteresis);
  EXPECT_TRUE(st.raise_error_at_min_scale);
}

TEST(MakeLossScalerTest, ZeroWithOneDynamicKeyTakesAllConfigValues) {
  Fp16Config c;
  c.enabled = true;
  c.loss_scale_window = 500;
  c.dynamic_args_given = true;  // only loss_scale_window was in the file
  auto st = make_loss_scaler(c, ScalerFlavor::Zero)->state();
  EXPECT_EQ(st.cur_scale, 65536);  // 2^16 from the initial_scale_power default
  EXPECT_EQ(st.scale_window, 500);
  EXPECT_EQ(st.min_scale, 1);
  EXPECT_EQ(st.delayed_shift, 2);  // the fp16.hysteresis default now applies
}

TEST(MakeLossScalerTest, FusedAndUnfusedDefaultsWithoutKeys) {
  Fp16Config c;
  c.enabled = true;
  auto fused = make_loss_scaler(c, ScalerFlavor::FusedFp16)->state();
  EXPECT_EQ(fused.kind, ScalerKind::LegacyDynamic);
  EXPECT_EQ(fused.cur_scale, 65536);
  EXPECT_EQ(fused.scale_window, 1000);
  EXPECT_EQ(fused.min_scale, 1);
  auto unfused = make_loss_scaler(c, ScalerFlavor::UnfusedFp16)->state();
  EXPECT_EQ(unfused.kind, ScalerKind::LegacyDynamic);
  EXPECT_EQ(unfused.cur_scale, 65536);
  EXPECT_EQ(unfused.scale_window, 1000);
  EXPECT_EQ(unfused.min_scale, 0.25);
}

TEST(MakeLossScalerTest, FusedAndUnfusedWithKeysTakeConfigValues) {
  Fp16Config c = fp16_with_keys(10, 7);
  c.min_loss_scale = 2;
  for (auto flavor : {ScalerFlavor::FusedFp16, ScalerFlavor::UnfusedFp16}) {
    auto st = make_loss_scaler(c, flavor)->state();
    EXPECT_EQ(st.cur_scale, 1024);
    EXPECT_EQ(st.scale_window, 7);
    EXPECT_EQ(st.min_scale, 2);  // unfused's 0.25 only applies without keys
  }
}

TEST(MakeLossScalerTest, PositiveLossScaleIsStaticForEveryFlavor) {
  Fp16Config c = fp16_with_keys(8, 2);  // dynamic keys do not matter once loss_scale > 0
  c.loss_scale = 138;
  for (auto flavor : {ScalerFlavor::Zero, ScalerFlavor::FusedFp16, ScalerFlavor::UnfusedFp16}) {
    auto s = make_loss_scaler(c, flavor);
    EXPECT_FALSE(s->dynamic());
    EXPECT_EQ(s->scale(), 138);
  }
  c.loss_scale = -1;
  EXPECT_THROW(make_loss_scaler(c, ScalerFlavor::Zero), ConfigError);
}

TEST(MakeLossScalerTest, Bf16AndFp32GetUnitStaticScaler) {
  Fp16Config off;  // fp16 disabled
  off.loss_scale = 138;
  for (auto flavor : {ScalerFlavor::Zero, ScalerFlavor::FusedFp16, ScalerFlavor::UnfusedFp16}) {
    auto s = make_loss_scaler(off, flavor);
    EXPECT_FALSE(s->dynamic());
    EXPECT_EQ(s->scale(), 1.0);
  }
  auto u = make_unit_loss_scaler();
  u->update(true);
  EXPECT_EQ(u->scale(), 1.0);
}

TEST(MakeLossScalerTest, FromParsedConfigFile) {
  auto bare = load_config_text(R"({"train_batch_size": 8, "fp16": {"enabled": true}})", 1);
  EXPECT_EQ(make_loss_scaler(bare.fp16, ScalerFlavor::Zero)->scale(), 4294967296.0);
  EXPECT_EQ(make_loss_scaler(bare.fp16, ScalerFlavor::Zero)->state().delayed_shift, 1);
  auto keyed = load_config_text(
      R"({"train_batch_size": 8, "fp16": {"enabled": true, "initial_scale_power": 12, "hysteresis": 3}})", 1);
  auto st = make_loss_scaler(keyed.fp16, ScalerFlavor::Zero)->state();
  EXPECT_EQ(st.cur_scale, 4096);
  EXPECT_EQ(st.delayed_shift, 3);
}

// Run a pattern, snapshot, continue; a fresh scaler loaded from the snapshot must continue identically.
void expect_round_trip(std::unique_ptr<LossScaler> a, std::unique_ptr<LossScaler> fresh) {
  const std::vector<bool> head = {true, false, true, false, false, true, false};
  const std::vector<bool> tail = {false, false, true, false, false, false, false, true, false, false};
  for (bool o : head) a->update(o);
  const LossScalerState snap = a->state();
  fresh->load_state(snap);
  EXPECT_EQ(fresh->state(), snap);
  auto restored = restore_loss_scaler(snap);
  EXPECT_EQ(restored->state(), snap);
  for (bool o : tail) {
    ScaleUpdate ua = a->update(o), ub = fresh->update(o), uc = restored->update(o);
    EXPECT_EQ(ua.event, ub.event);
    EXPECT_EQ(ua.event, uc.event);
    EXPECT_EQ(a->scale(), fresh->scale());
    EXPECT_EQ(a->scale(), restored->scale());
  }
  EXPECT_EQ(a->state(), fresh->state());
  EXPECT_EQ(a->state(), restored->state());
}

TEST(LossScalerStateTest, RoundTripContinuesIdentically) {
  LossScalerArgs zero;
  zero.init_scale = 1024;
  zero.scale_window = 3;
  zero.delayed_shift = 2;
  zero.consecutive_hysteresis = true;
  LossScalerArgs other;  // different settings: the state carries the checkpoint's own
  other.init_scale = 8;
  expect_round_trip(std::make_unique<DynamicLossScaler>(zero), std::make_unique<DynamicLossScaler>(other));
  expect_round_trip(std::make_unique<LegacyDynamicLossScaler>(zero),
                    std::make_unique<LegacyDynamicLossScaler>(other));
  expect_round_trip(std::make_unique<StaticLossScaler>(138), std::make_unique<StaticLossScaler>(1));
}

TEST(LossScalerStateTest, StateHoldsEveryField) {
  LossScalerArgs a;
  a.init_scale = 1024;
  a.scale_window = 3;
  a.min_scale = 4;
  a.delayed_shift = 2;
  DynamicLossScaler s(a);
  s.update(true);   // hysteresis 2 → 1
  s.update(false);
  const LossScalerState st = s.state();
  EXPECT_EQ(st.cur_scale, 1024);
  EXPECT_EQ(st.cur_iter, 2);
  EXPECT_EQ(st.last_overflow_iter, 0);
  EXPECT_EQ(st.scale_factor, 2);
  EXPECT_EQ(st.scale_window, 3);
  EXPECT_EQ(st.min_scale, 4);
  EXPECT_EQ(st.delayed_shift, 2);
  EXPECT_EQ(st.cur_hysteresis, 1);
}

TEST(LossScalerStateTest, LoadingAnotherKindThrows) {
  DynamicLossScaler dyn(LossScalerArgs{65536});
  StaticLossScaler st(138);
  EXPECT_THROW(dyn.load_state(st.state()), ds::Error);
  EXPECT_THROW(st.load_state(dyn.state()), ds::Error);
  LegacyDynamicLossScaler legacy(LossScalerArgs{65536});
  EXPECT_THROW(dyn.load_state(legacy.state()), ds::Error);
  auto restored = restore_loss_scaler(st.state());
  EXPECT_EQ(restored->scale(), 138);
  EXPECT_FALSE(restored->dynamic());
}

}  // namespace
}  // namespace ds::precision
