// Gradient reductions with DeepSpeed's arithmetic, over a Communicator and raw buffers.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "comm/communicator.h"

namespace ds::comm {

// DeepSpeed's data-parallel gradient averaging (engine.allreduce_bucket; reference §3), N = size():
//   postscale (prescale = false, the default): if predivide_factor != 1, grads *= 1/predivide_factor;
//     all_reduce(sum); if predivide_factor != N, grads *= predivide_factor / N.
//   prescale: grads *= 1/N; all_reduce(sum).
// Each multiply rounds like torch's tensor.mul_(float) (comm/kernels.h: scale_elements).
// `grads` is bf16, fp16, fp32 or fp64 (the communication data type). Throws ds::CommError if
// predivide_factor <= 0.
void average_gradients(Communicator& comm, Buffer grads, double predivide_factor = 1.0,
                       bool prescale = false, std::string_view tag = "average_gradients");

// DeepSpeed's reduce_scatter_coalesced (runtime/comm/coalesced_collectives.py; reference §16.19):
// each input i of n_i elements is cut into size() shards of ceil(n_i / size()) elements (the last
// ones shorter or empty); the shards are packed rank by rank, zero-padded, divided by size() and
// reduce-scattered, so outputs[i] on rank r receives the average over ranks of shard r of input i
// and must hold coalesced_shard_count(n_i, size(), r) elements. All buffers share one type.
void reduce_scatter_coalesced(Communicator& comm, std::span<const ConstBuffer> inputs,
                              std::span<const Buffer> outputs,
                              std::string_view tag = "reduce_scatter_coalesced");

// ceil(numel / world): the padded shard length of one input.
int64_t coalesced_shard_size(int64_t numel, int world) noexcept;
// The real (unpadded) elements of shard `rank`: clamp(numel - rank * shard_size, 0, shard_size).
int64_t coalesced_shard_count(int64_t numel, int world, int rank) noexcept;

}  // namespace ds::comm
