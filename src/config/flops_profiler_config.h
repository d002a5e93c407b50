// The "flops_profiler" section (reference §14.1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ds {

struct FlopsProfilerConfig {
  bool enabled = false;              // also turns on wall_clock_breakdown (DeepSpeed ORs them)
  double recompute_fwd_factor = 0.0;
  int64_t profile_step = 1;
  int64_t module_depth = -1;         // -1: all depths
  int64_t top_modules = 1;           // DeepSpeed's constant (its format string says 3)
  bool detailed = true;
  std::optional<std::string> output_file;  // None: stdout
};

}  // namespace ds
