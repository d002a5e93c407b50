// What ds-autotune may try, and what each try needs: the model profile an experiment wrote, the
// ZeRO stage variants (offload, activation checkpointing) with the micro-batch sizes that fit this
// machine's RAM by the engine's own estimate (zero/memory_estimate.h), DeepSpeed's micro-batch list
// (Autotuner.get_tuning_micro_batch_size_list) and its per-stage knob grids for the non-fast mode.
// Pure: no processes, no files (autotuner.h runs them).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ds::autotune {

using Json = nlohmann::json;

// model_info.json as the engine's probe writes it (runtime/autotuning_probe.h).
struct ModelProfile {
  int64_t num_params = 0;
  int64_t trainable_num_params = 0;
  int64_t activation_bytes = 0;  // one micro-batch of micro_batch_size, as the profiled config ran it
  int64_t micro_batch_size = 1;
  std::vector<int64_t> param_numels;
  bool has_layer_list = false;            // activation checkpointing can apply
  bool checkpointing = false;             // it was on in the profiled config (the user's)
  int world_size = 1, data_parallel_size = 1, local_world_size = 1;
  uint64_t rss_before_forward = 0;
};
// Throws ds::Error naming `origin` and the missing or malformed field.
ModelProfile read_model_profile(const Json& j, const std::string& origin);

// One way to run a stage: what it adds to the user's config.
struct Variant {
  int stage = 0;
  bool offload_optimizer = false;  // zero_optimization.offload_optimizer.device cpu
  bool offload_param = false;      // zero_optimization.offload_param.device cpu (stage 3)
  bool checkpointing = false;      // activation_checkpointing over the model's layers
  std::string name() const;        // "z2", "z3_offopt_ckpt", ...
  void apply(Json& config) const;  // writes the stage and the sections the variant adds
};

// The variants of `stage` worth considering, fastest first: plain, then checkpointing, offloaded
// optimizer, both, and at stage 3 offloaded parameters too. Sections the user already set (an
// offload device, an activation_checkpointing section) are kept as given and not varied.
std::vector<Variant> stage_variants(int stage, const Json& user_config, bool has_layer_list);

// The stages the user asks for: zero_optimization.stage as a number, a list or "all" (absent: 0,
// as DeepSpeed's autotuner). Throws ConfigError on anything else.
std::vector<int> requested_stages(const Json& user_config);

// The user's config with every tunable value made concrete (DeepSpeed's get_first_config: a list
// gives its first item, "auto" batch keys are dropped) and the autotuning section removed.
Json base_config(const Json& user_config);

// The config of one experiment: base + variant + batch (train_batch_size = micro x gas x dp).
Json experiment_config(const Json& base, const Variant& v, int64_t micro, int64_t gas, int64_t data_parallel);

// Bytes one rank needs for `config` at `micro`: the engine's estimate of its model states (RAM
// tiers) + micro x the profiled activations per sample (checkpointed ones when the variant
// checkpoints) + the process's measured overhead.
struct MemoryModel {
  const ModelProfile* profile = nullptr;
  std::optional<int64_t> checkpointed_activation_bytes;  // per profiled micro-batch
  uint64_t overhead = 0;   // the profile process beyond its model states
  uint64_t budget = 0;     // RAM one rank may use (this host's available RAM / local ranks, less headroom)
  uint64_t states(const Json& config) const;
  uint64_t need(const Json& config, int64_t micro, bool checkpointing) const;
  // The largest micro-batch that fits (0: not even one), at most `cap`.
  int64_t max_micro(const Json& config_at_micro1, bool checkpointing, int64_t cap) const;
};

// DeepSpeed's Autotuner.get_tuning_micro_batch_size_list: from max(min, max/2) to max in
// `count` strides, skipping sizes whose gradient accumulation would equal the largest's, then max.
std::vector<int64_t> tuning_micro_batch_sizes(int64_t min_micro, int64_t max_micro, int64_t count,
                                              int64_t max_train_batch_size_per_gpu);

// DeepSpeed's default knob grid of a stage (DEFAULT_TUNING_SPACE_ZERO_<n>), a key the user gives
// as a list replacing the default values and one given as a value fixing it. Each entry is a
// zero_optimization object to merge; in DeepSpeed's order (first key varies slowest).
std::vector<Json> zero_knob_grid(int stage, const Json& user_zero);
// "oc1_rs0_rbs5e+07..." for the knobs of one grid point (omitted when there are none).
std::string knob_name(const Json& knobs);

}  // namespace ds::autotune
