// The comm layer's view of a contiguous CPU tensor (comm/ itself is torch-free), for every layer
// above that runs collectives on tensors: tensor-parallel layers, ZeRO.
#pragma once

#include <torch/torch.h>

#include "comm/types.h"

namespace ds::nn {

// NotSupported for a non-contiguous or non-CPU tensor, or a dtype with no wire type.
comm::Buffer as_buffer(const torch::Tensor& t);

}  // namespace ds::nn
