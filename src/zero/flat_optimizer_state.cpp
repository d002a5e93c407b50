// The optimizer's step counters in the checkpoint manifest's "engine" JSON (the tensors themselves
// are in the rank files).
#include <nlohmann/json.hpp>

#include "zero/flat_optimizer.h"

namespace ds::zero {

nlohmann::json FlatOptimizer::state_json() const {
  const auto a = adam_state();
  return {{"type", to_string(type())},
          {"step", step_count()},
          {"adam", {{"step", a.step}, {"beta1", a.beta1}, {"beta2", a.beta2}, {"beta1_t", a.beta1_t}, {"beta2_t", a.beta2_t}}}};
}

void FlatOptimizer::load_state_json(const nlohmann::json& j) {
  const nlohmann::json& a = j.at("adam");
  restore_counters(j.at("step"), {a.at("step"), a.at("beta1"), a.at("beta2"), a.at("beta1_t"), a.at("beta2_t")});
}

}  // namespace ds::zero
