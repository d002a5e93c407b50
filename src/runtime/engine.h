// ds::Engine: what ds::initialize returns. It owns the flat parameter/gradient buffers, the
// 16-bit storage and accumulation buffers, the optimizer, the LR schedule, the loss scaler, the step
// counters and the memory ledger, and sequences one training step:
//   forward  — the user's module, on compute-dtype parameters
//   backward — loss / GAS (× loss scale), autograd into the flat gradient buffer, accumulate
//   step     — at accumulation boundaries: overflow check, unscale + clip, optimizer, write back
//              16-bit parameters, LR schedule, counters, logs
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <concepts>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "config/config.h"
#include "optim/lr_schedules.h"
#include "precision/loss_scaler.h"
#include "precision/overflow_summary.h"
#include "precision/step_guard.h"
#include "profiling/flops_profiler.h"
#include "profiling/monitor_master.h"
#include "runtime/stop_request.h"
#include "nn/activation_checkpointing.h"
#include "util/memory_ledger.h"
#include "zero/dtype_plan.h"
#include "zero/flat_optimizer.h"
#include "nn/layer_list.h"
#include "offload/host_memory.h"
#include "zero/flat_params.h"
#include "zero/model_states.h"

namespace ds {

// A user param group: the dotted names it holds and what it overrides. Every trainable parameter
// must be in exactly one group when groups are given (else a ConfigError names it).
struct ParamGroup {
  std::vector<std::string> params;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

// load_checkpoint's switches (DeepSpeed's keyword arguments of the same names).
struct LoadOptions {
  bool load_optimizer_states = true;     // false: weights only; optimizer state starts fresh
  bool load_lr_scheduler_states = true;  // false: the schedule starts where the config says
  bool load_module_only = false;         // true: weights only, counters and scaler untouched too
  bool load_module_strict = true;        // false: checkpoint parameters the model lacks are ignored
};

struct LoadResult {
  std::string path;           // the tag directory read
  nlohmann::json client_state;
};

class Engine {
 public:
  // `layers`: the model's LayerList when it has one (ZeRO stage 3 walks it); may be null.
  Engine(std::shared_ptr<torch::nn::Module> module, Config config, std::vector<ParamGroup> groups = {},
         nn::LayerList* layers = nullptr);
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
  double loss_scale() const { return scaler_->scale(); }
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

  int64_t train_batch_size() const { return config_.train_batch_size; }
  int64_t train_micro_batch_size_per_gpu() const { return config_.train_micro_batch_size_per_gpu; }
  int64_t gradient_accumulation_steps() const { return config_.gradient_accumulation_steps; }
  int world_size() const { return comm_->size(); }
  int rank() const { return comm_->rank(); }
  comm::Communicator& communicator() { return *comm_; }

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

  const Config& config() const { return config_; }
  torch::nn::Module& module() { return *module_; }
  torch::Device device() const { return device_; }
  const zero::DtypePlan& dtypes() const { return plan_; }
  // Stages 0-2: the flat parameter buffers (throws at stage 3, where parameters are sharded).
  const zero::FlatParameters& flat_parameters() const;
  // Where this rank's model states live (the ZeRO stage's implementation).
  zero::ModelStates& model_states() { return *states_; }
  const zero::ModelStates& model_states() const { return *states_; }
  const zero::FlatOptimizer* optimizer() const { return optimizer_.get(); }
  const precision::LossScaler& loss_scaler() const { return *scaler_; }
  // Activation checkpointing over the LayerList (null when the config does not ask for it).
  const nn::ActivationCheckpointing* activation_checkpointing() const { return activation_checkpointing_.get(); }
  const MemoryLedger& memory() const { return ledger_; }
  std::string memory_report() const;

 protected:
  // Called around the user's forward by ModelEngine::forward.
  void before_forward();
  void after_forward();

 private:
  using Clock = std::chrono::steady_clock;
  struct Timings {  // milliseconds, for wall_clock_breakdown and the throughput line
    double fwd = 0, bwd = 0, step = 0;            // this micro-step
    double fwd_sum = 0, bwd_sum = 0, step_sum = 0;  // this global step
    Clock::time_point fwd_start, step_start;
    bool step_started = false;
    double run_seconds = 0;                       // global steps after the first two
  };

