// Rendering of skipped-step lines and the warm-up summariser (see overflow_summary.h).
#include "precision/overflow_summary.h"

#include <fmt/format.h>

#include <cmath>

namespace ds::precision {

std::string format_scale(double scale) {
  // "{:.0f}" prints any whole double exactly (2^40 too), which int64 formatting could not promise.
  if (std::isfinite(scale) && scale == std::floor(scale)) return fmt::format("{:.0f}", scale);
  return fmt::format("{}", scale);
}

std::string overflow_message(const ScaleUpdate& u, int rank) {
  if (!u.overflow) return {};
  std::string line = fmt::format("[deepspeed] OVERFLOW! Rank {} Skipping step.", rank);
  switch (u.event) {
    case ScaleEvent::Decreased:
      line += fmt::format(" Attempted loss scale: {}, reducing to {}", format_scale(u.scale_before),
                          format_scale(u.scale_after));
      break;
    case ScaleEvent::HysteresisConsumed:
      line += fmt::format(" Attempted loss scale: {}, but hysteresis is {}. Reducing hysteresis to {}",
                          format_scale(u.scale_before), u.hysteresis_before, u.hysteresis_after);
      break;
    default:  // static scaler: DeepSpeed prints only the prefix for non-dynamic scaling
      break;
  }
  return line;
}

std::optional<std::string> OverflowSummary::observe(const ScaleUpdate& u, int rank) {
  const bool dynamic_skip =
      u.overflow && (u.event == ScaleEvent::Decreased || u.event == ScaleEvent::HysteresisConsumed);
  if (in_warmup_ && dynamic_skip) {
    if (skips_ == 0) first_scale_ = u.scale_before;
    last_scale_ = u.scale_after;
    ++skips_;
    return std::nullopt;
  }
  if (u.overflow) return overflow_message(u, rank);  // after warm-up, or a static scaler's skip
  if (in_warmup_) {
    in_warmup_ = false;
    if (skips_ > 0) return summary_line();
  }
  return std::nullopt;
}

std::optional<std::string> OverflowSummary::flush() {
  if (!in_warmup_ || skips_ == 0) return std::nullopt;
  auto line = summary_line();
  skips_ = 0;  // reported once
  return line;
}

std::string OverflowSummary::summary_line() const {
  const std::string what = skips_ == 1 ? "the first step" : fmt::format("the first {} steps", skips_);
  if (first_scale_ == last_scale_) {
    return fmt::format("fp16: skipped {} at loss scale {} (hysteresis absorbed the overflows; dynamic "
                       "loss scaling warm-up)",
                       what, format_scale(first_scale_));
  }
  return fmt::format("fp16: skipped {} while the loss scale fell from {} to {} (dynamic loss scaling "
                     "warm-up)",
                     what, format_scale(first_scale_), format_scale(last_scale_));
}

}  // namespace ds::precision
