// AutoTP for training (DeepSpeed 0.16.4+'s "tensor_parallel": {"autotp_size": N}): the model's
// projection layers are cut into tensor-parallel slices by name, the model's code unchanged.
//
// A policy maps a layer's dotted name (its last component) to a split: the built-in one covers the
// families deepspeed.cpp ships, as DeepSpeed's AutoTP splits them —
//   GPT-2: attn.c_attn column (q|k|v fused: whole heads per rank), mlp.c_fc column, both c_proj row;
//   Llama family: q/k/v/gate/up_proj column, o_proj and down_proj row (GQA: the kv heads split too,
//     so autotp_size must divide num_key_value_heads);
//   OPT: q/k/v_proj and fc1 column, out_proj and fc2 row.
// Everything else (embeddings, norms, the LM head) stays replicated on every rank of the group.
// Only ds::parallel::TpLinear layers (the built-in families' projections) can be cut: a plain
// torch::nn::Linear that a rule names is an error naming it, never a silently replicated layer.
#pragma once

#include <torch/torch.h>

#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "parallel/tp_linear.h"
#include "precision/gradient_spans.h"

namespace ds::parallel {

// Layers whose name's last component is `leaf` split this way (`parts` fused output blocks).
struct TpRule {
  std::string leaf;
  TpSplit split = TpSplit::Column;
  int64_t parts = 1;
};

struct TpPolicy {
  std::vector<TpRule> rules;
  // GPT-2, the Llama family and OPT (above).
  static TpPolicy builtin();
  const TpRule* match(const std::string& layer_name) const;
};

// One parameter AutoTP cut, and how (to put the full tensor back together).
struct SplitParameter {
  std::string name;
  TpSplit split = TpSplit::Column;  // Column: rows of the weight (and the bias); Row: columns of the weight
  int64_t parts = 1;                // fused output blocks (column)
  // > 0: rows of a table of this many rows in uneven whole-row ranges (vocab_range: the vocab-parallel
  // embedding), instead of equal slices.
  int64_t full_rows = 0;
};

// What apply_auto_tp did, kept by the engine for every step.
struct AutoTpResult {
  comm::Communicator* tp = nullptr;
  // The parameters that differ across the tensor-parallel group (the weights of split layers, the
  // biases of column ones), sorted by name: the gradient norm sums them over the group and counts
  // every other parameter once.
  std::vector<SplitParameter> split_parameters;
  int column_layers = 0;
  int row_layers = 0;

  const SplitParameter* find(std::string_view parameter) const;
  bool is_split(std::string_view parameter) const { return find(parameter) != nullptr; }
  // Sets grads.tp and marks the pieces of split parameters (for the norm and the inf/NaN check).
  void annotate(precision::GradientSpans& grads) const;
  // Records a parameter cut by rows into vocab_range()s of `rows` (the vocab-parallel embedding).
  void add_row_ranges(std::string parameter, int64_t rows);
  // The whole tensor of `parameter` given this rank's slice `local`: all-gathered over the group
  // (collective: every rank of the group calls it for the same names in the same order) and put
  // back in the layout the model had before the cut. `local` itself when the parameter is not split.
  torch::Tensor gather_full(const std::string& parameter, const torch::Tensor& local) const;
  std::string summary() const;  // "4 column-parallel and 4 row-parallel layers, 12 split parameters"

  // Checkpoints hold whole tensors (loadable at any TP size, ds-zero-to-fp32 unchanged): these map a
  // rank's slice onto its parameter's whole tensor. The whole shape of `parameter` given this rank's
  // slice's shape (`local` itself when not split).
  std::vector<int64_t> full_shape(std::string_view parameter, torch::IntArrayRef local) const;
  // Elements [offset, offset + n) of this rank's flattened slice as runs of the whole flattened
  // tensor, in order: a column slice breaks at fused-block boundaries, a row slice at every row.
  struct Run {
    int64_t local_offset = 0;  // into the flattened slice
    int64_t full_offset = 0;   // into the flattened whole tensor
    int64_t numel = 0;
  };
  std::vector<Run> full_runs(std::string_view parameter, torch::IntArrayRef local, int64_t offset, int64_t n) const;
  // This rank's position in the tensor-parallel group (0 without one): replicated parameters are
  // written to checkpoints by group rank 0 only.
  int tp_rank() const { return tp == nullptr ? 0 : tp->rank(); }
};

// Collective over `tp`: first every parameter and buffer of `module` is broadcast from the group's
// rank 0 (the slices are cut from one model), then each layer the policy names is sharded in place.
// ConfigError naming tensor_parallel.autotp_size when no layer matches or a size does not divide;
// NotSupported for a matching plain torch::nn::Linear or a layer carrying a LoRA adapter.
// `overlap_comm` (tensor_parallel.tp_overlap_comm): column layers overlap their backward all-reduce
// with the weight gradient.
AutoTpResult apply_auto_tp(torch::nn::Module& module, comm::Communicator& tp,
                           const TpPolicy& policy = TpPolicy::builtin(), bool overlap_comm = false);

}  // namespace ds::parallel
