// A user param group (ds::initialize's third argument), without the machinery that resolves it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ds {

// The dotted names a group holds and what it overrides. Every trainable parameter must be in
// exactly one group when groups are given (else a ConfigError names it).
struct ParamGroup {
  std::vector<std::string> params;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

}  // namespace ds
