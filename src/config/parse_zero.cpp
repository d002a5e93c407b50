// "zero_optimization" (reference §1.5, §1.6). DeepSpeed validates this section with pydantic, so an
// unknown key is an error here too; deprecated keys are remapped with a warning.
#include "config/parse_sections.h"
#include "util/error.h"

namespace ds::config_detail {
namespace {

// DeepSpeed's legacy form `"zero_optimization": true|false` (stage 1 with allgather_size / off).
Json legacy_zero_section(SectionReader& top, bool on) {
  top.ctx().warn("zero_optimization: the boolean form is deprecated; write {\"stage\": " +
                 std::string(on ? "1" : "0") + "} instead");
  Json z = {{"stage", on ? 1 : 0}};
  if (on) {
    const Json* size = top.take("allgather_size");
    z["allgather_bucket_size"] = size ? *size : Json(500000000);
  }
  return z;
}

// cpu_offload / cpu_offload_param: true → {"device": "cpu"} under the new key.
void remap_cpu_offload(SectionReader& z, const char* old_key, const char* new_key) {
  z.mark_known(old_key);
  Json& obj = z.object();
  auto it = obj.find(old_key);
  if (it == obj.end()) return;
  if (is_auto(*it)) {  // "auto" = absent
    obj.erase(it);
    return;
  }
  if (obj.contains(new_key)) {
    throw ConfigError(z.key_path(old_key), std::string("Cannot provide deprecated parameter '") + old_key +
                                               "' and replacing parameter '" + new_key + "' together");
  }
  if (!it->is_boolean()) type_error(z.key_path(old_key), "true or false", *it);
  const bool on = it->get<bool>();
  z.ctx().warn(z.key_path(old_key) + ": deprecated, use \"" + new_key + "\"" +
               (on ? " (taken as " + z.key_path(new_key) + ".device = \"cpu\")" : ""));
  if (on) obj[new_key] = {{"device", "cpu"}};
  obj.erase(old_key);
}

OffloadDevice read_device(SectionReader& s) {
  OffloadDevice d = OffloadDevice::None;
  s.read_enum("device", d, {{"none", OffloadDevice::None}, {"cpu", OffloadDevice::Cpu}, {"nvme", OffloadDevice::Nvme}});
  if (d == OffloadDevice::Nvme && !s.given("nvme_path")) {
    throw ConfigError(s.key_path("nvme_path"), "required when device is \"nvme\" (a directory on a local NVMe SSD)");
  }
  return d;
}

void parse_offload_param(SectionReader& z, OffloadParamConfig& c) {
  SectionReader s(z.ctx(), z.raw("offload_param"), z.key_path("offload_param"), UnknownKeys::Error);
  c.device = read_device(s);
  s.read("nvme_path", c.nvme_path);
  s.read("buffer_count", c.buffer_count, kNonNegative);
  s.read("buffer_size", c.buffer_size, kNonNegative);
  if (s.read("max_in_cpu", c.max_in_cpu, kNonNegative) && c.device == OffloadDevice::Nvme &&
      c.max_in_cpu != OffloadParamConfig{}.max_in_cpu)
    warn_no_effect(s.ctx(), s.key_path("max_in_cpu"), std::to_string(c.max_in_cpu),
                   "every swappable parameter shard goes to NVMe (docs/offload.md)");
  s.read("pin_memory", c.pin_memory);  // host buffers for a GPU's copies: nothing to pin on a CPU build
  s.finish();
}

// Returns whether the section was written (DeepSpeed's ratio check applies only then).
bool parse_offload_optimizer(SectionReader& z, OffloadOptimizerConfig& c) {
  SectionReader s(z.ctx(), z.raw("offload_optimizer"), z.key_path("offload_optimizer"), UnknownKeys::Error);
  c.device = read_device(s);
  s.read("nvme_path", c.nvme_path);
  s.read("buffer_count", c.buffer_count, kNonNegative);
  s.read("pin_memory", c.pin_memory);
  s.read("pipeline_read", c.pipeline_read);
  s.read("pipeline_write", c.pipeline_write);
  if (s.read("fast_init", c.fast_init) && c.fast_init && c.device == OffloadDevice::Nvme)
    warn_no_effect(s.ctx(), s.key_path("fast_init"), "true",
                   "the swap files are filled sub-group by sub-group from the parameters already");
  s.read("ratio", c.ratio, kUnitInterval);
  // Newer DeepSpeed keys (Superchip offload): accepted by name, not implemented.
  for (const char* k : {"super_offload", "convert_grad_on_cpu", "cpuadam_cores_perc"}) {
    if (s.take(k) != nullptr) warn_unsupported(z.ctx(), s.key_path(k));
  }
  s.finish();
  return s.present();
}

void parse_loco(SectionReader& z, std::optional<LocoParamConfig>& out) {
  SectionReader s(z.ctx(), z.raw("zeropp_loco_param"), z.key_path("zeropp_loco_param"), UnknownKeys::Warn);
  if (!s.present()) {
    z.ctx().record(s.path(), nullptr, s.section_source());
    return;
  }
  LocoParamConfig c;
  s.read("err_beta", c.err_beta, kUnitInterval);
  s.read("reset_T", c.reset_T, kPositive);
  s.finish();
  out = c;
}

void warn_if_set(SectionReader& z, const char* key, bool set) {
  if (set) warn_unsupported(z.ctx(), z.key_path(key));
}

// Switches of DeepSpeed's Python implementation that have no counterpart here: the numbers are the
// same either way, so a non-default value warns once, naming what deepspeed.cpp does instead.
void warn_no_effect_keys(SectionReader& z, const ZeroConfig& c) {
  auto no_effect = [&](const char* key, bool set, const std::string& value, const char* what) {
    if (set) warn_no_effect(z.ctx(), z.key_path(key), value, what);
  };
  no_effect("contiguous_gradients", !c.contiguous_gradients, "false",
            "gradients always accumulate in one flat buffer per parameter group");
  no_effect("allgather_partitions", !c.allgather_partitions, "false",
            "stages 1-2 always gather the updated partitions with all-gathers (DeepSpeed's false broadcasts each "
            "rank's partition instead; the parameters are the same)");
  no_effect("use_multi_rank_bucket_allreduce", !c.use_multi_rank_bucket_allreduce, "false",
            "each gradient bucket is reduced once, by reduce, reduce-scatter or all-reduce as its owners and "
            "reduce_scatter say; the sums are the same");
  no_effect("elastic_checkpoint", c.elastic_checkpoint && c.stage != 3, "true",
            "checkpoints always load at any data-parallel size, stage or offload (docs/checkpoint.md)");
  no_effect("override_module_apply", !c.override_module_apply, "false",
            "stage 3 partitions a C++ module after it is built, without patching Module.apply");
  no_effect("pipeline_loading_checkpoint", c.pipeline_loading_checkpoint, "true",
            "stage-3 checkpoints load the same way with and without pipeline stages");
  no_effect("enable_sanity_checks", c.enable_sanity_checks, "true",
            "deepspeed.cpp has no optional stage-3 self-checks to enable");
  no_effect("use_all_reduce_for_fetch_params", c.use_all_reduce_for_fetch_params, "true",
            "stage 3 fetches parameters with all-gathers (DeepSpeed's true all-reduces a zero-padded buffer "
            "instead; the parameters are the same)");
  no_effect("module_granularity_threshold", c.module_granularity_threshold > 0,
            std::to_string(c.module_granularity_threshold),
            "stage 3 fetches parameters per LayerList layer, never per small module, so there are no "
            "fine-grained modules to group into leaves");
}

}  // namespace

void parse_zero(SectionReader& top, Config& cfg) {
  const Json* raw = top.raw("zero_optimization");
  Json legacy;
  if (raw != nullptr && raw->is_boolean()) {
    legacy = legacy_zero_section(top, raw->get<bool>());
    raw = &legacy;
  }
  SectionReader z(top.ctx(), raw, "zero_optimization", UnknownKeys::Error);
  ZeroConfig& c = cfg.zero_optimization;

  remap_cpu_offload(z, "cpu_offload", "offload_optimizer");
  remap_cpu_offload(z, "cpu_offload_param", "offload_param");
  z.mark_known("cpu_offload_use_pin_memory");
  if (z.take("cpu_offload_use_pin_memory") != nullptr) {
    z.ctx().warn(z.key_path("cpu_offload_use_pin_memory") +
                 ": deprecated and ignored (as in DeepSpeed); set offload_param.pin_memory / "
                 "offload_optimizer.pin_memory instead");
  }
  for (const char* k : {"prefetch_bucket_size", "param_persistence_threshold", "model_persistence_threshold",
                        "max_live_parameters", "max_reuse_distance", "gather_16bit_weights_on_model_save",
                        "module_granularity_threshold", "use_all_reduce_for_fetch_params", "allgather_sequential"}) {
    z.alias(k, std::string("stage3_") + k, /*deprecated=*/false);
  }
  z.alias("gather_16bit_weights_on_model_save", "stage3_gather_fp16_weights_on_model_save", /*deprecated=*/true);

  z.read("stage", c.stage, IntRange{0, 3});
  z.read("contiguous_gradients", c.contiguous_gradients);
  z.read("reduce_scatter", c.reduce_scatter);
  z.read("reduce_bucket_size", c.reduce_bucket_size, kNonNegative);
  z.read("use_multi_rank_bucket_allreduce", c.use_multi_rank_bucket_allreduce);
  z.read("allgather_partitions", c.allgather_partitions);
  z.read("allgather_bucket_size", c.allgather_bucket_size, kNonNegative);
  std::optional<bool> overlap;
  z.read("overlap_comm", overlap);
  c.overlap_comm = overlap.value_or(c.stage == 3);  // DeepSpeed's None: on for stage 3 only
  z.ctx().auto_meaningful.insert(z.key_path("overlap_comm"));  // "auto" = DeepSpeed's None: derived
  if (!overlap) {
    const Source src = z.source_of("overlap_comm");
    z.ctx().record(z.key_path("overlap_comm"), c.overlap_comm, src == Source::Auto ? Source::Auto : Source::Derived);
  }
  z.read("load_from_fp32_weights", c.load_from_fp32_weights);
  z.read("elastic_checkpoint", c.elastic_checkpoint);
  parse_offload_param(z, c.offload_param);
  const bool offload_optimizer_written = parse_offload_optimizer(z, c.offload_optimizer);
  z.read("sub_group_size", c.sub_group_size, kNonNegative);
  z.read("prefetch_bucket_size", c.prefetch_bucket_size, kNonNegative);
  z.read("param_persistence_threshold", c.param_persistence_threshold, kNonNegative);
  z.read("model_persistence_threshold", c.model_persistence_threshold, kNonNegative);
  z.read("max_live_parameters", c.max_live_parameters, kNonNegative);
  z.read("max_reuse_distance", c.max_reuse_distance, kNonNegative);
  z.read("gather_16bit_weights_on_model_save", c.gather_16bit_weights_on_model_save);
  z.read("module_granularity_threshold", c.module_granularity_threshold, kNonNegative);
  z.read("use_all_reduce_for_fetch_params", c.use_all_reduce_for_fetch_params);
  z.read("allgather_sequential", c.allgather_sequential);
  z.read("ignore_unused_parameters", c.ignore_unused_parameters);
  z.read("legacy_stage1", c.legacy_stage1);
  z.read("round_robin_gradients", c.round_robin_gradients);
  z.read("zero_hpz_partition_size", c.zero_hpz_partition_size, kNonNegative);
  z.read("zero_quantized_weights", c.zero_quantized_weights);
  z.read("zero_quantized_nontrainable_weights", c.zero_quantized_nontrainable_weights);
  z.read("zero_quantized_gradients", c.zero_quantized_gradients);
  parse_loco(z, c.zeropp_loco_param);
  z.read("mics_shard_size", c.mics_shard_size, IntRange{-1});  // -1: off
  z.read("mics_hierarchical_params_gather", c.mics_hierarchical_params_gather);
  z.read("memory_efficient_linear", c.memory_efficient_linear);
  z.read("pipeline_loading_checkpoint", c.pipeline_loading_checkpoint);
  z.read("override_module_apply", c.override_module_apply);
  z.read("log_trace_cache_warnings", c.log_trace_cache_warnings);
  z.read("enable_sanity_checks", c.enable_sanity_checks);
  // Newer DeepSpeed keys: accepted by name so such configs load, warned as unsupported.
  for (const char* k : {"zenflow", "leaf_module", "partition_stream_chunk_size", "stage3_partition_stream_chunk_size",
                        "save_muon_momentum_buffer_in_memory"}) {
    if (z.take(k) != nullptr) warn_unsupported(z.ctx(), z.key_path(k));
  }
  z.finish();

  // Features parsed for compatibility that deepspeed.cpp does not implement: never silently.
  // hpZ: stage 3's secondary parameter partition (zero/sharded_params.h).
  if (c.zero_hpz_partition_size > 1 && c.stage != 3) {
    z.ctx().warn(z.key_path("zero_hpz_partition_size") + ": " + std::to_string(c.zero_hpz_partition_size) +
                 " only applies to ZeRO stage 3, the stage that gathers parameters; ignored at stage " +
                 std::to_string(c.stage));
  }
  // qwZ: the stage-3 parameter all-gather in int8 (zero/sharded_params.cpp); DeepSpeed ignores it below stage 3.
  if (c.zero_quantized_weights && c.stage != 3) {
    z.ctx().warn(z.key_path("zero_quantized_weights") + ": true only applies to ZeRO stage 3, the stage that gathers "
                 "parameters; ignored at stage " + std::to_string(c.stage));
  }
  // DeepSpeed keeps frozen parameters' shards in int8; deepspeed.cpp does not partition frozen
  // parameters at all (they stay whole with the module), so there is nothing to quantize.
  if (c.zero_quantized_nontrainable_weights) {
    z.ctx().warn(z.key_path("zero_quantized_nontrainable_weights") + ": true has no effect: deepspeed.cpp keeps "
                 "frozen (requires_grad false) parameters whole with the module instead of partitioning them, so "
                 "no frozen shard exists to keep in int8");
  }
  // qgZ: the stage-3 gradient reduce-scatter in int4 across nodes (zero/quantized_gradients.h).
  if (c.zero_quantized_gradients && c.stage != 3) {
    z.ctx().warn(z.key_path("zero_quantized_gradients") + ": true only applies to ZeRO stage 3 (DeepSpeed's "
                 "quantized reduce-scatter is stage 3's); ignored at stage " + std::to_string(c.stage));
  }
  warn_if_set(z, "zeropp_loco_param", c.zeropp_loco_param.has_value());
  warn_if_set(z, "mics_shard_size", c.mics_shard_size > 0);
  warn_if_set(z, "mics_hierarchical_params_gather", c.mics_hierarchical_params_gather);
  warn_if_set(z, "allgather_sequential", c.allgather_sequential);

  // Rules DeepSpeed enforces (or silently gets wrong) about this section alone.
  // Keys DeepSpeed accepts and ignores: one warning each, and the run goes on as DeepSpeed's would.
  if (c.legacy_stage1) {
    z.ctx().warn(z.key_path("legacy_stage1") + ": true is ignored: the legacy ZeRO stage 1 was removed from "
                                               "DeepSpeed, which still accepts the key and ignores it; remove it");
  }
  const std::string stage = std::to_string(c.stage);
  if (c.offload_param_enabled() && c.stage != 3) {
    z.ctx().warn(z.key_path("offload_param") + ": device \"" +
                 (c.offload_param.device == OffloadDevice::Nvme ? "nvme" : "cpu") +
                 "\" is ignored at stage " + stage +
                 ": parameter offload is for ZeRO stage 3 only, and DeepSpeed ignores it below; parameters stay on "
                 "the device (set \"stage\": 3 to offload them, or remove offload_param)");
  }
  if (c.offload_optimizer_enabled() && c.stage == 0) {
    throw ConfigError(z.key_path("offload_optimizer"),
                      "optimizer offload requires ZeRO stage 1, 2 or 3, but stage is 0; set a stage or remove it");
  }
  if (offload_optimizer_written && c.offload_optimizer.ratio < 1.0 && c.stage != 3) {
    throw ConfigError(z.key_path("offload_optimizer.ratio"),
                      Json(c.offload_optimizer.ratio).dump() +
                          ": Partial offloading only supported for ZeRO Stage 3 (stage is " + stage + ")");
  }
  if ((c.stage == 1 || c.stage == 2) && c.allgather_bucket_size % 2 != 0) {
    throw ConfigError(z.key_path("allgather_bucket_size"),
                      std::to_string(c.allgather_bucket_size) +
                          ": allgather_bucket_size must be a multiple of nccl_start_alignment_factor, 2");
  }
  if (c.stage == 3 && c.elastic_checkpoint) {
    z.ctx().warn(z.key_path("elastic_checkpoint") +
                 ": ZeRO-3 elastic checkpointing is deprecated and no longer supported. Use Universal "
                 "Checkpointing instead.");
  }
  if (c.stage == 3 && !c.load_from_fp32_weights) {
    z.ctx().warn(z.key_path("load_from_fp32_weights") +
                 ": false is ignored at stage 3, as DeepSpeed ignores it there: stage 3 always loads its fp32 "
                 "partitions from the checkpoint (stages 0-2 restart the fp32 master from the 16-bit weights)");
  }
  if (!c.ignore_unused_parameters && (c.stage == 0 || c.stage == 3)) {
    z.ctx().warn(z.key_path("ignore_unused_parameters") + ": false is ignored at stage " + stage +
                 ", as DeepSpeed ignores it there: only stages 1-2 stop when a trainable parameter takes no part in "
                 "the loss; here its gradient is zero and it is stepped as such (weight decay still applies)");
  }
  warn_no_effect_keys(z, c);
}

}  // namespace ds::config_detail
