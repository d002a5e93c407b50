// Mixed-precision sections: "fp16", "bf16" (old name "bfloat16"), "data_types" and "amp".
// Field names are the JSON keys; defaults are DeepSpeed's code defaults (reference §1.4).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ds {

// A floating-point type named in the config ("fp16", "bf16", "fp32" and their synonyms).
enum class DType { Fp16, Bf16, Fp32 };

// What a ZeRO DynamicLossScaler is built with (reference §1.4 / §8.1).
struct LossScalerArgs {
  double init_scale = 0;          // cur_scale at step 0
  int64_t scale_window = 1000;    // clean steps between doublings
  double min_scale = 1;
  int64_t delayed_shift = 1;      // hysteresis
  bool consecutive_hysteresis = false;
};

struct Fp16Config {
  bool enabled = false;
  bool auto_cast = false;               // ModelEngine::forward casts floating tensor inputs to the compute dtype
  double loss_scale = 0;                // 0 = dynamic, > 0 = static scale
  int64_t initial_scale_power = 16;     // dynamic scale starts at 2^initial_scale_power
  int64_t loss_scale_window = 1000;
  int64_t hysteresis = 2;
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1;
  bool fp16_master_weights_and_grads = false;

  // True when the file gave at least one of initial_scale_power, loss_scale_window, min_loss_scale,
  // hysteresis, consecutive_hysteresis. DeepSpeed only builds its dynamic-scaler argument dict in
  // that case; without it ZeRO falls back to init 2^32 and hysteresis 1 (reference §1.4).
  bool dynamic_args_given = false;

  bool dynamic_loss_scale() const { return loss_scale == 0; }
  // The arguments ZeRO stages 1-3 build their DynamicLossScaler with (honours dynamic_args_given).
  LossScalerArgs zero_dynamic_scaler_args() const;
};

struct Bf16Config {
  bool enabled = false;
  bool immediate_grad_update = false;   // add lp grads into the fp32 buffer from backward hooks
  // Skip a step whose gradients are not finite (DeepSpeed 0.19: default true, PR #8035; the old
  // name check_overflow is read as a deprecated alias). deepspeed.cpp's nan_guard does the skipping.
  bool check_grad_overflow = true;
  bool bf16_master_weights_and_grads = false;  // newer DeepSpeed: parsed, not supported here
  bool bf16_optimizer_states = false;          // newer DeepSpeed: parsed, not supported here
};

struct DataTypesConfig {
  std::optional<DType> grad_accum_dtype;  // None: accumulate in the model dtype (reference §8.3)
  // deepspeed.cpp's own key: the dtype the module computes in. None ("auto"): the model dtype on
  // GPU; on CPU fp32 for fp16 (no fp16 GEMM) and for bf16 without AVX512-BF16 (slow bf16 GEMM).
  std::optional<DType> compute_dtype;
};

// deepspeed.cpp's own section "nan_guard" (not a DeepSpeed key; docs/mixed_precision.md). DeepSpeed
// applies a bf16/fp32 step whatever its gradients hold, so one NaN silently ruins the weights. With the
// guard on, a step whose loss or gradients are not finite is skipped (not applied, counted in
// skipped_steps) unless fp16's dynamic loss scaling owns it, and max_consecutive_steps such steps in a
// row stop the run with the step, the loss and the first parameter whose gradient is not finite.
struct NanGuardConfig {
  bool enabled = true;
  int64_t max_consecutive_steps = 3;
};

// Apex AMP: parsed so it can be rejected clearly; deepspeed.cpp has no AMP.
struct AmpConfig {
  bool enabled = false;
  std::string params_json = "{}";  // the other keys, which DeepSpeed passes to amp.initialize
};

std::string to_string(DType t);

}  // namespace ds
