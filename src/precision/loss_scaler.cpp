// The scalers' update rules, transcribed from DeepSpeed's loss_scaler.py (ZeRO) and
// fused_optimizer.py / unfused_optimizer.py (non-ZeRO), reference §8.1 / §8.2. Keep the
// comparisons and their order as they are: trajectories must match DeepSpeed step for step.
#include "precision/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "precision/overflow_summary.h"

namespace ds::precision {
namespace {

std::string underflow_message(double min_scale, const std::string& parameter) {
  std::string m =
      "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run. "
      "(fp16 dynamic loss scaling: gradients still overflow at min_loss_scale " +
      format_scale(min_scale) + ")";
  if (!parameter.empty()) m += "; first parameter with an inf/NaN gradient: " + parameter;
  m += ". The model or its data produce inf/NaN: lower the learning rate, set gradient_clipping, "
       "check the inputs, or train in bf16 (\"bf16\": {\"enabled\": true}), which needs no loss "
       "scaling.";
  return m;
}

// Settings DeepSpeed would accept but that break the arithmetic (a window of 0 is a division by
// zero there too); the config parser rejects them earlier, this guards programmatic use.
void require(bool ok, const char* path, const std::string& message) {
  if (!ok) throw ConfigError(path, message);
}

void check_args(const LossScalerArgs& a) {
  require(std::isfinite(a.init_scale) && a.init_scale > 0, "fp16.initial_scale_power",
          "initial loss scale " + format_scale(a.init_scale) +
              " is not a positive finite fp32 number (use a power between 0 and 127)");
  require(a.scale_window >= 1, "fp16.loss_scale_window", std::to_string(a.scale_window) + " must be >= 1");
  require(std::isfinite(a.min_scale) && a.min_scale > 0, "fp16.min_loss_scale",
          format_scale(a.min_scale) + " must be > 0");
  require(a.delayed_shift >= 1, "fp16.hysteresis", std::to_string(a.delayed_shift) + " must be >= 1");
}

LossScalerState dynamic_state(const LossScalerArgs& a, ScalerKind kind) {
  check_args(a);
  LossScalerState s;
  s.kind = kind;
  s.cur_scale = a.init_scale;
  s.cur_iter = 0;
  s.last_overflow_iter = -1;
  s.scale_factor = 2;
  s.scale_window = a.scale_window;
  s.min_scale = a.min_scale;
  const bool zero = kind == ScalerKind::Dynamic;
  s.delayed_shift = zero ? a.delayed_shift : 1;  // the legacy variant has no hysteresis
  s.cur_hysteresis = s.delayed_shift;
  s.consecutive_hysteresis = zero && a.consecutive_hysteresis;
  return s;
}

ScaleUpdate begin_update(const LossScalerState& s, bool overflow) {
  ScaleUpdate u;
  u.overflow = overflow;
  u.iter = s.cur_iter;
  u.scale_before = u.scale_after = s.cur_scale;
  u.hysteresis_before = u.hysteresis_after = s.cur_hysteresis;
  return u;
}

void end_update(const LossScalerState& s, ScaleUpdate& u) {
  u.scale_after = s.cur_scale;
  u.hysteresis_after = s.cur_hysteresis;
}

const char* kind_name(ScalerKind k) {
  switch (k) {
    case ScalerKind::Static: return "static";
    case ScalerKind::Dynamic: return "dynamic (ZeRO)";
    case ScalerKind::LegacyDynamic: return "dynamic (non-ZeRO fp16)";
  }
  return "?";
}

}  // namespace

LossScaleUnderflow::LossScaleUnderflow(double min_scale, std::string parameter)
    : Error(underflow_message(min_scale, parameter)),
      min_scale_(min_scale),
      parameter_(std::move(parameter)) {}

void LossScaler::load_state(const LossScalerState& s) {
  DS_CHECK(s.kind == st_.kind, Error,
           std::string("loss scaler state is ") + kind_name(s.kind) + " but this run's scaler is " +
               kind_name(st_.kind) +
               " (the checkpoint was saved with another fp16 loss_scale setting; match the config "
               "or restore the checkpoint's scaler with restore_loss_scaler)");
  DS_CHECK(s.kind == ScalerKind::Static || (s.scale_window >= 1 && s.delayed_shift >= 1), Error,
           "loss scaler state is corrupt: scale_window " + std::to_string(s.scale_window) +
               ", hysteresis " + std::to_string(s.delayed_shift) + " (both must be >= 1)");
  st_ = s;
  last_ = ScaleUpdate{};
}

StaticLossScaler::StaticLossScaler(double scale) : LossScaler(LossScalerState{}) {
  require(std::isfinite(scale) && scale > 0, "fp16.loss_scale",
          format_scale(scale) + " is not a positive static scale (use 0 for dynamic loss scaling)");
  st_.kind = ScalerKind::Static;
  st_.cur_scale = scale;
}

ScaleUpdate StaticLossScaler::update(bool overflow) {
  last_ = begin_update(st_, overflow);  // state untouched: DeepSpeed's LossScaler.update_scale is a no-op
  return last_;
}

DynamicLossScaler::DynamicLossScaler(const LossScalerArgs& args, bool raise_error_at_min_scale)
    : LossScaler(dynamic_state(args, ScalerKind::Dynamic)) {
  st_.raise_error_at_min_scale = raise_error_at_min_scale;
}

ScaleUpdate DynamicLossScaler::update(bool overflow) {
  ScaleUpdate u = begin_update(st_, overflow);
  if (overflow) {
    if (st_.delayed_shift == 1 || st_.cur_hysteresis == 1) {
      // Raised before any state changes, as DeepSpeed does: the run is over anyway.
      if (st_.cur_scale == st_.min_scale && st_.raise_error_at_min_scale)
        throw LossScaleUnderflow(st_.min_scale);
      st_.cur_scale = std::max(st_.cur_scale / st_.scale_factor, st_.min_scale);
      u.event = ScaleEvent::Decreased;
    } else {
      st_.cur_hysteresis -= 1;
      u.event = ScaleEvent::HysteresisConsumed;
    }
    st_.last_overflow_iter = st_.cur_iter;
  } else {
    if (st_.consecutive_hysteresis) st_.cur_hysteresis = st_.delayed_shift;
    // cur_iter - last_overflow_iter >= 1 always, so this is the non-negative modulo of Python.
    if ((st_.cur_iter - st_.last_overflow_iter) % st_.scale_window == 0) {
      if (!st_.consecutive_hysteresis) st_.cur_hysteresis = st_.delayed_shift;
      st_.cur_scale *= st_.scale_factor;
      u.event = ScaleEvent::Increased;
    }
  }
  st_.cur_iter += 1;
  end_update(st_, u);
  last_ = u;
  return u;
}

LegacyDynamicLossScaler::LegacyDynamicLossScaler(const LossScalerArgs& args)
    : LossScaler(dynamic_state(args, ScalerKind::LegacyDynamic)) {
  st_.raise_error_at_min_scale = false;  // FP16_Optimizer just stays at the floor
}

ScaleUpdate LegacyDynamicLossScaler::update(bool overflow) {
  ScaleUpdate u = begin_update(st_, overflow);
  if (overflow) {
    st_.cur_scale = std::max(st_.cur_scale / st_.scale_factor, st_.min_scale);
    st_.last_overflow_iter = st_.cur_iter;
    u.event = ScaleEvent::Decreased;
  } else {
    // One step later than the ZeRO variant: the first doubling is at cur_iter == window.
    const int64_t stable = st_.cur_iter - st_.last_overflow_iter - 1;
    if (stable > 0 && stable % st_.scale_window == 0) {
      st_.cur_scale *= st_.scale_factor;
      u.event = ScaleEvent::Increased;
    }
  }
  st_.cur_iter += 1;
  end_update(st_, u);
  last_ = u;
  return u;
}

std::unique_ptr<LossScaler> make_unit_loss_scaler() { return std::make_unique<StaticLossScaler>(1.0); }

std::unique_ptr<LossScaler> make_loss_scaler(const Fp16Config& fp16, ScalerFlavor flavor) {
  if (!fp16.enabled) return make_unit_loss_scaler();
  require(fp16.loss_scale >= 0, "fp16.loss_scale",
          format_scale(fp16.loss_scale) +
              " is negative (use 0 for dynamic loss scaling or a positive static scale)");
  if (!fp16.dynamic_loss_scale()) return std::make_unique<StaticLossScaler>(fp16.loss_scale);

  if (flavor == ScalerFlavor::Zero) {
    // Without any dynamic key this is DynamicLossScaler's constructor default: 2^32, hysteresis 1.
    return std::make_unique<DynamicLossScaler>(fp16.zero_dynamic_scaler_args());
  }
  LossScalerArgs a;
  if (fp16.dynamic_args_given) {
    a.init_scale = std::ldexp(1.0, static_cast<int>(fp16.initial_scale_power));
    a.scale_window = fp16.loss_scale_window;
    a.min_scale = fp16.min_loss_scale;
  } else if (flavor == ScalerFlavor::FusedFp16) {
    // FP16_Optimizer takes the engine's initial_dynamic_scale (2^initial_scale_power), window 1000, min 1.
    a.init_scale = std::ldexp(1.0, static_cast<int>(fp16.initial_scale_power));
    a.scale_window = 1000;
    a.min_scale = 1;
  } else {
    // FP16_UnfusedOptimizer hard-codes 2^16, window 1000 and a floor of 0.25.
    a.init_scale = std::ldexp(1.0, 16);
    a.scale_window = 1000;
    a.min_scale = 0.25;
  }
  return std::make_unique<LegacyDynamicLossScaler>(a);
}

std::unique_ptr<LossScaler> restore_loss_scaler(const LossScalerState& s) {
  std::unique_ptr<LossScaler> out;
  if (s.kind == ScalerKind::Static) {
    out = std::make_unique<StaticLossScaler>(s.cur_scale);
  } else {
    LossScalerArgs a;
    a.init_scale = s.cur_scale;
    a.scale_window = s.scale_window;
    a.min_scale = s.min_scale;
    a.delayed_shift = s.delayed_shift;
    a.consecutive_hysteresis = s.consecutive_hysteresis;
    if (s.kind == ScalerKind::Dynamic) out = std::make_unique<DynamicLossScaler>(a);
    else out = std::make_unique<LegacyDynamicLossScaler>(a);
  }
  out->load_state(s);
  return out;
}

double combined_unscale_factor(double loss_scale, double clip, double total_norm_scaled) {
  // The norm is of the scaled gradients; c > 1 means the true norm exceeds clip (+1e-6 as DeepSpeed).
  double combined = loss_scale;
  if (clip > 0) {
    const double c = ((total_norm_scaled / loss_scale) + 1e-6) / clip;
    if (c > 1) combined = c * loss_scale;
  }
  return combined;
}

std::unique_ptr<LossScaler> make_loss_scaler(const Config& c, bool zero) {
  if (!c.fp16.enabled) return make_unit_loss_scaler();
  // DeepSpeed: FP16_Optimizer for its fused Adam and for 1-bit / 0/1 Adam, FP16_UnfusedOptimizer otherwise.
  const OptimizerType t = c.optimizer ? c.optimizer->type : OptimizerType::Adam;
  const bool fused = t == OptimizerType::Adam || t == OptimizerType::AdamW || t == OptimizerType::OneBitAdam ||
                     t == OptimizerType::ZeroOneAdam;
  return make_loss_scaler(c.fp16, zero ? ScalerFlavor::Zero : fused ? ScalerFlavor::FusedFp16 : ScalerFlavor::UnfusedFp16);
}

}  // namespace ds::precision
