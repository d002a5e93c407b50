#include "precision/step_decision.h"

#include "util/logging.h"

namespace ds::precision {

bool skip_step(const StepInputs& in, LossScaler& scaler, StepGuard& guard, OverflowSummary& summary) {
  // fp16 (either scaler) and the nan guard look for inf/NaN; bf16/fp32 without it never do (DeepSpeed).
  const bool non_finite = guard.checks_gradients() && any_non_finite(*in.comm, *in.grads, in.loss);
  const bool overflow = non_finite && scaler.dynamic();  // the dynamic scaler's to handle
  auto culprit = [&] { return first_non_finite_piece(*in.grads); };
  ScaleUpdate update;
  try {
    update = scaler.update(overflow);
  } catch (const LossScaleUnderflow& e) {
    throw LossScaleUnderflow(e.min_scale(), culprit());
  }
  // DeepSpeed's non-ZeRO scaler would skip forever at the floor; stop with the cause instead.
  if (overflow && update.scale_before <= scaler.state().min_scale)
    throw LossScaleUnderflow(scaler.state().min_scale, culprit());
  if (auto line = summary.observe(update)) log::info("{}", *line);
  // A static fp16 overflow, or a non-finite bf16/fp32 step under nan_guard, is skipped too (or stops the run).
  return overflow || guard.skip(non_finite, in.step, in.loss, scaler.scale(), culprit);
}

}  // namespace ds::precision
