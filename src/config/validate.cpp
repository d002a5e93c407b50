// Rules that span sections, checked once every section is read (reference §1.3 "sanity rules").
#include "config/parse_sections.h"
#include "util/error.h"

namespace ds::config_detail {

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
  if (cfg.optimizer) {
    const OptimizerType t = cfg.optimizer->type;
    if (t == OptimizerType::Lamb && cfg.fp16.enabled && !cfg.fp16.dynamic_loss_scale()) {
      throw ConfigError("fp16.loss_scale", Json(cfg.fp16.loss_scale).dump() +
                                               ": the Lamb optimizer requires dynamic loss scaling (set loss_scale to 0)");
    }
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
  if (cfg.vocabulary_size && *cfg.vocabulary_size % 8 != 0) {
    ctx.warn("vocabulary_size: " + std::to_string(*cfg.vocabulary_size) +
             " is not aligned to 8, may impact tensor core utilization");
  }
}

}  // namespace ds::config_detail
