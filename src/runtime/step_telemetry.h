// StepTelemetry: what the engine reports about its steps, in DeepSpeed's formats (reference §14.3):
// the progress line at steps_per_print, the throughput line, wall_clock_breakdown timings, the
// monitors' events (tensorboard / csv_monitor / jsonl_monitor, rank 0), the flops profile at
// profile_step and the NVMe swap phase report. The engine calls it at fixed points of a step and
// hands it a snapshot of its counters; it never changes what the engine computes.
#pragma once

#include <torch/torch.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "config/config.h"
#include "profiling/flops_profiler.h"
#include "profiling/monitor_master.h"
#include "util/memory_ledger.h"
#include "zero/flat_optimizer.h"
#include "zero/model_states.h"

namespace ds {

// The engine's counters at a point of a step.
struct StepSnapshot {
  int64_t global_steps = 0;
  int64_t global_samples = 0;
  int64_t micro_steps = 0;
  int64_t skipped_steps = 0;
  double loss = 0;        // this global step's loss so far (sum over micro-batches of loss/GAS)
  double grad_norm = -1;  // the last step's unscaled global norm (-1: not computed)
  double loss_scale = 1;
  bool dynamic_scale = false;
  std::vector<double> lrs;
  std::vector<std::array<double, 2>> moms;
};

class StepTelemetry {
 public:
  // `states` and `optimizer` (may be null) are read for the swap report; they must outlive this.
  // Opens the monitors: a bad output_path fails here (IoError).
  // With pipeline stages (`stage` ≥ 0 of `stages`), `profiles` marks one rank of each stage: each
  // profiles its own stage's modules, into output_file + ".stage<k>" (or stdout under a header).
  struct ProfilePlace {
    bool profiles = false;  // without stages: world rank 0
    int stage = -1;
    int stages = 1;
  };
  // `ledger` (may be null) is read for memory_breakdown's line.
  StepTelemetry(const Config& config, int rank, int world, torch::nn::Module& module, torch::Device device,
                zero::ModelStates* states, zero::FlatOptimizer* optimizer, ProfilePlace place,
                const MemoryLedger* ledger = nullptr);

  void forward_started(int64_t global_steps);  // starts the flops profiler at profile_step
  void forward_finished();
  void backward_started();
  // DeepSpeed logs the loss at the boundary's backward, x = samples before this step (with
  // log_loss false the caller logs it later with loss_event: a pipeline knows it only at the step).
  void backward_finished(bool boundary, double loss_so_far, int64_t global_samples, bool log_loss = true);
  void loss_event(double loss, int64_t global_samples);
  void step_started();
  void optimizer_ran(double seconds) { optimizer_seconds_ += seconds; }
  // At a boundary, before the counters advance: the progress line every steps_per_print steps.
  void boundary_reached(const StepSnapshot& s);
  // After the counters advanced: timings, monitor events, the flops profile, the throughput line.
  void step_finished(bool boundary, const StepSnapshot& s);
  // "step=<n>, skipped=<k>, lr=[...], mom=[...]" (and the loss line after the first step).
  void log_progress(const StepSnapshot& s) const;

 private:
  using Clock = std::chrono::steady_clock;
  void report_swap_phase();
  void log_memory() const;  // memory_breakdown: RSS and the ledger's tiers, every steps_per_print steps
  void log_timings(bool boundary) const;
  void log_throughput(const StepSnapshot& s, double step_seconds);
  void write_step_events(const StepSnapshot& s);
  void print_flops_profile(const StepSnapshot& s);

  const Config& config_;
  int world_;
  torch::Device device_;
  zero::ModelStates* states_;
  zero::FlatOptimizer* optimizer_;
  MonitorMaster monitor_;
  std::unique_ptr<profiling::FlopsProfiler> flops_profiler_;  // ProfilePlace::profiles, flops_profiler.enabled
  ProfilePlace place_;
  const MemoryLedger* ledger_;
  bool flops_profile_active_ = false;                         // this global step is profile_step
  // Milliseconds: this micro-step, and summed over this global step.
  double fwd_ = 0, bwd_ = 0, step_ = 0, fwd_sum_ = 0, bwd_sum_ = 0, step_sum_ = 0;
  Clock::time_point fwd_start_, bwd_start_, micro_start_, step_start_;
  bool step_started_ = false;
  double run_seconds_ = 0;         // global steps after the first two (DeepSpeed's running average)
  double optimizer_seconds_ = 0;   // in optimizer steps since the last swap report
  double last_scale_ = 0;          // DeepSpeed logs the scale as an int until it first changes
  bool scale_changed_ = false;
};

}  // namespace ds
