// ds::profiling::FlopsProfiler: DeepSpeed's flops profiler for any torch::nn::Module. Between
// start() and stop() it sees every aten operator the calling thread runs (an at::RecordFunction
// thread-local callback: LibTorch has no module forward hooks), counts FLOPs and MACs from the
// input shapes with DeepSpeed's formulas (op_flops.h), times the operator, and attributes both
// to a module of the tree (module_tree.h). Only outermost operators count: aten::linear calls
// aten::addmm inside, and only the linear is counted and timed.
//
//   ds::profiling::FlopsProfiler prof(*model);
//   prof.start();
//   auto logits = model->forward(idx);
//   prof.stop();
//   prof.print(timings, config.flops_profiler);   // or render(...) for the text
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/flops_profiler_config.h"
#include "profiling/flops_report.h"
#include "profiling/module_tree.h"

namespace ds::profiling {

class FlopsProfiler {
 public:
  // Keeps a reference: `model` must outlive the profiler. Its module tree is read at start().
  explicit FlopsProfiler(torch::nn::Module& model);
  ~FlopsProfiler();  // stops if still running
  FlopsProfiler(const FlopsProfiler&) = delete;
  FlopsProfiler& operator=(const FlopsProfiler&) = delete;

  // Clears the counts, re-reads the module tree, and starts counting this thread's operators.
  // Throws ds::Error if another FlopsProfiler is running on this thread.
  void start();
  // Stops counting (no-op when not running); the counts stay until the next start().
  void stop();
  bool running() const noexcept { return running_; }

  // The counted tree (every node covers its subtree). Valid after start(), also while running.
  ModuleProfile result() const;
  int64_t total_flops() const;
  int64_t total_macs() const;
  int64_t total_params() const;
  double total_latency_s() const;  // summed time of the counted operators
  int64_t total_ops() const;       // outermost operators seen

  // DeepSpeed's printout (flops_report.h); print() writes it to config.output_file or stdout.
  std::string render(const ProfileTimings& timings, const FlopsProfilerConfig& config) const;
  void print(const ProfileTimings& timings, const FlopsProfilerConfig& config) const;

 private:
  friend struct ProfilerCallbacks;  // the RecordFunction callbacks (flops_profiler.cpp)
  struct OpFrame;

  std::unique_ptr<OpFrame> on_op_start(const char* name, c10::ArrayRef<c10::IValue> inputs);
  void on_op_end(OpFrame& frame, const std::vector<c10::IValue>& outputs);

  torch::nn::Module* model_;
  std::unique_ptr<ModuleIndex> index_;
  std::vector<SelfCost> self_;
  int last_param_module_ = -1;  // module of the latest operator that read a parameter
  uint64_t handle_ = 0;         // at::CallbackHandle
  int depth_ = 0;               // RecordFunction nesting depth on the profiled thread
  bool running_ = false;
};

// Peak FLOPS of one square fp32 matmul of size n on `device` (best of `repeats` timed runs
// after one warm-up): 2·n³ / seconds. A measured stand-in when the caller has no datasheet peak
// for the MFU line.
double measure_gemm_peak_flops(int64_t n = 1024, int repeats = 5,
                               torch::Device device = torch::kCPU);

}  // namespace ds::profiling
