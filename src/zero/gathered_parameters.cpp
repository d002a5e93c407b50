#include "zero/gathered_parameters.h"

#include "zero/model_states.h"

namespace ds::zero {

GatheredParameters::GatheredParameters(ModelStates& states, std::vector<std::string> names)
    : states_(states), names_(std::move(names)) {
  states_.hold(names_);
}

GatheredParameters::~GatheredParameters() {
  try {
    states_.unhold(names_);
  } catch (...) {  // destructors never throw; release failures leave parameters gathered (memory only)
  }
}

}  // namespace ds::zero
