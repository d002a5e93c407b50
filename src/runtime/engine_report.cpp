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

void Engine::report_swap_phase() {
  // ZeRO-Infinity: is the disk the limit? Time the optimizer steps spent waiting on swap reads and
  // writes against the rest (compute), and the bandwidth the swapper achieved over those steps.
  if (const auto p = states_->param_swap_stats()) {
    // offload_param nvme: reads happen in forward/backward (prefetched), writes after the optimizer.
    log::info("nvme parameter swap since the last report: read {} in {} shard reads, waited {:.3f} s on them "
              "(forward/backward); wrote {} in {} shard writes, waited {:.3f} s on them",
              format_bytes(uint64_t(p->bytes_read)), p->shard_reads, p->read_wait_s, format_bytes(uint64_t(p->bytes_written)),
              p->shard_writes, p->write_wait_s);
    states_->reset_param_swap_stats();
  }
  const auto s = optimizer_ ? optimizer_->swap_stats() : std::nullopt;
  if (!s) return;
  const double wait = s->read_wait_s + s->write_wait_s, bytes = double(s->bytes_read + s->bytes_written);
  log::info("nvme optimizer swap since the last report: steps {:.3f} s = compute {:.3f} s + waiting on reads {:.3f} s "
            "+ on writes {:.3f} s; read {} and wrote {}, {:.2f} GB/s over the steps",
            optimizer_seconds_, std::max(0.0, optimizer_seconds_ - wait), s->read_wait_s, s->write_wait_s,
            format_bytes(uint64_t(s->bytes_read)), format_bytes(uint64_t(s->bytes_written)),
            optimizer_seconds_ > 0 ? bytes / optimizer_seconds_ / 1e9 : 0.0);
  optimizer_->reset_swap_stats();
  optimizer_seconds_ = 0;
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
