// Tensor-parallel linear layers made from a model's own torch::nn::Linear (AutoTP rewrites layers by
// name; the model is not changed). Each rank keeps a slice of the weight:
//   column-parallel: rows of W (output features) — the input is read whole (copy_to_tp_region), the
//     output stays split unless gather_output; GPT-2's fused c_attn and Llama's q/k/v/gate/up;
//   row-parallel: columns of W (input features) — the input arrives split, the partial outputs are
//     summed over the group (reduce_from_tp_region) and the bias, replicated, is added once;
//     attention's output projection and the MLP's down projection.
// A column layer followed by a row layer costs one all-reduce forward and one backward.
#pragma once

#include <torch/torch.h>

#include <string>

#include "comm/communicator.h"

namespace ds::parallel {

struct ColumnParallelOptions {
  std::string name;            // the layer's dotted name, for errors
  int64_t parts = 1;           // equal blocks fused along the output (3 for GPT-2's q|k|v), each split
  bool gather_output = false;  // all-gather the output back to full width (parts == 1 only)
};

struct RowParallelOptions {
  std::string name;
  bool input_is_parallel = true;  // false: the input is full width and each rank takes its slice
};

class ColumnParallelLinearImpl : public torch::nn::Module {
 public:
  // Rank r of `tp` keeps, of every one of the `parts` output blocks, slice r: whole heads per rank
  // when a block is heads x head_dim and the heads divide. Error naming the layer when they do not.
  ColumnParallelLinearImpl(const torch::nn::Linear& full, comm::Communicator& tp, ColumnParallelOptions options = {});
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight, bias;  // [out / tp, in], [out / tp] (bias undefined without one)

 private:
  comm::Communicator* tp_;
  ColumnParallelOptions options_;
};
TORCH_MODULE(ColumnParallelLinear);

class RowParallelLinearImpl : public torch::nn::Module {
 public:
  RowParallelLinearImpl(const torch::nn::Linear& full, comm::Communicator& tp, RowParallelOptions options = {});
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight, bias;  // [out, in / tp], [out] (replicated)

 private:
  comm::Communicator* tp_;
  RowParallelOptions options_;
};
TORCH_MODULE(RowParallelLinear);

// Rows [rank's slice of each of `parts` blocks] of a [n, ...] tensor split over `world` ranks; error
// naming `name` and `what` when n does not divide into parts x world.
torch::Tensor column_slice(const torch::Tensor& t, int64_t parts, int world, int rank, const std::string& name,
                           const char* what);

}  // namespace ds::parallel
