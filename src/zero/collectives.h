// Tensor-level collectives for the ZeRO stages, over a Communicator and contiguous CPU tensors:
// DeepSpeed's gradient averaging (reference §3) as all-reduce or reduce-scatter, and the
// start-of-training broadcast (the updated partitions' all-gathers: streamed_param_gather.h and
// overlapped_param_gather.h). Each respects its bucket size (elements) so temporary buffers stay
// bounded.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string_view>

#include "comm/communicator.h"
#include "nn/tensor_buffer.h"

namespace ds::zero {

using nn::as_buffer;  // the comm layer's view of a contiguous CPU tensor

// DeepSpeed's averaging knobs: gradient_predivide_factor and prescale_gradients.
struct Averaging {
  double predivide_factor = 1.0;
  bool prescale = false;
};

// t = average over ranks of t, in place, `bucket` elements per collective.
void allreduce_average(comm::Communicator& comm, const torch::Tensor& t, Averaging avg, int64_t bucket,
                       std::string_view tag);

// t holds world equal chunks; afterwards chunk rank() holds the average over ranks of that chunk
// (the other chunks are scratch). Buckets of at most `bucket` elements are packed rank by rank.
void reduce_scatter_average(comm::Communicator& comm, const torch::Tensor& t, Averaging avg, int64_t bucket,
                            std::string_view tag);

// The same as one collective, started now: returns the function that waits for it and applies
// the post-scaling. `t` is kept alive by the returned function.
std::function<void()> reduce_scatter_average_async(comm::Communicator& comm, torch::Tensor t, Averaging avg,
                                                   std::string_view tag);

// t on `root` = average over ranks of t (the others' t is scratch afterwards), started now (same
// contract as above): a bucket of gradients that one rank's partition holds whole.
std::function<void()> reduce_average_async(comm::Communicator& comm, torch::Tensor t, int root, Averaging avg,
                                           std::string_view tag);

// allreduce_average as one collective, started now (same contract as above).
std::function<void()> allreduce_average_async(comm::Communicator& comm, torch::Tensor t, Averaging avg,
                                              std::string_view tag);

// Makes `t` on every rank equal to rank 0's.
void broadcast_from_rank0(comm::Communicator& comm, const torch::Tensor& t, std::string_view tag);

}  // namespace ds::zero
