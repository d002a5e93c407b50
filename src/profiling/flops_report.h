// The flops profiler's printout in DeepSpeed's layout (profiler.py print_model_profile): the
// "Profile Summary at step N" block, "Aggregated Profile per GPU" (top modules per depth by
// class name) and, when `detailed`, "Detailed Profile per GPU" (the module tree annotated
// "<params> = x% Params, <MACs> = y% MACs, <latency> = z% latency, <FLOPS>"). deepspeed.cpp adds
// three lines DeepSpeed lacks at the end of the summary: fwd+bwd flops, peak FLOPS and MFU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/flops_profiler_config.h"
#include "profiling/module_tree.h"

namespace ds::profiling {

// What the engine measured around the profiled step (DeepSpeed reads them from its timers).
struct ProfileTimings {
  int64_t profile_step = 1;
  // false: standalone use, the world/data/model parallel size and batch size lines are left out
  // (DeepSpeed prints them only with an engine).
  bool has_engine = true;
  int64_t world_size = 1;
  int64_t dp_world_size = 1;
  int64_t mp_world_size = 1;
  int64_t micro_batch_size = 1;  // train_micro_batch_size_per_gpu
  // Seconds. fwd unset: the profiler's own summed operator time. bwd and step set: the bwd, step,
  // iter, FLOPS per GPU and samples/second lines are printed (DeepSpeed: wall_clock_breakdown).
  std::optional<double> fwd_latency_s;
  std::optional<double> bwd_latency_s;
  std::optional<double> step_latency_s;
  // Peak FLOPS of one rank for the MFU line (0: no peak/MFU lines); `peak_source` says where it
  // came from ("given", "measured fp32 GEMM 2048x2048").
  double peak_flops = 0.0;
  std::string peak_source;
};

// The whole printout for `root` (FlopsProfiler::result()) as one string; lines end in '\n'.
std::string render_profile(const ModuleProfile& root, const ProfileTimings& timings,
                           const FlopsProfilerConfig& config);

// Writes `text` to config.output_file (creating its directory, truncating the file; ds::IoError
// naming the path on failure) or, without one, to stdout.
void write_profile(const std::string& text, const FlopsProfilerConfig& config);

// DeepSpeed's number formatting (profiler.py): f"{round(x / magnitude, 2):g} {unit}" with unit
// T, G, M, K, "", m or u chosen by size.
std::string number_to_string(double x);
std::string macs_to_string(double macs);         // "1.2 GMACs"
std::string flops_to_string(double flops);       // "3.4 TFLOPS"
std::string params_to_string(double params);     // "124.44 M", "1.5 B", "512"
std::string duration_to_string(double seconds);  // "12.5 ms"

}  // namespace ds::profiling
