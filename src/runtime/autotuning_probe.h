// AutotuningProbe: an engine started by ds-autotune as one experiment measures itself and ends the
// process, as DeepSpeed's engine does (_autotuning_exit, autotuning_profile_model_info): the user's
// program needs no change to be tuned. Two kinds of experiment, told apart by the config's
// autotuning section (config/autotuning_config.h):
// - model_info.profile with model_info_path: after the first forward, rank 0 writes the model's
//   parameter counts and sizes, the activation memory that forward kept (CountingCpuAllocator) and
//   the job's shape, then every rank exits 0.
// - metric_path: the global steps after start_profile_step up to end_profile_step are timed; rank 0
//   writes {"throughput", "latency", "FLOPS_per_gpu", ...} to metric_path and every rank exits 0.
// A config with autotuning enabled and neither key trains normally (DeepSpeed would exit after
// end_profile_step there too; we say once that only ds-autotune's experiments do).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "parallel/topology.h"
#include "profiling/flops_profiler.h"
#include "runtime/cpu_allocation_counter.h"

namespace ds {

class AutotuningProbe {
 public:
  // Reads the trainable parameters' sizes now: build it before ZeRO-3 partitions them.
  AutotuningProbe(const Config& config, const parallel::Topology& topology, torch::nn::Module& module,
                  bool has_layer_list);
  ~AutotuningProbe();

  void forward_started(int64_t global_steps);
  void forward_finished();
  // At an accumulation boundary, after the counters advanced to `global_steps`.
  void step_finished(int64_t global_steps);

 private:
  [[noreturn]] void end_experiment(const std::string& path, const std::string& json_text, const char* what);

  const Config& config_;
  const parallel::Topology& topology_;
  torch::nn::Module& module_;
  bool profile_ = false, timing_ = false, has_layer_list_ = false;
  int64_t num_params_ = 0, trainable_params_ = 0;
  std::vector<int64_t> trainable_numels_;
  std::unique_ptr<CountingCpuAllocator::Scope> counting_;
  uint64_t rss_before_forward_ = 0;
  std::unique_ptr<profiling::FlopsProfiler> flops_;  // rank 0, metric flops: one forward counted
  int64_t forward_flops_ = 0;
  std::chrono::steady_clock::time_point t0_;
  std::vector<double> step_seconds_;
  std::chrono::steady_clock::time_point last_boundary_;
};

}  // namespace ds
