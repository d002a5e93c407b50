// The training step's sequence. The work lives in the parts (runtime/engine_builder.h); this file
// only orders it as DeepSpeed's engine does (reference §2.3).
#include "runtime/engine.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>

#include "comm/comms_logger.h"
#include "parallel/tp_input_check.h"
#include "precision/step_decision.h"
#include "runtime/engine_builder.h"
#include "runtime/ready_banner.h"
#include "util/error.h"
#include "util/logging.h"
#include "util/system_info.h"

namespace ds {
namespace {

std::shared_ptr<torch::nn::Module> non_null(std::shared_ptr<torch::nn::Module> module) {
  DS_CHECK(module != nullptr, Error, "ds::initialize: model is null");
  return module;
}

}  // namespace

Engine::Engine(std::shared_ptr<torch::nn::Module> module, Config cfg, EngineOptions options)
    : module_(non_null(std::move(module))),
      layers_(options.layers), p_(std::make_unique<EngineParts>(build_engine_parts(*module_, std::move(cfg), options))) {
  check_inputs_ = p_->tensor_parallel.has_value() || p_->topology->sequence().size() > 1;
  if (p_->scheduler) apply_schedule();  // construction sets the initial lr (e.g. warmup_min_lr), as DeepSpeed's does
  // The model's own parameter tensors, now copied into the engine's buffers, were freed into the heap:
  // give those pages back (measured: 25-33 MB per pipeline stage of GPT-2 8 x 512 held otherwise).
  release_free_heap_memory();
  log_engine_ready(*p_);
  if (config().steps_per_print) p_->telemetry->log_progress(snapshot());
}

Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() {
  // The LayerList belongs to the model, which may outlive the engine.
  if (p_ && layers_ && p_->activation_checkpointing && layers_->runner() == p_->activation_checkpointing.get())
    layers_->set_runner(nullptr);
}

bool Engine::is_gradient_accumulation_boundary() const {
  return (n_.micro_steps + 1) % config().gradient_accumulation_steps == 0;
}

void Engine::before_forward(std::optional<int64_t> micro_batch) {
  const bool training = module_->is_training();
  if (training) advance_curriculum();  // DeepSpeed's forward (training forwards only)
  select_micro_batch(micro_batch.value_or(n_.micro_steps % config().gradient_accumulation_steps), training);
  p_->states->before_forward();
  p_->states->forward_started();
  p_->telemetry->forward_started(n_.global_steps);
  if (p_->autotuning) p_->autotuning->forward_started(n_.global_steps);
}

void Engine::select_micro_batch(int64_t micro_batch, bool training) {
  if (!p_->layer_drop) return;
  // The micro-batch's place in the global order (step, micro-batch, data-parallel replica): the
  // same at any world size for the same samples (ds-train's order).
  const auto& dp = p_->topology->data();
  const int64_t global = (n_.global_steps * config().gradient_accumulation_steps + micro_batch) * dp.size() + dp.rank();
  p_->layer_drop->select(uint64_t(global), training);
}

CurriculumScheduler* Engine::curriculum_scheduler() { return p_->curriculum.get(); }

std::optional<int64_t> Engine::advance_curriculum() {
  if (!p_->curriculum) return std::nullopt;
  return p_->curriculum->update_difficulty(n_.global_steps + 1);
}

std::optional<int64_t> Engine::curriculum_seqlen() {
  if (!p_->curriculum || p_->curriculum->config().curriculum_type != "seqlen") return std::nullopt;
  return advance_curriculum();
}

std::optional<double> Engine::get_pld_theta() const {
  if (!p_->layer_drop) return std::nullopt;
  return p_->layer_drop->theta();
}

void Engine::check_forward_inputs(const std::vector<torch::Tensor>& inputs) {
  // Both groups compute on one batch: TP ranks hold slices of the layers, SP ranks blocks of its tokens.
  parallel::check_same_inputs(p_->topology->model(), inputs);
  parallel::check_same_inputs(p_->topology->sequence(), inputs, parallel::kSequenceGroup);
}

void Engine::after_forward() {
  p_->states->forward_finished();
  p_->telemetry->forward_finished();
  if (p_->autotuning) p_->autotuning->forward_finished();  // a profile experiment ends the process here
}

void Engine::backward(const torch::Tensor& loss) {
  DS_CHECK(loss.defined() && loss.numel() == 1, Error,
           fmt::format("engine.backward expects a scalar loss, got a tensor of shape {}",
                       loss.defined() ? fmt::format("{}", loss.sizes().vec()) : "undefined"));
  p_->telemetry->backward_started();
  p_->states->settle_params();   // a forward run outside the engine's forward() may have left a gather
  p_->states->before_forward();  // user code may have reset .grad (Module::zero_grad(set_to_none))
  const int64_t gas = config().gradient_accumulation_steps;
  torch::Tensor scaled = gas > 1 ? loss.to(torch::kFloat32) / static_cast<double>(gas) : loss;
  n_.loss_accum += scaled.detach().item<double>();
  const double s = p_->scaler->scale();
  if (s != 1.0) scaled = scaled.to(torch::kFloat32) * s;  // DeepSpeed: (loss.float() * cur_scale).backward()
  // The overlapped step runs before any check of the gradients: not for a step whose loss is already bad.
  const bool boundary = is_gradient_accumulation_boundary();
  if (p_->zero.overlap_step && boundary && p_->guard->allows_step_before_check(n_.loss_accum)) arm_overlapped_step();
  scaled.backward();
  p_->states->after_backward();
  p_->telemetry->backward_finished(boundary, n_.loss_accum, n_.global_samples, !loss_logged_at_step_);
}

void Engine::backward_from(const torch::Tensor& output, const torch::Tensor& grad) {
  p_->telemetry->backward_started();
  p_->states->before_forward();
  const bool boundary = is_gradient_accumulation_boundary();
  torch::autograd::backward({output}, {grad});
  p_->states->after_backward();
  p_->telemetry->backward_finished(boundary, n_.loss_accum, n_.global_samples, !loss_logged_at_step_);
}

void Engine::set_accumulated_loss(double loss) {
  n_.loss_accum = loss;
  p_->telemetry->loss_event(loss, n_.global_samples);
}

void Engine::step() {
  p_->telemetry->step_started();
  const bool boundary = is_gradient_accumulation_boundary();
  if (boundary) {
    if (!p_->optimizer)
      throw ConfigError("optimizer", "engine.step() needs an optimizer; add an \"optimizer\" section to the config");
    if (p_->layer_drop) p_->layer_drop->update_state(n_.global_steps);  // DeepSpeed's order: before the step
    take_model_step();
    p_->states->zero_grads();
    p_->telemetry->boundary_reached(snapshot());
    n_.global_steps += 1;
    n_.global_samples += config().train_batch_size;
    n_.last_loss = n_.loss_accum;
    n_.loss_accum = 0.0;
    stop_.agree(p_->topology->world());  // a stop request takes effect on every rank at the same boundary
  }
  p_->telemetry->step_finished(boundary, snapshot());
  n_.micro_steps += 1;
  if (boundary && p_->autotuning) p_->autotuning->step_finished(n_.global_steps);  // may end the process
}

void Engine::take_model_step() {
  if (step_in_flight_) return publish_overlapped_step();
  // A 1-bit optimizer past its warm-up exchanges compressed momenta instead of gradients.
  if (p_->optimizer->wants_reduced_gradients()) p_->states->reduce_gradients();
  precision::GradientSpans grads = p_->states->gradient_spans();
  if (p_->tensor_parallel) p_->tensor_parallel->annotate(grads);  // the norm counts TP slices across the group
  annotate_gradients(grads);
  if (precision::skip_step({&p_->data_parallel(), &grads, n_.loss_accum, n_.global_steps + 1}, *p_->scaler, *p_->guard,
                           p_->overflow_summary)) {
    n_.skipped_steps += 1;  // the LR schedule does not advance on a skipped step (DeepSpeed)
    n_.last_step_applied = false;
    n_.last_grad_norm = -1.0;
    return;
  }
  n_.last_step_applied = true;
  n_.last_grad_norm = precision::unscale_and_clip(p_->data_parallel(), grads, p_->scaler->scale(), config().gradient_clipping);
  const auto t_opt = std::chrono::steady_clock::now();
  // Each updated master span goes to the 16-bit parameters as it is produced: in the pieces the
  // states ask for (ZeRO 1-2: a partition's all-gather starts while the optimizer steps the rest),
  // and with NVMe one sub-group at a time (no full fp32 master is ever in RAM).
  p_->optimizer->step(
      grads.flat,
      [this](size_t g, int64_t offset, const torch::Tensor& master) { p_->states->write_back_range(g, offset, master); },
      p_->states->write_back_pieces());
  p_->states->finish_write_back();
  p_->telemetry->optimizer_ran(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_opt).count());
  if (p_->scheduler) {
    p_->scheduler->step();
    apply_schedule();
  }
}

