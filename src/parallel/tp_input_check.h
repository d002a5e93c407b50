// DeepSpeed's data-loader contract under tensor parallelism: every rank of a tensor-parallel group
// computes on the same batch (each holds a slice of the same layers). A loader that shards by
// world rank instead of data-parallel rank breaks it silently: every layer would mix two batches'
// activations. The engine checks each forward's tensor arguments with one small all-reduce.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "comm/communicator.h"

namespace ds::parallel {

// Collective over `tp` (nothing at one rank). Throws ds::Error on every rank of the group, naming the
// argument, when its shape or bytes differ between ranks.
void check_same_inputs(comm::Communicator& tp, const std::vector<torch::Tensor>& inputs);

}  // namespace ds::parallel
