// The vocabulary split over a tensor-parallel group (Megatron-LM's VocabParallelEmbedding and
// vocab_parallel_cross_entropy; deepspeed.cpp's "tensor_parallel": {"vocab_parallel": true}): each
// rank keeps a range of the embedding's rows, looks up only the tokens in it, and — with the LM head
// tied to the embedding — computes only its range's logits. The cross-entropy then needs three
// small all-reduces per token (max, sum of exponentials, target logit), so no rank ever holds the
// [tokens, vocab] logits, nor the whole embedding and its gradient and optimizer states.
// Ranges are whole rows, uneven where they must be (parallel/vocab_range.h).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "parallel/vocab_range.h"

namespace ds::parallel {

// The group a model's embedding and head are split over, shared by the model's layers (set once by
// the engine before the first forward). Empty = the vocabulary is replicated.
struct VocabGroup {
  comm::Communicator* comm = nullptr;
  VocabRange range;
  bool active() const noexcept { return comm != nullptr && comm->size() > 1; }
};
using VocabGroupSlot = std::shared_ptr<VocabGroup>;

// A model whose token embedding (and the LM head tied to it) can be split by rows. The engine calls
// enable_vocab_parallel after AutoTP's cut when tensor_parallel.vocab_parallel is true and refuses
// (ConfigError naming the key) a model that is not one.
class VocabParallelModel {
 public:
  virtual ~VocabParallelModel() = default;
  // Keeps this rank's rows of the embedding (in place: the parameter keeps its name) and from the next
  // forward on computes only their logits; returns the embedding parameter's name and row count.
  struct Cut {
    std::string parameter;
    int64_t rows = 0;
  };
  virtual Cut enable_vocab_parallel(comm::Communicator& tp) = 0;
};

// The embedding of `ids` [..] given this rank's rows `weight` [range.size(), C]: ids outside the range
// give zeros here and their owner's row after the sum over the group (all-reduce forward, identity
// backward: each rank's rows get the gradient of their own tokens).
torch::Tensor vocab_parallel_embedding(const torch::Tensor& ids, const torch::Tensor& weight, VocabRange range,
                                       comm::Communicator& tp);

// The summed cross-entropy of logits split along the vocabulary — this rank's columns `logits`
// [N, range.size()] (any float dtype; fp32 arithmetic) — against `targets` int64 [N] (-100 ignored):
// the same value on every rank of the group; its gradient is softmax − one-hot on this rank's
// columns, with no backward collective. Divide by the counted targets for the mean.
torch::Tensor vocab_parallel_cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& targets,
                                               VocabRange range, comm::Communicator& tp);

}  // namespace ds::parallel
