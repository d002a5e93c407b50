// The curriculum's and progressive layer drop's arithmetic against DeepSpeed's: its unit tests'
// ground truths (tests/unit/runtime/test_data_efficiency.py TestLegacyCurriculumScheduler,
// tests/unit/runtime/test_pld.py), fixed_root and the floor rule worked out from its
// curriculum_scheduler.py, and the draws' rate.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "runtime/curriculum_scheduler.h"
#include "runtime/progressive_layer_drop.h"
#include "util/error.h"

namespace ds {
namespace {

CurriculumLearningConfig curriculum(CurriculumSchedule type, int64_t min, int64_t max) {
  CurriculumLearningConfig c;
  c.enabled = true;
  c.curriculum_type = "seqlen";
  c.schedule_type = type;
  c.min_difficulty = min;
  c.max_difficulty = max;
  return c;
}

// The engine's order: update_difficulty(global_steps + 1) before the forward of step n (1-based).
std::vector<int64_t> seqlens(CurriculumScheduler& s, int steps) {
  std::vector<int64_t> out;
  for (int n = 1; n <= steps; ++n) out.push_back(s.update_difficulty(n));
  return out;
}

TEST(CurriculumScheduler, FixedDiscreteAsDeepSpeedsTest) {
  auto c = curriculum(CurriculumSchedule::FixedDiscrete, 1, 5);
  c.difficulty = {1, 2, 3, 4, 5};
  c.max_step = {2, 4, 6, 8};
  CurriculumScheduler s(c);
  EXPECT_EQ(s.get_current_difficulty(), 1);
  EXPECT_EQ(seqlens(s, 10), (std::vector<int64_t>{1, 1, 2, 2, 3, 3, 4, 4, 5, 5}));
}

TEST(CurriculumScheduler, FixedLinearAsDeepSpeedsTest) {
  auto c = curriculum(CurriculumSchedule::FixedLinear, 2, 10);
  c.total_curriculum_step = 8;
  c.difficulty_step = 2;
  CurriculumScheduler s(c);
  EXPECT_EQ(seqlens(s, 10), (std::vector<int64_t>{2, 4, 4, 6, 6, 8, 8, 10, 10, 10}));
}

TEST(CurriculumScheduler, FixedRootAndItsFloor) {
  auto c = curriculum(CurriculumSchedule::FixedRoot, 8, 64);
  c.total_curriculum_step = 100;
  c.difficulty_step = 8;
  c.root_degree = 2;
  CurriculumScheduler s(c);
  // floor(sqrt(t / 100) * 56 + 8), then down to a multiple of 8.
  const std::map<int64_t, int64_t> want = {{1, 8}, {4, 16}, {9, 24}, {25, 32}, {36, 40}, {64, 48}, {100, 64}, {200, 64}};
  for (auto [step, seqlen] : want) EXPECT_EQ(s.get_difficulty(step), seqlen) << "step " << step;
  // min_difficulty 8 with difficulty_step 16: flooring gives 0 on the first step; the floor is the
  // first multiple of the step at or above min_difficulty (DeepSpeed's fix).
  auto f = curriculum(CurriculumSchedule::FixedLinear, 8, 64);
  f.total_curriculum_step = 100;
  f.difficulty_step = 16;
  CurriculumScheduler floor(f);
  EXPECT_EQ(floor.get_difficulty(1), 16);
  EXPECT_EQ(floor.get_difficulty(100), 64);
}

TEST(CurriculumScheduler, StaysOnceAtTheMaximumAndTakesACustomSchedule) {
  auto c = curriculum(CurriculumSchedule::Custom, 4, 32);
  CurriculumScheduler s(c);
  EXPECT_THROW(s.get_difficulty(1), Error);  // no function given
  s.set_custom_get_difficulty([](int64_t step) { return step < 3 ? 4 : 32; });
  EXPECT_EQ(seqlens(s, 4), (std::vector<int64_t>{4, 4, 32, 32}));
  s.set_custom_get_difficulty([](int64_t) { return 4; });
  EXPECT_EQ(s.update_difficulty(5), 32) << "max_difficulty reached: DeepSpeed stops updating";
}

TEST(CurriculumScheduler, TruncatesTheSequenceDimension) {
  const torch::Tensor t = torch::arange(24).reshape({2, 12});
  EXPECT_EQ(truncate_to_seqlen(t, 8).sizes().vec(), (std::vector<int64_t>{2, 8}));
  EXPECT_TRUE(truncate_to_seqlen(t, 8).equal(t.narrow(1, 0, 8)));
  EXPECT_EQ(truncate_to_seqlen(t, 16).sizes().vec(), (std::vector<int64_t>{2, 12})) << "not longer than it is";
  EXPECT_THROW(truncate_to_seqlen(torch::arange(4), 2), Error);
}

TEST(ProgressiveLayerDrop, ThetaAsDeepSpeedsTest) {
  ProgressiveLayerDrop pld({true, 0.5, 0.001});
  EXPECT_EQ(pld.theta(), 1.0) << "1.0 until the first boundary";
  for (int i = 0; i < 50; ++i) {
    pld.update_state(i);  // the engine's boundary i + 1, before its step
    EXPECT_EQ(pld.theta(), (1.0 - 0.5) * std::exp(-0.001 * i) + 0.5) << i;
  }
  ProgressiveLayerDrop resumed({true, 0.5, 0.001});
  resumed.restore(50);
  EXPECT_EQ(resumed.theta(), pld.theta()) << "a load at step 50 continues where the run was";
}

TEST(ProgressiveLayerDrop, KeepsBlocksAtTheirDepthsProbability) {
  EXPECT_DOUBLE_EQ(ProgressiveLayerDrop::keep_probability(1, 4, 0.5), 0.875);
  EXPECT_DOUBLE_EQ(ProgressiveLayerDrop::keep_probability(4, 4, 0.5), 0.5);
  for (double p : {0.5, 0.875}) {
    int kept = 0;
    const int n = 20000;
    for (int m = 0; m < n; ++m) kept += ProgressiveLayerDrop::keeps(uint64_t(m), 3, p) ? 1 : 0;
    EXPECT_NEAR(double(kept) / n, p, 0.015) << p;  // ~4 standard deviations
  }
  // Blocks of one micro-batch draw independently of each other.
  int both = 0;
  for (int m = 0; m < 20000; ++m)
    both += ProgressiveLayerDrop::keeps(uint64_t(m), 1, 0.5) && ProgressiveLayerDrop::keeps(uint64_t(m), 2, 0.5);
  EXPECT_NEAR(both / 20000.0, 0.25, 0.015);
}

TEST(ProgressiveLayerDrop, WrapsOnlyResidualBlocksAndOnlyInTraining) {
  nn::LayerList layers;
  layers.add("embed", [](const torch::Tensor& x) { return x * 2; }, {});
  for (int b = 1; b <= 2; ++b)
    layers.add(nn::Layer{"h." + std::to_string(b), [](const torch::Tensor& x) { return x + 1; }, {}, b, 2});
  ProgressiveLayerDrop pld({true, 0.5, 10.0});
  ASSERT_EQ(pld.wrap_blocks(layers), 2);
  const torch::Tensor x = torch::ones({1, 1});
  pld.select(0, true);
  EXPECT_EQ(layers.forward(x).item<double>(), 4.0) << "theta 1.0: every block runs as it is";
  pld.update_state(5);  // theta ~0.5
  const double theta = pld.theta();
  for (uint64_t m = 0; m < 16; ++m) {
    pld.select(m, true);
    double want = 2.0;
    for (int b = 1; b <= 2; ++b) {
      const double p = ProgressiveLayerDrop::keep_probability(b, 2, theta);
      if (ProgressiveLayerDrop::keeps(m, b, p)) want += 1.0 / p;
    }
    EXPECT_NEAR(layers.forward(x).item<double>(), want, 1e-6) << m;
    pld.select(m, false);
    EXPECT_EQ(layers.forward(x).item<double>(), 4.0) << "evaluation keeps every block";
  }
}

}  // namespace
}  // namespace ds
