// Internal: one parse function per config area. Each reads its section(s) from the top-level
// reader into `cfg`, records resolved values and throws ConfigError on invalid values.
#pragma once

#include "config/config.h"
#include "config/elasticity.h"
#include "config/section_reader.h"

namespace ds::config_detail {

void parse_batch(SectionReader& top, int world_size, Config& cfg);
void parse_top_scalars(SectionReader& top, Config& cfg);
void parse_precision(SectionReader& top, Config& cfg);                  // fp16, bf16, data_types, amp
void parse_optimizer(SectionReader& top, Config& cfg);
void parse_scheduler(SectionReader& top, Config& cfg);
void parse_zero(SectionReader& top, Config& cfg);                       // incl. offload sub-sections
void parse_aio(SectionReader& top, Config& cfg);
void parse_activation_checkpointing(SectionReader& top, Config& cfg);
void parse_flops_profiler(SectionReader& top, Config& cfg);
void parse_monitors(SectionReader& top, Config& cfg);                   // tensorboard, csv, jsonl, wandb, comet
void parse_logging(SectionReader& top, Config& cfg);                    // timers.throughput, comms_logger
void parse_checkpoint(SectionReader& top, Config& cfg);
void parse_autotuning(SectionReader& top, Config& cfg);
void parse_training_schedules(SectionReader& top, Config& cfg);         // curriculum_learning, progressive_layer_drop
void parse_unsupported(SectionReader& top);
// The "elasticity" section (config/elasticity.h), read with DeepSpeed's checks; parse_batch applies it.
ElasticityConfig read_elasticity_section(SectionReader& section);
// pipeline.stages, tensor_parallel.autotp_size and sequence_parallel_size of a whole config.
ParallelSizes read_parallel_sizes_of(const Json& root);                             // known to DeepSpeed, not to us

// Rules that span sections (fp16 with bf16, amp with ZeRO, ...), run after every section is read.
void validate_config(ParseContext& ctx, Config& cfg);

// One warning listing every "auto" that took a default (those with a meaning were resolved already).
void warn_about_auto_values(ParseContext& ctx);

// "<path> is parsed but not supported by deepspeed.cpp yet; ignored" (+ detail).
void warn_unsupported(ParseContext& ctx, const std::string& path, const std::string& detail = "");
// "<path>: <value> has no effect in deepspeed.cpp: <what>": a key whose non-default value changes
// nothing here (a switch of DeepSpeed's Python implementation, a GPU-only setting), said so the
// setting is not mistaken for one in force; `what` says what deepspeed.cpp does instead.
void warn_no_effect(ParseContext& ctx, const std::string& path, const std::string& value, const std::string& what);
// The same for a key whose JSON value is not DeepSpeed's "off" (absent, null, false, 0, "", {}, []).
void warn_no_effect_if_given(SectionReader& s, std::string_view key, const std::string& what);

}  // namespace ds::config_detail
