// The "scheduler" section: {"type": ..., "params": {...}} (reference §9.2). One params struct holds
// every DeepSpeed schedule's arguments; each type reads only its own keys.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ds {

enum class SchedulerType { WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest };
enum class WarmupType { Log, Linear };

struct SchedulerParams {
  int64_t last_batch_iteration = -1;  // every type

  // WarmupLR, WarmupDecayLR (WarmupCosineLR shares warmup_num_steps and warmup_type)
  double warmup_min_lr = 0.0;
  double warmup_max_lr = 0.001;
  int64_t warmup_num_steps = 1000;
  WarmupType warmup_type = WarmupType::Log;
  // WarmupDecayLR, WarmupCosineLR: required by DeepSpeed (no default); 0 until given.
  int64_t total_num_steps = 0;

  // WarmupCosineLR
  double warmup_min_ratio = 0.0;
  double cos_min_ratio = 0.0001;

  // OneCycle (cycle_min_lr and cycle_max_lr are required)
  double cycle_min_lr = 0.0;
  double cycle_max_lr = 0.0;
  double decay_lr_rate = 0.0;
  int64_t cycle_first_step_size = 2000;
  std::optional<int64_t> cycle_second_step_size;   // None: = cycle_first_step_size
  int64_t cycle_first_stair_count = 0;
  std::optional<int64_t> cycle_second_stair_count;  // None: = cycle_first_stair_count
  int64_t decay_step_size = 0;
  bool cycle_momentum = true;
  double cycle_min_mom = 0.8;
  double cycle_max_mom = 0.9;
  double decay_mom_rate = 0.0;

  // LRRangeTest
  double lr_range_test_min_lr = 0.001;
  int64_t lr_range_test_step_size = 2000;
  double lr_range_test_step_rate = 1.0;
  bool lr_range_test_staircase = false;
};

struct SchedulerConfig {
  SchedulerType type = SchedulerType::WarmupLR;
  SchedulerParams params;
};

std::string to_string(SchedulerType t);  // "WarmupLR", ...
std::string to_string(WarmupType t);     // "log", "linear"

}  // namespace ds
