// TpLinear: a torch Linear that AutoTP can cut into a tensor-parallel slice in place (the model's
// code does not change; only the layer's weight and forward do). Each rank keeps a slice:
//   column-parallel: rows of W (output features) — the input is read whole (copy_to_tp_region), the
//     output stays split unless gather_output; GPT-2's fused c_attn and Llama's q/k/v/gate/up;
//   row-parallel: columns of W (input features) — the input arrives split, the partial outputs are
//     summed over the group (reduce_from_tp_region) and the bias, replicated, is added once;
//     attention's output projection and the MLP's down projection.
// A column layer followed by a row layer costs one all-reduce forward and one backward. Unsharded,
// TpLinear is exactly torch::nn::Linear (same parameters, names and forward). Every projection of
// the built-in model families is one (models::LoraLinear derives from it); a user's own module gets
// AutoTP by declaring its projections as ds::parallel::TpLinear.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "comm/communicator.h"

namespace ds::parallel {

enum class TpSplit : uint8_t { None, Column, Row };

struct ColumnParallelOptions {
  std::string name;            // the layer's dotted name, for errors
  int64_t parts = 1;           // equal blocks fused along the output (3 for GPT-2's q|k|v), each split
  bool gather_output = false;  // all-gather the output back to full width (parts == 1 only)
};

struct RowParallelOptions {
  std::string name;
  bool input_is_parallel = true;  // false: the input is full width and each rank takes its slice
};

class TpLinearImpl : public torch::nn::LinearImpl {
 public:
  using torch::nn::LinearImpl::LinearImpl;
  TpLinearImpl(int64_t in, int64_t out, bool bias = true);

  // Keep rank r's slice of every one of the `parts` output blocks (whole heads per rank when a block
  // is heads x head_dim and the heads divide). The registered parameters keep their identity (their
  // data is replaced), so module.named_parameters() names the slices as it named the full tensors.
  // ConfigError naming tensor_parallel.autotp_size and the layer when a size does not divide.
  void shard_columns(comm::Communicator& tp, ColumnParallelOptions options);
  // Keep rank r's slice of the input features; the bias stays whole (added after the sum).
  void shard_rows(comm::Communicator& tp, RowParallelOptions options);

  torch::Tensor forward(const torch::Tensor& x);

  TpSplit split() const noexcept { return split_; }
  // The width a slice must hold whole: an attention projection sets its head size, so every rank
  // gets whole heads (q, k, v and the output projection's input). 1 = any row.
  void set_shard_unit(int64_t unit) { shard_unit_ = unit; }
  int64_t shard_unit() const noexcept { return shard_unit_; }
  // ZeRO stage 3 (zero_optimization.memory_efficient_linear): compute through
  // nn::memory_efficient_linear, whose backward reads the weight as re-gathered instead of pinning
  // the forward's copy. Same values either way.
  void set_memory_efficient(bool on) noexcept { memory_efficient_ = on; }
  bool memory_efficient() const noexcept { return memory_efficient_; }
  // tensor_parallel.tp_overlap_comm (column layers): backward all-reduces the input gradient while it
  // computes the weight gradient (parallel/tp_overlap.h). Same values either way.
  void set_overlap_comm(bool on) noexcept { overlap_comm_ = on; }
  bool overlap_comm() const noexcept { return overlap_comm_; }

 private:
  comm::Communicator* tp_ = nullptr;
  TpSplit split_ = TpSplit::None;
  int64_t parts_ = 1;
  bool gather_output_ = false;
  bool input_is_parallel_ = true;
  int64_t shard_unit_ = 1;
  bool memory_efficient_ = false;
  bool overlap_comm_ = false;

  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& b) const;
};
TORCH_MODULE(TpLinear);

// A column- / row-parallel layer cut from a copy of `full` (which is left unchanged).
TpLinear column_parallel(const torch::nn::Linear& full, comm::Communicator& tp, ColumnParallelOptions options = {});
TpLinear row_parallel(const torch::nn::Linear& full, comm::Communicator& tp, RowParallelOptions options = {});

// Rows [rank's slice of each of `parts` blocks] of a [n, ...] tensor split over `world` ranks, each
// slice whole `unit`s (heads); ConfigError naming `name` and `what` when n does not divide so.
torch::Tensor column_slice(const torch::Tensor& t, int64_t parts, int world, int rank, const std::string& name,
                           const char* what, int64_t unit = 1);

}  // namespace ds::parallel
