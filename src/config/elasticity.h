// DeepSpeed's elasticity (the "elasticity" section): one global batch that many world sizes can
// train with, by trading micro batch against gradient accumulation. compute_elastic_config() is
// DeepSpeed's algorithm of the same name (deepspeed/elasticity/elasticity.py, versions 0.1 and
// 0.2), kept exactly so that the same config gives the same batch and the same valid world sizes;
// `ds-run --elastic` restarts a job on the hosts still alive with one of those sizes
// (docs/elasticity.md).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ds {

// The section as DeepSpeed's ElasticityConfig reads it, defaults included (constants.py).
struct ElasticityConfig {
  bool enabled = false;
  int64_t max_train_batch_size = 2000;
  std::vector<int64_t> micro_batch_sizes = {2, 4, 6};
  int64_t min_gpus = 1;
  int64_t max_gpus = 10000;
  double min_time = 0;  // minutes before a scheduler may rescale: read, not acted on
  bool prefer_larger_batch = true;
  bool ignore_non_elastic_batch_info = false;
  int64_t model_parallel_size = 1;
  int64_t num_gpus_per_node = 1;
  double version = 0.2;  // LATEST_ELASTICITY_VERSION; 0.1 and 0.2 are the algorithms
};

// The latest elasticity version DeepSpeed (and deepspeed.cpp) implements.
inline constexpr double kLatestElasticityVersion = 0.2;

// Reads the "elasticity" object with DeepSpeed's checks (ElasticityConfig.__init__): with enabled
// true, max_train_batch_size and micro_batch_sizes are required; micro batches are positive
// integers; 1 <= min_gpus <= max_gpus; model_parallel_size, num_gpus_per_node >= 1; min_time >= 0.
// Throws ds::ConfigError naming "elasticity.<key>". Unknown keys go to `warnings`.
ElasticityConfig parse_elasticity_config(const nlohmann::json& section, std::vector<std::string>* warnings = nullptr);

// What a launcher needs from a DeepSpeed config file to size an elastic job.
struct ElasticJob {
  ElasticityConfig elasticity;
  // pipeline.stages x tensor_parallel.autotp_size x sequence_parallel_size: the ranks per
  // data-parallel rank. The valid sizes count data-parallel ranks, as DeepSpeed's runtime passes
  // its data-parallel world; a launch starts this many times as many processes.
  int64_t ranks_per_replica = 1;
};

// std::nullopt when the file has no enabled "elasticity" section. Throws ds::ConfigError.
std::optional<ElasticJob> read_elastic_job(const std::string& config_path);

struct ElasticBatch {
  int64_t train_batch_size = 0;
  // Valid world sizes (data-parallel sizes in version 0.2), ascending.
  std::vector<int64_t> valid_world_sizes;
  // For the world size asked about; 0 when none was given (version 0.1 without one).
  int64_t micro_batch_size = 0;
  int64_t gradient_accumulation_steps = 0;  // train_batch_size / (micro x world); 0 with no world
};

// DeepSpeed's compute_elastic_config(ds_config, version, world_size, return_microbatch=True) for
// `cfg`: the largest (or, prefer_larger_batch false, smallest) global batch up to
// max_train_batch_size that the most world sizes in [min_gpus, max_gpus] divide into a listed
// micro batch, then the largest micro batch for `world_size` (0: none; version 0.2 needs one, as
// DeepSpeed needs WORLD_SIZE). Throws ds::ConfigError naming the key: elasticity disabled, a version
// above 0.2, model_parallel_size > 1 below version 0.2, a micro batch above max_train_batch_size,
// num_gpus_per_node not a multiple of model_parallel_size, no valid world size at all, and
// `world_size` not among the valid ones (the message lists them).
ElasticBatch compute_elastic_config(const ElasticityConfig& cfg, int64_t world_size);

// The scheduler's call, compute_elastic_config(..., world_size=0, return_microbatch=True) with
// WORLD_SIZE=`current_world_size` (all GPUs): version 0.1 as above; version 0.2 takes the micro
// batch from its own node-level search for the data-parallel share (current / model_parallel_size),
// without requiring the size to be in the list.
ElasticBatch compute_elastic_config_for_scheduler(const ElasticityConfig& cfg, int64_t current_world_size);

// "1, 2, 3, 4" for messages.
std::string format_world_sizes(const std::vector<int64_t>& sizes);

}  // namespace ds
