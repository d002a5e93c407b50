// Data parallelism over a Communicator for ZeRO stage 0: replicated parameters broadcast from
// rank 0 at start, and the accumulated gradients averaged across ranks at each accumulation
// boundary in the communication dtype, in buckets of reduce_bucket_size elements (reference §3).
#pragma once

#include <torch/torch.h>

#include "comm/communicator.h"
#include "config/config.h"
#include "util/memory_ledger.h"
#include "zero/precision_buffers.h"

namespace ds {

// The comm layer's view of a contiguous CPU tensor.
comm::Buffer as_buffer(torch::Tensor& t);

// Makes every rank's parameters (storage, compute copy) and module buffers equal to rank 0's.
void broadcast_model(comm::Communicator& comm, torch::nn::Module& module, zero::PrecisionBuffers& precision,
                     size_t num_groups);

// Averages group gradients across ranks in place (DeepSpeed's postscale/prescale arithmetic).
void allreduce_gradients(comm::Communicator& comm, const Config& config, torch::ScalarType communication_dtype,
                         zero::PrecisionBuffers& precision, size_t num_groups);

}  // namespace ds
