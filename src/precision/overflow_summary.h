// The lines the engine logs about skipped steps. DeepSpeed prints one OVERFLOW line per skip; a
// dynamic fp16 run from 2^32 skips ~12 steps at start-up, so the warm-up run of skips is folded
// into one line. Returns strings only: the caller decides where they go (and which rank prints).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "precision/loss_scaler.h"

namespace ds::precision {

// A scale as DeepSpeed prints it (int(...)): whole numbers without a fraction ("4294967296"),
// others in shortest form ("0.25").
std::string format_scale(double scale);

// DeepSpeed's ZeRO line for an overflow update, e.g.
//   "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768"
//   "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis is 2.
//    Reducing hysteresis to 1" (one line)
// A static scaler's skip gets the bare "[deepspeed] OVERFLOW! Rank 0 Skipping step.".
// Empty for an update without overflow.
std::string overflow_message(const ScaleUpdate& u, int rank = 0);

class OverflowSummary {
 public:
  // Feed every update in order. Returns the line to log now, if any: nothing while the opening
  // run of dynamic-scale skips lasts, the one summary line at the first clean step, then one
  // OVERFLOW line per later skip.
  std::optional<std::string> observe(const ScaleUpdate& u, int rank = 0);
  // The pending summary when training ends (or a report is wanted) inside the warm-up.
  std::optional<std::string> flush();

  bool in_warmup() const { return in_warmup_; }
  int64_t warmup_skips() const { return skips_; }

 private:
  std::string summary_line() const;

  bool in_warmup_ = true;
  int64_t skips_ = 0;
  double first_scale_ = 0;  // scale attempted by the first skipped step
  double last_scale_ = 0;   // scale after the latest skipped step
};

}  // namespace ds::precision
