// tensor_parallel.tp_overlap_comm (DeepSpeed's TPTrainingConfig): a column-parallel linear layer whose
// backward all-reduces the input gradient while it computes the weight and bias gradients, instead of
// after them. Each rank's column slice contributes a partial input gradient that the group must sum
// (copy_to_tp_region's backward); the weight gradient does not need that sum, so the all-reduce runs
// on the communicator's thread during the weight-gradient product. Same values as
// linear(copy_to_tp_region(x), w, b).
#pragma once

#include <torch/torch.h>

#include "comm/communicator.h"

namespace ds::parallel {

// y = x·wᵀ + b (b may be undefined) for x read whole by every rank of `tp` and w this rank's rows;
// backward: the input gradient's all-reduce overlaps the weight-gradient product. Saves x and w itself
// (not a view: a ZeRO-3 gathered copy is read again in backward, as nn::memory_efficient_linear).
torch::Tensor column_parallel_linear_overlapped(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                                comm::Communicator& tp);

}  // namespace ds::parallel
