// Activation checkpointing over a LayerList (reference §12; docs/activation_checkpointing.md).
// Installed as the list's LayerRunner, it cuts the layers into segments; each segment's forward runs
// without an autograd graph and keeps only the segment's input, and backward recomputes the
// segment with grad enabled and backpropagates through it (DeepSpeed's reentrant
// checkpoint(), with the LayerList as the unit instead of user-chosen functions).
//
// How it composes with the rest:
//  - Parameters are inputs of the segment's autograd function (resolved from the model's
//    named_parameters() by the layers' param_names), and their gradients are its outputs. So each
//    parameter's AccumulateGrad fires once per backward, after every use, exactly as without
//    checkpointing: a tied weight used by two segments (GPT-2's wte in "embed" and "head") gets
//    one summed gradient, which ZeRO's gradient buckets require (a second arrival would be
//    "a gradient arrived twice"). Recapturing them inside the recompute would fire it per segment.
//  - LayerHooks: the segment's forward calls before_forward(i)/after_forward(i) around each layer
//    as usual, inside a BackwardFollowsScope: stage 3 keeps for backward what its
//    stage3_max_reuse_distance keeps without checkpointing. wrap_output(i) of every layer of the
//    segment is applied to the segment's output, in layer order, so in backward their functions run
//    (last layer first) before the recompute: stage 3 thereby gathers every parameter of the segment
//    the forward released before it is recomputed (with the default distance: none). The
//    recompute itself calls no hooks: after_forward would release parameters the recomputed
//    graph still needs, and before_forward would restart the coordinator's fetch-order record.
//  - RNG: the default CPU generator's state (and the device's, for CUDA inputs) is saved before a
//    segment runs and restored around its recompute, so dropout draws the same mask.
// Not supported: create_graph (double backward) through a checkpointed segment.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/activation_checkpointing_config.h"
#include "nn/layer_list.h"

namespace ds {
struct Config;
}

namespace ds::nn {

// Layers [begin, end) of a list, checkpointed as one unit (one saved input).
struct CheckpointSegment {
  std::size_t begin = 0;
  std::size_t end = 0;
};

// `number_checkpoints` unset, or ≥ num_layers: one segment per layer. Otherwise that many
// contiguous segments whose sizes differ by at most one, the larger ones first
// (10 layers, 4 checkpoints → 3, 3, 2, 2). Throws ds::ConfigError for a value < 1.
std::vector<CheckpointSegment> checkpoint_segments(std::size_t num_layers,
                                                   std::optional<int64_t> number_checkpoints);

struct CheckpointStats {
  int64_t forwards = 0;            // checkpointed segment forwards run
  int64_t recomputes = 0;          // segment recomputes run in backward
  double recompute_seconds = 0.0;  // their total time (forward recompute only)
  double backward_seconds = 0.0;   // time backpropagating through the recomputed segments
  int64_t saved_bytes = 0;         // bytes of segment inputs kept by the latest forward
};

class ActivationCheckpointing final : public LayerRunner {
 public:
  // Resolves each layer's param_names in model.named_parameters(); throws ds::Error for a name the
  // model does not have. `layers` fixes the segmentation; run() requires a list of the same size.
  ActivationCheckpointing(const ActivationCheckpointingConfig& config, const LayerList& layers,
                          const torch::nn::Module& model);

  // LayerRunner: without grad mode (evaluation) runs the layers in place, saving nothing.
  torch::Tensor run(const LayerList& list, const torch::Tensor& x) override;

  const std::vector<CheckpointSegment>& segments() const noexcept { return segments_; }
  const CheckpointStats& stats() const noexcept { return stats_; }
  const ActivationCheckpointingConfig& config() const noexcept { return config_; }

  // Used by the segment's autograd function (activation_checkpointing.cpp).
  torch::Tensor run_segment_forward(const LayerList& list, std::size_t segment, const torch::Tensor& x);
  torch::Tensor recompute(const LayerList& list, std::size_t segment, const torch::Tensor& x);
  torch::Tensor stash(const torch::Tensor& x) const;
  void record_backward(std::size_t segment, double recompute_s, double backward_s);
  std::string describe(std::size_t segment) const;  // "segment 1 (layers h.0..h.1)"

 private:
  std::vector<torch::Tensor> trainable_params(std::size_t segment) const;
  void synchronize(const torch::Tensor& x) const;

  ActivationCheckpointingConfig config_;
  std::vector<CheckpointSegment> segments_;
  std::vector<std::vector<torch::Tensor>> segment_params_;  // each parameter once per segment
  std::vector<std::string> layer_names_;
  std::size_t num_layers_ = 0;
  CheckpointStats stats_;
};

// Builds an ActivationCheckpointing for `layers` and installs it as their runner (replacing any
// runner); returns it for its stats. layers.set_runner(nullptr) turns checkpointing off again.
// The runner must outlive any backward pending on a forward it ran (the list holds it).
std::shared_ptr<ActivationCheckpointing> apply_activation_checkpointing(
    LayerList& layers, const torch::nn::Module& model, const ActivationCheckpointingConfig& config);

// Whether the config file wrote an "activation_checkpointing" section with at least one key
// (read from Config::resolved): the engine's rule for turning checkpointing on.
bool activation_checkpointing_requested(const Config& config);

}  // namespace ds::nn
