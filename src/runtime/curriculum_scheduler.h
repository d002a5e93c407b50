// DeepSpeed's legacy curriculum learning ("curriculum_learning", its CurriculumScheduler): a
// difficulty — with curriculum_type "seqlen", the sequence length to train at — that grows with the
// step from min_difficulty to max_difficulty on a fixed schedule. The engine updates it to
// global_steps + 1 before each training forward (and each pipeline train_batch), as DeepSpeed does;
// the model or the data loop reads it and trains at that difficulty (engine.curriculum_seqlen()).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>

#include "config/training_schedules_config.h"

namespace ds {

class CurriculumScheduler {
 public:
  explicit CurriculumScheduler(const CurriculumLearningConfig& config);

  // The difficulty the schedule gives at `global_steps` (DeepSpeed's get_difficulty): fixed_linear
  // and fixed_root floor to a multiple of difficulty_step, never below the first multiple at or
  // above min_difficulty nor above max_difficulty. Throws ds::Error for "custom" without a function.
  int64_t get_difficulty(int64_t global_steps) const;
  // Moves the current difficulty to get_difficulty(global_steps) unless it already reached
  // max_difficulty; returns it. Idempotent for a given step.
  int64_t update_difficulty(int64_t global_steps);
  int64_t get_current_difficulty() const { return current_; }
  void set_current_difficulty(int64_t difficulty) { current_ = difficulty; }
  // schedule_type "custom": the schedule, global_steps → difficulty.
  void set_custom_get_difficulty(std::function<int64_t(int64_t)> schedule) { custom_ = std::move(schedule); }

  const CurriculumLearningConfig& config() const { return config_; }

 private:
  int64_t root_schedule(int64_t global_steps, double root_degree) const;

  CurriculumLearningConfig config_;
  int64_t current_ = 0;
  std::function<int64_t(int64_t)> custom_;
};

// The first `seqlen` positions of a [batch, sequence, ...] tensor (all of it when not longer): the
// truncation Megatron-DeepSpeed's models apply to their tokens and labels for curriculum_seqlen.
torch::Tensor truncate_to_seqlen(const torch::Tensor& t, int64_t seqlen);

}  // namespace ds
