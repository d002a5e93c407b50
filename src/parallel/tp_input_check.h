// DeepSpeed's data-loader contract under tensor parallelism: every rank of a tensor-parallel group
// computes on the same batch (each holds a slice of the same layers); under Ulysses as deepspeed.cpp
// runs it, every rank of a sequence group too (each keeps its block of the tokens). A loader that
// shards by world rank instead of data-parallel rank breaks it silently: every layer would mix two
// batches' activations. The engine checks each forward's tensor arguments with one small all-reduce.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "comm/communicator.h"

namespace ds::parallel {

// Which group is checked, for the message: its config key and what it is called.
struct GroupKind {
  const char* key = "tensor_parallel.autotp_size";
  const char* name = "tensor-parallel";
};
inline constexpr GroupKind kSequenceGroup{"sequence_parallel_size", "sequence-parallel"};

// Collective over `group` (nothing at one rank). Throws ds::Error on every rank of the group, naming
// the argument, when its shape or bytes differ between ranks.
void check_same_inputs(comm::Communicator& group, const std::vector<torch::Tensor>& inputs, const GroupKind& kind = {});

}  // namespace ds::parallel
