// Engine::save_checkpoint / load_checkpoint / save_16bit_model: the engine's counters and its
// parts' states around the checkpoint sequence (checkpoint/checkpointer.h).
#include <fmt/format.h>

#include <algorithm>

#include "checkpoint/checkpointer.h"
#include "checkpoint/layout.h"
#include "parallel/pipe_module.h"
#include "runtime/engine.h"
#include "runtime/engine_builder.h"
#include "util/error.h"
#include "util/logging.h"

namespace ds {

checkpoint::EngineStates Engine::checkpoint_parts() {
  p_->states->settle_params();  // saves read the parameters, loads overwrite them
  const auto* stage = dynamic_cast<const parallel::PipelineModule*>(module_.get());
  const bool pipeline = stage != nullptr && stage->num_stages() > 1;
  if (!p_->tensor_parallel && !pipeline)
    return {p_->data_parallel(), *module_, *p_->states, p_->optimizer.get(), config(), p_->dtypes.model};
  // AutoTP and pipelines: every rank of the world holds pieces (its slices' share, its stage's
  // parameters), mapped onto whole tensors.
  checkpoint::EngineStates parts{p_->topology->world(), *module_, *p_->states, p_->optimizer.get(), config(),
                                 p_->dtypes.model};
  parts.data = &p_->data_parallel();
  if (p_->tensor_parallel) parts.tensor_parallel = &*p_->tensor_parallel;
  if (pipeline) {
    parts.pipeline = true;
    for (const auto& t : stage->tied())
      if (t.group && !t.counts_in_norm) parts.pipeline_copies.push_back(t.name);
    const auto& pipe_ranks = p_->topology->ranks(parallel::Group::Pipe);  // world ranks, one per stage
    if (std::find(pipe_ranks.begin(), pipe_ranks.end(), 0) != pipe_ranks.end()) parts.stage_leaders = &p_->topology->pipe();
  }
  return parts;
}

nlohmann::json Engine::engine_state_json() const {
  nlohmann::json st = counters_json(n_);
  st["loss_scaler"] = p_->scaler->state_json();
  st["batch"] = checkpoint::batch_json(config());
  if (p_->scheduler) st["lr_scheduler"] = p_->scheduler->state_json();
  if (p_->optimizer) st["optimizer"] = p_->optimizer->state_json();
  return st;
}

void Engine::restore_engine_state(const nlohmann::json& st, const LoadOptions& options) {
  restore_counters(n_, st, config().gradient_accumulation_steps);
  if (!p_->scaler->load_state_json(st.at("loss_scaler")))
    log::warn("load_checkpoint: the checkpoint's loss scaler is of another kind than this config's (fp16 settings "
              "changed); keeping this run's scaler at scale {}",
              p_->scaler->scale());
  if (p_->optimizer && options.load_optimizer_states && st.contains("optimizer"))
    p_->optimizer->load_state_json(st.at("optimizer"));
  if (p_->scheduler && options.load_lr_scheduler_states && st.contains("lr_scheduler")) {
    p_->scheduler->load_state_json(st.at("lr_scheduler"));
    apply_schedule();
  }
}

std::string Engine::save_checkpoint(const std::string& dir, const std::string& tag, const nlohmann::json& client_state,
                                    bool save_latest) {
  checkpoint::check_save_at_boundary(n_.micro_steps, config().gradient_accumulation_steps);
  const std::string resolved = tag.empty() ? checkpoint::default_tag(n_.global_steps) : tag;
  const std::string out =
      checkpoint::save(checkpoint_parts(), {dir, resolved, engine_state_json(), client_state, save_latest});
  log::info("saved checkpoint {} (global step {}, {} rank file{})", out, n_.global_steps, world_size(),
            world_size() == 1 ? "" : "s");
  return out;
}

std::optional<LoadResult> Engine::load_checkpoint(const std::string& dir, const std::string& tag,
                                                  const LoadOptions& options) {
  const auto loaded = checkpoint::load(checkpoint_parts(), dir, tag, options);
  if (!loaded) return std::nullopt;
  if (!options.load_module_only) {
    restore_engine_state(loaded->engine_state, options);
    if (p_->layer_drop) p_->layer_drop->restore(n_.global_steps);  // theta follows the step count
    checkpoint::warn_if_global_batch_changed(loaded->engine_state, config(), loaded->path);
  }
  log::info("loaded checkpoint {} (saved at world {}, ZeRO stage {}; now world {}, stage {}; global step {})",
            loaded->path, loaded->dp_world_size, loaded->zero_stage, world_size(), p_->zero.stage, n_.global_steps);
  return LoadResult{loaded->path, loaded->client_state};
}

void Engine::save_16bit_model(const std::string& dir, const std::string& file) {
  if (p_->zero.stage == 3 && !config().zero_optimization.gather_16bit_weights_on_model_save)
    log::info("zero_optimization.gather_16bit_weights_on_model_save is false: DeepSpeed would save nothing here "
              "(its save_16bit_model returns False at stage 3); deepspeed.cpp gathers one parameter at a time, so "
              "no rank holds the whole model, and saves it");
  // Under AutoTP the slices are put back together one parameter at a time, and a pipeline's stages
  // send theirs to rank 0: the file is the whole model.
  checkpoint::save_16bit_model(checkpoint_parts(), dir, file);
}

}  // namespace ds
