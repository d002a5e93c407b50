// OneCycle and LRRangeTest (and what every schedule shares): values against the formulas of
// reference §9.2 written out again here in double, plus the expectations of DeepSpeed's
// tests/unit/runtime/test_lr_schedulers.py.
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "optim/lr_schedules.h"
#include "lr_schedule_test_util.h"
#include "util/error.h"
#include "util/logging.h"

namespace ds::optim {
namespace {

using namespace ds::optim::test_util;

// OneCycle's scale in [0, 1] inside the cycle.
double one_cycle_scale(long it, double s1, double s2) {
  const double total = s1 + s2, ratio = s1 / total, b = it + 1.0;
  const double x = 1 + b / total - std::floor(1 + b / total);
  return x <= ratio ? x / ratio : (x - 1) / (ratio - 1);
}

// ---- OneCycle ------------------------------------------------------------------------------

SchedulerParams one_cycle_params(double lo, double hi, long s1) {
  SchedulerParams p;
  p.cycle_min_lr = lo;
  p.cycle_max_lr = hi;
  p.cycle_first_step_size = s1;
  return p;
}

TEST(LrSchedOneCycle, ConstructionSetsMinLrAndMinMomentumWithBeta2Pinned) {
  SchedulerParams p = one_cycle_params(1e-3, 1e-2, 10);
  auto s = make(SchedulerType::OneCycle, p, base_groups({0.5, 0.5}));
  for (const auto& g : s->groups()) {
    EXPECT_EQ(g.lr, 1e-3);
    EXPECT_EQ(g.betas, (std::array<double, 2>{0.8, 0.99}));
  }
  // ...while get_mom() at iteration -1 already reports the cycle's start, max momentum.
  EXPECT_EQ(s->get_lr()[0], 1e-3);
  EXPECT_EQ(s->get_mom()[0], (std::array<double, 2>{0.9, 0.99}));
}

TEST(LrSchedOneCycle, AsymmetricCycleThenDecayFollowTheFormula) {
  SchedulerParams p = one_cycle_params(1e-3, 1e-2, 10);
  p.cycle_second_step_size = 30;
  p.decay_lr_rate = 0.1;
  p.decay_step_size = 5;
  p.decay_mom_rate = 0.01;
  auto s = make(SchedulerType::OneCycle, p);
  for (long it = 0; it < 60; ++it) {
    s->step();
    double lr = 0, mom = 0;
    if (it < 40) {
      const double scale = one_cycle_scale(it, 10, 30);
      lr = 1e-3 + (1e-2 - 1e-3) * scale;
      mom = 0.9 - (0.9 - 0.8) * scale;
    } else {
      const double d = it - 40 + 1;
      lr = 1e-3 / (1 + 0.1 * (d / 5));
      mom = 0.9 * (1 + 0.01 * (d / 5));
    }
    EXPECT_DOUBLE_EQ(s->groups()[0].lr, lr) << "it=" << it;
    EXPECT_DOUBLE_EQ(s->groups()[0].betas[0], mom) << "it=" << it;
    EXPECT_EQ(s->groups()[0].betas[1], 0.99);
  }
  s->step_to(9);  // b = 10 = first step size: the peak
  EXPECT_DOUBLE_EQ(s->groups()[0].lr, 1e-2);
  s->step_to(39);  // b = 40 = total: back at the bottom
  EXPECT_DOUBLE_EQ(s->groups()[0].lr, 1e-3);
}

TEST(LrSchedOneCycle, DeepSpeedLrExpectations) {
  // test_lr: step_lrs[k] is get_lr() BEFORE step k, i.e. at iteration k - 1.
  struct Case { double lo, hi, rate; long size, decay_size; };
  for (Case c : {Case{1e-5, 1e-2, 1e-3, 10, 10}, Case{1e-3, 1e-1, 0, 21, 21}, Case{1e-3, 1e-1, 1e-1, 21, 21},
                 Case{1e-5, 1e-1, 0, 10, 0}}) {
    SchedulerParams p = one_cycle_params(c.lo, c.hi, c.size);
    p.decay_lr_rate = c.rate;
    p.decay_step_size = c.decay_size;
    auto s = make(SchedulerType::OneCycle, p);
    std::vector<double> lrs;
    for (long k = 0; k < std::max(50L, 3 * c.size); ++k) {
      lrs.push_back(s->get_lr()[0]);
      s->step();
    }
    EXPECT_EQ(lrs[0], c.lo);
    EXPECT_EQ(lrs[c.size], c.hi);
    for (long k = 1; k < c.size; ++k) EXPECT_GT(lrs[k], lrs[k - 1]);
    for (long k = c.size + 1; k < 2 * c.size; ++k) EXPECT_LT(lrs[k], lrs[k - 1]);
    for (long k = 2 * c.size + 1; k < long(lrs.size()); ++k) {
      if (c.rate > 0) EXPECT_LT(lrs[k], lrs[k - 1]);
      else EXPECT_EQ(lrs[k], c.lo);  // no decay: stays at min
    }
  }
}

TEST(LrSchedOneCycle, DeepSpeedMomentumExpectations) {
  for (double rate : {1e-3, 0.0}) {
    for (long size : {10L, 21L}) {
      SchedulerParams p = one_cycle_params(1e-3, 1e-2, size);
      p.cycle_min_mom = 0.08;
      p.cycle_max_mom = 0.09;
      p.decay_mom_rate = rate;
      p.decay_step_size = size;
      auto s = make(SchedulerType::OneCycle, p);
      std::vector<double> moms;
      for (long k = 0; k < std::max(50L, 3 * size); ++k) {
        moms.push_back(s->get_mom()[0][0]);
        s->step();
      }
      EXPECT_EQ(moms[0], 0.09);
      EXPECT_EQ(moms[size], 0.08);
      for (long k = 1; k < size; ++k) EXPECT_LT(moms[k], moms[k - 1]);
      for (long k = size + 1; k < 2 * size; ++k) EXPECT_GT(moms[k], moms[k - 1]);
      for (long k = 2 * size + 1; k < long(moms.size()); ++k) {
        if (rate > 0) EXPECT_GT(moms[k], moms[k - 1]);
        else EXPECT_EQ(moms[k], 0.09);
      }
    }
  }
}

TEST(LrSchedOneCycle, MomentumLeftAloneWhenDisabledOrOptimizerHasNoBetas) {
  SchedulerParams p = one_cycle_params(1e-3, 1e-2, 10);
  p.cycle_momentum = false;
  auto s = make(SchedulerType::OneCycle, p);
  s->step_to(5);
  EXPECT_EQ(s->groups()[0].betas, (std::array<double, 2>{0.9, 0.999}));
  EXPECT_TRUE(s->get_mom().empty());

  WarningCapture warnings;
  p.cycle_momentum = true;
  auto sgd = LrScheduler::create({SchedulerType::OneCycle, p}, base_groups({0.1}), has_betas(OptimizerType::SGD));
  EXPECT_TRUE(warnings.saw("cycle_momentum is disabled"));
  sgd->step_to(5);
  EXPECT_EQ(sgd->groups()[0].betas, (std::array<double, 2>{0.9, 0.999}));
  EXPECT_TRUE(has_betas(OptimizerType::Adam) && has_betas(OptimizerType::Lamb) && has_betas(OptimizerType::Lion));
  EXPECT_FALSE(has_betas(OptimizerType::Adagrad));
}

TEST(LrSchedOneCycle, RejectsAZeroFirstStepSize) {
  EXPECT_EQ(config_error_path([] { make(SchedulerType::OneCycle, one_cycle_params(0, 0.1, 0)); }),
            "scheduler.params.cycle_first_step_size");
}

// ---- LRRangeTest ---------------------------------------------------------------------------

SchedulerParams range_params(double lo, double rate, long size, bool staircase) {
  SchedulerParams p;
  p.lr_range_test_min_lr = lo;
  p.lr_range_test_step_rate = rate;
  p.lr_range_test_step_size = size;
  p.lr_range_test_staircase = staircase;
  return p;
}

TEST(LrSchedLRRangeTest, ContinuousAndStaircaseFollowTheFormula) {
  for (bool staircase : {false, true}) {
    auto s = make(SchedulerType::LRRangeTest, range_params(1e-3, 0.5, 4, staircase));
    EXPECT_EQ(s->groups()[0].lr, 1e-3);
    for (long it = 0; it < 20; ++it) {
      s->step();
      double interval = (it + 1) / 4.0;
      if (staircase) interval = std::floor(interval);
      EXPECT_DOUBLE_EQ(s->groups()[0].lr, 1e-3 * (1 + 0.5 * interval)) << "it=" << it;
    }
  }
}

TEST(LrSchedLRRangeTest, DeepSpeedTestExpectations) {
  struct Case { double lo, rate; long size; bool staircase; };
  for (Case c : {Case{1e-4, 1e-5, 1, true}, Case{1e-5, 1e-5, 1, false}, Case{1e-4, 1e-3, 10, true},
                 Case{1e-3, 1e-3, 10, false}, Case{1e-2, 1e-2, 19, true}, Case{1e-2, 1e-2, 19, false}}) {
    auto s = make(SchedulerType::LRRangeTest, range_params(c.lo, c.rate, c.size, c.staircase));
    std::vector<double> lrs;
    for (long k = 0; k < std::max(50L, 2 * c.size); ++k) {
      lrs.push_back(s->get_lr()[0]);
      s->step();
    }
    EXPECT_EQ(lrs[0], c.lo);
    for (size_t k = 1; k < lrs.size(); ++k) {
      if (!c.staircase) EXPECT_LT(lrs[k - 1], lrs[k]);
      else if (k % c.size != 0) EXPECT_EQ(lrs[k], lrs[k - 1]);  // flat within a stair
      else EXPECT_LT(lrs[k - 1], lrs[k]);
    }
  }
  EXPECT_EQ(config_error_path([] { make(SchedulerType::LRRangeTest, range_params(1e-3, 1, 0, false)); }),
            "scheduler.params.lr_range_test_step_size");
}

// ---- every type ----------------------------------------------------------------------------

TEST(LrSchedAllTypes, ResumingLeavesGroupsThenStepsFromTheGivenIteration) {
  for (SchedulerType t : {SchedulerType::WarmupLR, SchedulerType::WarmupDecayLR, SchedulerType::WarmupCosineLR,
                          SchedulerType::OneCycle, SchedulerType::LRRangeTest}) {
    SchedulerParams p = one_cycle_params(1e-3, 1e-2, 10);
    p.total_num_steps = 100;
    p.warmup_num_steps = 10;
    p.last_batch_iteration = 7;
    auto s = make(t, p, base_groups({0.25, 0.5}));
    EXPECT_EQ(s->type(), t);
    EXPECT_EQ(s->last_batch_iteration(), 7);
    EXPECT_EQ(s->groups()[0].lr, 0.25);
    EXPECT_EQ(s->groups()[1].lr, 0.5);
    EXPECT_EQ(s->groups()[0].betas, (std::array<double, 2>{0.9, 0.999}));
    s->step();
    EXPECT_EQ(s->last_batch_iteration(), 8);
    const auto lrs = s->get_lr();
    ASSERT_EQ(lrs.size(), 2u);
    EXPECT_EQ(s->groups()[0].lr, lrs[0]);
    EXPECT_EQ(s->groups()[1].lr, lrs[1]);
  }
  SchedulerParams bad;
  bad.last_batch_iteration = -2;
  EXPECT_EQ(config_error_path([&] { make(SchedulerType::WarmupLR, bad); }), "scheduler.params.last_batch_iteration");
}

}  // namespace
}  // namespace ds::optim
