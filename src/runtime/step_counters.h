// The engine's counters (DeepSpeed's global_steps, global_samples, skipped_steps, micro_steps and the
// last step's outcome), and the part of them a checkpoint carries.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>

namespace ds {

struct StepCounters {
  int64_t global_steps = 0;
  int64_t global_samples = 0;
  int64_t micro_steps = 0;
  int64_t skipped_steps = 0;
  int64_t overlapped_sub_group_steps = 0;  // ZeRO-Offload overlap: sub-groups stepped during backward
  bool last_step_applied = false;
  double last_grad_norm = -1.0;  // unscaled global norm of the last step; -1 when not computed or inf/NaN
  double loss_accum = 0.0;       // sum over this step's micro-batches of loss/GAS
  double last_loss = 0.0;        // loss_accum of the last completed global step
};

// {"global_steps", "global_samples", "skipped_steps", "micro_steps"} as the engine state records them.
nlohmann::json counters_json(const StepCounters& n);
// Back from counters_json, at an accumulation boundary (micro_steps = global_steps x GAS).
void restore_counters(StepCounters& n, const nlohmann::json& state, int64_t gradient_accumulation_steps);

}  // namespace ds
