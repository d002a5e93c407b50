// A communicator carried through an autograd function's context: autograd keeps non-tensor state
// as IValues, so the group travels as its address (every group outlives the steps that use it).
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "comm/communicator.h"

namespace ds::parallel {

inline void save_group(torch::autograd::AutogradContext* ctx, comm::Communicator& group) {
  ctx->saved_data["group"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(&group));
}

inline comm::Communicator& saved_group(torch::autograd::AutogradContext* ctx) {
  return *reinterpret_cast<comm::Communicator*>(static_cast<intptr_t>(ctx->saved_data["group"].toInt()));
}

}  // namespace ds::parallel
