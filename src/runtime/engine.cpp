// The training step's sequence. The work lives in the components (flat buffers, precision buffers,
// optimizer, scaler, schedule); this file only orders it as DeepSpeed's engine does (reference §2.3).
#include "runtime/engine.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "precision/overflow.h"
#include "zero/collectives.h"
#include "util/error.h"
#include "util/logging.h"

namespace ds {

Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

bool Engine::is_gradient_accumulation_boundary() const {
  return (micro_steps_ + 1) % config_.gradient_accumulation_steps == 0;
}

void Engine::before_forward() {
  states_->before_forward();
  if (!timings_.step_started) {
    timings_.step_start = Clock::now();
    timings_.step_started = true;
  }
  timings_.fwd_start = Clock::now();
}

void Engine::after_forward() {
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
  const double s = scaler_->scale();
  if (s != 1.0) scaled = scaled.to(torch::kFloat32) * s;  // DeepSpeed: (loss.float() * cur_scale).backward()
  if (overlap_step_ && optimizer_ && is_gradient_accumulation_boundary()) arm_overlapped_step();
  scaled.backward();
  states_->after_backward();
  timings_.bwd = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  timings_.bwd_sum += timings_.bwd;
}

bool Engine::check_overflow(const std::vector<torch::Tensor>& grads) {
  // Only a dynamic fp16 scaler looks for inf/NaN (DeepSpeed: bf16/fp32 never skip, §8.1).
  if (!scaler_->dynamic()) return false;
  int32_t overflow = precision::first_non_finite(grads).has_value() ? 1 : 0;
  // Partitions: one rank's inf skips the step everywhere.
  if (states_->partitioned() && world_size() > 1) comm_->all_reduce(comm::Buffer(&overflow, 1), comm::ReduceOp::Max, "overflow_flag");
  return overflow != 0;
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
  const bool overflow = check_overflow(grads);
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
  if (auto line = overflow_summary_.observe(update)) log::info("{}", *line);
  last_step_applied_ = !overflow;
  if (overflow) {
    skipped_steps_ += 1;  // the LR schedule does not advance on a skipped step (DeepSpeed)
    last_grad_norm_ = -1.0;
    return;
  }
  unscale_and_clip(grads);
  optimizer_->step(grads);
  std::vector<torch::Tensor> masters;
  for (size_t g = 0; g < grads.size(); ++g) masters.push_back(optimizer_->master(g));
  states_->write_back(masters);
  if (scheduler_) {
    scheduler_->step();
    apply_schedule();
  }
}

void Engine::zero_grads() { states_->zero_grads(); }

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
        (global_steps_ + 1) % *config_.steps_per_print == 0)
      log_progress();
    global_steps_ += 1;
    global_samples_ += config_.train_batch_size;
    last_loss_ = loss_accum_;
    loss_accum_ = 0.0;
  }
  timings_.step = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  timings_.step_sum += timings_.step;
  if (config_.wall_clock_breakdown) log_timings(boundary);
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