  void setup_parameters(const std::vector<ParamGroup>& groups);
  void setup_optimizer(const std::vector<ParamGroup>& groups);
  void setup_schedule();
  void check_memory_budget() const;
  void check_nvme_budget(const MemoryLedger& estimate, int ranks) const;
  void apply_schedule();
  bool check_non_finite(const std::vector<torch::Tensor>& grads);
  std::string first_non_finite_name(const std::vector<torch::Tensor>& grads) const;
  double grad_norm(const std::vector<torch::Tensor>& grads) const;
  void unscale_and_clip(std::vector<torch::Tensor>& grads);
  void take_model_step();
  void arm_overlapped_step();
  void zero_grads();
  void log_progress() const;
  void log_timings(bool boundary) const;
  void log_throughput(double step_seconds);
  void write_step_events(bool boundary);
  void print_flops_profile();
  void report_swap_phase();
  nlohmann::json engine_state_json() const;
  void restore_engine_state(const nlohmann::json& state, const LoadOptions& options);
  void check_tag_agreement(const std::string& tag);
  // Every rank learns whether any failed; all throw, with the first failing rank's message.
  void agree_or_throw(std::exception_ptr error, const std::string& what);

  std::shared_ptr<torch::nn::Module> module_;
  Config config_;
  std::unique_ptr<comm::Communicator> comm_;
  torch::Device device_ = torch::kCPU;
  zero::DtypePlan plan_;
  nn::LayerList* layers_ = nullptr;
  offload::HostMemoryPlan host_;  // ZeRO-Offload host buffers: pinned or not, and why
  bool overlap_step_ = false;     // ZeRO-Offload: step sub-groups as their gradients complete
  bool step_in_flight_ = false;   // this boundary's optimizer step already ran during backward
  int64_t overlapped_sub_group_steps_ = 0;
  std::unique_ptr<zero::ModelStates> states_;
  std::unique_ptr<zero::FlatOptimizer> optimizer_;
  std::unique_ptr<optim::LrScheduler> scheduler_;
  std::unique_ptr<precision::LossScaler> scaler_;
  precision::StepGuard step_guard_;  // inf/NaN steps: skip or stop (precision/step_guard.h)
  precision::OverflowSummary overflow_summary_;
  MemoryLedger ledger_;
  Timings timings_;
  MonitorMaster monitor_;           // tensorboard / csv_monitor / jsonl_monitor, rank 0 only
  bool loss_scale_changed_ = false;  // DeepSpeed logs the scale as an int until it first changes
  std::unique_ptr<profiling::FlopsProfiler> flops_profiler_;  // rank 0, flops_profiler.enabled
  bool flops_profile_active_ = false;                         // this global step is profile_step
  double optimizer_seconds_ = 0;  // time in optimizer steps since the last report (NVMe phase report)
  std::shared_ptr<nn::ActivationCheckpointing> activation_checkpointing_;
  StopRequest stop_;  // agreed at each accumulation boundary

  int64_t global_steps_ = 0;
  int64_t global_samples_ = 0;
  int64_t micro_steps_ = 0;
  int64_t skipped_steps_ = 0;
  bool last_step_applied_ = false;
  double last_grad_norm_ = -1.0;
  double loss_accum_ = 0.0;  // sum over this step's micro-batches of loss/GAS
  double last_loss_ = 0.0;
};

// The engine for a concrete module type: forward() forwards any arguments to M::forward.
// The model's LayerList, for models that expose one as `layers()` (GPT2 does).
template <class M>
nn::LayerList* layer_list_of(M& model) {
  if constexpr (requires(M& m) { { m.layers() } -> std::same_as<nn::LayerList&>; }) return &model.layers();
  return nullptr;
}

template <class M>
class ModelEngine : public Engine {
 public:
  ModelEngine(std::shared_ptr<M> model, Config config, std::vector<ParamGroup> groups = {})
      : Engine(model, std::move(config), std::move(groups), layer_list_of(*model)), model_(std::move(model)) {}

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
