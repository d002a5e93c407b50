// StepGuard: decides, at each accumulation boundary, whether the step's gradients must be checked for
// inf/NaN, whether a step whose loss or gradients are not finite is skipped, and when a run of such
// steps stops training. It holds the rules; the engine supplies the flags and applies the verdict.
//
//   fp16, dynamic scale   the loss scaler owns overflow (skip, lower the scale; LossScaleUnderflow at
//                         min_loss_scale), as DeepSpeed. The guard only watches the loss.
//   fp16, static scale    an overflowed step is skipped, as DeepSpeed skips it; the scale stays.
//   bf16 / fp32           DeepSpeed applies every step. With nan_guard on (the default) a step whose
//                         loss or gradients are not finite is skipped instead, so one bad batch cannot
//                         turn the weights into NaN; off, the step is applied as DeepSpeed does.
// nan_guard.max_consecutive_steps non-finite steps in a row (outside dynamic scaling) throw
// NonFiniteTraining naming the step, the loss and the first parameter whose gradient is not finite.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "config/precision_config.h"
#include "util/error.h"

namespace ds::precision {

class NonFiniteTraining : public Error {
  using Error::Error;
};

class StepGuard {
 public:
  StepGuard(const Fp16Config& fp16, const NanGuardConfig& guard);

  // Must this step's gradients be checked for inf/NaN (one pass over them, a flag all-reduced)?
  bool checks_gradients() const { return fp16_ || guard_.enabled; }
  // May the optimizer step run during backward (no step-wide check needed first), given the loss so far?
  bool allows_step_before_check(double loss) const;

  // One boundary. `non_finite`: the loss or a gradient was inf/NaN (agreed across ranks). Returns true when
  // the step must be skipped here (fp16 dynamic overflow is the scaler's call, not this one's). Throws
  // NonFiniteTraining when this makes max_consecutive_steps in a row. `culprit` names the first parameter
  // whose gradient is not finite (called only for a message).
  bool skip(bool non_finite, int64_t step, double loss, double scale, const std::function<std::string()>& culprit);

  int64_t consecutive() const { return consecutive_; }

 private:
  bool fp16_;
  bool dynamic_;
  NanGuardConfig guard_;
  int64_t consecutive_ = 0;
};

}  // namespace ds::precision
