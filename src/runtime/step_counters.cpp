#include "runtime/step_counters.h"

namespace ds {

nlohmann::json counters_json(const StepCounters& n) {
  return {{"global_steps", n.global_steps},
          {"global_samples", n.global_samples},
          {"skipped_steps", n.skipped_steps},
          {"micro_steps", n.micro_steps}};
}

void restore_counters(StepCounters& n, const nlohmann::json& state, int64_t gradient_accumulation_steps) {
  n.global_steps = state.at("global_steps");
  n.global_samples = state.at("global_samples");
  n.skipped_steps = state.at("skipped_steps");
  n.micro_steps = n.global_steps * gradient_accumulation_steps;  // saved at a boundary
  n.loss_accum = 0.0;
}

}  // namespace ds
