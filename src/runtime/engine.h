// ds::Engine: what ds::initialize returns. Its parts (runtime/engine_builder.h: topology, ZeRO plan,
// model states, optimizer, schedule, loss scaler, step guard, telemetry) are built once; the engine
// only sequences them through one training step, as DeepSpeed's engine does (reference §2.3):
//   forward  — the user's module, on compute-dtype parameters
//   backward — loss / GAS (× loss scale), autograd into the model states, accumulate
//   step     — at accumulation boundaries: overflow check, unscale + clip, optimizer, write back
//              16-bit parameters, LR schedule, counters, logs
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <array>
#include <concepts>
#include <deque>
#include <type_traits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/load_options.h"
#include "config/config.h"
#include "runtime/param_group.h"
#include "runtime/step_counters.h"
#include "runtime/stop_request.h"

// The parts are the engine's business: the public API names them, users include their headers.
namespace ds {
class CurriculumScheduler;
class MemoryLedger;
struct EngineParts;
struct StepSnapshot;
namespace checkpoint { struct EngineStates; }
namespace nn { class ActivationCheckpointing; class LayerList; }
namespace parallel { class Topology; }
namespace precision { class LossScaler; struct GradientSpans; }
namespace zero { struct DtypePlan; struct ZeroPlan; class FlatParameters; class ModelStates; class FlatOptimizer; }
namespace comm { class Communicator; }

// What the caller may give instead of the defaults (tests give their own communicator or topology).
struct EngineOptions {
  std::vector<ParamGroup> param_groups;
  nn::LayerList* layers = nullptr;               // the model's LayerList, when it has one (stage 3 walks it)
  std::shared_ptr<comm::Communicator> comm;      // default: the launcher's world
  std::shared_ptr<parallel::Topology> topology;  // default: one over `comm` from the config's sizes
  // The module is one pipeline stage (PipelineEngine): pipeline.stages > 1 is allowed, and ZeRO
  // stages 2-3 are refused as DeepSpeed refuses them with pipelines.
  bool pipeline_stage = false;
};

class Engine {
 public:
  Engine(std::shared_ptr<torch::nn::Module> module, Config config, EngineOptions options = {});
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;
  virtual ~Engine();

  // Scales by 1/GAS (and the loss scale in fp16, as DeepSpeed) and runs autograd.
  void backward(const torch::Tensor& loss);
  // Call after every micro-batch; at an accumulation boundary it updates the parameters.
  void step();

  bool is_gradient_accumulation_boundary() const;
  // The counters and the last step's outcome (runtime/step_counters.h says what each is).
  int64_t global_steps() const { return n_.global_steps; }
  int64_t global_samples() const { return n_.global_samples; }
  int64_t micro_steps() const { return n_.micro_steps; }
  int64_t skipped_steps() const { return n_.skipped_steps; }
  bool was_step_applied() const { return n_.last_step_applied; }
  std::vector<double> get_lr() const;
  std::vector<std::array<double, 2>> get_mom() const;
  double loss_scale() const;
  double get_global_grad_norm() const { return n_.last_grad_norm; }
  double last_loss() const { return n_.last_loss; }
  // Graceful stop (runtime/stop_request.h): request_stop() on any rank, or a SIGTERM/SIGINT after
  // ds::install_stop_signal_handlers(), makes stop_requested() true on every rank at the same
  // accumulation boundary; the loop then saves a checkpoint and ends. stop_signal(): SIGTERM, SIGINT or 0.
  void request_stop() { stop_.request(); }
  bool stop_requested() const { return stop_.agreed(); }
  int stop_signal() const { return stop_.signal(); }
  int64_t overlapped_sub_group_steps() const { return n_.overlapped_sub_group_steps; }

  int64_t train_batch_size() const { return config().train_batch_size; }
  int64_t train_micro_batch_size_per_gpu() const { return config().train_micro_batch_size_per_gpu; }
  int64_t gradient_accumulation_steps() const { return config().gradient_accumulation_steps; }
  int world_size() const;
  int rank() const;
  comm::Communicator& communicator();
  const parallel::Topology& topology() const;

