// Small sections: "aio" (§1.7), "activation_checkpointing" (§12), "flops_profiler" (§14.1),
// the monitors (§14.2), "timers" and "comms_logger", and "checkpoint" (§1.3).
#include "config/parse_sections.h"

#include <algorithm>

#include "util/error.h"

namespace ds::config_detail {

void parse_aio(SectionReader& top, Config& cfg) {
  SectionReader s(top.ctx(), top.raw("aio"), "aio", UnknownKeys::Warn);
  AioConfig& c = cfg.aio;
  // DeepSpeed renamed thread_count to intra_op_parallelism (#7056) and no longer reads the old
  // name, so an old config silently runs single-threaded there; we honour it, loudly.
  if (s.given("thread_count") && !s.given("intra_op_parallelism")) {
    s.ctx().warn("aio.thread_count: deprecated, use \"intra_op_parallelism\" (value taken as "
                 "aio.intra_op_parallelism; note that DeepSpeed itself now ignores thread_count)");
    s.object()["intra_op_parallelism"] = s.object()["thread_count"];
  } else if (s.given("thread_count")) {
    s.ctx().warn("aio.thread_count: deprecated and ignored because aio.intra_op_parallelism is also given");
  }
  s.mark_known("thread_count");
  s.read("block_size", c.block_size, kPositive);
  s.read("queue_depth", c.queue_depth, kPositive);
  s.read("intra_op_parallelism", c.intra_op_parallelism, kPositive);
  s.read("single_submit", c.single_submit);
  s.read("overlap_events", c.overlap_events);
  if (s.read("use_gds", c.use_gds) && c.use_gds) warn_unsupported(s.ctx(), "aio.use_gds", "GPUDirect Storage");
  s.finish();
}

void parse_activation_checkpointing(SectionReader& top, Config& cfg) {
  SectionReader s(top.ctx(), top.raw("activation_checkpointing"), "activation_checkpointing", UnknownKeys::Warn);
  ActivationCheckpointingConfig& c = cfg.activation_checkpointing;
  s.read("partition_activations", c.partition_activations);
  s.read("cpu_checkpointing", c.cpu_checkpointing);
  s.read("contiguous_memory_optimization", c.contiguous_memory_optimization);
  s.read("number_checkpoints", c.number_checkpoints, kPositive);
  s.read("synchronize_checkpoint_boundary", c.synchronize_checkpoint_boundary);
  s.read("profile", c.profile);
  // DeepSpeed asserts this only when checkpointing.configure() runs; say it at load time.
  if (c.contiguous_memory_optimization && (!c.partition_activations || !c.number_checkpoints)) {
    s.ctx().warn("activation_checkpointing.contiguous_memory_optimization: needs partition_activations and "
                 "number_checkpoints; DeepSpeed's checkpointing.configure() would reject this");
  } else if (c.contiguous_memory_optimization) {
    warn_no_effect(s.ctx(), s.key_path("contiguous_memory_optimization"), "true",
                   "the saved inputs are the previous segments' outputs, kept as they are, not copied into "
                   "preallocated buffers");
  }
  s.finish();
}

void parse_flops_profiler(SectionReader& top, Config& cfg) {
  SectionReader s(top.ctx(), top.raw("flops_profiler"), "flops_profiler", UnknownKeys::Warn);
  FlopsProfilerConfig& c = cfg.flops_profiler;
  s.read("enabled", c.enabled);
  s.read("recompute_fwd_factor", c.recompute_fwd_factor, kNonNegativeReal);
  s.read("profile_step", c.profile_step, kPositive);
  s.read("module_depth", c.module_depth, IntRange{-1});
  s.read("top_modules", c.top_modules, kPositive);
  s.read("detailed", c.detailed);
  s.read("output_file", c.output_file);
  s.finish();
}

void parse_monitors(SectionReader& top, Config& cfg) {
  {
    SectionReader s(top.ctx(), top.raw("tensorboard"), "tensorboard", UnknownKeys::Error);
    s.read("enabled", cfg.tensorboard.enabled);
    s.read("output_path", cfg.tensorboard.output_path);
    s.read("job_name", cfg.tensorboard.job_name);
    s.finish();
  }
  {
    SectionReader s(top.ctx(), top.raw("csv_monitor"), "csv_monitor", UnknownKeys::Error);
    s.read("enabled", cfg.csv_monitor.enabled);
    s.read("output_path", cfg.csv_monitor.output_path);
    s.read("job_name", cfg.csv_monitor.job_name);
    s.finish();
  }
  {  // deepspeed.cpp's own section; strict like its DeepSpeed siblings
    SectionReader s(top.ctx(), top.raw("jsonl_monitor"), "jsonl_monitor", UnknownKeys::Error);
    s.read("enabled", cfg.jsonl_monitor.enabled);
    s.read("output_path", cfg.jsonl_monitor.output_path);
    s.read("job_name", cfg.jsonl_monitor.job_name);
    s.finish();
  }
  {
    SectionReader s(top.ctx(), top.raw("wandb"), "wandb", UnknownKeys::Error);
    WandbConfig& c = cfg.wandb;
    s.read("enabled", c.enabled);
    s.read("group", c.group);
    s.read("team", c.team);
    s.read("project", c.project);
    s.finish();
    if (c.enabled) warn_unsupported(top.ctx(), "wandb", "no Weights & Biases client; use csv_monitor or tensorboard");
  }
  {
    SectionReader s(top.ctx(), top.raw("comet"), "comet", UnknownKeys::Error);
    CometConfig& c = cfg.comet;
    s.read("enabled", c.enabled);
    s.read("samples_log_interval", c.samples_log_interval, kPositive);
    s.read("project", c.project);
    s.read("workspace", c.workspace);
    s.read("api_key", c.api_key);
    s.read("experiment_name", c.experiment_name);
    s.read("experiment_key", c.experiment_key);
    s.read("online", c.online);
    s.read("mode", c.mode);
    s.finish();
    if (c.enabled) warn_unsupported(top.ctx(), "comet", "no Comet client; use csv_monitor or tensorboard");
  }
}

void parse_logging(SectionReader& top, Config& cfg) {
  {  // DeepSpeed reads only "timers.throughput", a strict model; other keys of "timers" are unknown.
    SectionReader t(top.ctx(), top.raw("timers"), "timers", UnknownKeys::Warn);
    SectionReader s(top.ctx(), t.raw("throughput"), "timers.throughput", UnknownKeys::Error);
    s.read("enabled", cfg.throughput_timer);
    bool synchronized = true;
    if (s.read("synchronized", synchronized) && !synchronized)
      warn_no_effect(s.ctx(), s.key_path("synchronized"), "false",
                     "the throughput timer reads the host clock once the step has returned; on the CPU there is no "
                     "device queue to synchronise first");
    s.finish();
    t.finish();
  }
  {
    SectionReader s(top.ctx(), top.raw("comms_logger"), "comms_logger", UnknownKeys::Error);
    CommsLoggerConfig& c = cfg.comms_logger;
    s.read("enabled", c.enabled);
    s.read("verbose", c.verbose);
    s.read("prof_all", c.prof_all);
    s.read("debug", c.debug);
    if (const Json* ops = s.take("prof_ops"); ops != nullptr && !ops->is_null()) {
      const bool strings = ops->is_array() && std::all_of(ops->begin(), ops->end(), [](const Json& v) { return v.is_string(); });
      if (!strings)
        throw ConfigError(s.key_path("prof_ops"), ops->dump() + ": expected a list of operation names, e.g. [\"all_reduce\"]");
      for (const auto& v : *ops) c.prof_ops.push_back(v.get<std::string>());
    }
    s.finish();
  }
}

void parse_checkpoint(SectionReader& top, Config& cfg) {
  SectionReader s(top.ctx(), top.raw("checkpoint"), "checkpoint", UnknownKeys::Warn);
  CheckpointConfig& c = cfg.checkpoint;
  // DeepSpeed upper-cases the value before comparing, so any case is accepted.
  s.read_enum("tag_validation", c.tag_validation,
              {{"Warn", TagValidation::Warn}, {"Ignore", TagValidation::Ignore}, {"Fail", TagValidation::Fail}},
              /*case_insensitive=*/true);
  if (s.read("load_universal", c.load_universal) && c.load_universal)
    warn_no_effect(s.ctx(), s.key_path("load_universal"), "true",
                   "every checkpoint loads at any world size, stage, TP size and number of pipeline stages "
                   "already (no ds_to_universal conversion needed)");
  if (s.read("use_node_local_storage", c.use_node_local_storage) && c.use_node_local_storage)
    warn_no_effect(s.ctx(), s.key_path("use_node_local_storage"), "true",
                   "every rank writes its pieces into the one checkpoint directory, which all hosts must see");
  SectionReader pw(top.ctx(), s.raw("parallel_write"), "checkpoint.parallel_write", UnknownKeys::Warn);
  if (pw.read("pipeline_stage", c.parallel_write.pipeline_stage) && c.parallel_write.pipeline_stage)
    warn_no_effect(pw.ctx(), pw.key_path("pipeline_stage"), "true",
                   "every pipeline stage writes its own pieces in parallel already");
  pw.finish();
  s.finish();
}

}  // namespace ds::config_detail
