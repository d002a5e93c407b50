#include "runtime/step_telemetry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>

#include "util/logging.h"
#include "util/system_info.h"

namespace ds {

StepTelemetry::StepTelemetry(const Config& config, int rank, int world, torch::nn::Module& module, torch::Device device,
                             zero::ModelStates* states, zero::FlatOptimizer* optimizer, ProfilePlace place,
                             const MemoryLedger* ledger)
    : config_(config), world_(world), device_(device), states_(states), optimizer_(optimizer),
      monitor_(monitor_options(config, rank)), place_(place), ledger_(ledger) {
  if (config.flops_profiler.enabled && place.profiles)
    flops_profiler_ = std::make_unique<profiling::FlopsProfiler>(module);
}

void StepTelemetry::forward_started(int64_t global_steps) {
  if (!step_started_) {
    step_start_ = Clock::now();
    step_started_ = true;
  }
  fwd_start_ = Clock::now();
  // The flops profiler counts the forward of profile_step (with accumulation, its last micro-batch).
  flops_profile_active_ = flops_profiler_ && global_steps == config_.flops_profiler.profile_step;
  if (flops_profile_active_) flops_profiler_->start();
}

void StepTelemetry::forward_finished() {
  if (flops_profiler_ && flops_profiler_->running()) flops_profiler_->stop();
  fwd_ = std::chrono::duration<double, std::milli>(Clock::now() - fwd_start_).count();
  fwd_sum_ += fwd_;
}

void StepTelemetry::backward_started() { bwd_start_ = Clock::now(); }

void StepTelemetry::backward_finished(bool boundary, double loss_so_far, int64_t global_samples, bool log_loss) {
  bwd_ = std::chrono::duration<double, std::milli>(Clock::now() - bwd_start_).count();
  bwd_sum_ += bwd_;
  if (boundary && log_loss) loss_event(loss_so_far, global_samples);
}

void StepTelemetry::loss_event(double loss, int64_t global_samples) {
  if (monitor_.enabled()) monitor_.write_events({{"Train/Samples/train_loss", loss, global_samples}});
}

void StepTelemetry::step_started() { micro_start_ = Clock::now(); }

void StepTelemetry::boundary_reached(const StepSnapshot& s) {
  const auto every = config_.steps_per_print;
  if (!every || *every <= 0 || (s.global_steps + 1) % *every != 0) return;
  log_progress(s);
  if (config_.memory_breakdown) log_memory();
  report_swap_phase();
}

void StepTelemetry::log_memory() const {
  // DeepSpeed's see_memory_usage line, in this engine's terms: the process and its model states by tier.
  constexpr double kMiB = 1024.0 * 1024.0;
  std::string states = "no ledger";
  if (ledger_)
    states = fmt::format("device {:.1f} MB, cpu {:.1f} MB, nvme {:.1f} MB", ledger_->tier_total(Tier::Device) / kMiB,
                         ledger_->tier_total(Tier::Cpu) / kMiB, ledger_->tier_total(Tier::Nvme) / kMiB);
  log::info("memory: RSS {:.1f} MB (peak {:.1f} MB); model states {}", double(current_rss_bytes()) / kMiB,
            double(peak_rss_bytes()) / kMiB, states);
}

void StepTelemetry::step_finished(bool boundary, const StepSnapshot& s) {
  step_ = std::chrono::duration<double, std::milli>(Clock::now() - micro_start_).count();
  step_sum_ += step_;
  if (s.loss_scale != last_scale_ && last_scale_ != 0) scale_changed_ = true;
  last_scale_ = s.loss_scale;
  if (config_.wall_clock_breakdown) log_timings(boundary);
  if (!boundary) return;
  write_step_events(s);
  if (flops_profile_active_) print_flops_profile(s);
  log_throughput(s, std::chrono::duration<double>(Clock::now() - step_start_).count());
  fwd_sum_ = bwd_sum_ = step_sum_ = 0;
  step_started_ = false;
}

void StepTelemetry::log_progress(const StepSnapshot& s) const {
  // "step=<n>, skipped=<k>, lr=[...], mom=[...]"; ours adds the last step's loss on its own line.
  std::vector<std::string> moms;
  for (const auto& b : s.moms) moms.push_back(fmt::format("({}, {})", b[0], b[1]));
  log::info("step={}, skipped={}, lr={}, mom=[{}]", s.global_steps, s.skipped_steps, s.lrs, fmt::join(moms, ", "));
  if (s.global_steps > 0)
    log::info("loss={:.6f}, loss_scale={}, grad_norm={:.4f}", s.loss, s.loss_scale, s.grad_norm);
}

void StepTelemetry::report_swap_phase() {
  // ZeRO-Infinity: is the disk the limit? Time the optimizer steps spent waiting on swap reads and
  // writes against the rest (compute), and the bandwidth the swapper achieved over those steps.
  if (const auto p = states_ ? states_->param_swap_stats() : std::nullopt) {
    // offload_param nvme: reads happen in forward/backward (prefetched), writes after the optimizer.
    log::info("nvme parameter swap since the last report: read {} in {} shard reads, waited {:.3f} s on them "
              "(forward/backward); wrote {} in {} shard writes, waited {:.3f} s on them",
              format_bytes(uint64_t(p->bytes_read)), p->shard_reads, p->read_wait_s, format_bytes(uint64_t(p->bytes_written)),
              p->shard_writes, p->write_wait_s);
    states_->reset_param_swap_stats();
  }
  const auto s = optimizer_ ? optimizer_->swap_stats() : std::nullopt;
  if (!s) return;
  const double wait = s->read_wait_s + s->write_wait_s, bytes = double(s->bytes_read + s->bytes_written);
  log::info("nvme optimizer swap since the last report: steps {:.3f} s = compute {:.3f} s + waiting on reads {:.3f} s "
            "+ on writes {:.3f} s; read {} and wrote {}, {:.2f} GB/s over the steps",
            optimizer_seconds_, std::max(0.0, optimizer_seconds_ - wait), s->read_wait_s, s->write_wait_s,
            format_bytes(uint64_t(s->bytes_read)), format_bytes(uint64_t(s->bytes_written)),
            optimizer_seconds_ > 0 ? bytes / optimizer_seconds_ / 1e9 : 0.0);
  optimizer_->reset_swap_stats();
  optimizer_seconds_ = 0;
}

void StepTelemetry::log_timings(bool boundary) const {
  log::info("time (ms) | fwd_microstep: {:.2f} | bwd_microstep: {:.2f} | bwd_inner_microstep: {:.2f} | "
            "bwd_allreduce_microstep: {:.2f} | step_microstep: {:.2f}",
            fwd_, bwd_, bwd_, 0.0, step_);
  if (boundary)
    log::info("time (ms) | fwd: {:.2f} | bwd: {:.2f} | bwd_inner: {:.2f} | bwd_allreduce: {:.2f} | step: {:.2f}",
              fwd_sum_, bwd_sum_, bwd_sum_, 0.0, step_sum_);
}

void StepTelemetry::log_throughput(const StepSnapshot& s, double step_seconds) {
  // DeepSpeed's running average leaves out the first two global steps (start_step = 2).
  if (s.global_steps > 2) run_seconds_ += step_seconds;
  const auto every = config_.steps_per_print;
  if (!config_.throughput_timer || !every || *every <= 0 || s.global_steps % *every != 0) return;
  const double batch = static_cast<double>(config_.train_batch_size);
  const double running =
      s.global_steps > 2 && run_seconds_ > 0 ? batch / (run_seconds_ / static_cast<double>(s.global_steps - 2)) : 0.0;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  log::info("epoch=0/micro_step={}/global_step={}, RunningAvgSamplesPerSec={}, CurrSamplesPerSec={}, "
            "MemAllocated={:.2f}GB, MaxMemAllocated={:.2f}GB",
            s.micro_steps + 1, s.global_steps, running, batch / step_seconds, current_rss_bytes() / gib,
            peak_rss_bytes() / gib);
}

void StepTelemetry::write_step_events(const StepSnapshot& s) {
  if (!monitor_.enabled()) return;
  // x = global samples after the step; written even for an overflow-skipped step, as DeepSpeed.
  std::vector<MonitorEvent> events{{"Train/Samples/lr", s.lrs.empty() ? 0.0 : s.lrs[0], s.global_samples}};
  if (config_.fp16.enabled) {
    const double scale = s.loss_scale;
    const bool as_int = s.dynamic_scale ? !scale_changed_ : scale == std::trunc(scale);
    events.push_back({"Train/Samples/loss_scale", scale, s.global_samples, as_int ? ValueKind::Int : ValueKind::Float});
  }
  if (config_.wall_clock_breakdown || config_.flops_profiler.enabled) {
    for (const auto& [name, ms] : {std::pair<const char*, double>{"forward", fwd_sum_}, {"backward", bwd_sum_},
                                   {"backward_inner", bwd_sum_}, {"backward_allreduce", 0.0}, {"step", step_sum_}})
      events.push_back({std::string("Train/Samples/elapsed_time_ms_") + name, ms, s.global_samples});
  }
  monitor_.write_events(events);
}

void StepTelemetry::print_flops_profile(const StepSnapshot& s) {
  flops_profile_active_ = false;
  profiling::ProfileTimings t;
  t.profile_step = s.global_steps;  // DeepSpeed prints global_steps after the increment
  t.world_size = world_;
  t.dp_world_size = config_.data_parallel_size;  // DeepSpeed's data-parallel size: world / (pipe x tensor x sequence)
  t.micro_batch_size = config_.train_micro_batch_size_per_gpu;
  t.fwd_latency_s = fwd_ / 1e3;  // the profiled micro-step
  t.bwd_latency_s = bwd_ / 1e3;
  t.step_latency_s = step_ / 1e3;
  // MFU against the user's peak (DS_PEAK_TFLOPS, e.g. a datasheet figure) or a measured GEMM peak.
  if (const char* peak = std::getenv("DS_PEAK_TFLOPS"); peak != nullptr && std::atof(peak) > 0) {
    t.peak_flops = std::atof(peak) * 1e12;
    t.peak_source = "DS_PEAK_TFLOPS";
  } else {
    t.peak_flops = profiling::measure_gemm_peak_flops(1024, 3, device_);
    t.peak_source = "measured fp32 GEMM 1024x1024";
  }
  if (place_.stage < 0) {
    flops_profiler_->print(t, config_.flops_profiler);
    return;
  }
  // A pipeline stage: its own file, or stdout under a header naming the stage.
  FlopsProfilerConfig per_stage = config_.flops_profiler;
  if (per_stage.output_file && !per_stage.output_file->empty()) {
    *per_stage.output_file += ".stage" + std::to_string(place_.stage);
    flops_profiler_->print(t, per_stage);
  } else {
    std::cout << "pipeline stage " << place_.stage << " of " << place_.stages << ": this stage's layers\n";
    flops_profiler_->print(t, per_stage);
  }
}

}  // namespace ds
