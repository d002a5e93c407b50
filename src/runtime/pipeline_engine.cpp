// The pipeline's batch: DeepSpeed's instruction streams executed in order. The Engine underneath
// keeps doing what it does for any model (ZeRO states of this stage, loss scaling, the step); this
// file only runs the schedule and the transfers between stages.
#include "runtime/pipeline_engine.h"

#include <fmt/format.h>

#include <chrono>
#include <optional>

#include "comm/make_communicator.h"
#include "nn/tensor_buffer.h"
#include "parallel/pipe_channel.h"
#include "parallel/pipe_schedule.h"
#include "precision/gradient_spans.h"
#include "runtime/curriculum_scheduler.h"
#include "util/error.h"
#include "util/logging.h"
#include "zero/model_states.h"

namespace ds {

using parallel::PipeInstruction;
using parallel::PipeOp;

// Per pipe buffer: what one in-flight micro-batch holds on this stage.
struct PipelineEngine::Buffers {
  std::vector<torch::Tensor> inputs, labels, outputs, losses, output_grads;
  std::vector<std::vector<torch::Tensor>> side;  // the micro-batch's side tensors (PipeBatch::side)
  std::vector<int64_t> micro_batch;  // which micro-batch of the batch the buffer holds
  int64_t forwards = 0;              // this stage's forwards so far: micro-batches arrive in order
  double loss_sum = 0;  // this stage's sum of micro-batch losses (last stage)
  explicit Buffers(int n)
      : inputs(size_t(n)), labels(size_t(n)), outputs(size_t(n)), losses(size_t(n)), output_grads(size_t(n)), side(size_t(n)),
        micro_batch(size_t(n)) {}
};

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

EngineOptions stage_options(parallel::PipelineModule& module, EngineOptions o) {
  o.topology = module.shared_topology();
  o.pipeline_stage = true;
  o.layers = &module.stage_layers();  // the config's activation_checkpointing walks the stage's layers
  return o;
}

}  // namespace

PipelineEngine::PipelineEngine(std::shared_ptr<parallel::PipelineModule> module, Config config, EngineOptions options)
    : Engine(module, std::move(config), stage_options(*module, std::move(options))),
      module_(std::move(module)) {
  channels_ = std::make_unique<parallel::PipeChannels>(module_->topology());
  loss_logged_at_step_ = true;  // only the last stage knows the loss before OptimizerStep
  log::info("pipeline: {} stages, {} micro-batches a batch; {}", num_stages(), micro_batches(), module_->describe_partition());
}

PipelineEngine::PipelineEngine(PipelineEngine&&) noexcept = default;
PipelineEngine::~PipelineEngine() = default;

double PipelineEngine::train_batch(const PipeDataIterator& data) {
  DS_CHECK(micro_steps() % gradient_accumulation_steps() == 0, Error,
           "train_batch: the engine is inside an accumulation window (forward/backward/step were called directly)");
  run(data, /*train=*/true);
  return last_loss_mean_;
}

double PipelineEngine::eval_batch(const PipeDataIterator& data) {
  run(data, /*train=*/false);
  return last_loss_mean_;
}

void PipelineEngine::follow_curriculum(bool train) {
  if (curriculum_scheduler() == nullptr) return;
  // The activations' shapes change with the difficulty (DeepSpeed's reset_activation_shape): every
  // stage decides alike from the step count, so both ends of each channel forget them together.
  // An evaluation batch may run at another length than training: it starts and ends afresh.
  const int64_t difficulty = train ? *advance_curriculum() : -1;
  if (difficulty != shapes_difficulty_) channels_->reset_shapes();
  shapes_difficulty_ = difficulty;
}

