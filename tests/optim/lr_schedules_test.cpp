// Warmup schedules (WarmupLR, WarmupDecayLR, WarmupCosineLR): every value is checked against the
// formula of reference §9.2 written out again here in double, plus the expectations of DeepSpeed's
// tests/unit/runtime/test_lr_schedulers.py. OneCycle and LRRangeTest: lr_cycle_schedules_test.cpp.
#include "optim/lr_schedules.h"
#include "lr_schedule_test_util.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <string>
#include <vector>

#include "util/error.h"
#include "util/logging.h"

namespace ds::optim {
namespace {

using namespace ds::optim::test_util;

// lr of group 0 after each of `steps` step() calls (index k: last_batch_iteration == k).
std::vector<double> lrs_after_steps(LrScheduler& s, int steps) {
  std::vector<double> out;
  for (int k = 0; k < steps; ++k) {
    s.step();
    out.push_back(s.groups()[0].lr);
  }
  return out;
}

// ---- reference formulas (§9.2) -------------------------------------------------------------

double warmup_gamma(long it, long warmup_num_steps, WarmupType type) {
  const double w = std::max(2L, warmup_num_steps);
  if (type == WarmupType::Log) return std::log(it + 1.0) / std::log(w);
  return it / w;
}

double warmup_lr(long it, double lo, double hi, long warmup_num_steps, WarmupType type) {
  const long w = std::max(2L, warmup_num_steps);
  const double gamma = it < w ? warmup_gamma(it, warmup_num_steps, type) : 1.0;
  return lo + (hi - lo) * gamma;
}

double warmup_decay_lr(long it, double lo, double hi, long warmup_num_steps, long total, WarmupType type) {
  const long w = std::max(2L, warmup_num_steps);
  if (it < w) return warmup_lr(it, lo, hi, warmup_num_steps, type);
  return lo + (hi - lo) * std::max(0.0, double(total - it) / std::max(1.0, double(total - w)));
}

double warmup_cosine_lr(long it, double base, long warmup_num_steps, long total, double wmin, double cmin,
                        WarmupType type) {
  const long w = std::max(2L, warmup_num_steps);
  if (it < w) return base * (wmin + (1 - wmin) * warmup_gamma(it, warmup_num_steps, type));
  const double k = it - w + 1, big_k = total - w;
  return base * std::max(0.0, cmin + (1 - cmin) * (1 + std::cos(std::numbers::pi * k / big_k)) / 2);
}

// ---- WarmupLR ------------------------------------------------------------------------------

SchedulerParams warmup_params(double lo, double hi, long steps, WarmupType type) {
  SchedulerParams p;
  p.warmup_min_lr = lo;
  p.warmup_max_lr = hi;
  p.warmup_num_steps = steps;
  p.warmup_type = type;
  return p;
}

TEST(LrSchedWarmupLR, ConstructionSetsEveryGroupToMin) {
  auto s = make(SchedulerType::WarmupLR, warmup_params(0.01, 0.1, 10, WarmupType::Log), base_groups({0.5, 0.7}));
  EXPECT_EQ(s->last_batch_iteration(), -1);
  EXPECT_EQ(s->type(), SchedulerType::WarmupLR);
  for (const auto& g : s->groups()) EXPECT_EQ(g.lr, 0.01);
  EXPECT_EQ(s->get_lr(), (std::vector<double>{0.01, 0.01}));
}

TEST(LrSchedWarmupLR, LogAndLinearFollowTheFormula) {
  for (WarmupType type : {WarmupType::Log, WarmupType::Linear}) {
    auto s = make(SchedulerType::WarmupLR, warmup_params(0.01, 0.1, 10, type));
    const auto lrs = lrs_after_steps(*s, 25);
    for (long it = 0; it < 25; ++it) {
      EXPECT_DOUBLE_EQ(lrs[it], warmup_lr(it, 0.01, 0.1, 10, type)) << "it=" << it;
    }
    EXPECT_EQ(lrs[0], 0.01);          // step 0
    EXPECT_DOUBLE_EQ(lrs[10], 0.1);   // warmup end
    EXPECT_EQ(lrs[24], lrs[10]);      // constant after
  }
}

TEST(LrSchedWarmupLR, WarmupStepsBelowTwoBecomeTwo) {
  // W = max(2, warmup_num_steps): with 1 (or 0) linear warmup still takes two steps.
  for (long steps : {0L, 1L}) {
    auto s = make(SchedulerType::WarmupLR, warmup_params(0.0, 1.0, steps, WarmupType::Linear));
    const auto lrs = lrs_after_steps(*s, 3);
    EXPECT_EQ(lrs[0], 0.0);
    EXPECT_EQ(lrs[1], 0.5);
    EXPECT_EQ(lrs[2], 1.0);
  }
}

TEST(LrSchedWarmupLR, DeepSpeedTestExpectations) {
  // test_lr_warmup_schedule: min 0.1, max 0.2; lr after step k is step_lrs[k].
  for (long w : {10L, 15L, 19L, 33L}) {
    for (WarmupType type : {WarmupType::Log, WarmupType::Linear}) {
      auto s = make(SchedulerType::WarmupLR, warmup_params(0.1, 0.2, w, type));
      const auto lrs = lrs_after_steps(*s, 2 * w);
      EXPECT_EQ(lrs[0], 0.1);
      EXPECT_EQ(lrs[w], 0.2);
      for (long k = w; k < 2 * w; ++k) EXPECT_EQ(lrs[k], 0.2);
    }
  }
}

TEST(LrSchedWarmupLR, StepToJumpsAndResumedSchedulerLeavesGroupsUntilStep) {
  auto s = make(SchedulerType::WarmupLR, warmup_params(0.0, 1.0, 100, WarmupType::Linear));
  s->step_to(40);
  EXPECT_EQ(s->last_batch_iteration(), 40);
  EXPECT_DOUBLE_EQ(s->groups()[0].lr, 0.4);
  s->step();
  EXPECT_EQ(s->last_batch_iteration(), 41);
  EXPECT_DOUBLE_EQ(s->groups()[0].lr, 0.41);

  SchedulerParams p = warmup_params(0.0, 1.0, 100, WarmupType::Linear);
  p.last_batch_iteration = 40;  // resuming: DeepSpeed does not touch the param groups yet
  auto resumed = make(SchedulerType::WarmupLR, p, base_groups({0.123}));
  EXPECT_EQ(resumed->groups()[0].lr, 0.123);
  EXPECT_DOUBLE_EQ(resumed->get_lr()[0], 0.4);
  resumed->step();
  EXPECT_DOUBLE_EQ(resumed->groups()[0].lr, 0.41);
}

// ---- WarmupDecayLR -------------------------------------------------------------------------

TEST(LrSchedWarmupDecayLR, WarmupThenLinearDecayToZero) {
  for (WarmupType type : {WarmupType::Log, WarmupType::Linear}) {
    SchedulerParams p = warmup_params(0.01, 0.1, 10, type);
    p.total_num_steps = 30;
    auto s = make(SchedulerType::WarmupDecayLR, p);
    EXPECT_EQ(s->groups()[0].lr, 0.01);
    const auto lrs = lrs_after_steps(*s, 40);
    for (long it = 0; it < 40; ++it) {
      EXPECT_DOUBLE_EQ(lrs[it], warmup_decay_lr(it, 0.01, 0.1, 10, 30, type)) << "it=" << it;
    }
    EXPECT_DOUBLE_EQ(lrs[10], 0.1);  // gamma = (30 - 10) / 20
    EXPECT_EQ(lrs[30], 0.01);  // gamma 0 at total: back to min, and stays there
    EXPECT_EQ(lrs[39], 0.01);
    for (long k = 11; k <= 30; ++k) EXPECT_LT(lrs[k], lrs[k - 1]);  // DeepSpeed: decreasing after W
  }
}

TEST(LrSchedWarmupDecayLR, RequiresTotalAndWarnsWhenShorterThanWarmup) {
  SchedulerParams p = warmup_params(0.0, 0.1, 10, WarmupType::Log);
  EXPECT_EQ(config_error_path([&] { make(SchedulerType::WarmupDecayLR, p); }), "scheduler.params.total_num_steps");
  WarningCapture warnings;
  p.total_num_steps = 5;
  auto s = make(SchedulerType::WarmupDecayLR, p);
  EXPECT_TRUE(warnings.saw("total_num_steps 5 is less than warmup_num_steps 10"));
  s->step_to(10);  // max(1, total - W) keeps it finite; gamma clamps at 0
  EXPECT_EQ(s->groups()[0].lr, 0.0);
}

// ---- WarmupCosineLR ------------------------------------------------------------------------

SchedulerParams cosine_params(long total, long warmup, double cmin, double wmin) {
  SchedulerParams p;
  p.total_num_steps = total;
  p.warmup_num_steps = warmup;
  p.cos_min_ratio = cmin;
  p.warmup_min_ratio = wmin;
  return p;
}

TEST(LrSchedWarmupCosineLR, ZeroBeforeFirstStepOnlyForTheFirstGroup) {
  auto s = make(SchedulerType::WarmupCosineLR, cosine_params(100, 10, 0.1, 0.2), base_groups({0.1, 0.2}));
  EXPECT_EQ(s->get_lr(), std::vector<double>{0.0});  // DeepSpeed's [0.0]: one element
  EXPECT_EQ(s->groups()[0].lr, 0.0);
  EXPECT_EQ(s->groups()[1].lr, 0.2);  // zip() stops after the first group
  s->step();
  EXPECT_DOUBLE_EQ(s->groups()[0].lr, 0.1 * 0.2);
  EXPECT_DOUBLE_EQ(s->groups()[1].lr, 0.2 * 0.2);
}

TEST(LrSchedWarmupCosineLR, FollowsTheFormulaAndRisesAgainPastTotal) {
  for (WarmupType type : {WarmupType::Log, WarmupType::Linear}) {
    SchedulerParams p = cosine_params(50, 10, 0.1, 0.2);
    p.warmup_type = type;
    auto s = make(SchedulerType::WarmupCosineLR, p, base_groups({0.3}));
    const auto lrs = lrs_after_steps(*s, 80);
    for (long it = 0; it < 80; ++it) {
      EXPECT_DOUBLE_EQ(lrs[it], warmup_cosine_lr(it, 0.3, 10, 50, 0.2, 0.1, type)) << "it=" << it;
    }
    EXPECT_GT(lrs[60], lrs[49]);  // no clamp at total_num_steps (DeepSpeed 0.14.5)
  }
}

TEST(LrSchedWarmupCosineLR, DeepSpeedTestExpectations) {
  // test_lr: lr[0] = base*wmin, lr[W-1] = base, lr[total-1] = base*cmin (log warmup).
  const double base = 0.0015;
  struct Case { long total, warmup; double cmin, wmin; };
  for (Case c : {Case{200, 20, 0.1, 0.2}, Case{500, 30, 0.0, 0.2}, Case{600, 300, 0.1, 0.0},
                 Case{600, 550, 0.0, 0.0}}) {
    auto s = make(SchedulerType::WarmupCosineLR, cosine_params(c.total, c.warmup, c.cmin, c.wmin), base_groups({base}));
    const auto lrs = lrs_after_steps(*s, c.total);
    EXPECT_NEAR(lrs[0], base * c.wmin, 1e-7);
    EXPECT_NEAR(lrs[c.warmup - 1], base, 1e-7);
    EXPECT_NEAR(lrs[c.total - 1], base * c.cmin, 1e-7);
    for (long k = 1; k < c.warmup; ++k) EXPECT_GT(lrs[k], lrs[k - 1]);
    for (long k = c.warmup; k < c.total; ++k) EXPECT_LT(lrs[k], lrs[k - 1]);
  }
}

TEST(LrSchedWarmupCosineLR, TotalEqualToWarmupFailsOnlyPastWarmup) {
  auto s = make(SchedulerType::WarmupCosineLR, cosine_params(10, 10, 0.1, 0.0));
  s->step_to(9);  // still warming up: fine
  EXPECT_DOUBLE_EQ(s->groups()[0].lr, 0.1);
  EXPECT_EQ(config_error_path([&] { s->step(); }), "scheduler.params.total_num_steps");
  EXPECT_EQ(config_error_path([] { make(SchedulerType::WarmupCosineLR, cosine_params(0, 10, 0.1, 0.0)); }),
            "scheduler.params.total_num_steps");
}

}  // namespace
}  // namespace ds::optim
