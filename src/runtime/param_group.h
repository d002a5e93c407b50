// A user param group (ds::initialize's third argument), without the machinery that resolves it.
#pragma once

#include <ATen/core/Tensor.h>

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
  // The 1-bit optimizers only (OneBitAdam, ZeroOneAdam, OneBitLamb; DeepSpeed's
  // param_group["exp_avg_mask"]): after every compressed exchange each parameter's momentum is
  // multiplied by it, so masked elements (a position embedding's rows the data never reaches) take
  // no step. The shape of every parameter of the group; undefined: none.
  at::Tensor exp_avg_mask{};
};

}  // namespace ds