void PipelineEngine::run(const PipeDataIterator& data, bool train) {
  module_->train(train);  // DeepSpeed's train_batch / eval_batch: module.train() / module.eval()
  follow_curriculum(train);
  const int m = micro_batches(), p = num_stages(), s = stage_id();
  const auto steps = train ? parallel::train_schedule(m, p, s) : parallel::inference_schedule(m, p, s);
  Buffers b(train ? parallel::train_pipe_buffers(m, p, s) : parallel::kInferencePipeBuffers);
  std::optional<torch::NoGradGuard> no_grad;
  if (!train) no_grad.emplace();
  times_ = {};
  const auto t0 = Clock::now();
  for (const auto& step : steps)
    for (const auto& in : step) {
      const auto t = Clock::now();
      execute(in, b, data, train);
      const double dt = seconds_since(t);
      if (in.op == PipeOp::ForwardPass || in.op == PipeOp::BackwardPass) times_.compute_s += dt;
      if (in.op == PipeOp::ReduceTiedGrads || in.op == PipeOp::OptimizerStep) times_.step_s += dt;
    }
  channels_->drain();
  times_.total_s = seconds_since(t0);
  if (!train) last_loss_mean_ = agree_loss(b.loss_sum);
}

void PipelineEngine::execute(const PipeInstruction& in, Buffers& b, const PipeDataIterator& data, bool train) {
  const size_t i = size_t(std::max(in.buffer, 0));
  const std::string what = fmt::format("pipe stage {} {}", stage_id(), parallel::to_string(in));
  switch (in.op) {
    case PipeOp::LoadMicroBatch: {
      PipeBatch batch = data();
      if (is_first_stage()) {
        DS_CHECK(batch.inputs.defined(), Error, "pipeline: the data iterator gave the first stage no inputs");
        b.inputs[i] = batch.inputs;
        b.side[i] = std::move(batch.side);
      }
      if (is_last_stage()) {
        DS_CHECK(batch.labels.defined(), Error, "pipeline: the data iterator gave the last stage no labels");
        b.labels[i] = batch.labels;
      }
      return;
    }
    case PipeOp::RecvActivation: {
      parallel::PipeActivation a = channels_->recv_activation(what);
      if (train && a.x.is_floating_point()) a.x.requires_grad_(true);
      b.inputs[i] = a.x;
      b.side[i] = std::move(a.side);
      return;
    }
    case PipeOp::ForwardPass: {
      b.micro_batch[i] = b.forwards++;
      before_forward(b.micro_batch[i]);
      module_->use_side_inputs(b.side[i]);
      torch::Tensor out = module_->forward(b.inputs[i]);
      after_forward();
      if (is_last_stage()) {
        b.losses[i] = module_->loss(out, b.labels[i]);
        b.loss_sum += b.losses[i].detach().to(torch::kFloat64).item<double>();
        b.labels[i] = torch::Tensor();
      }
      b.outputs[i] = out;
      if (!train) {  // nothing flows back: the input is done with, and so is the last stage's output
        b.inputs[i] = torch::Tensor();
        if (is_last_stage()) {
          b.outputs[i] = torch::Tensor();
          b.side[i].clear();
        }
      }
      return;
    }
    case PipeOp::SendActivation:
      channels_->send_activation(b.outputs[i], b.side[i], what);
      if (!train) {
        b.outputs[i] = torch::Tensor();
        b.side[i].clear();
      }
      return;
    case PipeOp::RecvGrad:
      b.output_grads[i] = channels_->recv_grad(b.outputs[i], what);
      return;
    case PipeOp::BackwardPass:
      module_->use_side_inputs(b.side[i]);  // recomputed segments (activation checkpointing) read them
      select_micro_batch(b.micro_batch[i], true);  // and drop the blocks the forward dropped
      if (is_last_stage())
        backward(b.losses[i]);
      else
        backward_from(b.outputs[i], b.output_grads[i]);
      b.outputs[i] = torch::Tensor();
      b.losses[i] = torch::Tensor();
      b.output_grads[i] = torch::Tensor();
      b.side[i].clear();
      if (!is_gradient_accumulation_boundary()) step();  // counts the micro-step; the boundary's is OptimizerStep
      return;
    case PipeOp::SendGrad: {
      torch::Tensor g = b.inputs[i].grad();
      channels_->send_grad(g.defined() ? g : torch::zeros_like(b.inputs[i]), what);
      b.inputs[i] = torch::Tensor();
      return;
    }
    case PipeOp::ReduceTiedGrads:
      reduce_tied_gradients();
      return;
    case PipeOp::ReduceGrads:  // the engine's step reduces over the data-parallel group
      return;
    case PipeOp::OptimizerStep: {
      const double mean = agree_loss(b.loss_sum);
      // Every stage steps on the last stage's loss: its guard and logs read it.
      set_accumulated_loss(mean_replica_loss_);
      step();
      last_loss_mean_ = mean;
      return;
    }
  }
}

