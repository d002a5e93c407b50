// The four crossings between replicated and tensor-parallel regions (Megatron-LM's f, g and their
// gather/scatter forms, which DeepSpeed's AutoTP layers use), as autograd functions over the
// tensor-parallel group. Each is the identity when the group has one rank.
#pragma once

#include <torch/torch.h>

#include "comm/communicator.h"

namespace ds::parallel {

// Identity forward; all-reduce (sum) of the gradient backward: the input of a column-parallel layer,
// which every rank reads whole and each rank's slice contributes gradient to.
torch::Tensor copy_to_tp_region(const torch::Tensor& x, comm::Communicator& tp);

// All-reduce (sum) forward; identity backward: the output of a row-parallel layer.
torch::Tensor reduce_from_tp_region(const torch::Tensor& x, comm::Communicator& tp);

// This rank's slice of the last dimension forward; all-gather of the gradient backward.
torch::Tensor scatter_to_tp_region(const torch::Tensor& x, comm::Communicator& tp);

// All-gather along the last dimension (rank order) forward; this rank's slice of the gradient backward.
torch::Tensor gather_from_tp_region(const torch::Tensor& x, comm::Communicator& tp);

}  // namespace ds::parallel
