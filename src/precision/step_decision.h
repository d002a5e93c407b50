// Whether an accumulation boundary's optimizer step is applied, decided the same on every rank:
// the inf/NaN check (fp16, or the nan guard), the loss scaler's update (a dynamic scaler lowers the
// scale on overflow and the step is skipped), and the step guard's skip-or-stop for everything else.
#pragma once

#include <cstdint>

#include "comm/communicator.h"
#include "precision/gradient_spans.h"
#include "precision/loss_scaler.h"
#include "precision/overflow_summary.h"
#include "precision/step_guard.h"

namespace ds::precision {

struct StepInputs {
  comm::Communicator* comm = nullptr;  // the group the gradients are partitioned over
  const GradientSpans* grads = nullptr;
  double loss = 0;                     // this step's loss (sum over micro-batches of loss/GAS)
  int64_t step = 0;                    // the global step being taken (1-based)
};

// Collective when the gradients are checked. Returns true when the step must be skipped; throws
// LossScaleUnderflow at the dynamic scale's floor, and the guard's error when it stops the run,
// both naming the first parameter whose gradient held inf/NaN.
bool skip_step(const StepInputs& in, LossScaler& scaler, StepGuard& guard, OverflowSummary& summary);

}  // namespace ds::precision
