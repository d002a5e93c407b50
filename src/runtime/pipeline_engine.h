// ds::PipelineEngine: DeepSpeed's PipelineEngine. One stage of a PipelineModule per rank; each
// train_batch() runs gradient_accumulation_steps micro-batches through the pipe on DeepSpeed's 1F1B
// TrainSchedule (parallel/pipe_schedule.h), activations and their gradients crossing between
// neighbouring stages (parallel/pipe_channel.h), then sums tied gradients over the stages that share
// them and takes one optimizer step, with the overflow check and the clipping norm agreed over the
// whole pipe. ZeRO 0-1 across the data-parallel group of each stage; AutoTP inside a stage.
//
//   auto engine = ds::initialize_pipeline(model, "ds_config.json", {.loss_fn = ...});
//   for (...) double loss = engine.train_batch(next_micro_batch);  // same loss on every stage
//
// The data iterator is called only on the first stage (inputs, side tensors) and the last (labels),
// once per micro-batch; each data-parallel replica reads its own micro-batches (shard by
// topology().data()).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "nn/layer_list.h"
#include "parallel/pipe_module.h"
#include "runtime/engine.h"

namespace ds {
namespace parallel { class PipeChannels; struct PipeInstruction; }

// One micro-batch: the first stage's inputs, the last stage's labels, and side tensors every stage's
// layers need beside the activations (a packed row's document and position ids, at most
// PipeChannels::kMaxSideTensors): taken from the first stage's batch, they travel with its
// activations and reach PipelineModuleOptions::use_side_inputs on every stage before each of the
// micro-batch's passes.
struct PipeBatch {
  torch::Tensor inputs;
  torch::Tensor labels;
  std::vector<torch::Tensor> side{};
};
using PipeDataIterator = std::function<PipeBatch()>;

// Where the last batch's time went on this stage (wall clock): the rest of total_s is waiting on
// the neighbours (the pipeline's bubble) and the step.
struct PipeBatchTimes {
  double total_s = 0;    // the whole train_batch / eval_batch
  double compute_s = 0;  // forward and backward passes (the loss included)
  double step_s = 0;     // tied-gradient reduction and the optimizer step
};

class PipelineEngine : public Engine {
 public:
  // Collective over the stage's topology.
  PipelineEngine(std::shared_ptr<parallel::PipelineModule> module, Config config, EngineOptions options = {});
  PipelineEngine(PipelineEngine&&) noexcept;
  ~PipelineEngine() override;

  // One batch of gradient_accumulation_steps micro-batches and one optimizer step. Returns the
  // batch's mean loss, averaged over the data-parallel replicas (DeepSpeed's train_batch), on
  // every stage. Throws ds::Error when called between a forward() and its step.
  double train_batch(const PipeDataIterator& data);
  // The same micro-batches forward only (no gradients): the mean loss, as train_batch reports it.
  double eval_batch(const PipeDataIterator& data);

  parallel::PipelineModule& pipeline_module() { return *module_; }
  int stage_id() const { return module_->stage_id(); }
  int num_stages() const { return module_->num_stages(); }
  bool is_first_stage() const { return module_->is_first_stage(); }
  bool is_last_stage() const { return module_->is_last_stage(); }
  int micro_batches() const { return int(gradient_accumulation_steps()); }
  const PipeBatchTimes& last_batch_times() const { return times_; }

 protected:
  void annotate_gradients(precision::GradientSpans& grads) override;

 private:
  struct Buffers;
  void run(const PipeDataIterator& data, bool train);
  void follow_curriculum(bool train);
  void execute(const parallel::PipeInstruction& in, Buffers& b, const PipeDataIterator& data, bool train);
  void reduce_tied_gradients();
  double agree_loss(double replica_sum);

  std::shared_ptr<parallel::PipelineModule> module_;
  std::unique_ptr<parallel::PipeChannels> channels_;
  double last_loss_mean_ = 0;     // the last batch's loss, averaged over the data-parallel replicas
  double mean_replica_loss_ = 0;  // this replica's (the last stage's), what the engine logs
  PipeBatchTimes times_;
  int64_t shapes_difficulty_ = 0;  // the curriculum difficulty the channels' cached shapes are for
};

// ds::initialize for a pipeline: cuts `model` (whose LayerList is `layers()`) into
// `pipeline.stages` stages over the launcher's world and returns the engine of this rank's stage.
// Throws ds::Error when `layers` is null (the model exposes no LayerList).
PipelineEngine make_pipeline_engine(std::shared_ptr<torch::nn::Module> model, const nn::LayerList* layers, Config config,
                                    parallel::PipelineModuleOptions options = {});

template <class M>
PipelineEngine initialize_pipeline(std::shared_ptr<M> model, Config config, parallel::PipelineModuleOptions options = {}) {
  return make_pipeline_engine(model, layer_list_of(*model), std::move(config), std::move(options));
}

// From layer specs (DeepSpeed's PipelineModule(layers=[LayerSpec(...)])): each rank builds only its
// stage's layers (parallel/layer_spec.h).
PipelineEngine initialize_pipeline(const std::vector<parallel::LayerSpec>& specs, Config config,
                                   parallel::PipelineModuleOptions options = {});

// From a model builder (parallel::ModelBuilder: the built-in models and from_pretrained take a layer
// selection): each rank materialises only its stage's layers, with the values the whole model
// built the same way would give them (parallel/pipe_module.h).
PipelineEngine initialize_pipeline(const parallel::ModelBuilder& build, Config config,
                                   parallel::PipelineModuleOptions options = {});

}  // namespace ds
