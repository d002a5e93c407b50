// The checkpoint sequence across ranks: what the engine's components put in a tag (rank files, the
// model file, the manifest with the engine's counters and every file's checksums) and how they are
// read back at any world size, stage or offload mode. Every phase ends with an agreement, so one
// rank's failure fails the operation on all of them with the cause named, and a failed save leaves
// the previous checkpoint untouched (docs/checkpoint.md).
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "checkpoint/load_options.h"
#include "comm/communicator.h"
#include "config/config.h"
#include "parallel/auto_tp.h"
#include "zero/flat_optimizer.h"
#include "zero/model_states.h"

namespace ds::checkpoint {

// The engine's components a checkpoint is made of (borrowed for the call).
struct EngineStates {
  comm::Communicator& comm;          // the ranks that hold pieces (the data-parallel group; the world under TP)
  torch::nn::Module& module;
  zero::ModelStates& states;
  zero::FlatOptimizer* optimizer;    // null without an optimizer
  const Config& config;
  torch::ScalarType model_dtype;
  // Tensor parallelism (AutoTP): `comm` is the whole world, `data` the data-parallel group, and
  // `tensor_parallel` maps each rank's slices onto whole tensors. Checkpoints then hold whole
  // tensors (split parameters written piecewise by every TP rank, replicated ones by TP rank 0), so
  // they load at any TP size, or none, and ds-zero-to-fp32 reads them unchanged.
  comm::Communicator* data = nullptr;  // null: `comm` is the data-parallel group
  const parallel::AutoTpResult* tensor_parallel = nullptr;
  // Pipeline parallelism: `comm` is the whole world, `data` the stage's data-parallel group, and each
  // rank's module holds one stage's parameters. The manifest lists every stage's (the union, in stage
  // order: the model's order), a tied parameter is written by the stage that owns it only (its
  // copies on other stages are `pipeline_copies`) and read back by every stage that holds it, so the
  // checkpoint is the same as a data-parallel one and loads at any number of stages, or none.
  bool pipeline = false;
  std::vector<std::string> pipeline_copies{};
  // Pipeline stages, on the ranks of world rank 0's pipe group only (one rank of each stage): the
  // group save_16bit_model collects the stages' tensors over. Null elsewhere.
  comm::Communicator* stage_leaders = nullptr;
};

struct SaveRequest {
  std::string dir;
  std::string tag;                   // resolved (never empty)
  nlohmann::json engine_state;       // the engine's counters and its components' states
  nlohmann::json client_state;
  bool save_latest = true;
};

// Throws unless micro_steps is at a gradient accumulation boundary (an unfinished step is not saved).
void check_save_at_boundary(int64_t micro_steps, int64_t gradient_accumulation_steps);

// Collective. Writes <dir>/<tag>/ atomically, then <dir>/latest; returns the tag directory.
std::string save(const EngineStates& parts, const SaveRequest& request);

struct Loaded {
  std::string path;                  // the tag directory read
  nlohmann::json engine_state;
  nlohmann::json client_state;
  int dp_world_size = 0;             // the world it was saved at
  int zero_stage = 0;
};

// Collective. Reads <dir>/<tag> (tag "" = the one in `latest`; nullopt with a warning when there is
// none, as DeepSpeed) into the model states and optimizer; the caller restores engine_state.
std::optional<Loaded> load(const EngineStates& parts, const std::string& dir, const std::string& tag,
                           const LoadOptions& options);

// Collective. The full model (trainable in the model dtype, frozen parameters, buffers) as one
// safetensors file written by rank 0; at stage 3 parameters are gathered one at a time, under
// tensor parallelism each slice is put back together first (AutoTpResult::gather_full), and with
// pipeline stages each stage's tensors travel to rank 0 over `stage_leaders` (a tied parameter once),
// so the file is the model as it was before AutoTP and the pipeline cut it (save_16bit.cpp).
void save_16bit_model(const EngineStates& parts, const std::string& dir, const std::string& file);

// Warns when a resume changes the global batch (what that does to the data order and the schedule).
void warn_if_global_batch_changed(const nlohmann::json& engine_state, const Config& config, const std::string& path);
// The batch triple as the engine state records it.
nlohmann::json batch_json(const Config& config);

}  // namespace ds::checkpoint