  // Checkpoints (docs/checkpoint.md): every rank calls these, after engine.step() at an accumulation
  // boundary. save writes <dir>/<tag>/ (tag "" = global_step<N>) atomically and then <dir>/latest;
  // returns the tag directory. load reads <dir>/<tag> (tag "" = the one in latest) saved at any
  // world size; returns nullopt (with a warning) when there is no `latest`, as DeepSpeed does.
  std::string save_checkpoint(const std::string& dir, const std::string& tag = "",
                              const nlohmann::json& client_state = nlohmann::json::object(), bool save_latest = true);
  std::optional<LoadResult> load_checkpoint(const std::string& dir, const std::string& tag = "",
                                            const LoadOptions& options = {});
  // The full model (trainable in the model dtype, frozen parameters, buffers) as <dir>/<file>, a
  // safetensors file written by rank 0; at stage 3 parameters are gathered one at a time.
  void save_16bit_model(const std::string& dir, const std::string& file = "model.safetensors");

  const Config& config() const;
  // With zero_overlap_param_gather the parameters other ranks updated arrive during the next
  // forward: module() and model() wait for them first; code holding the module itself calls
  // settle_parameters() before reading parameters between step() and the next forward.
  torch::nn::Module& module() {
    settle_parameters();
    return *module_;
  }
  void settle_parameters();
  torch::Device device() const;
  const zero::DtypePlan& dtypes() const;
  const zero::ZeroPlan& zero_plan() const;
  // Stages 0-2: the flat parameter buffers (throws at stage 3, where parameters are sharded).
  const zero::FlatParameters& flat_parameters() const;
  // Where this rank's model states live (the ZeRO stage's implementation).
  zero::ModelStates& model_states();
  const zero::ModelStates& model_states() const;
  const zero::FlatOptimizer* optimizer() const;
  const precision::LossScaler& loss_scaler() const;
  // Activation checkpointing over the LayerList (null when the config does not ask for it).
  const nn::ActivationCheckpointing* activation_checkpointing() const;
  const MemoryLedger& memory() const;
  std::string memory_report() const;
  // DeepSpeed's deepspeed.comm.log_summary(show_straggler): with "comms_logger" enabled, the table of
  // this rank's collectives so far (count, latency, bandwidth per operation and message size); with
  // show_straggler (a collective over the world) also each row's wait for the slowest rank. Rank 0 logs it.
  std::string log_comms_summary(bool show_straggler = false) const;

  // "curriculum_learning" (DeepSpeed's legacy curriculum, runtime/curriculum_scheduler.h): the
  // scheduler, null when off. Its difficulty follows global_steps + 1, updated before every training
  // forward (and pipeline train_batch) as DeepSpeed's engine does.
  CurriculumScheduler* curriculum_scheduler();
  // With curriculum_type "seqlen", the sequence length this step trains at, brought up to date for
  // the coming step: DeepSpeed passes it to the model's forward as `curriculum_seqlen`; here the
  // caller truncates its batch to it before the forward (ds::truncate_to_seqlen). nullopt otherwise.
  std::optional<int64_t> curriculum_seqlen();
  // "progressive_layer_drop": DeepSpeed's get_pld_theta(), the layers' keep-probability floor this
  // step (runtime/progressive_layer_drop.h); nullopt when off.
  std::optional<double> get_pld_theta() const;

 protected:
  // Called around the user's forward by ModelEngine::forward. `micro_batch` is the forward's
  // micro-batch within the step (default: the micro-step's; a pipeline gives its buffer's): the
  // progressive layer drop's draws are keyed by it.
  void before_forward(std::optional<int64_t> micro_batch = std::nullopt);
  // The micro-batch a pipeline's backward recomputes (activation checkpointing) belongs to.
  void select_micro_batch(int64_t micro_batch, bool training);
  void after_forward();
  // The curriculum's difficulty moved to the coming step (global_steps + 1, as DeepSpeed's forward
  // moves it); nullopt without a curriculum.
  std::optional<int64_t> advance_curriculum();
  // fp16.auto_cast (DeepSpeed's _cast_inputs_half): the dtype ModelEngine::forward casts floating
  // tensor arguments to, the module's compute dtype (half where it computes in fp16, as in DeepSpeed;
  // fp32 where the engine computes an fp16 model in fp32); nullopt without it.
  std::optional<torch::ScalarType> auto_cast_dtype() const;
  // Under AutoTP and Ulysses, every rank of a tensor- or sequence-parallel group must be given the
  // same batch: ModelEngine checks the forward's tensor arguments (one small all-reduce per group;
  // ds::Error naming the argument).
  bool checks_forward_inputs() const noexcept { return check_inputs_; }
  void check_forward_inputs(const std::vector<torch::Tensor>& inputs);

