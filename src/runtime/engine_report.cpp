// The engine's console lines, in DeepSpeed's formats (reference §14.3): the progress line at
// steps_per_print, the throughput line, and wall_clock_breakdown timings.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/engine.h"
#include "util/logging.h"
#include "util/system_info.h"

namespace ds {

void Engine::log_progress() const {
  // "step=<n>, skipped=<k>, lr=[...], mom=[...]"; ours adds the last step's loss on its own line.
  std::vector<std::string> moms;
  for (const auto& b : get_mom()) moms.push_back(fmt::format("({}, {})", b[0], b[1]));
  log::info("step={}, skipped={}, lr={}, mom=[{}]", global_steps_, skipped_steps_, get_lr(), fmt::join(moms, ", "));
  if (global_steps_ > 0)
    log::info("loss={:.6f}, loss_scale={}, grad_norm={:.4f}", loss_accum_, scaler_->scale(), last_grad_norm_);
}

void Engine::log_timings(bool boundary) const {
  const auto& t = timings_;
  log::info("time (ms) | fwd_microstep: {:.2f} | bwd_microstep: {:.2f} | bwd_inner_microstep: {:.2f} | "
            "bwd_allreduce_microstep: {:.2f} | step_microstep: {:.2f}",
            t.fwd, t.bwd, t.bwd, 0.0, t.step);
  if (boundary)
    log::info("time (ms) | fwd: {:.2f} | bwd: {:.2f} | bwd_inner: {:.2f} | bwd_allreduce: {:.2f} | step: {:.2f}",
              t.fwd_sum, t.bwd_sum, t.bwd_sum, 0.0, t.step_sum);
}

void Engine::log_throughput(double step_seconds) {
  // DeepSpeed's running average leaves out the first two global steps (start_step = 2).
  if (global_steps_ > 2) timings_.run_seconds += step_seconds;
  if (!config_.steps_per_print || *config_.steps_per_print <= 0 || global_steps_ % *config_.steps_per_print != 0)
    return;
  const double batch = static_cast<double>(config_.train_batch_size);
  const double running = global_steps_ > 2 && timings_.run_seconds > 0
                             ? batch / (timings_.run_seconds / static_cast<double>(global_steps_ - 2))
                             : 0.0;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  log::info("epoch=0/micro_step={}/global_step={}, RunningAvgSamplesPerSec={}, CurrSamplesPerSec={}, "
            "MemAllocated={:.2f}GB, MaxMemAllocated={:.2f}GB",
            micro_steps_ + 1, global_steps_, running, batch / step_seconds, current_rss_bytes() / gib,
            peak_rss_bytes() / gib);
}

}  // namespace ds
