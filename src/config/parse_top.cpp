// Top-level keys: the batch triple, the scalars (reference §1.3), and the sections DeepSpeed knows
// that deepspeed.cpp does not implement (each warned about by name, never silently dropped).
#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "config/parse_sections.h"
#include "util/error.h"
#include "util/logging.h"

namespace ds::config_detail {

void warn_unsupported(ParseContext& ctx, const std::string& path, const std::string& detail) {
  ctx.warn(path + " is parsed but not supported by deepspeed.cpp yet; ignored" +
           (detail.empty() ? "" : " (" + detail + ")"));
}

void warn_no_effect(ParseContext& ctx, const std::string& path, const std::string& value, const std::string& what) {
  ctx.warn(path + ": " + value + " has no effect in deepspeed.cpp: " + what);
}

void warn_no_effect_if_given(SectionReader& s, std::string_view key, const std::string& what) {
  const Json* v = s.take(key);
  if (v == nullptr || v->is_null() || (v->is_boolean() && !v->get<bool>()) || (v->is_number() && *v == 0) ||
      (v->is_string() && v->get<std::string>().empty()) || (v->is_structured() && v->empty()))
    return;
  warn_no_effect(s.ctx(), s.key_path(key), v->dump(), what);
}

namespace {

// DeepSpeed's get_communication_data_type: "fp16" / "bf16" / "fp32" in any case; null means "by mode"
// (Config::effective_communication_data_type()); absent, the key's default (`out` on entry).
void read_communication_dtype(SectionReader& top, std::string_view key, std::optional<DType>& out) {
  const Json* v = top.take(key);
  if ((v != nullptr && v->is_null()) || (v == nullptr && !out)) {
    out.reset();
    top.ctx().record(top.key_path(key), nullptr, v != nullptr ? Source::File : top.source_of(key));
    return;
  }
  DType t = out.value_or(DType::Fp32);
  top.read_enum(key, t, {{"fp16", DType::Fp16}, {"bf16", DType::Bf16}, {"fp32", DType::Fp32}},
                /*case_insensitive=*/true);
  out = t;
}

// The sizes that divide the world before the triple (DeepSpeedConfig's world_size): top-level
// sequence_parallel_size, tensor_parallel.autotp_size (0 = off) and pipeline.stages ("auto" = 1;
// deepspeed.cpp's stand-in for PipelineModule's num_stages).
ParallelSizes read_parallel_sizes(SectionReader& top) {
  ParallelSizes s;
  int64_t sp = 1;
  top.read("sequence_parallel_size", sp, IntRange{1, 1 << 20});
  s.sequence_parallel_size = int(sp);

  SectionReader tp(top.ctx(), top.raw("tensor_parallel"), "tensor_parallel", UnknownKeys::Warn);
  int64_t autotp = 0;
  const bool autotp_given = tp.read("autotp_size", autotp, IntRange{0, 1 << 20});
  // The legacy spelling: TPTrainingConfig's nested TPConfig ("tensor_parallel" or its alias "tp")
  // with tp_size, read when autotp_size is not given; both given must agree.
  tp.alias("tensor_parallel", "tp", /*deprecated=*/false);
  SectionReader legacy(top.ctx(), tp.raw("tensor_parallel"), "tensor_parallel.tensor_parallel", UnknownKeys::Warn);
  int64_t legacy_size = 1;
  if (legacy.read("tp_size", legacy_size, IntRange{1, 1 << 20})) {
    if (!autotp_given) autotp = legacy_size;
    else if (autotp != legacy_size && !(autotp == 0 && legacy_size == 1))
      throw ConfigError("tensor_parallel.autotp_size",
                        fmt::format("{} disagrees with tensor_parallel.tensor_parallel.tp_size {} (the legacy "
                                    "spelling of the same size); give one of them",
                                    autotp, legacy_size));
  }
  for (const char* k : {"tp_grain_size", "mpu", "tp_group"})
    warn_no_effect_if_given(legacy, k, "AutoTP splits by its built-in policy over the topology's model group");
  legacy.finish();
  s.autotp_size = autotp == 0 ? 1 : int(autotp);
  // TPTrainingConfig's other keys only matter with autotp_size > 1.
  if (tp.read("tp_overlap_comm", s.tp_overlap_comm) && s.tp_overlap_comm && s.autotp_size == 1)
    top.ctx().warn("tensor_parallel.tp_overlap_comm has no effect without tensor_parallel.autotp_size > 1");
  if (tp.read("vocab_parallel", s.vocab_parallel) && s.vocab_parallel && s.autotp_size == 1)
    top.ctx().warn("tensor_parallel.vocab_parallel has no effect without tensor_parallel.autotp_size > 1");
  // DeepSpeed's inference-side and policy keys: AutoTP here splits by its built-in policy, in the
  // training dtype (fp16 / bf16 sections), with no kernel injection.
  for (const char* k : {"dtype", "injection_policy_tuple", "partition_config", "preset_model", "keep_module_on_host",
                        "replace_with_kernel_inject", "kernel_inject"})
    warn_no_effect_if_given(tp, k,
                            "AutoTP splits by its built-in policy (docs/parallel.md), in the fp16 / bf16 sections' "
                            "dtype, without kernel injection");
  tp.finish();

  // DeepSpeed keeps "pipeline" as a free-form dict ({"stages": "auto", "partition": "best", ...}).
  SectionReader pipe(top.ctx(), top.raw("pipeline"), "pipeline", UnknownKeys::Warn);
  // "auto" is DeepSpeed's own default here (the PipelineModule decides), not Hugging Face's.
  const auto written = pipe.object().find("stages");
  const bool is_auto = written == pipe.object().end() || *written == "auto";
  top.ctx().auto_meaningful.insert("pipeline.stages");
  if (is_auto) {
    pipe.mark_known("stages");
    top.ctx().record("pipeline.stages", "auto", written == pipe.object().end() ? Source::Default : Source::File);
  } else {
    int64_t n = 1;
    pipe.read("stages", n, IntRange{1, 1 << 20});
    s.pipeline_stages = int(n);
  }
  int64_t interval = 0;
  pipe.read("activation_checkpoint_interval", interval, IntRange{0, 1 << 20});
  s.pipeline_activation_checkpoint_interval = int(interval);
  for (const auto& item : pipe.object().items()) pipe.mark_known(item.key());
  if (pipe.present() && !pipe.object().empty()) {
    Json rest = pipe.object();
    rest.erase("stages");
    rest.erase("activation_checkpoint_interval");
    // Settings whose results are the same here (and DeepSpeed's "partition": "best", which its
    // PipelineModule does not read either): nothing to warn about. Another "partition" is named: the
    // method is PipelineModuleOptions::partition_method.
    for (const char* same : {"seed_layers", "pipe_partitioned", "grad_partitioned", "use_reentrant"}) rest.erase(same);
    if (rest.contains("partition") && rest["partition"] == "best") rest.erase("partition");
    const bool off = rest.contains("enabled") && rest["enabled"] == false;
    if (!rest.empty() && !off)
      warn_unsupported(top.ctx(), "pipeline", "the pipeline engine reads stages and activation_checkpoint_interval");
  }
  pipe.finish();
  return s;
}

}  // namespace

ParallelSizes read_parallel_sizes_of(const Json& root) {
  ParseContext ctx;
  SectionReader top(ctx, &root, "", UnknownKeys::Warn);
  return read_parallel_sizes(top);
}

namespace {

// DeepSpeed's ensure_immutable_elastic_config: a scheduler (ds-run --elastic) that chose the world
// size from one elasticity section must not see the ranks train with another.
void check_scheduler_saw_same(ParseContext& ctx, const ElasticityConfig& ours) {
  const char* env = std::getenv("DEEPSPEED_ELASTICITY_CONFIG");
  if (env == nullptr) {
    ctx.warn("elasticity: DEEPSPEED_ELASTICITY_CONFIG is not set, so nothing guarantees the launcher scales this "
             "job to the world sizes this section allows (ds-run --elastic sets it)");
    return;
  }
  Json theirs = Json::parse(env, nullptr, /*allow_exceptions=*/false);
  if (theirs.is_object() && theirs.contains("elasticity")) theirs = theirs["elasticity"];
  if (!theirs.is_object())
    throw ConfigError("elasticity", std::string("DEEPSPEED_ELASTICITY_CONFIG is not a JSON object: ") + env);
  theirs["enabled"] = true;
  const ElasticityConfig s = parse_elasticity_config(theirs);
  auto mismatch = [](const char* key, const std::string& sched, const std::string& run) {
    return ConfigError("elasticity." + std::string(key),
                       fmt::format("Elastic config '{}={}' seen by resource scheduler does not match config passed to "
                                   "runtime {}={} (DEEPSPEED_ELASTICITY_CONFIG)", key, sched, key, run));
  };
  if (s.max_train_batch_size != ours.max_train_batch_size)
    throw mismatch("max_train_batch_size", std::to_string(s.max_train_batch_size), std::to_string(ours.max_train_batch_size));
  if (s.micro_batch_sizes != ours.micro_batch_sizes)
    throw mismatch("micro_batch_sizes", "[" + format_world_sizes(s.micro_batch_sizes) + "]",
                   "[" + format_world_sizes(ours.micro_batch_sizes) + "]");
  if (s.version != ours.version) throw mismatch("version", fmt::format("{}", s.version), fmt::format("{}", ours.version));
}

// With elasticity enabled its batch replaces the triple (DeepSpeedConfig.__init__): the batch keys
// must then be absent, or ignore_non_elastic_batch_info true (they are overridden, with a warning).
void apply_elasticity(SectionReader& top, const DataParallelWorld& dp, std::optional<int64_t> (&given)[3]) {
  static constexpr const char* kKeys[3] = {"train_batch_size", "train_micro_batch_size_per_gpu",
                                           "gradient_accumulation_steps"};
  const Json* section = top.raw("elasticity");
  if (section == nullptr || section->is_null() || is_auto(*section)) return;
  SectionReader reader(top.ctx(), section, "elasticity", UnknownKeys::Warn);
  const ElasticityConfig elastic = read_elasticity_section(reader);
  if (!elastic.enabled) return;
  const ElasticBatch batch = compute_elastic_config(elastic, dp.size);
  check_scheduler_saw_same(top.ctx(), elastic);
  const int64_t elastic_values[3] = {batch.train_batch_size, batch.micro_batch_size, batch.gradient_accumulation_steps};
  for (int i = 0; i < 3; ++i) {
    if (!given[i]) continue;
    if (!elastic.ignore_non_elastic_batch_info)
      throw ConfigError(kKeys[i], "One or more batch related parameters were found in your ds_config "
                                  "(train_batch_size, train_micro_batch_size_per_gpu, and/or "
                                  "gradient_accumulation_steps). These parameters *will not be used* since elastic "
                                  "training is enabled, which takes control of these parameters. If you want to "
                                  "suppress this error (the parameters will be silently ignored) please set "
                                  "'ignore_non_elastic_batch_info':true in your elasticity config.");
    top.ctx().warn(fmt::format("[Elasticity] overriding {}: {} -> {}", kKeys[i], *given[i], elastic_values[i]));
  }
  log::info("[Elasticity] valid world sizes: [{}]; this {} trains batch {} as micro {} x GAS {}",
            format_world_sizes(batch.valid_world_sizes), dp.term(), batch.train_batch_size, batch.micro_batch_size,
            batch.gradient_accumulation_steps);
  for (int i = 0; i < 3; ++i) given[i] = elastic_values[i];
}

}  // namespace

void parse_batch(SectionReader& top, int world_size, Config& cfg) {
  static constexpr const char* kKeys[3] = {"train_batch_size", "train_micro_batch_size_per_gpu",
                                           "gradient_accumulation_steps"};
  cfg.parallel_sizes = read_parallel_sizes(top);
  const DataParallelWorld dp = resolve_data_parallel_world(world_size, cfg.parallel_sizes);
  std::optional<int64_t> given[3];
  for (int i = 0; i < 3; ++i) {
    // Beyond int64 (1e19, 2^64 - 1) is above the batch limit too: say that, not "expected an integer".
    const Json* v = top.take(kKeys[i]);
    if (v != nullptr && v->is_number() && !as_integer(*v) && v->get<double>() > static_cast<double>(kMaxBatchSize))
      throw ConfigError(kKeys[i], batch_size_limit_message(show(*v)));
    top.read(kKeys[i], given[i]);  // any integer: the triple checks signs and the limit
  }
  apply_elasticity(top, dp, given);
  BatchTriple b;
  try {
    b = resolve_batch_triple(given[0], given[1], given[2], dp);
  } catch (const ConfigError& e) {
    // "auto" batch keys are Hugging Face's Trainer's to fill (from per_device_train_batch_size and
    // gradient_accumulation_steps); without it only the ones derivable from the others resolve.
    std::string autos;
    for (const char* k : kKeys) {
      if (top.source_of(k) == Source::Auto) autos += (autos.empty() ? "" : ", ") + std::string(k);
    }
    if (autos.empty()) throw;
    throw ConfigError(e.path(), std::string(e.what()).substr(e.path().empty() ? 0 : e.path().size() + 2) + " (" +
                                    autos + " \"auto\": Hugging Face's Trainer fills these in; without it, give "
                                    "train_micro_batch_size_per_gpu and gradient_accumulation_steps)");
  }
  cfg.train_batch_size = b.train_batch_size;
  cfg.train_micro_batch_size_per_gpu = b.train_micro_batch_size_per_gpu;
  cfg.gradient_accumulation_steps = b.gradient_accumulation_steps;
  cfg.world_size = world_size;
  cfg.data_parallel_size = dp.size;
  const int64_t resolved[3] = {b.train_batch_size, b.train_micro_batch_size_per_gpu, b.gradient_accumulation_steps};
  for (int i = 0; i < 3; ++i) {
    const Source src = top.source_of(kKeys[i]);
    top.ctx().auto_meaningful.insert(kKeys[i]);  // "auto" = derived from the others, as HF's integration does
    top.ctx().record(kKeys[i], resolved[i], given[i] ? Source::File : src == Source::Auto ? Source::Auto : Source::Derived);
  }
}

namespace {

// Top-level keys DeepSpeed 0.19 added (constants.py). Their defaults are what deepspeed.cpp does;
// other values are named: refused where they would change the numbers, warned where they would not.
void parse_newer_scalars(SectionReader& top) {
  bool managed = true;  // false: the client owns the accumulation boundary, each step() updates
  if (top.read("managed_gradient_accumulation", managed) && !managed)
    warn_unsupported(top.ctx(), "managed_gradient_accumulation",
                     "false: the engine always owns the boundary, an update every gradient_accumulation_steps "
                     "micro-batches");
  // DeepSpeed lower-cases it and accepts "mean" (the default) or "sum".
  if (const Json* op = top.take("gradient_allreduce_op"); op != nullptr) {
    std::string v = op->is_string() ? op->get<std::string>() : show(*op);
    for (char& ch : v) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    if (v != "mean" && v != "sum")
      throw ConfigError("gradient_allreduce_op", "Invalid gradient_allreduce_op. Supported operations: ['mean', "
                                                 "'sum']. Got: " + show(*op));
    if (v == "sum")
      throw NotSupported("gradient_allreduce_op: \"sum\" is not implemented by deepspeed.cpp, which averages "
                         "gradients over the data-parallel ranks; use \"mean\" (the default)");
    top.ctx().record("gradient_allreduce_op", "mean", Source::File);
  } else {
    top.ctx().record("gradient_allreduce_op", "mean", top.source_of("gradient_allreduce_op"));
  }
  bool disable_gc = false;  // Python's cyclic GC: there is none here
  top.read("disable_python_gc", disable_gc);
  std::optional<std::string> log_level;
  if (top.read("log_level", log_level) && log_level)
    warn_unsupported(top.ctx(), "log_level", "deepspeed.cpp's log level is not set from the config");
}

}  // namespace

void parse_top_scalars(SectionReader& top, Config& cfg) {
  top.read("steps_per_print", cfg.steps_per_print, kPositive);
  top.read("gradient_clipping", cfg.gradient_clipping, kNonNegativeReal);
  top.read("prescale_gradients", cfg.prescale_gradients);
  top.read("gradient_predivide_factor", cfg.gradient_predivide_factor, RealRange{0.0, INFINITY, true});
  top.read("wall_clock_breakdown", cfg.wall_clock_breakdown);
  top.read("memory_breakdown", cfg.memory_breakdown);  // a memory line every steps_per_print steps
  if (top.read("dump_state", cfg.dump_state) && cfg.dump_state)
    warn_no_effect(top.ctx(), "dump_state", "true", "use ds-report --config to print every resolved value");
  if (top.read("sparse_gradients", cfg.sparse_gradients) && cfg.sparse_gradients)
    warn_no_effect(top.ctx(), "sparse_gradients", "true",
                   "embedding gradients are dense here and are reduced with the other gradients");
  top.read("disable_allgather", cfg.disable_allgather);
  top.read("zero_allow_untested_optimizer", cfg.zero_allow_untested_optimizer);
  top.read("zero_force_ds_cpu_optimizer", cfg.zero_force_ds_cpu_optimizer);
  top.read("zero_overlap_param_gather", cfg.zero_overlap_param_gather);
  top.read("dataloader_drop_last", cfg.dataloader_drop_last);
  if (top.read("graph_harvesting", cfg.graph_harvesting) && cfg.graph_harvesting) {
    warn_unsupported(top.ctx(), "graph_harvesting", "CUDA-graph capture");
  }
  top.read("vocabulary_size", cfg.vocabulary_size, kPositive);

  read_communication_dtype(top, "communication_data_type", cfg.communication_data_type);
  read_communication_dtype(top, "seq_parallel_communication_data_type", cfg.seq_parallel_communication_data_type);
  top.mark_known("allgather_size");  // read by parse_zero for the legacy boolean form only
  parse_newer_scalars(top);
}

void parse_unsupported(SectionReader& top) {
  // Keys DeepSpeed reads that deepspeed.cpp has no implementation for. Present and not switched
  // off ({"enabled": false}, false, null or {}) → one warning each.
  static constexpr const char* kUnsupported[] = {
      "compile", "compression_training",
      "data_efficiency", "datastates", "eigenvalue", "expert_parallel", "hybrid_engine", "nebula",
      "quantize_training", "sparse_attention", "torch_autocast",
      "trackio", "use_data_before_expert_parallelism", "weight_quantization"};
  for (const char* key : kUnsupported) {
    const Json* v = top.take(key);
    if (v == nullptr || v->is_null() || (v->is_boolean() && !v->get<bool>())) continue;
    if (v->is_object() && (v->empty() || (v->contains("enabled") && v->at("enabled") == false))) continue;
    warn_unsupported(top.ctx(), key);
  }
}

}  // namespace ds::config_detail
