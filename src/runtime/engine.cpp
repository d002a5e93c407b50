// The training step's sequence. The work lives in the parts (runtime/engine_builder.h); this file
// only orders it as DeepSpeed's engine does (reference §2.3).
#include "runtime/engine.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>

#include "comm/comm.h"
#include "precision/step_decision.h"

#include "util/error.h"
#include "util/logging.h"

namespace ds {
namespace {

std::shared_ptr<torch::nn::Module> non_null(std::shared_ptr<torch::nn::Module> module) {
  DS_CHECK(module != nullptr, Error, "ds::initialize: model is null");
  return module;
}

}  // namespace

Engine::Engine(std::shared_ptr<torch::nn::Module> module, Config cfg, EngineOptions options)
    : module_(non_null(std::move(module))),
      layers_(options.layers), p_(build_engine_parts(*module_, std::move(cfg), options)) {
  if (p_.scheduler) apply_schedule();  // construction sets the initial lr (e.g. warmup_min_lr), as DeepSpeed's does
  log::info("engine ready (rank {} of {}, {} backend, ZeRO stage {}): {} trainable parameters in {} group(s) on {}; "
            "batch {} = micro {} x GAS {} x world {}",
            rank(), world_size(), comm::to_string(communicator().backend()), p_.zero.stage, p_.states->numel(),
            p_.states->num_groups(), p_.device.str(), config().train_batch_size, config().train_micro_batch_size_per_gpu,
            config().gradient_accumulation_steps, world_size());
  log::info("{}", p_.dtypes.table());
  for (const auto& line : p_.zero.describe()) log::info("{}", line);
  if (config().steps_per_print) p_.telemetry->log_progress(snapshot());
}

Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() {
  // The LayerList belongs to the model, which may outlive the engine.
  if (layers_ && p_.activation_checkpointing && layers_->runner() == p_.activation_checkpointing.get())
    layers_->set_runner(nullptr);
}

bool Engine::is_gradient_accumulation_boundary() const {
  return (micro_steps_ + 1) % config().gradient_accumulation_steps == 0;
}

void Engine::before_forward() {
  p_.states->before_forward();
  p_.states->forward_started();
  p_.telemetry->forward_started(global_steps_);
}

void Engine::after_forward() {
  p_.states->forward_finished();
  p_.telemetry->forward_finished();
}

void Engine::backward(const torch::Tensor& loss) {
  DS_CHECK(loss.defined() && loss.numel() == 1, Error,
           fmt::format("engine.backward expects a scalar loss, got a tensor of shape {}",
                       loss.defined() ? fmt::format("{}", loss.sizes().vec()) : "undefined"));
  p_.telemetry->backward_started();
  p_.states->before_forward();  // user code may have reset .grad (Module::zero_grad(set_to_none))
  const int64_t gas = config().gradient_accumulation_steps;
  torch::Tensor scaled = gas > 1 ? loss.to(torch::kFloat32) / static_cast<double>(gas) : loss;
  loss_accum_ += scaled.detach().item<double>();
  const double s = p_.scaler->scale();
  if (s != 1.0) scaled = scaled.to(torch::kFloat32) * s;  // DeepSpeed: (loss.float() * cur_scale).backward()
  // The overlapped step runs before any check of the gradients: not for a step whose loss is already bad.
  const bool boundary = is_gradient_accumulation_boundary();
  if (p_.zero.overlap_step && boundary && p_.guard->allows_step_before_check(loss_accum_)) arm_overlapped_step();
  scaled.backward();
  p_.states->after_backward();
  p_.telemetry->backward_finished(boundary, loss_accum_, global_samples_);
}

void Engine::step() {
  p_.telemetry->step_started();
  const bool boundary = is_gradient_accumulation_boundary();
  if (boundary) {
    if (!p_.optimizer)
      throw ConfigError("optimizer", "engine.step() needs an optimizer; add an \"optimizer\" section to the config");
    take_model_step();
    p_.states->zero_grads();
    p_.telemetry->boundary_reached(snapshot());
    global_steps_ += 1;
    global_samples_ += config().train_batch_size;
    last_loss_ = loss_accum_;
    loss_accum_ = 0.0;
    stop_.agree(p_.topology->world());  // a stop request takes effect on every rank at the same boundary
  }
  p_.telemetry->step_finished(boundary, snapshot());
  micro_steps_ += 1;
}

void Engine::take_model_step() {
  if (step_in_flight_) return publish_overlapped_step();
  p_.states->reduce_gradients();
  precision::GradientSpans grads = gradient_spans();
  if (precision::skip_step({&p_.data_parallel(), &grads, loss_accum_, global_steps_ + 1}, *p_.scaler, *p_.guard,
                           overflow_summary_)) {
    skipped_steps_ += 1;  // the LR schedule does not advance on a skipped step (DeepSpeed)
    last_step_applied_ = false;
    last_grad_norm_ = -1.0;
    return;
  }
  last_step_applied_ = true;
  last_grad_norm_ = precision::unscale_and_clip(p_.data_parallel(), grads, p_.scaler->scale(), config().gradient_clipping);
  const auto t_opt = std::chrono::steady_clock::now();
  // Each updated master span goes to the 16-bit parameters as it is produced (with NVMe, one
  // sub-group at a time: no full fp32 master is ever in RAM).
  p_.optimizer->step(grads.flat, [this](size_t g, int64_t offset, const torch::Tensor& master) {
    p_.states->write_back_range(g, offset, master);
  });
  p_.states->finish_write_back();
  p_.telemetry->optimizer_ran(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_opt).count());
  if (p_.scheduler) {
    p_.scheduler->step();
    apply_schedule();
  }
}