  // A pipeline stage that is not the last: autograd from `output` with `grad`, the gradient the
  // next stage sent (already scaled by 1/GAS and the loss scale, since it came from the scaled loss).
  void backward_from(const torch::Tensor& output, const torch::Tensor& grad);
  // The pipeline's batch loss (sum over micro-batches of loss/GAS), agreed from the last stage, as
  // this rank's before the boundary step (the guard and the logs read it; the monitors get it here,
  // not at the backward: set loss_logged_at_step_).
  void set_accumulated_loss(double loss);
  bool loss_logged_at_step_ = false;
  // Called on the gradients the step is about to check (after TP's annotation): a pipeline stage
  // marks its tied copies and names its pipe group.
  virtual void annotate_gradients(precision::GradientSpans& grads) {}

 private:
  void take_model_step();
  void publish_overlapped_step();
  void arm_overlapped_step();
  void apply_schedule();
  StepSnapshot snapshot() const;
  checkpoint::EngineStates checkpoint_parts();
  nlohmann::json engine_state_json() const;
  void restore_engine_state(const nlohmann::json& state, const LoadOptions& options);

  std::shared_ptr<torch::nn::Module> module_;  // first: the parts refer to it
  nn::LayerList* layers_ = nullptr;
  std::unique_ptr<EngineParts> p_;  // built once (runtime/engine_builder.h)
  StopRequest stop_;               // agreed at each accumulation boundary
  bool step_in_flight_ = false;    // this boundary's optimizer step already ran during backward
  bool check_inputs_ = false;      // AutoTP / Ulysses: forward arguments are compared across the groups
  StepCounters n_;
};

// The model's LayerList, for models that expose one as `layers()` (GPT2 does).
template <class M>
nn::LayerList* layer_list_of(M& model) {
  if constexpr (requires(M& m) { { m.layers() } -> std::same_as<nn::LayerList&>; }) return &model.layers();
  return nullptr;
}

namespace detail {
// `a` itself, or for a floating tensor of another dtype than `to` a cast copy kept in `cast` (alive
// through the forward), with `a`'s value category.
template <class A>
A&& cast_input(A&& a, std::optional<torch::ScalarType> to, std::deque<torch::Tensor>& cast) {
  if constexpr (std::is_same_v<std::remove_cvref_t<A>, torch::Tensor>) {
    if (to && a.defined() && a.is_floating_point() && a.scalar_type() != *to) {
      cast.push_back(a.to(*to));
      return static_cast<A&&>(cast.back());
    }
  }
  return static_cast<A&&>(a);
}
}  // namespace detail

// The engine for a concrete module type: forward() forwards any arguments to M::forward.
template <class M>
class ModelEngine : public Engine {
 public:
  ModelEngine(std::shared_ptr<M> model, Config config, std::vector<ParamGroup> groups = {})
      : Engine(model, std::move(config), options(std::move(groups), layer_list_of(*model))), model_(std::move(model)) {}

  template <class... Args>
  auto forward(Args&&... args) {
    if (checks_forward_inputs()) {
      std::vector<torch::Tensor> tensors;
      auto add = [&](const auto& a) {
        if constexpr (std::is_convertible_v<const std::decay_t<decltype(a)>&, const torch::Tensor&>) tensors.push_back(a);
      };
      (add(args), ...);
      check_forward_inputs(tensors);
    }
    before_forward();
    std::deque<torch::Tensor> cast;
    const auto to = auto_cast_dtype();
    auto out = model_->forward(detail::cast_input(std::forward<Args>(args), to, cast)...);
    after_forward();
    return out;
  }

  M& model() {
    settle_parameters();
    return *model_;
  }
  std::shared_ptr<M> model_ptr() const { return model_; }

 private:
  static EngineOptions options(std::vector<ParamGroup> groups, nn::LayerList* layers) {
    EngineOptions o;
    o.param_groups = std::move(groups);
    o.layers = layers;
    return o;
  }
  std::shared_ptr<M> model_;
};

}  // namespace ds
