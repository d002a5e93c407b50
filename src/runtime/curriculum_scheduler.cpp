#include "runtime/curriculum_scheduler.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/error.h"

namespace ds {

namespace {

// Python's // and % (floor division): the schedule's arithmetic as DeepSpeed writes it.
int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

}  // namespace

CurriculumScheduler::CurriculumScheduler(const CurriculumLearningConfig& config)
    : config_(config), current_(config.min_difficulty) {}

int64_t CurriculumScheduler::root_schedule(int64_t global_steps, double root_degree) const {
  const double progress = std::pow(double(global_steps) / double(config_.total_curriculum_step), 1.0 / root_degree);
  const double span = double(config_.max_difficulty - config_.min_difficulty);
  int64_t next = int64_t(std::floor(progress * span + double(config_.min_difficulty)));
  const int64_t step = config_.difficulty_step;
  next -= floor_mod(next, step);
  // Flooring can land below the start (min 8, step 16 → 0 on the first step): the first multiple
  // of the step at or above min_difficulty is the floor instead.
  next = std::max(next, -floor_div(-config_.min_difficulty, step) * step);
  return std::min(next, config_.max_difficulty);
}

int64_t CurriculumScheduler::get_difficulty(int64_t global_steps) const {
  switch (config_.schedule_type) {
    case CurriculumSchedule::FixedDiscrete: {
      const auto& steps = config_.max_step;
      if (global_steps > steps.back()) return config_.difficulty.back();  // DeepSpeed's order of tests
      for (size_t i = 0; i < steps.size(); ++i)
        if (global_steps <= steps[i]) return config_.difficulty[i];
      return config_.difficulty.back();
    }
    case CurriculumSchedule::FixedLinear: return root_schedule(global_steps, 1.0);
    case CurriculumSchedule::FixedRoot: return root_schedule(global_steps, config_.root_degree);
    case CurriculumSchedule::Custom:
      DS_CHECK(bool(custom_), Error,
               "curriculum_learning.schedule_type \"custom\": no schedule function was given; call "
               "engine.curriculum_scheduler()->set_custom_get_difficulty(f) before training");
      return custom_(global_steps);
  }
  return current_;
}

int64_t CurriculumScheduler::update_difficulty(int64_t global_steps) {
  if (current_ < config_.max_difficulty) current_ = get_difficulty(global_steps);
  return current_;
}

torch::Tensor truncate_to_seqlen(const torch::Tensor& t, int64_t seqlen) {
  DS_CHECK(t.dim() >= 2, Error, fmt::format("truncate_to_seqlen: expected a [batch, sequence, ...] tensor, got shape {}",
                                           t.sizes().vec()));
  DS_CHECK(seqlen > 0, Error, "truncate_to_seqlen: the sequence length must be positive, got " + std::to_string(seqlen));
  return seqlen < t.size(1) ? t.narrow(1, 0, seqlen) : t;
}

}  // namespace ds
