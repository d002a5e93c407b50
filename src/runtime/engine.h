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
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "precision/gradient_spans.h"
#include "precision/overflow_summary.h"
#include "runtime/engine_builder.h"
#include "runtime/stop_request.h"

namespace ds {

class Engine {
 public:
  Engine(std::shared_ptr<torch::nn::Module> module, Config config, EngineOptions options = {});
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;
  ~Engine();

  // Scales by 1/GAS (and the loss scale in fp16, as DeepSpeed) and runs autograd.
  void backward(const torch::Tensor& loss);
  // Call after every micro-batch; at an accumulation boundary it updates the parameters.
  void step();

  bool is_gradient_accumulation_boundary() const;
  int64_t global_steps() const { return global_steps_; }
  int64_t global_samples() const { return global_samples_; }
  int64_t micro_steps() const { return micro_steps_; }
  int64_t skipped_steps() const { return skipped_steps_; }
  bool was_step_applied() const { return last_step_applied_; }
  std::vector<double> get_lr() const;
  std::vector<std::array<double, 2>> get_mom() const;
  double loss_scale() const { return p_.scaler->scale(); }
  // The unscaled global gradient norm of the last step (-1 when not computed or inf/NaN).
  double get_global_grad_norm() const { return last_grad_norm_; }
  // Mean loss of the last completed global step (sum over micro-steps of loss/GAS).
  double last_loss() const { return last_loss_; }
  // Graceful stop (runtime/stop_request.h): request_stop() on any rank, or a SIGTERM/SIGINT after
  // ds::install_stop_signal_handlers(), makes stop_requested() true on every rank at the same
  // accumulation boundary; the loop then saves a checkpoint and ends. stop_signal(): SIGTERM, SIGINT or 0.
  void request_stop() { stop_.request(); }
  bool stop_requested() const { return stop_.agreed(); }
  int stop_signal() const { return stop_.signal(); }
  // ZeRO-Offload overlap: optimizer sub-groups stepped during backward so far (0 when it is off).
  int64_t overlapped_sub_group_steps() const { return overlapped_sub_group_steps_; }

  int64_t train_batch_size() const { return config().train_batch_size; }
  int64_t train_micro_batch_size_per_gpu() const { return config().train_micro_batch_size_per_gpu; }
  int64_t gradient_accumulation_steps() const { return config().gradient_accumulation_steps; }
  int world_size() const { return p_.topology->world_size(); }
  int rank() const { return p_.topology->rank(); }
  comm::Communicator& communicator() { return p_.topology->world(); }
  const parallel::Topology& topology() const { return *p_.topology; }

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

  const Config& config() const { return *p_.config; }
  torch::nn::Module& module() { return *module_; }
  torch::Device device() const { return p_.device; }
  const zero::DtypePlan& dtypes() const { return p_.dtypes; }
  const zero::ZeroPlan& zero_plan() const { return p_.zero; }
  // Stages 0-2: the flat parameter buffers (throws at stage 3, where parameters are sharded).
  const zero::FlatParameters& flat_parameters() const;
  // Where this rank's model states live (the ZeRO stage's implementation).
  zero::ModelStates& model_states() { return *p_.states; }
  const zero::ModelStates& model_states() const { return *p_.states; }
  const zero::FlatOptimizer* optimizer() const { return p_.optimizer.get(); }
  const precision::LossScaler& loss_scaler() const { return *p_.scaler; }
  // Activation checkpointing over the LayerList (null when the config does not ask for it).
  const nn::ActivationCheckpointing* activation_checkpointing() const { return p_.activation_checkpointing.get(); }
  const MemoryLedger& memory() const { return *p_.ledger; }
  std::string memory_report() const;

 protected:
  // Called around the user's forward by ModelEngine::forward.
  void before_forward();
  void after_forward();

 private:
  void take_model_step();
  void publish_overlapped_step();
  void arm_overlapped_step();
  void apply_schedule();
  precision::GradientSpans gradient_spans() const;
  StepSnapshot snapshot() const;
  checkpoint::EngineStates checkpoint_parts();
  nlohmann::json engine_state_json() const;
  void restore_engine_state(const nlohmann::json& state, const LoadOptions& options);

  std::shared_ptr<torch::nn::Module> module_;  // first: the parts refer to it
  nn::LayerList* layers_ = nullptr;
  EngineParts p_;
  precision::OverflowSummary overflow_summary_;
  StopRequest stop_;               // agreed at each accumulation boundary
  bool step_in_flight_ = false;    // this boundary's optimizer step already ran during backward
  int64_t overlapped_sub_group_steps_ = 0;
  int64_t global_steps_ = 0;
  int64_t global_samples_ = 0;
  int64_t micro_steps_ = 0;
  int64_t skipped_steps_ = 0;
  bool last_step_applied_ = false;
  double last_grad_norm_ = -1.0;
  double loss_accum_ = 0.0;  // sum over this step's micro-batches of loss/GAS
  double last_loss_ = 0.0;
};

// The model's LayerList, for models that expose one as `layers()` (GPT2 does).
template <class M>
nn::LayerList* layer_list_of(M& model) {
  if constexpr (requires(M& m) { { m.layers() } -> std::same_as<nn::LayerList&>; }) return &model.layers();
  return nullptr;
}

// The engine for a concrete module type: forward() forwards any arguments to M::forward.
template <class M>
class ModelEngine : public Engine {
 public:
  ModelEngine(std::shared_ptr<M> model, Config config, std::vector<ParamGroup> groups = {})
      : Engine(model, std::move(config), {std::move(groups), layer_list_of(*model)}), model_(std::move(model)) {}

  template <class... Args>
  auto forward(Args&&... args) {
    before_forward();
    auto out = model_->forward(std::forward<Args>(args)...);
    after_forward();
    return out;
  }

  M& model() { return *model_; }
  std::shared_ptr<M> model_ptr() const { return model_; }

 private:
  std::shared_ptr<M> model_;
};

}  // namespace ds
