// Ulysses sequence parallelism (DeepSpeed's "sequence_parallel_size": N, DistributedAttention):
// each rank of a sequence group holds T/N consecutive tokens of every sequence. Everything outside
// attention is per-token, so it runs on the local tokens unchanged; attention needs every token, so
// q, k and v go through an all-to-all from sequence-sharded [B,H,T/N,D] to head-sharded
// [B,H/N,T,D], attention runs over the whole sequence for H/N heads, and its output goes back by
// the inverse all-to-all. The loss is the mean over every token of the group's sequences.
//
// The pieces here are what a model calls; models/ (GPT-2) uses them when the engine enables
// sequence parallelism on it (SequenceParallelModel below). Each is the identity on a one-rank group.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.h"

namespace ds::parallel {

// The sequence group a model's layers run over, shared by the model and its attention layers (set
// once by the engine, before the first forward). Empty = no sequence parallelism.
struct SequenceGroup {
  comm::Communicator* comm = nullptr;
  bool active() const noexcept { return comm != nullptr && comm->size() > 1; }
};
using SequenceGroupSlot = std::shared_ptr<SequenceGroup>;

// A model whose attention can run as DistributedAttention. The engine calls enable_sequence_parallel
// when sequence_parallel_size > 1 and refuses (ConfigError naming the key) a model that is not one.
class SequenceParallelModel {
 public:
  virtual ~SequenceParallelModel() = default;
  // From the next forward on, every rank of `sp` is given the same whole batch and computes its
  // 1/sp.size() of each sequence; the loss forward returns is the group's mean over all tokens.
  // ConfigError naming sequence_parallel_size when the model's heads do not split over the group.
  virtual void enable_sequence_parallel(comm::Communicator& sp) = 0;
};

// This rank's block of `dim` (rank r of N holds [r·T/N, (r+1)·T/N)): a view, differentiable.
// ConfigError naming sequence_parallel_size when T is not a multiple of N.
torch::Tensor shard_sequence(const torch::Tensor& x, comm::Communicator& sp, int64_t dim = 1);

// The global positions of this rank's tokens of a length-t sequence: int64 [t/N] on `device`.
torch::Tensor sequence_positions(int64_t t, comm::Communicator& sp, torch::Device device);

// DistributedAttention's first all-to-all: [B,H,T/N,D] (this rank's tokens, every head) →
// [B,H/N,T,D] (every token, this rank's heads: rank r gets heads [r·H/N, (r+1)·H/N)). Its backward
// is the inverse all-to-all. ConfigError naming sequence_parallel_size when H is not a multiple of N.
torch::Tensor sequence_to_heads(const torch::Tensor& x, comm::Communicator& sp);

// The inverse: [B,H/N,T,D] → [B,H,T/N,D].
torch::Tensor heads_to_sequence(const torch::Tensor& x, comm::Communicator& sp);

// The loss over a sequence-sharded batch: `local_sum` is the summed token losses of this rank's
// tokens and `local_count` how many it counted. The value returned is the group's mean over every
// token (sum / count over the group; the same on every rank); its gradient is that of
// N·local_sum / group count, so averaging the gradients over the sequence group (ZeRO averages over
// data x sequence, as DeepSpeed's sequence-data-parallel group does) gives the gradient of that mean.
torch::Tensor sequence_parallel_mean(const torch::Tensor& local_sum, int64_t local_count, comm::Communicator& sp);

}  // namespace ds::parallel