void Engine::arm_overlapped_step() {
  // Legal only without global clipping and without overflow checks (the plan decided): no step-wide
  // quantity is needed before a sub-group's update, so each runs once its gradients are final.
  p_->optimizer->begin_step();
  step_in_flight_ = true;
  const double inv_scale = 1.0 / p_->scaler->scale();  // a static fp16 scale
  p_->states->arm_sub_group_steps([this, inv_scale](size_t g, int64_t begin, int64_t end) {
    torch::NoGradGuard no_grad;
    torch::Tensor grads = p_->states->local_grads(g);  // the fp32 host partition itself (offload)
    if (inv_scale != 1.0) grads.narrow(0, begin, end - begin).mul_(inv_scale);
    p_->optimizer->step_range(g, begin, end, grads);
    n_.overlapped_sub_group_steps += 1;
  });
}

void Engine::publish_overlapped_step() {
  // The optimizer already stepped every sub-group during backward; publish the parameters.
  step_in_flight_ = false;
  (void)p_->scaler->update(false);
  (void)p_->guard->skip(false, n_.global_steps + 1, n_.loss_accum, p_->scaler->scale(), [] { return std::string(); });
  n_.last_step_applied = true;
  n_.last_grad_norm = -1.0;
  std::vector<torch::Tensor> masters;
  for (size_t g = 0; g < p_->states->num_groups(); ++g) masters.push_back(p_->optimizer->master(g));
  p_->states->write_back(masters);
  if (p_->scheduler) {
    p_->scheduler->step();
    apply_schedule();
  }
}

