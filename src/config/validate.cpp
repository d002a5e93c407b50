// Rules that span sections, checked once every section is read (reference §1.3 "sanity rules"),
// then what this build runs (config/support.h) and warnings about values that train badly.
#include <fmt/format.h>

#include <cmath>

#include "config/parse_sections.h"
#include "config/support.h"
#include "util/error.h"

namespace ds::config_detail {
namespace {

// fp16's largest finite value: a scaled gradient beyond it is inf, and the step is skipped.
constexpr double kFp16Max = 65504.0;
// The highest initial scale DeepSpeed itself uses (ZeRO's DynamicLossScaler default, 2^32); the
// static scales and initial powers above it only cost skipped steps.
constexpr int64_t kHighestUsefulScalePower = 32;

void warn_about_fp16_scales(ParseContext& ctx, const Config& cfg) {
  const Fp16Config& f = cfg.fp16;
  if (!f.enabled) return;
  if (!f.dynamic_loss_scale() && f.loss_scale > std::ldexp(1.0, kHighestUsefulScalePower)) {
    ctx.warn(fmt::format("fp16.loss_scale: the static scale {} is above 2^32: any gradient larger than {:.2g} "
                         "(65504 / scale) overflows fp16 at that scale and its step is skipped, and a static scale "
                         "never comes down; use 0 (dynamic loss scaling) or a static scale such as 65536",
                         Json(f.loss_scale).dump(), kFp16Max / f.loss_scale));
  }
  if (f.dynamic_loss_scale() && f.initial_scale_power > kHighestUsefulScalePower) {
    // Each overflowing step halves the scale; ZeRO's scaler first uses up its hysteresis.
    const int64_t hysteresis = cfg.zero_optimization.stage > 0 ? f.hysteresis : 1;
    const int64_t skipped = f.initial_scale_power - kHighestUsefulScalePower + hysteresis - 1;
    ctx.warn(fmt::format("fp16.initial_scale_power: {} starts the dynamic loss scale at 2^{} = {:.3g}: any gradient "
                         "larger than {:.2g} (65504 / scale) overflows fp16, so the first steps are skipped while the "
                         "scale halves, at least {} skipped steps before it is down to 2^32 (the highest start "
                         "DeepSpeed uses); the default 16 suits most models",
                         f.initial_scale_power, f.initial_scale_power, std::ldexp(1.0, int(f.initial_scale_power)),
                         kFp16Max / std::ldexp(1.0, int(f.initial_scale_power)), skipped));
  }
}

// The 1-bit family: DeepSpeed asserts they run without ZeRO and warns outside fp16.
void validate_onebit(ParseContext& ctx, const Config& cfg) {
  const OptimizerConfig& o = *cfg.optimizer;
  const std::string name = o.type == OptimizerType::OneBitAdam    ? "1-bit Adam"
                           : o.type == OptimizerType::ZeroOneAdam ? "0/1 Adam"
                                                                  : "1-bit Lamb";
  if (cfg.zero_optimization.stage > 0) {
    throw ConfigError("zero_optimization.stage",
                      std::to_string(cfg.zero_optimization.stage) + " with optimizer " + to_string(o.type) + ": " +
                          name + " is not compatible with ZeRO (it compresses the data-parallel exchange of whole "
                          "momenta, which ZeRO partitions); use stage 0");
  }
  if (!cfg.fp16.enabled) ctx.warn("optimizer.type: Currently the convergence of " + name + " is only verified under FP16");
  // 1-bit Adam/Lamb compress only after their warm-up; 0/1 Adam takes local steps only after it.
  const int64_t freeze = o.type == OptimizerType::ZeroOneAdam ? o.params.var_freeze_step : o.params.freeze_step;
  const char* key = o.type == OptimizerType::ZeroOneAdam ? "var_freeze_step" : "freeze_step";
  if (cfg.scheduler && cfg.scheduler->params.total_num_steps > 0 && freeze >= cfg.scheduler->params.total_num_steps) {
    ctx.warn(fmt::format("optimizer.params.{}: {} is not below the schedule's total_num_steps {}: {}", key, freeze,
                         cfg.scheduler->params.total_num_steps,
                         o.type == OptimizerType::ZeroOneAdam ? "the variance never freezes, so local steps never begin"
                                                              : "the whole run stays in the uncompressed warm-up"));
  }
}

}  // namespace

void validate_config(ParseContext& ctx, Config& cfg) {
  const ZeroConfig& z = cfg.zero_optimization;
  if (cfg.fp16.enabled && cfg.bf16.enabled) {
    throw ConfigError("bf16.enabled", "true together with fp16.enabled: true; bfloat16 and fp16 modes cannot be "
                                      "simultaneously enabled (enable one)");
  }
  if (cfg.amp.enabled && z.stage > 0) {
    throw ConfigError("amp.enabled", "true with ZeRO stage " + std::to_string(z.stage) +
                                         ": Amp and ZeRO are not currently compatible, please use (legacy) fp16 "
                                         "mode which performs similar to amp opt_mode=O2");
  }
  if (cfg.amp.enabled && cfg.fp16.enabled) {
    throw ConfigError("amp.enabled", "true together with fp16.enabled: true; Cannot enable both amp with (legacy) "
                                     "fp16 mode");
  }
  if (cfg.fp16.fp16_master_weights_and_grads && z.stage != 2) {
    throw ConfigError("fp16.fp16_master_weights_and_grads",
                      "true with ZeRO stage " + std::to_string(z.stage) +
                          ": Fp16_master_weights_and_grads is only supported with ZeRO Stage 2 for now.");
  }
  // DeepSpeed splits the saved inputs over the model-parallel group; here each rank keeps them whole.
  if (cfg.activation_checkpointing.partition_activations && cfg.parallel_sizes.autotp_size > 1)
    warn_unsupported(ctx, "activation_checkpointing.partition_activations",
                     "under AutoTP each rank keeps its checkpointed segments' saved inputs whole");
  // What this build cannot run is refused here too, so ds-report --config refuses what the engine would.
  check_engine_support(cfg);
  if (cfg.optimizer) {
    const OptimizerType t = cfg.optimizer->type;
    if (t == OptimizerType::Lamb && cfg.fp16.enabled && !cfg.fp16.dynamic_loss_scale()) {
      throw ConfigError("fp16.loss_scale", Json(cfg.fp16.loss_scale).dump() +
                                               ": the Lamb optimizer requires dynamic loss scaling (set loss_scale to 0)");
    }
    if (is_onebit(t)) validate_onebit(ctx, cfg);
    // DeepSpeed's ZeRO-supported list: Adam, AdamW, Adagrad, Lion; others need an explicit opt-in.
    const bool zero_tested = t == OptimizerType::Adam || t == OptimizerType::AdamW || t == OptimizerType::Adagrad ||
                             t == OptimizerType::Lion;
    if (z.stage > 0 && !zero_tested && !cfg.zero_allow_untested_optimizer) {
      throw ConfigError("optimizer.type", "\"" + to_string(t) +
                                              "\" with ZeRO: You are using an untested ZeRO Optimizer. Please add "
                                              "<\"zero_allow_untested_optimizer\": true> in the configuration file "
                                              "to use it.");
    }
  }
  // DeepSpeed turns on the timers the flops profiler needs by OR-ing the two flags.
  if (cfg.flops_profiler.enabled && !cfg.wall_clock_breakdown) {
    cfg.wall_clock_breakdown = true;
    ctx.record("wall_clock_breakdown", true, Source::Derived);
  }
  warn_about_fp16_scales(ctx, cfg);
  if (z.round_robin_gradients && z.stage != 1 && z.stage != 2) {
    ctx.warn("zero_optimization.round_robin_gradients: true applies to ZeRO stages 1 and 2, whose partitions it lays "
             "out; ignored at stage " + std::to_string(z.stage));
  }
  if (cfg.zero_overlap_param_gather && z.stage != 1 && z.stage != 2) {
    ctx.warn("zero_overlap_param_gather: true applies to ZeRO stages 1 and 2, whose step all-gathers the updated "
             "parameters (stage 3 gathers each layer's and prefetches: stage3_prefetch_bucket_size); ignored at stage " +
             std::to_string(z.stage));
  }
  if (cfg.vocabulary_size && *cfg.vocabulary_size % 8 != 0) {
    ctx.warn("vocabulary_size: " + std::to_string(*cfg.vocabulary_size) +
             " is not aligned to 8, may impact tensor core utilization");
  }
}

}  // namespace ds::config_detail
