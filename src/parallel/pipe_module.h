// PipelineModule: one pipeline stage of a model, cut from the model's LayerList (DeepSpeed's
// PipelineModule over a layer list). The layers are partitioned over `pipe` stages with DeepSpeed's
// arithmetic (pipe_partition.h); this rank keeps the layers of its stage and registers their
// modules under the model's own names ("transformer.h.3.attn.c_attn.weight"), so its checkpoints,
// exports and ZeRO partitions speak the whole model's names; the other layers' parameters are
// released. A parameter used by layers on several stages (GPT-2's wte: the embedding on the first
// stage, the output projection on the last) is a tied parameter: every stage that uses it holds a
// copy, made equal at construction and kept equal by summing its gradient over those stages before
// each step (DeepSpeed's TiedLayerSpec and ReduceTiedGrads).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "comm/communicator.h"
#include "nn/layer_list.h"
#include "nn/placeholder.h"
#include "parallel/layer_spec.h"
#include "parallel/topology.h"

namespace ds::parallel {

// (outputs of the last stage, labels) -> scalar loss: DeepSpeed's PipelineModule(loss_fn=...).
using PipeLossFn = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>;
// Hands a micro-batch's side tensors (ds::PipeBatch::side) to the stage's layers before each of that
// micro-batch's passes (its forward, its backward: recomputation reads them again).
using PipeSideInputsFn = std::function<void(const std::vector<torch::Tensor>&)>;

struct PipelineModuleOptions {
  // "parameters" (DeepSpeed's default), "uniform", or "type:<regex>" over the layer names.
  std::string partition_method = "parameters";
  PipeLossFn loss_fn;  // needed on the last stage to train
  PipeSideInputsFn use_side_inputs{};  // needed when the batches carry side tensors
  // > 0: the stage's layers run as activation-checkpointed segments of at most this many layers
  // (DeepSpeed's activation_checkpoint_interval; the segments are balanced, each input saved once).
  int activation_checkpoint_interval = 0;
  // The LayerSpec constructor's seed_layers / base_seed (layer_spec.h).
  LayerSeeds seeds{};
};

// A trainable parameter several stages hold copies of (frozen ones are made equal at construction
// and need nothing after).
struct TiedParameter {
  std::string name;
  std::vector<int> stages;                     // ascending; the first owns it in the gradient norm
  std::shared_ptr<comm::Communicator> group;   // this rank's copies' group (null when not held here)
  bool counts_in_norm = false;                 // this rank is the group's first stage
};

// A model built with only the layers of a selection materialised (nn/placeholder.h), and its LayerList.
struct BuiltModel {
  std::shared_ptr<torch::nn::Module> model;
  nn::LayerList* layers = nullptr;  // the model's own
};
// Builds the model with the layers `selection` names (the built-in models' LayerSelection
// constructors, models::from_pretrained with PretrainedOptions::selection).
using ModelBuilder = std::function<BuiltModel(const nn::LayerSelection& selection)>;

class PipelineModule : public torch::nn::Module {
 public:
  // Collective over topology->world(): every rank constructs it at the same point, from the same
  // model (one split per group of stages that share a parameter, one broadcast per tied parameter).
  // `layers` belongs to `model`. Throws ConfigError naming `pipeline.stages` when there are fewer
  // layers than stages, `pipeline.partition` for a bad method.
  PipelineModule(std::shared_ptr<torch::nn::Module> model, const nn::LayerList& layers,
                 std::shared_ptr<Topology> topology, PipelineModuleOptions options = {});
  // From layer specs (DeepSpeed's PipelineModule(layers=[LayerSpec(...), ...])): this rank builds
  // only its stage's layers; model() holds just those. The same errors, and ConfigError naming
  // `pipeline.layers` for a bad spec (check_layer_specs).
  PipelineModule(const std::vector<LayerSpec>& specs, std::shared_ptr<Topology> topology,
                 PipelineModuleOptions options = {});
  // From a builder: no rank holds the whole model. It is built twice: with no layer materialised
  // (the layers' names and shapes for the partition; torch's global generator put back after it), then
  // with this stage's layers, whose values are then those of the whole model built the same way. The
  // same errors as the first constructor.
  PipelineModule(const ModelBuilder& build, std::shared_ptr<Topology> topology, PipelineModuleOptions options = {});

  int num_stages() const noexcept { return int(parts_.size()) - 1; }
  int stage_id() const noexcept { return stage_; }
  bool is_first_stage() const noexcept { return stage_ == 0; }
  bool is_last_stage() const noexcept { return stage_ == num_stages() - 1; }
  // DeepSpeed's `parts`: stage s runs layers [parts[s], parts[s + 1]).
  const std::vector<int>& parts() const noexcept { return parts_; }
  const Topology& topology() const noexcept { return *topology_; }
  // The whole model the stage was cut from (its other stages' parameters released; from specs, the
  // stage's layers only): what Ulysses is enabled on, since its attention code is the model's.
  torch::nn::Module& model() noexcept { return *model_; }
  std::shared_ptr<Topology> shared_topology() const noexcept { return topology_; }

  // This stage's layers, in order: the first stage takes the model's input, the others the
  // previous stage's output.
  torch::Tensor forward(const torch::Tensor& x);
  // Those layers as a list of their own (what activation checkpointing and the engine walk).
  nn::LayerList& stage_layers() noexcept { return stage_layers_; }
  // loss_fn(outputs, labels); ds::Error when no loss_fn was given.
  torch::Tensor loss(const torch::Tensor& outputs, const torch::Tensor& labels) const;
  bool has_loss_fn() const noexcept { return static_cast<bool>(options_.loss_fn); }
  // use_side_inputs(side); ds::Error when side is not empty and no use_side_inputs was given.
  void use_side_inputs(const std::vector<torch::Tensor>& side) const;

  const std::vector<TiedParameter>& tied() const noexcept { return tied_; }
  // Names of this stage's parameters (every layer's, each once), in first-use order.
  const std::vector<std::string>& stage_parameter_names() const noexcept { return names_; }
  // "stage 0: layers 0-2 (embed .. h.1), 12.3k parameters" for each stage.
  std::string describe_partition() const;

 private:
  // Every layer's trainable elements in model_ (placeholders counted at their shapes).
  std::vector<int64_t> count_trainable();
  // The cut of every layer's trainable elements into stages (parts_), checked.
  void partition(std::vector<int64_t> layer_trainable);
  // This stage's layers, modules and tied parameters, once model_ and layers_ are set.
  void take_stage();
  void register_stage_modules();
  void find_tied_parameters();
  void release_other_stages();

  std::shared_ptr<torch::nn::Module> model_;
  const nn::LayerList* layers_;
  std::shared_ptr<Topology> topology_;
  PipelineModuleOptions options_;
  int stage_ = 0;
  std::vector<int> parts_;
  std::vector<int64_t> layer_params_;  // per layer of the whole model
  std::unordered_set<std::string> trainable_names_;  // of the whole model
  nn::LayerList spec_layers_;          // from specs: every layer (layers_ points here)
  std::vector<std::string> names_;
  std::vector<TiedParameter> tied_;
  nn::LayerList stage_layers_;
  std::shared_ptr<nn::LayerRunner> checkpointing_;  // activation_checkpoint_interval's runner
};

}  // namespace ds::parallel