void Engine::apply_schedule() {
  // The schedule was built over the optimizer's groups (one per flat group), in the same order.
  const auto& groups = p_->scheduler->groups();
  for (size_t g = 0; g < p_->optimizer->num_groups() && g < groups.size(); ++g) {
    p_->optimizer->set_lr(g, groups[g].lr);
    p_->optimizer->set_betas(g, groups[g].betas);
  }
}

StepSnapshot Engine::snapshot() const {
  return {n_.global_steps,  n_.global_samples,       n_.micro_steps, n_.skipped_steps, n_.loss_accum, n_.last_grad_norm,
          loss_scale(),   p_->scaler->dynamic(), get_lr(),     get_mom()};
}

std::vector<double> Engine::get_lr() const { return p_->optimizer ? p_->optimizer->lrs() : std::vector<double>{}; }

std::vector<std::array<double, 2>> Engine::get_mom() const {
  return p_->optimizer ? p_->optimizer->betas() : std::vector<std::array<double, 2>>{};
}

void Engine::settle_parameters() { p_->states->settle_params(); }

const zero::FlatParameters& Engine::flat_parameters() const {
  p_->states->settle_params();
  const zero::FlatParameters* flat = p_->states->flat();
  DS_CHECK(flat != nullptr, NotSupported,
           "flat_parameters(): at ZeRO stage 3 parameters are sharded, not flat (use model_states())");
  return *flat;
}

double Engine::loss_scale() const { return p_->scaler->scale(); }
int Engine::world_size() const { return p_->topology->world_size(); }
int Engine::rank() const { return p_->topology->rank(); }
comm::Communicator& Engine::communicator() { return p_->topology->world(); }
const parallel::Topology& Engine::topology() const { return *p_->topology; }
const Config& Engine::config() const { return *p_->config; }
torch::Device Engine::device() const { return p_->device; }
const zero::DtypePlan& Engine::dtypes() const { return p_->dtypes; }
std::optional<torch::ScalarType> Engine::auto_cast_dtype() const {
  if (!config().fp16.enabled || !config().fp16.auto_cast) return std::nullopt;
  return p_->dtypes.compute;
}
const zero::ZeroPlan& Engine::zero_plan() const { return p_->zero; }
zero::ModelStates& Engine::model_states() { return *p_->states; }
const zero::ModelStates& Engine::model_states() const { return *p_->states; }
const zero::FlatOptimizer* Engine::optimizer() const { return p_->optimizer.get(); }
const precision::LossScaler& Engine::loss_scaler() const { return *p_->scaler; }
const nn::ActivationCheckpointing* Engine::activation_checkpointing() const { return p_->activation_checkpointing.get(); }
const MemoryLedger& Engine::memory() const { return *p_->ledger; }
std::string Engine::log_comms_summary(bool show_straggler) const {
  std::string table = comm::CommsLogger::global().format_summary();
  if (show_straggler) table += comm::CommsLogger::global().format_straggler_summary(p_->topology->world());
  log::info("communication summary (comms_logger):\n{}", table);
  return table;
}

std::string Engine::memory_report() const { return "memory held by the engine, per tier:\n" + p_->ledger->table(); }

}  // namespace ds
