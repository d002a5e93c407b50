// ds::Config: a DeepSpeed JSON config resolved into typed sections. Top-level scalars are direct
// fields, sections are sub-structs named like their key (cfg.zero_optimization.stage). Every field
// is spelled like its JSON key. Built by config/loader.h; read by every subsystem.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/activation_checkpointing_config.h"
#include "config/aio_config.h"
#include "config/autotuning_config.h"
#include "config/batch_config.h"
#include "config/checkpoint_config.h"
#include "config/flops_profiler_config.h"
#include "config/monitor_config.h"
#include "config/optimizer_config.h"
#include "config/precision_config.h"
#include "config/scheduler_config.h"
#include "config/training_schedules_config.h"
#include "config/zero_config.h"

namespace ds {

// The DeepSpeed release whose config semantics (keys, defaults, batch arithmetic, messages) the
// loader follows; ds-report --config prints it. Each default's source: docs/config-defaults.md.
inline constexpr const char* kDeepSpeedSemantics = "DeepSpeed 0.19.x";

// Where a resolved value came from.
enum class Source {
  File,     // written in the config
  Default,  // DeepSpeed's code default
  Derived,  // computed from other values (batch triple, overlap_comm, ...)
  Auto,     // the file said "auto": treated as absent, then default or derived
};

struct ResolvedValue {
  std::string path;   // "zero_optimization.offload_optimizer.device"
  std::string value;  // JSON text of the resolved value: 500000000, "cpu", null, [0.9,0.999]
  Source source = Source::Default;
};

struct Config {
  // Batch triple, resolved for `world_size` data-parallel ranks (reference §1.2).
  int64_t train_batch_size = 0;
  int64_t train_micro_batch_size_per_gpu = 0;
  int64_t gradient_accumulation_steps = 0;
  int world_size = 1;  // not a DeepSpeed key: the world size the config was loaded for (all ranks)
  // The parallel sizes as read (sequence_parallel_size, tensor_parallel.autotp_size, pipeline.stages)
  // and the data-parallel world they leave, world_size / (their product): the world the triple is
  // resolved for, DeepSpeedConfig's world_size. Equal to world_size when every size is 1.
  ParallelSizes parallel_sizes;
  int data_parallel_size = 1;

  std::optional<int64_t> steps_per_print;  // code default None: no progress lines
  double gradient_clipping = 1.0;          // 0 = off; DeepSpeed 0.19 default (PR #8068; 0.0 before)
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  std::optional<DType> communication_data_type;  // None: see effective_communication_data_type()
  // With sequence_parallel_size > 1 DeepSpeed's engine replaces communication_data_type with this
  // (gradients of a sequence-parallel run reduce in fp32 by default); None (null): by mode.
  std::optional<DType> seq_parallel_communication_data_type = DType::Fp32;
  bool wall_clock_breakdown = false;       // resolved: OR-ed with flops_profiler.enabled
  bool memory_breakdown = false;
  bool throughput_timer = true;  // timers.throughput.enabled: the RunningAvgSamplesPerSec line at steps_per_print
  bool dump_state = false;
  bool sparse_gradients = false;
  bool disable_allgather = false;          // parsed; DeepSpeed has no consumer either
  bool zero_allow_untested_optimizer = false;
  bool zero_force_ds_cpu_optimizer = true;
  // deepspeed.cpp extension (not a DeepSpeed key): ZeRO stages 1-2 gather the updated parameters
  // behind the next forward instead of inside step() (zero/overlapped_param_gather.h).
  bool zero_overlap_param_gather = false;
  bool dataloader_drop_last = false;
  bool graph_harvesting = false;           // CUDA-graph capture; parsed, not supported
  std::optional<int64_t> vocabulary_size;  // only checked (warning if not a multiple of 8)

  Fp16Config fp16;
  Bf16Config bf16;
  DataTypesConfig data_types;
  AmpConfig amp;
  NanGuardConfig nan_guard;  // deepspeed.cpp extension
  std::optional<OptimizerConfig> optimizer;  // None: the client supplies one
  std::optional<SchedulerConfig> scheduler;  // None: constant lr (or a client scheduler)
  ZeroConfig zero_optimization;
  AioConfig aio;
  ActivationCheckpointingConfig activation_checkpointing;
  FlopsProfilerConfig flops_profiler;
  TensorBoardConfig tensorboard;
  CsvMonitorConfig csv_monitor;
  JsonlMonitorConfig jsonl_monitor;  // deepspeed.cpp extension
  WandbConfig wandb;
  CometConfig comet;
  CommsLoggerConfig comms_logger;
  CheckpointConfig checkpoint;
  AutotuningConfig autotuning;
  CurriculumLearningConfig curriculum_learning;  // the legacy curriculum (runtime/curriculum_scheduler.h)
  ProgressiveLayerDropConfig progressive_layer_drop;

  // Every warning the loader gave (unknown keys, deprecated aliases, unsupported features), in order.
  std::vector<std::string> warnings;
  // Every key of every section with its resolved value and source, sorted by path.
  std::vector<ResolvedValue> resolved;
  // The loaded JSON, comments stripped, keys sorted: what checkpoints store and startup prints.
  std::string json_text = "{}";
  std::string origin = "<default>";  // file path or "<string>"

  // DeepSpeed's engine.communication_data_type: the configured one, else fp16 / bf16 / fp32 by mode;
  // under sequence parallelism seq_parallel_communication_data_type in its place.
  DType effective_communication_data_type() const {
    const auto& configured =
        parallel_sizes.sequence_parallel_size > 1 ? seq_parallel_communication_data_type : communication_data_type;
    if (configured) return *configured;
    if (fp16.enabled) return DType::Fp16;
    if (bf16.enabled) return DType::Bf16;
    return DType::Fp32;
  }
};

std::string to_string(Source s);  // "file", "default", "derived", "auto"

}  // namespace ds
