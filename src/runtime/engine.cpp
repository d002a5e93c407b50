// The training step's sequence. The work lives in the components (flat buffers, precision buffers,
// optimizer, scaler, schedule); this file only orders it as DeepSpeed's engine does (reference §2.3).
#include "runtime/engine.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>

#include "precision/overflow.h"
#include "zero/collectives.h"
#include "util/error.h"
#include "util/logging.h"

namespace ds {

Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() {
  // The LayerList belongs to the model, which may outlive the engine.
  if (layers_ && activation_checkpointing_ && layers_->runner() == activation_checkpointing_.get())
    layers_->set_runner(nullptr);
}

bool Engine::is_gradient_accumulation_boundary() const {
  return (micro_steps_ + 1) % config_.gradient_accumulation_steps == 0;
}

void Engine::before_forward() {
  states_->before_forward();
  states_->forward_started();
  if (!timings_.step_started) {
    timings_.step_start = Clock::now();
    timings_.step_started = true;
  }
  timings_.fwd_start = Clock::now();
  // The flops profiler counts the forward of profile_step (with accumulation, its last micro-batch).
  flops_profile_active_ = flops_profiler_ && global_steps_ == config_.flops_profiler.profile_step;
  if (flops_profile_active_) flops_profiler_->start();
}

void Engine::after_forward() {
  states_->forward_finished();
  if (flops_profiler_ && flops_profiler_->running()) flops_profiler_->stop();
  timings_.fwd = std::chrono::duration<double, std::milli>(Clock::now() - timings_.fwd_start).count();
  timings_.fwd_sum += timings_.fwd;
}

void Engine::backward(const torch::Tensor& loss) {
  DS_CHECK(loss.defined() && loss.numel() == 1, Error,
           fmt::format("engine.backward expects a scalar loss, got a tensor of shape {}",
                       loss.defined() ? fmt::format("{}", loss.sizes().vec()) : "undefined"));
  auto t0 = Clock::now();
  states_->before_forward();  // user code may have reset .grad (Module::zero_grad(set_to_none))
  torch::Tensor scaled = loss;
  if (config_.gradient_accumulation_steps > 1)
    scaled = loss.to(torch::kFloat32) / static_cast<double>(config_.gradient_accumulation_steps);
  loss_accum_ += scaled.detach().item<double>();
  // DeepSpeed logs the loss at the boundary's backward, x = samples before this step.
  if (monitor_.enabled() && is_gradient_accumulation_boundary())
    monitor_.write_events({{"Train/Samples/train_loss", loss_accum_, global_samples_}});
  const double s = scaler_->scale();
  if (s != 1.0) scaled = scaled.to(torch::kFloat32) * s;  // DeepSpeed: (loss.float() * cur_scale).backward()
  // The overlapped step runs before any check of the gradients: not for a step whose loss is already bad.
  if (overlap_step_ && optimizer_ && is_gradient_accumulation_boundary() && step_guard_.allows_step_before_check(loss_accum_))
    arm_overlapped_step();
  scaled.backward();
  states_->after_backward();
  timings_.bwd = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  timings_.bwd_sum += timings_.bwd;
}

bool Engine::check_non_finite(const std::vector<torch::Tensor>& grads) {
  // fp16 (either scaler) and the nan guard look for inf/NaN; bf16/fp32 without it never do (DeepSpeed).
  if (!step_guard_.checks_gradients()) return false;
  int32_t bad = std::isfinite(loss_accum_) && !precision::first_non_finite(grads).has_value() ? 0 : 1;
  // Partitions, or one rank's loss: every rank must take the same decision.
  if (world_size() > 1) comm_->all_reduce(comm::Buffer(&bad, 1), comm::ReduceOp::Max, "overflow_flag");
  return bad != 0;
}

std::string Engine::first_non_finite_name(const std::vector<torch::Tensor>& grads) const {
  for (size_t g = 0; g < grads.size(); ++g)
    for (const auto& s : states_->local_layout(g).slots)
      if (precision::has_inf_or_nan(grads[g].narrow(0, s.offset, s.numel))) return s.name;
  return states_->partitioned() ? "(none in this rank's partition)" : "(none found)";
}

double Engine::grad_norm(const std::vector<torch::Tensor>& grads) const {
  torch::NoGradGuard no_grad;
  if (states_->partitioned()) {
    // ZeRO: each rank's sum of squares over its partition, summed across ranks (one all-reduce).
    double sq = 0.0;
    for (const auto& g : grads) sq += g.to(torch::kFloat64).square().sum().item<double>();
    if (world_size() > 1) comm_->all_reduce(comm::Buffer(&sq, 1), comm::ReduceOp::Sum, "grad_norm");
    const double norm = std::sqrt(sq);
    return std::isfinite(norm) ? norm : -1.0;
  }
  // DeepSpeed's stage-0 arithmetic: the L2 norm of the stacked per-tensor L2 norms (reference §19).
  std::vector<torch::Tensor> norms;
  for (size_t g = 0; g < grads.size(); ++g)
    for (const auto& s : states_->local_layout(g).slots) norms.push_back(grads[g].narrow(0, s.offset, s.numel).norm());
  const double norm = torch::stack(norms).norm().item<double>();
  return std::isfinite(norm) ? norm : -1.0;
}

void Engine::unscale_and_clip(std::vector<torch::Tensor>& grads) {
  torch::NoGradGuard no_grad;
  const double clip = config_.gradient_clipping, scale = scaler_->scale();
  if (scale == 1.0) {
    if (clip <= 0.0) return;
    // fp32 path: coef = min(1, clip / (norm + 1e-6)), grads multiplied (runtime/utils.clip_grad_norm_).
    last_grad_norm_ = grad_norm(grads);
    const double coef = clip / (last_grad_norm_ + 1e-6);
    if (last_grad_norm_ >= 0 && coef < 1.0)
      for (auto& g : grads) g.mul_(coef);
    return;
  }
  // fp16 path: the norm of the scaled gradients, one combined unscale+clip factor (reference §10).
  const double scaled_norm = clip > 0.0 ? grad_norm(grads) : 0.0;
  precision::unscale_and_clip(grads, scale, clip, scaled_norm);
  last_grad_norm_ = clip > 0.0 ? scaled_norm / scale : -1.0;
}

void Engine::arm_overlapped_step() {
  // Legal only without global clipping and without overflow checks (setup decided): no step-wide
  // quantity is needed before a sub-group's update, so each runs once its gradients are final.
  optimizer_->begin_step();
  step_in_flight_ = true;
  const double inv_scale = 1.0 / scaler_->scale();  // a static fp16 scale
  states_->arm_sub_group_steps([this, inv_scale](size_t g, int64_t begin, int64_t end) {
    torch::NoGradGuard no_grad;
    torch::Tensor grads = states_->local_grads(g);  // the fp32 host partition itself (offload)
    if (inv_scale != 1.0) grads.narrow(0, begin, end - begin).mul_(inv_scale);
    optimizer_->step_range(g, begin, end, grads);
    overlapped_sub_group_steps_ += 1;
  });
}

void Engine::take_model_step() {
  if (step_in_flight_) {
    // The optimizer already stepped every sub-group during backward; publish the parameters.
    step_in_flight_ = false;
    (void)scaler_->update(false);
    (void)step_guard_.skip(false, global_steps_ + 1, loss_accum_, scaler_->scale(), [] { return std::string(); });
    last_step_applied_ = true;
    last_grad_norm_ = -1.0;
    std::vector<torch::Tensor> masters;
    for (size_t g = 0; g < states_->num_groups(); ++g) masters.push_back(optimizer_->master(g));
    states_->write_back(masters);
    if (scheduler_) {
      scheduler_->step();
      apply_schedule();
    }
    return;
  }
  states_->reduce_gradients();
  std::vector<torch::Tensor> grads;
  for (size_t g = 0; g < states_->num_groups(); ++g) grads.push_back(states_->local_grads(g));
  const bool non_finite = check_non_finite(grads);
  const bool overflow = non_finite && scaler_->dynamic();  // the dynamic scaler's to handle
  // Name the first parameter whose gradient held inf/NaN, so the user knows where to look.
  auto culprit = [&] { return first_non_finite_name(grads); };
  precision::ScaleUpdate update;
  try {
    update = scaler_->update(overflow);
  } catch (const precision::LossScaleUnderflow& e) {
    throw precision::LossScaleUnderflow(e.min_scale(), culprit());
  }
  // DeepSpeed's non-ZeRO scaler would skip forever at the floor; stop with the cause instead.
  if (overflow && scaler_->dynamic() && update.scale_before <= scaler_->state().min_scale)
    throw precision::LossScaleUnderflow(scaler_->state().min_scale, culprit());
  if (update.scale_after != update.scale_before) loss_scale_changed_ = true;
  if (auto line = overflow_summary_.observe(update)) log::info("{}", *line);
  last_step_applied_ = !overflow;
  // A static fp16 overflow, or a non-finite bf16/fp32 step under nan_guard, is skipped too (or stops the run).
  if (overflow || step_guard_.skip(non_finite, global_steps_ + 1, loss_accum_, scaler_->scale(), culprit)) {
    skipped_steps_ += 1;  // the LR schedule does not advance on a skipped step (DeepSpeed)
    last_step_applied_ = false;
    last_grad_norm_ = -1.0;
    return;
  }
  unscale_and_clip(grads);
  const auto t_opt = Clock::now();
  // Each updated master span goes to the 16-bit parameters as it is produced (with NVMe, one
  // sub-group at a time: no full fp32 master is ever in RAM).
  optimizer_->step(grads, [this](size_t g, int64_t offset, const torch::Tensor& master) {
    states_->write_back_range(g, offset, master);
  });
  states_->finish_write_back();
  optimizer_seconds_ += std::chrono::duration<double>(Clock::now() - t_opt).count();
  if (scheduler_) {
    scheduler_->step();
    apply_schedule();
  }
}

void Engine::zero_grads() { states_->zero_grads(); }

void Engine::print_flops_profile() {
  flops_profile_active_ = false;
  profiling::ProfileTimings t;
  t.profile_step = global_steps_;  // DeepSpeed prints global_steps after the increment
  t.world_size = t.dp_world_size = world_size();
  t.micro_batch_size = config_.train_micro_batch_size_per_gpu;
  t.fwd_latency_s = timings_.fwd / 1e3;  // the profiled micro-step
  t.bwd_latency_s = timings_.bwd / 1e3;
  t.step_latency_s = timings_.step / 1e3;
  // MFU against the user's peak (DS_PEAK_TFLOPS, e.g. a datasheet figure) or a measured GEMM peak.
  if (const char* peak = std::getenv("DS_PEAK_TFLOPS"); peak != nullptr && std::atof(peak) > 0) {
    t.peak_flops = std::atof(peak) * 1e12;
    t.peak_source = "DS_PEAK_TFLOPS";
  } else {
    t.peak_flops = profiling::measure_gemm_peak_flops(1024, 3, device_);
    t.peak_source = "measured fp32 GEMM 1024x1024";
  }
  flops_profiler_->print(t, config_.flops_profiler);
}

void Engine::write_step_events(bool boundary) {
  if (!boundary || !monitor_.enabled()) return;
  // x = global samples after the step; written even for an overflow-skipped step, as DeepSpeed.
  const auto lr = get_lr();
  std::vector<MonitorEvent> events{{"Train/Samples/lr", lr.empty() ? 0.0 : lr[0], global_samples_}};
  if (config_.fp16.enabled) {
    const double s = scaler_->scale();
    const bool as_int = scaler_->dynamic() ? !loss_scale_changed_ : s == std::trunc(s);
    events.push_back({"Train/Samples/loss_scale", s, global_samples_, as_int ? ValueKind::Int : ValueKind::Float});
  }
  if (config_.wall_clock_breakdown || config_.flops_profiler.enabled) {
    for (const auto& [name, ms] : {std::pair<const char*, double>{"forward", timings_.fwd_sum},
                                   {"backward", timings_.bwd_sum}, {"backward_inner", timings_.bwd_sum},
                                   {"backward_allreduce", 0.0}, {"step", timings_.step_sum}})
      events.push_back({std::string("Train/Samples/elapsed_time_ms_") + name, ms, global_samples_});
  }
  monitor_.write_events(events);
}

const zero::FlatParameters& Engine::flat_parameters() const {
  const zero::FlatParameters* flat = states_->flat();
  DS_CHECK(flat != nullptr, NotSupported,
           "flat_parameters(): at ZeRO stage 3 parameters are sharded, not flat (use model_states())");
  return *flat;
}

void Engine::step() {
  auto t0 = Clock::now();
  const bool boundary = is_gradient_accumulation_boundary();
  if (boundary) {
    if (!optimizer_)
      throw ConfigError("optimizer", "engine.step() needs an optimizer; add an \"optimizer\" section to the config");
    take_model_step();
    zero_grads();
    if (config_.steps_per_print && *config_.steps_per_print > 0 &&
        (global_steps_ + 1) % *config_.steps_per_print == 0) {
      log_progress();
      report_swap_phase();
    }
    global_steps_ += 1;
    global_samples_ += config_.train_batch_size;
    last_loss_ = loss_accum_;
    loss_accum_ = 0.0;
    stop_.agree(*comm_);  // a stop request takes effect on every rank at the same boundary
  }
  timings_.step = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  timings_.step_sum += timings_.step;
  if (config_.wall_clock_breakdown) log_timings(boundary);
  write_step_events(boundary);
  if (boundary && flops_profile_active_) print_flops_profile();
  if (boundary) {
    log_throughput(std::chrono::duration<double>(Clock::now() - timings_.step_start).count());
    timings_.fwd_sum = timings_.bwd_sum = timings_.step_sum = 0;
    timings_.step_started = false;
  }
  micro_steps_ += 1;
}

std::vector<double> Engine::get_lr() const {
  if (optimizer_) return optimizer_->lrs();
  return {};
}

std::vector<std::array<double, 2>> Engine::get_mom() const {
  if (optimizer_) return optimizer_->betas();
  return {};
}

void Engine::apply_schedule() {
  // The schedule was built over the optimizer's groups (one per flat group), in the same order.
  const auto& groups = scheduler_->groups();
  for (size_t g = 0; g < optimizer_->num_groups() && g < groups.size(); ++g) {
    optimizer_->set_lr(g, groups[g].lr);
    optimizer_->set_betas(g, groups[g].betas);
  }
}

std::string Engine::memory_report() const {
  return "memory held by the engine, per tier:\n" + ledger_.table();
}

}  // namespace ds
