// Constructor checks the optimizers share: a negative hyperparameter is a ConfigError naming the
// key, as torch.optim's constructors raise ValueError.
#pragma once

#include <string>

#include "util/error.h"

namespace ds::optim {

// Throws ConfigError("optimizer.params.<key>") unless v >= 0 (NaN fails too).
inline void require_non_negative(double v, const char* key, const char* what, const char* optimizer) {
  if (!(v >= 0.0)) {
    throw ConfigError(std::string("optimizer.params.") + key,
                      std::string("invalid ") + what + " " + std::to_string(v) + " for " + optimizer +
                          " (torch.optim." + optimizer + " requires >= 0)");
  }
}

}  // namespace ds::optim
