// "fp16", "bf16" (old name "bfloat16"), "data_types" and "amp" (reference §1.4, §8).
#include <cmath>

#include "config/parse_sections.h"
#include "util/error.h"

namespace ds::config_detail {
namespace {

// 2^127 is the largest power of two fp32 holds.
constexpr int64_t kMaxInitialScalePower = 127;

void parse_fp16(SectionReader& top, Fp16Config& c) {
  SectionReader s(top.ctx(), top.raw("fp16"), "fp16", UnknownKeys::Warn);
  s.read("enabled", c.enabled);
  s.read("auto_cast", c.auto_cast);
  s.read("loss_scale", c.loss_scale, kNonNegativeReal);  // beyond fp32's range is refused by the reader
  if (s.read("initial_scale_power", c.initial_scale_power, kNonNegative) &&
      c.initial_scale_power > kMaxInitialScalePower) {
    // 2^128 is inf in fp32: every step would overflow and be skipped, silently.
    throw ConfigError(s.key_path("initial_scale_power"),
                      std::to_string(c.initial_scale_power) + " is above the limit " +
                          std::to_string(kMaxInitialScalePower) +
                          ": the dynamic loss scale starts at 2^initial_scale_power, which must be a finite fp32 "
                          "(2^128 and above are inf); DeepSpeed's default is 16");
  }
  s.read("loss_scale_window", c.loss_scale_window, kPositive);
  s.read("hysteresis", c.hysteresis, kPositive);
  s.read("consecutive_hysteresis", c.consecutive_hysteresis);
  s.read("min_loss_scale", c.min_loss_scale, RealRange{0.0, INFINITY, true});
  s.read("fp16_master_weights_and_grads", c.fp16_master_weights_and_grads);
  for (const char* k : {"initial_scale_power", "loss_scale_window", "min_loss_scale", "hysteresis",
                        "consecutive_hysteresis"}) {
    c.dynamic_args_given = c.dynamic_args_given || s.given(k);
  }
  s.finish();
}

void parse_bf16(SectionReader& top, Bf16Config& c) {
  top.alias("bf16", "bfloat16", /*deprecated=*/true);
  SectionReader s(top.ctx(), top.raw("bf16"), "bf16", UnknownKeys::Warn);
  s.read("enabled", c.enabled);
  s.read("immediate_grad_update", c.immediate_grad_update);
  if (c.immediate_grad_update)
    warn_no_effect(top.ctx(), s.key_path("immediate_grad_update"), "true",
                   "each micro-batch's bf16 gradients are added into an fp32 accumulator already (set "
                   "data_types.grad_accum_dtype to choose another), so the accumulation is the same");
  s.alias("check_grad_overflow", "check_overflow", /*deprecated=*/true);
  if (s.read("check_grad_overflow", c.check_grad_overflow) && !c.check_grad_overflow && c.enabled) {
    top.ctx().warn(s.key_path("check_grad_overflow") +
                   ": false is not honoured: nan_guard (on by default) still skips a bf16 step whose gradients are "
                   "not finite, and stops after nan_guard.max_consecutive_steps such steps; set nan_guard.enabled "
                   "false to apply them");
  }
  for (auto [key, field] : {std::pair{"bf16_master_weights_and_grads", &c.bf16_master_weights_and_grads},
                            std::pair{"bf16_optimizer_states", &c.bf16_optimizer_states}}) {
    if (s.read(key, *field) && *field) warn_unsupported(top.ctx(), s.key_path(key));
  }
  s.finish();
}

// deepspeed.cpp's own section; strict like its DeepSpeed siblings.
void parse_nan_guard(SectionReader& top, NanGuardConfig& c) {
  SectionReader s(top.ctx(), top.raw("nan_guard"), "nan_guard", UnknownKeys::Error);
  s.read("enabled", c.enabled);
  s.read("max_consecutive_steps", c.max_consecutive_steps, IntRange{1, 1000000});
  s.finish();
}

void parse_data_types(SectionReader& top, DataTypesConfig& c) {
  SectionReader s(top.ctx(), top.raw("data_types"), "data_types", UnknownKeys::Warn);
  // grad_accum_dtype is DeepSpeed's; compute_dtype is deepspeed.cpp's own (docs/mixed_precision.md).
  auto read_dtype = [&](const char* key, std::optional<DType>& out) {
    const Json* v = s.take(key);
    if (v == nullptr || v->is_null()) {
      top.ctx().record(s.key_path(key), nullptr, v ? Source::File : s.source_of(key));
      return;
    }
    DType t = DType::Fp32;
    // DeepSpeed's DtypeEnum spellings; the first of each is the one reported.
    s.read_enum(key, t,
                {{"fp32", DType::Fp32}, {"float32", DType::Fp32}, {"float", DType::Fp32},
                 {"torch.float32", DType::Fp32}, {"fp16", DType::Fp16}, {"float16", DType::Fp16},
                 {"half", DType::Fp16}, {"torch.float16", DType::Fp16}, {"bf16", DType::Bf16},
                 {"bfloat16", DType::Bf16}, {"torch.bfloat16", DType::Bf16}});
    out = t;
  };
  read_dtype("grad_accum_dtype", c.grad_accum_dtype);
  read_dtype("compute_dtype", c.compute_dtype);
  // DeepSpeed 0.19's FSDP-style casts (null: the training dtype / the loaded dtype): not done here.
  for (const char* key : {"param_dtype", "buffer_dtype"}) {
    std::optional<DType> cast;
    read_dtype(key, cast);
    if (cast) warn_unsupported(top.ctx(), s.key_path(key), "parameters and buffers keep the training dtype");
  }
  s.finish();
}

void parse_amp(SectionReader& top, AmpConfig& c) {
  SectionReader s(top.ctx(), top.raw("amp"), "amp", UnknownKeys::Warn);
  s.read("enabled", c.enabled);
  Json rest = s.object();
  rest.erase("enabled");
  for (const auto& item : rest.items()) s.mark_known(item.key());  // apex amp.initialize kwargs
  c.params_json = rest.dump();
  if (c.enabled) warn_unsupported(top.ctx(), "amp", "NVIDIA Apex AMP; use fp16 or bf16");
  s.finish();
}

}  // namespace

void parse_precision(SectionReader& top, Config& cfg) {
  parse_fp16(top, cfg.fp16);
  parse_bf16(top, cfg.bf16);
  parse_data_types(top, cfg.data_types);
  parse_amp(top, cfg.amp);
  parse_nan_guard(top, cfg.nan_guard);
}

}  // namespace ds::config_detail