void Engine::arm_overlapped_step() {
  // Legal only without global clipping and without overflow checks (the plan decided): no step-wide
  // quantity is needed before a sub-group's update, so each runs once its gradients are final.
  p_.optimizer->begin_step();
  step_in_flight_ = true;
  const double inv_scale = 1.0 / p_.scaler->scale();  // a static fp16 scale
  p_.states->arm_sub_group_steps([this, inv_scale](size_t g, int64_t begin, int64_t end) {
    torch::NoGradGuard no_grad;
    torch::Tensor grads = p_.states->local_grads(g);  // the fp32 host partition itself (offload)
    if (inv_scale != 1.0) grads.narrow(0, begin, end - begin).mul_(inv_scale);
    p_.optimizer->step_range(g, begin, end, grads);
    overlapped_sub_group_steps_ += 1;
  });
}

void Engine::publish_overlapped_step() {
  // The optimizer already stepped every sub-group during backward; publish the parameters.
  step_in_flight_ = false;
  (void)p_.scaler->update(false);
  (void)p_.guard->skip(false, global_steps_ + 1, loss_accum_, p_.scaler->scale(), [] { return std::string(); });
  last_step_applied_ = true;
  last_grad_norm_ = -1.0;
  std::vector<torch::Tensor> masters;
  for (size_t g = 0; g < p_.states->num_groups(); ++g) masters.push_back(p_.optimizer->master(g));
  p_.states->write_back(masters);
  if (p_.scheduler) {
    p_.scheduler->step();
    apply_schedule();
  }
}

precision::GradientSpans Engine::gradient_spans() const {
  precision::GradientSpans grads;
  grads.partitioned = p_.states->partitioned();
  for (size_t g = 0; g < p_.states->num_groups(); ++g) {
    grads.flat.push_back(p_.states->local_grads(g));
    for (const auto& s : p_.states->local_layout(g).slots) grads.pieces.push_back({s.name, g, s.offset, s.numel});
  }
  return grads;
}

void Engine::apply_schedule() {
  // The schedule was built over the optimizer's groups (one per flat group), in the same order.
  const auto& groups = p_.scheduler->groups();
  for (size_t g = 0; g < p_.optimizer->num_groups() && g < groups.size(); ++g) {
    p_.optimizer->set_lr(g, groups[g].lr);
    p_.optimizer->set_betas(g, groups[g].betas);
  }
}

StepSnapshot Engine::snapshot() const {
  return {global_steps_,  global_samples_,       micro_steps_, skipped_steps_, loss_accum_, last_grad_norm_,
          loss_scale(),   p_.scaler->dynamic(), get_lr(),     get_mom()};
}

std::vector<double> Engine::get_lr() const { return p_.optimizer ? p_.optimizer->lrs() : std::vector<double>{}; }

std::vector<std::array<double, 2>> Engine::get_mom() const {
  return p_.optimizer ? p_.optimizer->betas() : std::vector<std::array<double, 2>>{};
}

const zero::FlatParameters& Engine::flat_parameters() const {
  const zero::FlatParameters* flat = p_.states->flat();
  DS_CHECK(flat != nullptr, NotSupported,
           "flat_parameters(): at ZeRO stage 3 parameters are sharded, not flat (use model_states())");
  return *flat;
}

std::string Engine::memory_report() const { return "memory held by the engine, per tier:\n" + p_.ledger->table(); }

}  // namespace ds
