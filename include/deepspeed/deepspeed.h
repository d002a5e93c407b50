// deepspeed.cpp public entry point.
//
//   auto model  = std::make_shared<MyModel>(...);          // any torch::nn::Module with forward()
//   auto engine = ds::initialize(model, "ds_config.json");  // DeepSpeed's JSON schema
//   auto loss   = engine.forward(x, y);                     // calls MyModel::forward(x, y)
//   engine.backward(loss);
//   engine.step();                                          // call after every micro-batch
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

// What a user calls, and what a user's own model needs (nothing else is part of the API):
#include "comm/communicator.h"         // ds::comm::Communicator (engine.communicator())
#include "comm/make_communicator.h"    // make_communicator, launcher_world_size
#include "config/config.h"             // ds::Config
#include "config/loader.h"             // load_config_file / load_config_text
#include "nn/layer_list.h"             // ds::nn::LayerList: expose `LayerList& layers()` for ZeRO-3 to walk
#include "parallel/pipe_module.h"      // ds::parallel::PipelineModule: one pipeline stage of a model
#include "parallel/topology.h"         // ds::parallel::Topology: the process grid and its per-axis groups
#include "runtime/curriculum_scheduler.h"  // ds::CurriculumScheduler, truncate_to_seqlen (curriculum_learning)
#include "runtime/engine.h"            // ds::Engine / ModelEngine<M>: forward, backward, step, checkpoints
                                       // (the parts it returns are declared only: include their headers)
#include "runtime/pipeline_engine.h"   // ds::PipelineEngine / initialize_pipeline: train_batch over the stages
#include "runtime/param_groups.h"      // ds::ParamGroup and groups by parameter name
#include "runtime/world.h"             // rank / local rank as the launcher set them
#include "util/stop_signal.h"          // ds::install_stop_signal_handlers(): SIGTERM/SIGINT stop at a boundary
#include "zero/gathered_parameters.h"  // ds::zero::GatheredParameters: full parameters in a custom forward

namespace ds {

// From a config file (DeepSpeed JSON; comments allowed).
template <class M>
ModelEngine<M> initialize(std::shared_ptr<M> model, const std::string& config_path,
                          std::vector<ParamGroup> param_groups = {}) {
  return ModelEngine<M>(std::move(model), load_config_file(config_path, comm::launcher_world_size()),
                        std::move(param_groups));
}

template <class M>
ModelEngine<M> initialize(std::shared_ptr<M> model, const char* config_path,
                          std::vector<ParamGroup> param_groups = {}) {
  return initialize(std::move(model), std::string(config_path), std::move(param_groups));
}

// From an in-memory JSON document.
template <class M>
ModelEngine<M> initialize(std::shared_ptr<M> model, const nlohmann::json& config,
                          std::vector<ParamGroup> param_groups = {}) {
  return ModelEngine<M>(std::move(model), load_config_text(config.dump(), comm::launcher_world_size(), "<json>"),
                        std::move(param_groups));
}

// From a loaded config (its batch triple resolved for this world size).
template <class M>
ModelEngine<M> initialize(std::shared_ptr<M> model, Config config, std::vector<ParamGroup> param_groups = {}) {
  return ModelEngine<M>(std::move(model), std::move(config), std::move(param_groups));
}

// TORCH_MODULE holders (torch::nn::Linear, models::GPT2, ...).
template <class Impl, class C>
ModelEngine<Impl> initialize(torch::nn::ModuleHolder<Impl> model, C&& config,
                             std::vector<ParamGroup> param_groups = {}) {
  return initialize(model.ptr(), std::forward<C>(config), std::move(param_groups));
}

}  // namespace ds
