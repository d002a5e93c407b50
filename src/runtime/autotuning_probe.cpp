#include "runtime/autotuning_probe.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "comm/mpi_exit.h"
#include "nn/activation_checkpointing.h"
#include "runtime/world.h"
#include "util/error.h"
#include "util/logging.h"
#include "util/system_info.h"

namespace ds {
namespace {

// Written whole or not at all: ds-autotune reads a missing file as a failed experiment.
bool write_atomically(const std::string& path, const std::string& text) {
  std::error_code ec;
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text << "\n";
    out.flush();
    if (!out) return false;
  }
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}

}  // namespace

AutotuningProbe::AutotuningProbe(const Config& config, const parallel::Topology& topology, torch::nn::Module& module,
                                 bool has_layer_list)
    : config_(config), topology_(topology), module_(module), has_layer_list_(has_layer_list) {
  const AutotuningConfig& a = config.autotuning;
  profile_ = a.enabled && a.model_info && a.model_info->profile && a.model_info_path;
  timing_ = a.enabled && a.metric_path && !profile_;
  if (a.enabled && !profile_ && !timing_ && topology.rank() == 0)
    log::info("autotuning.enabled: this run trains normally; `ds-autotune` (or `ds-run --autotuning tune`) runs the "
              "experiments, whose configs carry autotuning.metric_path (DeepSpeed's engine would end this process "
              "after autotuning.end_profile_step)");
  // A pipeline's first stage would stop after its first forward while the others wait on it.
  if (profile_ && topology.pipe().size() > 1)
    throw ConfigError("autotuning.model_info.profile",
                      "the model profile runs one forward on every rank; with pipeline.stages > 1 the stages would "
                      "wait on each other: profile the model without pipeline stages");
  for (const auto& p : module.parameters()) {
    num_params_ += p.numel();
    if (p.requires_grad()) {
      trainable_params_ += p.numel();
      trainable_numels_.push_back(p.numel());
    }
  }
  last_boundary_ = std::chrono::steady_clock::now();
}

AutotuningProbe::~AutotuningProbe() = default;

void AutotuningProbe::forward_started(int64_t global_steps) {
  if (profile_ && !counting_) {
    rss_before_forward_ = current_rss_bytes();
    counting_ = std::make_unique<CountingCpuAllocator::Scope>();
  }
  // metric "flops": rank 0 counts one forward, the step before the timed ones (it slows that step).
  const AutotuningConfig& a = config_.autotuning;
  if (timing_ && a.metric == AutotuningMetric::Flops && topology_.rank() == 0 && forward_flops_ == 0 && !flops_ &&
      global_steps == std::max<int64_t>(0, a.start_profile_step - 1)) {
    flops_ = std::make_unique<profiling::FlopsProfiler>(module_);
    flops_->start();
  }
}

void AutotuningProbe::forward_finished() {
  if (flops_ && flops_->running()) {
    flops_->stop();
    forward_flops_ = flops_->total_flops();
    flops_.reset();
  }
  if (!profile_ || !counting_) return;
  const int64_t activation = counting_->live();  // what the forward keeps for backward, and its output
  counting_.reset();
  const nlohmann::json info = {
      {"num_params", num_params_},
      {"trainable_num_params", trainable_params_},
      {"activation_mem_per_gpu", activation},
      {"rank", 0},
      // deepspeed.cpp's additions: what ds-autotune's memory estimate (zero/memory_estimate.h) needs.
      {"param_numels", trainable_numels_},
      {"micro_batch_size", config_.train_micro_batch_size_per_gpu},
      {"activation_checkpointing", has_layer_list_ && nn::activation_checkpointing_requested(config_)},
      {"has_layer_list", has_layer_list_},
      {"world_size", topology_.world_size()},
      {"data_parallel_size", config_.data_parallel_size},
      {"local_world_size", local_world_size()},
      {"rss_before_forward_bytes", rss_before_forward_},
      {"mem_available_bytes", mem_available_bytes()}};
  end_experiment(*config_.autotuning.model_info_path, info.dump(2), "the model's profile");
}

void AutotuningProbe::step_finished(int64_t global_steps) {
  if (!timing_) return;
  const AutotuningConfig& a = config_.autotuning;
  const auto now = std::chrono::steady_clock::now();
  if (global_steps > a.start_profile_step && global_steps <= a.end_profile_step)
    step_seconds_.push_back(std::chrono::duration<double>(now - last_boundary_).count());
  last_boundary_ = now;
  if (global_steps != a.end_profile_step) return;
  const double mean_s =
      std::accumulate(step_seconds_.begin(), step_seconds_.end(), 0.0) / double(std::max<size_t>(1, step_seconds_.size()));
  // DeepSpeed's metric file: latency of a global step (ms), samples per second of the whole job,
  // and the forward FLOPS of one rank (its flops profiler counts the forward only).
  const nlohmann::json metrics = {
      {"latency", mean_s * 1e3},
      {"throughput", double(config_.train_batch_size) / mean_s},
      {"FLOPS_per_gpu", double(forward_flops_) * double(config_.gradient_accumulation_steps) / mean_s},
      {"step_seconds", step_seconds_},
      {"train_batch_size", config_.train_batch_size},
      {"train_micro_batch_size_per_gpu", config_.train_micro_batch_size_per_gpu},
      {"gradient_accumulation_steps", config_.gradient_accumulation_steps},
      {"peak_rss_bytes", peak_rss_bytes()}};
  end_experiment(*a.metric_path, metrics.dump(2), "the metrics");
}

void AutotuningProbe::end_experiment(const std::string& path, const std::string& json_text, const char* what) {
  const bool written = topology_.rank() != 0 || write_atomically(path, json_text);
  topology_.world().barrier("autotuning_exit");  // no rank leaves while another is mid-collective
  if (!written) throw IoError(fmt::format("autotuning: cannot write {} to {}", what, path));
  if (topology_.rank() == 0)
    log::info("autotuning: wrote {} to {}; this experiment ends here, as ds-autotune asked", what, path);
  std::fflush(nullptr);
  comm::finalize_mpi_for_exit();  // mpirun counts an exit without MPI_Finalize as a failure
  std::exit(0);                   // DeepSpeed's _autotuning_exit
}

}  // namespace ds
