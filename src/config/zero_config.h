// The "zero_optimization" section with its offload sub-sections (reference §1.5, §1.6).
// Sizes and thresholds are element counts (int64_t), as in DeepSpeed.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace ds {

enum class OffloadDevice { None, Cpu, Nvme };

// "offload_param": stage 3 only.
struct OffloadParamConfig {
  OffloadDevice device = OffloadDevice::None;
  std::optional<std::string> nvme_path;
  int64_t buffer_count = 5;
  int64_t buffer_size = 100000000;   // elements per pooled buffer
  int64_t max_in_cpu = 1000000000;   // elements kept in CPU memory with nvme
  bool pin_memory = false;
};

// "offload_optimizer": stages 1-3 (stages 1/2 treat nvme as cpu, as DeepSpeed does).
struct OffloadOptimizerConfig {
  OffloadDevice device = OffloadDevice::None;
  std::optional<std::string> nvme_path;
  int64_t buffer_count = 4;          // >= tensors per parameter (Adam: param, grad, m, v)
  bool pin_memory = false;
  bool pipeline_read = false;
  bool pipeline_write = false;
  bool fast_init = false;
  double ratio = 1.0;                // fraction of stage-3 sub-groups updated on CPU, in [0, 1]

  bool pipeline() const { return pipeline_read || pipeline_write; }
};

// "zeropp_loco_param": LoCo error feedback for ZeRO++ (parsed, not supported).
struct LocoParamConfig {
  double err_beta = 0.8;
  int64_t reset_T = 1024;
};

struct ZeroConfig {
  int stage = 0;
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  int64_t reduce_bucket_size = 500000000;
  bool use_multi_rank_bucket_allreduce = true;
  bool allgather_partitions = true;
  int64_t allgather_bucket_size = 500000000;
  bool overlap_comm = false;          // resolved: DeepSpeed's None means true for stage 3 only
  bool load_from_fp32_weights = true;
  bool elastic_checkpoint = false;
  OffloadParamConfig offload_param;          // device None when the key is absent
  OffloadOptimizerConfig offload_optimizer;  // device None when the key is absent
  int64_t sub_group_size = 1000000000;
  // Stage 3 (each also accepted as "stage3_<name>")
  int64_t prefetch_bucket_size = 50000000;
  int64_t param_persistence_threshold = 100000;
  int64_t model_persistence_threshold = std::numeric_limits<int64_t>::max();  // sys.maxsize
  int64_t max_live_parameters = 1000000000;
  int64_t max_reuse_distance = 1000000000;
  bool gather_16bit_weights_on_model_save = false;
  int64_t module_granularity_threshold = 0;
  bool use_all_reduce_for_fetch_params = false;
  bool allgather_sequential = false;
  // Stages 1/2
  bool ignore_unused_parameters = true;
  bool legacy_stage1 = false;          // true warns and is ignored (removed from DeepSpeed, which ignores it)
  bool round_robin_gradients = false;
  // ZeRO++ / MiCS (parsed; non-default values warn as unsupported)
  int64_t zero_hpz_partition_size = 1;
  bool zero_quantized_weights = false;
  bool zero_quantized_nontrainable_weights = false;
  bool zero_quantized_gradients = false;
  std::optional<LocoParamConfig> zeropp_loco_param;
  int64_t mics_shard_size = -1;
  bool mics_hierarchical_params_gather = false;
  // Python-module plumbing in DeepSpeed; parsed for compatibility.
  bool memory_efficient_linear = true;
  bool pipeline_loading_checkpoint = false;
  bool override_module_apply = true;
  bool log_trace_cache_warnings = false;
  bool enable_sanity_checks = false;

  bool enabled() const { return stage > 0; }
  bool offload_optimizer_enabled() const { return offload_optimizer.device != OffloadDevice::None; }
  bool offload_param_enabled() const { return offload_param.device != OffloadDevice::None; }
};

std::string to_string(OffloadDevice d);  // "none", "cpu", "nvme"

}  // namespace ds
