// The model's trainable parameters as the engine hands them to the ZeRO stage: in model order, each
// distinct tensor once (a shared one under its first name), each with its param group.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "runtime/param_group.h"
#include "util/memory_ledger.h"
#include "zero/flat_params.h"

namespace ds {

// Throws ConfigError("param_groups", ...) naming a parameter listed twice, one in no group, or a
// name that is not a parameter; Error when nothing is trainable. Frozen parameters are recorded in
// `ledger` (they stay whole on the device).
std::vector<zero::NamedParam> collect_trainable_params(torch::nn::Module& module, const std::vector<ParamGroup>& groups,
                                                       MemoryLedger& ledger);

}  // namespace ds
