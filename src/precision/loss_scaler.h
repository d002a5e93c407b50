// Loss scalers: DeepSpeed's two dynamic algorithms (ZeRO's with hysteresis, the non-ZeRO fp16
// optimizers' without), the static scaler, and the factory that picks one from the fp16 config
// exactly as DeepSpeed does (reference §1.4, §8). No LibTorch here: the scale is a double and the
// caller decides what an overflow is (see overflow.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "config/config.h"
#include "config/precision_config.h"
#include "util/error.h"

namespace ds::precision {

// Thrown when an overflow arrives while the dynamic scale is already at min_loss_scale. The engine
// rethrows it with the name of the first parameter whose gradient held inf/NaN.
class LossScaleUnderflow : public ds::Error {
 public:
  explicit LossScaleUnderflow(double min_scale, std::string parameter = {});
  double min_scale() const noexcept { return min_scale_; }
  const std::string& parameter() const noexcept { return parameter_; }

 private:
  double min_scale_;
  std::string parameter_;
};

enum class ScalerKind { Static, Dynamic, LegacyDynamic };

// Which of DeepSpeed's optimizer wrappers the scaler stands in for: they differ in defaults and
// algorithm (reference §1.4, §8.1, §8.2).
enum class ScalerFlavor { Zero, FusedFp16, UnfusedFp16 };

enum class ScaleEvent {
  None,                // scale unchanged (clean step inside the window, or a static scaler)
  Decreased,           // overflow: scale divided by scale_factor (floored at min_scale)
  HysteresisConsumed,  // overflow absorbed by hysteresis: scale unchanged, cur_hysteresis - 1
  Increased,           // scale_window clean steps: scale multiplied by scale_factor
};

// What one update() did; enough to render DeepSpeed's OVERFLOW line afterwards.
struct ScaleUpdate {
  bool overflow = false;
  ScaleEvent event = ScaleEvent::None;
  int64_t iter = 0;  // cur_iter at which the update was made
  double scale_before = 1;
  double scale_after = 1;
  int64_t hysteresis_before = 1;
  int64_t hysteresis_after = 1;
};

// Every field of every scaler, so a checkpoint resumes the trajectory exactly. DeepSpeed's ZeRO
// pickles its whole scaler object, so the window/min/hysteresis settings travel too.
struct LossScalerState {
  ScalerKind kind = ScalerKind::Static;
  double cur_scale = 1;
  int64_t cur_iter = 0;
  int64_t last_overflow_iter = -1;
  double scale_factor = 2;
  int64_t scale_window = 1000;
  double min_scale = 1;
  int64_t delayed_shift = 1;  // hysteresis as configured
  int64_t cur_hysteresis = 1;
  bool consecutive_hysteresis = false;
  bool raise_error_at_min_scale = true;

  bool operator==(const LossScalerState&) const = default;
};

class LossScaler {
 public:
  virtual ~LossScaler() = default;

  double scale() const { return st_.cur_scale; }
  bool dynamic() const { return st_.kind != ScalerKind::Static; }
  ScalerKind kind() const { return st_.kind; }
  int64_t cur_iter() const { return st_.cur_iter; }
  int64_t cur_hysteresis() const { return st_.cur_hysteresis; }

  // Called once per optimizer step with whether any gradient held inf/NaN (the step is skipped by
  // the caller on overflow). Returns and remembers what happened.
  virtual ScaleUpdate update(bool overflow) = 0;
  const ScaleUpdate& last_update() const { return last_; }

  LossScalerState state() const { return st_; }
  // Throws ds::Error if the state is of another kind (use restore_loss_scaler for that).
  void load_state(const LossScalerState& s);
  // The state as the engine's checkpoint JSON holds it. load_state_json returns false (and keeps
  // this scaler) when the saved scaler is of another kind (the fp16 settings changed).
  nlohmann::json state_json() const;
  bool load_state_json(const nlohmann::json& j);

 protected:
  explicit LossScaler(LossScalerState s) : st_(s) {}
  LossScalerState st_;
  ScaleUpdate last_;
};

// A constant scale; update() changes nothing. Scale 1.0 serves bf16 and fp32, which never check
// overflow or skip steps (reference §8.1).
class StaticLossScaler final : public LossScaler {
 public:
  explicit StaticLossScaler(double scale);
  ScaleUpdate update(bool overflow) override;
};

// ZeRO stages 1-3 (DeepSpeed's loss_scaler.py::DynamicLossScaler, reference §8.1).
class DynamicLossScaler final : public LossScaler {
 public:
  // args.delayed_shift is the hysteresis. Throws ConfigError on a window < 1, min <= 0, ...
  explicit DynamicLossScaler(const LossScalerArgs& args, bool raise_error_at_min_scale = true);
  ScaleUpdate update(bool overflow) override;  // throws LossScaleUnderflow at the floor
};

// Non-ZeRO FP16_Optimizer / FP16_UnfusedOptimizer (reference §8.2): no hysteresis and never throws
// at the floor. args.delayed_shift and consecutive_hysteresis are ignored, as in DeepSpeed.
class LegacyDynamicLossScaler final : public LossScaler {
 public:
  explicit LegacyDynamicLossScaler(const LossScalerArgs& args);
  ScaleUpdate update(bool overflow) override;
};

// The scaler DeepSpeed builds for `flavor` from the fp16 section: static when loss_scale > 0,
// otherwise dynamic with the flavor's defaults when no dynamic key was given (reference §1.4).
// fp16 disabled (bf16/fp32 runs) gives the static 1.0 scaler.
std::unique_ptr<LossScaler> make_loss_scaler(const Fp16Config& fp16, ScalerFlavor flavor);
// bf16 and fp32: static 1.0.
std::unique_ptr<LossScaler> make_unit_loss_scaler();
// The scaler a training config gets: with fp16, DeepSpeed's ZeRO variant (`zero`) or, without ZeRO,
// FP16_Optimizer's for fused bases (Adam/AdamW) and FP16_UnfusedOptimizer's otherwise; else 1.0.
std::unique_ptr<LossScaler> make_loss_scaler(const Config& config, bool zero);
// A scaler of the state's kind resuming from it (DeepSpeed's ZeRO replaces its scaler object
// wholesale on checkpoint load).
std::unique_ptr<LossScaler> restore_loss_scaler(const LossScalerState& s);

// The combined factor of ZeRO/FP16 unscale+clip (reference §10): grads are divided by it.
// total_norm_scaled is the global norm of the still-scaled gradients; clip <= 0 disables clipping.
double combined_unscale_factor(double loss_scale, double clip, double total_norm_scaled);

}  // namespace ds::precision
