// EngineBuilder: config → plan → parts. Everything an engine is made of is decided and built here,
// once: the process topology and its communicators, the ZeRO plan, the dtypes, the model states,
// the optimizer, the LR schedule, the loss scaler, the step guard and the telemetry. The Engine then
// only sequences them (runtime/engine.h).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>

#include "config/config.h"
#include "config/zero_plan.h"
#include "nn/activation_checkpointing.h"
#include "offload/host_memory.h"
#include "optim/lr_schedules.h"
#include "parallel/auto_tp.h"
#include "parallel/topology.h"
#include "precision/loss_scaler.h"
#include "precision/overflow_summary.h"
#include "precision/step_guard.h"
#include "runtime/engine.h"
#include "runtime/autotuning_probe.h"
#include "runtime/curriculum_scheduler.h"
#include "runtime/progressive_layer_drop.h"
#include "runtime/step_telemetry.h"
#include "util/memory_ledger.h"
#include "zero/dtype_plan.h"
#include "zero/flat_optimizer.h"
#include "zero/model_states.h"

namespace ds {

struct EngineParts {
  std::shared_ptr<const Config> config;
  std::shared_ptr<parallel::Topology> topology;
  zero::ZeroPlan zero;
  zero::DtypePlan dtypes;
  torch::Device device = torch::kCPU;
  offload::HostMemoryPlan host;                    // ZeRO-Offload host buffers: pinned or not, and why
  std::unique_ptr<MemoryLedger> ledger;            // stable address: the states record into it
  std::unique_ptr<zero::ModelStates> states;
  std::unique_ptr<zero::FlatOptimizer> optimizer;  // null without an "optimizer" section
  std::unique_ptr<optim::LrScheduler> scheduler;   // null without a "scheduler" section
  std::unique_ptr<precision::LossScaler> scaler;
  std::unique_ptr<precision::StepGuard> guard;
  std::unique_ptr<StepTelemetry> telemetry;
  std::unique_ptr<AutotuningProbe> autotuning;     // null unless this run is one of ds-autotune's experiments
  std::shared_ptr<nn::ActivationCheckpointing> activation_checkpointing;
  std::optional<parallel::AutoTpResult> tensor_parallel;  // AutoTP's split layers (autotp_size > 1)
  precision::OverflowSummary overflow_summary;     // folds the start-up run of skipped steps into one line
  std::unique_ptr<CurriculumScheduler> curriculum;  // "curriculum_learning" (null when off)
  std::unique_ptr<ProgressiveLayerDrop> layer_drop; // "progressive_layer_drop" (null when off)

  // The group ZeRO partitions over and averages gradients in (the world with every size 1).
  comm::Communicator& data_parallel() const { return topology->data_parallel(); }
};

// Collective over the world: every rank builds its parts at the same point. Throws ConfigError /
// NotSupported / OutOfMemory / IoError naming the key before anything large is allocated.
EngineParts build_engine_parts(torch::nn::Module& module, Config config, const EngineOptions& options);

}  // namespace ds
