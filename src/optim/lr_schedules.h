// DeepSpeed's five LR schedules (deepspeed/runtime/lr_schedules.py, reference §9.2) in plain C++:
// WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest. A scheduler owns a copy of the
// optimizer's per-group lr and betas (what DeepSpeed writes into torch param groups); the caller
// copies groups() into its optimizer after construction and after every step().
//
// Quirks kept on purpose, because a DeepSpeed config must train the same way here:
//  - WarmupCosineLR's get_lr() is {0.0} (ONE element) before the first step, so construction sets
//    only the FIRST group's lr to 0; the other groups keep their base lr until step().
//  - WarmupCosineLR does not clamp past total_num_steps: the cosine rises again after the end.
//  - OneCycle construction sets betas to (cycle_min_mom, 0.99) while get_mom() at iteration -1
//    says cycle_max_mom; cycle stair counts are accepted and ignored (DeepSpeed 0.14.5).
//  - Constructing with last_batch_iteration != -1 leaves the groups untouched until step().
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/optimizer_config.h"
#include "config/scheduler_config.h"

namespace ds::optim {

// One optimizer param group as a schedule sees it.
struct GroupLr {
  double lr = 0.0;
  std::array<double, 2> betas{0.9, 0.999};
};

// Whether torch's/DeepSpeed's optimizer of this type has `betas` in its defaults: OneCycle only
// cycles momentum when it does (SGD and Adagrad: no).
bool has_betas(OptimizerType t);

class LrScheduler {
 public:
  virtual ~LrScheduler() = default;

  // base: the optimizer's per-group lr and betas at construction (what DeepSpeed reads from the
  // param groups). optimizer_has_betas: see has_betas(); false disables OneCycle's momentum
  // cycling with a warning, as DeepSpeed. Throws ds::ConfigError("scheduler.params.<key>") for
  // values DeepSpeed's constructor (or its first steps) would fail on.
  static std::unique_ptr<LrScheduler> create(const SchedulerConfig& cfg, std::vector<GroupLr> base,
                                             bool optimizer_has_betas = true);

  void step() { step_to(last_batch_iteration_ + 1); }  // DeepSpeed's step()
  void step_to(std::int64_t iteration);                // DeepSpeed's step(iteration)
  std::int64_t last_batch_iteration() const { return last_batch_iteration_; }
  // {"last_batch_iteration": n}, as the engine's checkpoint JSON holds it; loading steps to n.
  nlohmann::json state_json() const;
  void load_state_json(const nlohmann::json& j);

  // Current lr and betas per group (betas change only with OneCycle momentum cycling).
  const std::vector<GroupLr>& groups() const { return groups_; }

  // DeepSpeed's scheduler.get_lr(): the formula at the current iteration. Usually one value per
  // group, but WarmupCosineLR returns {0.0} before its first step (see the file comment).
  std::vector<double> get_lr() const { return lr_at(last_batch_iteration_); }
  // DeepSpeed's OneCycle.get_mom(): betas per group; empty when momentum is not cycled.
  std::vector<std::array<double, 2>> get_mom() const { return mom_at(last_batch_iteration_); }

  virtual SchedulerType type() const = 0;

 protected:
  LrScheduler(std::vector<GroupLr> base, std::int64_t last_batch_iteration);

  virtual std::vector<double> lr_at(std::int64_t it) const = 0;
  virtual std::vector<std::array<double, 2>> mom_at(std::int64_t) const { return {}; }

  // DeepSpeed's update_lr: zip(param_groups, values), so a shorter list leaves the rest alone.
  void write_lrs(const std::vector<double>& lrs);
  void write_betas(const std::vector<std::array<double, 2>>& betas);

  std::vector<GroupLr> groups_;
  std::int64_t last_batch_iteration_;
};

}  // namespace ds::optim