double PipelineEngine::agree_loss(double replica_sum) {
  // The last stage's mean over micro-batches, averaged over the data-parallel replicas (DeepSpeed's
  // _aggregate_total_loss), then broadcast from the last stage to every stage of the pipe.
  const auto& topo = module_->topology();
  double v[2] = {replica_sum / double(micro_batches()), 0.0};
  if (is_last_stage()) {
    v[1] = v[0];
    if (topo.data().size() > 1) {
      topo.data().all_reduce(comm::Buffer(&v[1], 1), comm::ReduceOp::Sum, "pipe_loss_dp_mean");
      v[1] /= double(topo.data().size());
    }
  }
  if (topo.pipe().size() > 1) topo.pipe().broadcast(comm::Buffer(v, 2), topo.pipe().size() - 1, "pipe_loss");
  mean_replica_loss_ = v[0];
  return v[1];
}

void PipelineEngine::reduce_tied_gradients() {
  torch::NoGradGuard no_grad;
  for (const auto& t : module_->tied())
    if (t.group) {
      torch::Tensor g = model_states().accumulated_grad(t.name);
      t.group->all_reduce(nn::as_buffer(g), comm::ReduceOp::Sum, "pipe_tied_grads");
    }
}

void PipelineEngine::annotate_gradients(precision::GradientSpans& grads) {
  grads.pipe = &module_->topology().pipe();
  for (auto& piece : grads.pieces)
    for (const auto& t : module_->tied())
      if (t.group && !t.counts_in_norm && piece.name == t.name) piece.pipe_copy = true;
}

namespace {

std::shared_ptr<parallel::Topology> pipeline_topology(const Config& config, parallel::PipelineModuleOptions& options) {
  const ParallelSizes& n = config.parallel_sizes;
  if (options.activation_checkpoint_interval == 0)  // the config's, as DeepSpeed's engine applies it
    options.activation_checkpoint_interval = n.pipeline_activation_checkpoint_interval;
  return std::make_shared<parallel::Topology>(comm::make_communicator(comm::Backend::Auto),
                                              parallel::TopologySizes{n.pipeline_stages, n.autotp_size,
                                                                      n.sequence_parallel_size});
}

}  // namespace

PipelineEngine make_pipeline_engine(std::shared_ptr<torch::nn::Module> model, const nn::LayerList* layers, Config config,
                                    parallel::PipelineModuleOptions options) {
  DS_CHECK(layers != nullptr, Error, "initialize_pipeline: the model exposes no LayerList (layers()) to cut into stages");
  auto topology = pipeline_topology(config, options);
  auto stage = std::make_shared<parallel::PipelineModule>(std::move(model), *layers, topology, std::move(options));
  return PipelineEngine(std::move(stage), std::move(config));
}

PipelineEngine initialize_pipeline(const std::vector<parallel::LayerSpec>& specs, Config config,
                                   parallel::PipelineModuleOptions options) {
  auto topology = pipeline_topology(config, options);
  auto stage = std::make_shared<parallel::PipelineModule>(specs, topology, std::move(options));
  return PipelineEngine(std::move(stage), std::move(config));
}

PipelineEngine initialize_pipeline(const parallel::ModelBuilder& build, Config config,
                                   parallel::PipelineModuleOptions options) {
  auto topology = pipeline_topology(config, options);
  auto stage = std::make_shared<parallel::PipelineModule>(build, topology, std::move(options));
  return PipelineEngine(std::move(stage), std::move(config));
}

}  // namespace ds
