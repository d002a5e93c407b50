// StepGuard (see step_guard.h).
#include "precision/step_guard.h"

#include <fmt/format.h>

#include <cmath>

#include "util/logging.h"

namespace ds::precision {
namespace {

std::string format_loss(double loss) {
  if (std::isnan(loss)) return "nan";  // not "-nan": the sign of a NaN means nothing here
  if (std::isinf(loss)) return loss > 0 ? "inf" : "-inf";
  return fmt::format("{:.4f}", loss);
}

}  // namespace

StepGuard::StepGuard(const Fp16Config& fp16, const NanGuardConfig& guard)
    : fp16_(fp16.enabled), dynamic_(fp16.enabled && fp16.dynamic_loss_scale()), guard_(guard) {}

bool StepGuard::allows_step_before_check(double loss) const {
  return !checks_gradients() || (!fp16_ && std::isfinite(loss));
}

bool StepGuard::skip(bool non_finite, int64_t step, double loss, double scale,
                     const std::function<std::string()>& culprit) {
  if (dynamic_) {
    // The scaler skips overflowed steps and stops at min_loss_scale; a loss that is itself not finite
    // with finite gradients cannot happen there (its gradients would be NaN too).
    return false;
  }
  if (!non_finite) {
    consecutive_ = 0;
    return false;
  }
  if (!checks_gradients()) return false;  // bf16/fp32 with the guard off: DeepSpeed applies the step
  consecutive_ += 1;
  const std::string what =
      fp16_ ? fmt::format("the fp16 gradients overflowed at the static loss scale {:g}", scale)
            : fmt::format("loss {}", format_loss(loss));
  if (guard_.enabled && consecutive_ >= guard_.max_consecutive_steps) {
    throw NonFiniteTraining(fmt::format(
        "training stopped at step {}: {} consecutive steps had a non-finite loss or gradient "
        "(nan_guard.max_consecutive_steps = {}); last: loss {}, first non-finite gradient: {}{}. None of them "
        "was applied: the weights are those of step {}. Lower the learning rate, check the data{}, or raise "
        "nan_guard.max_consecutive_steps",
        step, consecutive_, guard_.max_consecutive_steps, format_loss(loss), culprit(),
        fp16_ ? fmt::format(" (fp16 static loss scale {:g})", scale) : "", step - consecutive_,
        fp16_ ? ", use dynamic loss scaling (fp16.loss_scale 0)" : ""));
  }
  log::warn("step {} skipped: {} (first non-finite gradient: {}); {} in a row{}", step, what, culprit(), consecutive_,
            guard_.enabled ? fmt::format(", the run stops at {} (nan_guard.max_consecutive_steps)",
                                         guard_.max_consecutive_steps)
                           : std::string());
  return true;
}

}  // namespace ds::precision
