// Building param groups by parameter name, e.g. the usual "no weight decay on biases and norms".
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "runtime/param_group.h"

namespace ds {

// A rule: parameters whose dotted name contains any of `name_contains` form a group with these
// overrides. Rules are tried in order; the first match wins.
struct ParamGroupRule {
  std::vector<std::string> name_contains;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

// Groups every trainable parameter of `module`: one group per rule (in rule order, empty ones
// dropped), then a last group with no overrides for the parameters no rule matched.
std::vector<ParamGroup> param_groups_by_name(torch::nn::Module& module, const std::vector<ParamGroupRule>& rules);

// The common split: biases and normalisation weights (names containing "bias", "ln_", "norm",
// "LayerNorm" by default) get weight_decay 0; everything else keeps the optimizer's.
std::vector<ParamGroup> no_decay_param_groups(torch::nn::Module& module,
                                              std::vector<std::string> no_decay = {"bias", "ln_", "norm",
                                                                                   "LayerNorm"});

}  // namespace ds
