// DeepSpeed's two step-driven training schedules that the model reads during its forward:
// "curriculum_learning" (the legacy curriculum: a difficulty, usually the sequence length, growing
// with the step) and "progressive_layer_drop" (PLD: how likely each layer is to be skipped).
// DeepSpeed reads both as plain dictionaries: an unknown key in them is warned about.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds {

enum class CurriculumSchedule { FixedLinear, FixedRoot, FixedDiscrete, Custom };

// "curriculum_learning" (DeepSpeed's runtime/data_pipeline/curriculum_scheduler.py). DeepSpeed
// requires min_difficulty, max_difficulty and schedule_type, and each schedule its schedule_config
// keys; the engine's forward reads curriculum_type, so it is required too.
struct CurriculumLearningConfig {
  bool enabled = false;
  std::string curriculum_type;  // "seqlen": the difficulty is the sequence length to train at
  int64_t min_difficulty = 0;
  int64_t max_difficulty = 0;
  CurriculumSchedule schedule_type = CurriculumSchedule::FixedLinear;
  // fixed_linear / fixed_root: from min to max over total_curriculum_step steps, each value floored
  // to a multiple of difficulty_step; fixed_root follows the root_degree-th root of the progress.
  int64_t total_curriculum_step = 0;
  int64_t difficulty_step = 0;
  double root_degree = 1.0;
  // fixed_discrete: difficulty[i] up to step max_step[i], the last difficulty after.
  std::vector<int64_t> difficulty;
  std::vector<int64_t> max_step;
};

// "progressive_layer_drop" (DeepSpeed's runtime/progressive_layer_drop.py): theta(t) =
// (1 - theta) * exp(-gamma * t) + theta, the keep probability's floor the layers' own probabilities
// are derived from. DeepSpeed's documented defaults.
struct ProgressiveLayerDropConfig {
  bool enabled = false;
  double theta = 1.0;
  double gamma = 0.001;
};

}  // namespace ds
