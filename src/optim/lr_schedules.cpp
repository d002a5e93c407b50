// The five schedules. Each formula follows DeepSpeed's Python expression by expression, in double,
// so the lrs are the same doubles Python computes (reference §9.2).
#include "optim/lr_schedules.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/logging.h"

namespace ds::optim {

bool has_betas(OptimizerType t) {
  switch (t) {
    case OptimizerType::Adam:
    case OptimizerType::AdamW:
    case OptimizerType::Lamb:
    case OptimizerType::Lion:
    case OptimizerType::OneBitAdam:
    case OptimizerType::ZeroOneAdam:
    case OptimizerType::OneBitLamb:
      return true;
    case OptimizerType::SGD:
    case OptimizerType::Adagrad:
      return false;
  }
  return false;
}

LrScheduler::LrScheduler(std::vector<GroupLr> base, std::int64_t last_batch_iteration)
    : groups_(std::move(base)), last_batch_iteration_(last_batch_iteration) {
  DS_ASSERT(!groups_.empty(), "a scheduler needs at least one optimizer param group");
}

nlohmann::json LrScheduler::state_json() const { return {{"last_batch_iteration", last_batch_iteration_}}; }

void LrScheduler::load_state_json(const nlohmann::json& j) { step_to(j.at("last_batch_iteration").get<std::int64_t>()); }

void LrScheduler::step_to(std::int64_t iteration) {
  last_batch_iteration_ = iteration;
  write_lrs(lr_at(iteration));
  write_betas(mom_at(iteration));
}

void LrScheduler::write_lrs(const std::vector<double>& lrs) {
  for (size_t i = 0; i < std::min(lrs.size(), groups_.size()); ++i) groups_[i].lr = lrs[i];
}

void LrScheduler::write_betas(const std::vector<std::array<double, 2>>& betas) {
  for (size_t i = 0; i < std::min(betas.size(), groups_.size()); ++i) groups_[i].betas = betas[i];
}

namespace {

// A value DeepSpeed's constructor or formulas cannot use: ConfigError naming scheduler.params.<name>.
void require(bool ok, const char* name, const std::string& message) {
  if (!ok) throw ConfigError(std::string("scheduler.params.") + name, message);
}

// WarmupLR's gamma during warmup; shared by WarmupDecayLR and (as a ratio) WarmupCosineLR.
double warmup_gamma(std::int64_t it, double w, double inverse_log_w, WarmupType type) {
  if (type == WarmupType::Log) return inverse_log_w * std::log(static_cast<double>(it + 1));
  return static_cast<double>(it) / w;
}

class WarmupLr : public LrScheduler {
 public:
  WarmupLr(const SchedulerParams& p, std::vector<GroupLr> base)
      : LrScheduler(std::move(base), p.last_batch_iteration),
        min_lr_(p.warmup_min_lr),
        delta_lr_(p.warmup_max_lr - p.warmup_min_lr),
        warmup_(std::max<std::int64_t>(2, p.warmup_num_steps)),
        inverse_log_warmup_(1.0 / std::log(static_cast<double>(warmup_))),
        warmup_type_(p.warmup_type) {
    if (last_batch_iteration_ == -1) write_lrs(std::vector<double>(groups_.size(), min_lr_));
  }
  SchedulerType type() const override { return SchedulerType::WarmupLR; }

 protected:
  std::vector<double> lr_at(std::int64_t it) const override {
    if (it < 0) return std::vector<double>(groups_.size(), min_lr_);
    return std::vector<double>(groups_.size(), min_lr_ + delta_lr_ * gamma(it));
  }
  virtual double gamma(std::int64_t it) const {
    if (it < warmup_) return warmup_gamma(it, static_cast<double>(warmup_), inverse_log_warmup_, warmup_type_);
    return 1.0;
  }

  double min_lr_, delta_lr_;
  std::int64_t warmup_;  // W = max(2, warmup_num_steps)
  double inverse_log_warmup_;
  WarmupType warmup_type_;
};

class WarmupDecayLr final : public WarmupLr {
 public:
  WarmupDecayLr(const SchedulerParams& p, std::vector<GroupLr> base)
      : WarmupLr(p, std::move(base)), total_(p.total_num_steps) {}
  SchedulerType type() const override { return SchedulerType::WarmupDecayLR; }

 protected:
  double gamma(std::int64_t it) const override {
    if (it < warmup_) return warmup_gamma(it, static_cast<double>(warmup_), inverse_log_warmup_, warmup_type_);
    return std::max(0.0, static_cast<double>(total_ - it) /
                             std::max(1.0, static_cast<double>(total_ - warmup_)));
  }

 private:
  std::int64_t total_;
};

class WarmupCosineLr final : public LrScheduler {
 public:
  WarmupCosineLr(const SchedulerParams& p, std::vector<GroupLr> base)
      : LrScheduler(std::move(base), p.last_batch_iteration),
        total_(p.total_num_steps),
        warmup_(std::max<std::int64_t>(2, p.warmup_num_steps)),
        inverse_log_warmup_(1.0 / std::log(static_cast<double>(warmup_))),
        warmup_min_ratio_(p.warmup_min_ratio),
        cos_min_ratio_(p.cos_min_ratio),
        warmup_type_(p.warmup_type) {
    for (const auto& g : groups_) org_lrs_.push_back(g.lr);
    if (last_batch_iteration_ == -1) write_lrs(lr_at(-1));  // {0.0}: only group 0 becomes 0
  }
  SchedulerType type() const override { return SchedulerType::WarmupCosineLR; }

 protected:
  std::vector<double> lr_at(std::int64_t it) const override {
    if (it < 0) return {0.0};
    const double ratio = lr_ratio(it);
    std::vector<double> lrs;
    for (double lr : org_lrs_) lrs.push_back(lr * ratio);
    return lrs;
  }

 private:
  double lr_ratio(std::int64_t it) const {
    if (it < warmup_) {
      const double g = warmup_gamma(it, static_cast<double>(warmup_), inverse_log_warmup_, warmup_type_);
      return warmup_min_ratio_ + g * (1.0 - warmup_min_ratio_);
    }
    const double real_last_step = static_cast<double>(it - warmup_ + 1);
    const double real_total_steps = static_cast<double>(total_ - warmup_);
    // Python raises ZeroDivisionError here; say why instead.
    require(real_total_steps != 0.0, "total_num_steps",
            "WarmupCosineLR cannot step past warmup_num_steps (" + std::to_string(warmup_) +
                ") when total_num_steps equals it (DeepSpeed divides by total_num_steps - warmup_num_steps); "
                "make total_num_steps larger");
    const double ratio = (1.0 + std::cos(std::numbers::pi * real_last_step / real_total_steps)) / 2.0;
    return std::max(0.0, cos_min_ratio_ + (1.0 - cos_min_ratio_) * ratio);
  }

  std::int64_t total_, warmup_;
  double inverse_log_warmup_, warmup_min_ratio_, cos_min_ratio_;
  WarmupType warmup_type_;
  std::vector<double> org_lrs_;
};

class OneCycle final : public LrScheduler {
 public:
  OneCycle(const SchedulerParams& p, std::vector<GroupLr> base, bool optimizer_has_betas)
      : LrScheduler(std::move(base), p.last_batch_iteration),
        min_lr_(p.cycle_min_lr),
        max_lr_(p.cycle_max_lr),
        decay_lr_rate_(p.decay_lr_rate),
        decay_step_size_(static_cast<double>(p.decay_step_size)),
        cycle_momentum_(p.cycle_momentum),
        min_mom_(p.cycle_min_mom),
        max_mom_(p.cycle_max_mom),
        decay_mom_rate_(p.decay_mom_rate) {
    const double first = static_cast<double>(p.cycle_first_step_size);
    const double second = p.cycle_second_step_size ? static_cast<double>(*p.cycle_second_step_size) : first;
    total_size_ = first + second;
    step_ratio_ = first / total_size_;
    // DeepSpeed: math.isclose(x, 0) (exact zero) on decay_step_size, then on each decay rate.
    skip_lr_decay_ = decay_step_size_ == 0.0 || decay_lr_rate_ == 0.0;
    skip_mom_decay_ = decay_step_size_ == 0.0 || decay_mom_rate_ == 0.0;
    if (last_batch_iteration_ == -1) write_lrs(std::vector<double>(groups_.size(), min_lr_));
    if (cycle_momentum_ && !optimizer_has_betas) {
      log::warn("cycle_momentum is disabled because the optimizer does not support momentum (no betas "
                "attribute in its defaults)");
      cycle_momentum_ = false;
    }
    if (cycle_momentum_ && last_batch_iteration_ == -1) {
      write_betas(std::vector<std::array<double, 2>>(groups_.size(), {min_mom_, kBeta2}));
    }
  }
  SchedulerType type() const override { return SchedulerType::OneCycle; }

 protected:
  std::vector<double> lr_at(std::int64_t it) const override {
    double lr = 0.0;
    if (static_cast<double>(it) < total_size_) {
      lr = min_lr_ + (max_lr_ - min_lr_) * scale_factor(it);
    } else if (skip_lr_decay_) {
      lr = min_lr_;
    } else {
      const double decay_interval = decay_iteration(it) / decay_step_size_;
      lr = min_lr_ / (1.0 + decay_lr_rate_ * decay_interval);
    }
    return std::vector<double>(groups_.size(), lr);
  }

  std::vector<std::array<double, 2>> mom_at(std::int64_t it) const override {
    if (!cycle_momentum_) return {};
    double beta1 = max_mom_;
    if (static_cast<double>(it) < total_size_) {
      beta1 = max_mom_ - (max_mom_ - min_mom_) * scale_factor(it);
    } else if (!skip_mom_decay_) {
      // Post-cycle "decay" multiplies by (1 + rate * interval): momentum grows, as DeepSpeed.
      const double decay_interval = decay_iteration(it) / decay_step_size_;
      beta1 = max_mom_ * (1.0 + decay_mom_rate_ * decay_interval);
    }
    return std::vector<std::array<double, 2>>(groups_.size(), {beta1, kBeta2});
  }

 private:
  static constexpr double kBeta2 = 0.99;  // DeepSpeed pins beta2 while cycling

  double decay_iteration(std::int64_t it) const { return static_cast<double>(it) - total_size_ + 1.0; }

  double scale_factor(std::int64_t it) const {
    const double batch_iteration = static_cast<double>(it + 1);
    const double cycle = std::floor(1.0 + batch_iteration / total_size_);
    const double x = 1.0 + batch_iteration / total_size_ - cycle;
    if (x <= step_ratio_) return x / step_ratio_;
    return (x - 1.0) / (step_ratio_ - 1.0);
  }

  double min_lr_, max_lr_, decay_lr_rate_, decay_step_size_;
  bool cycle_momentum_;
  double min_mom_, max_mom_, decay_mom_rate_;
  double total_size_ = 0.0, step_ratio_ = 0.0;
  bool skip_lr_decay_ = true, skip_mom_decay_ = true;
};

class LrRangeTest final : public LrScheduler {
 public:
  LrRangeTest(const SchedulerParams& p, std::vector<GroupLr> base)
      : LrScheduler(std::move(base), p.last_batch_iteration),
        min_lr_(p.lr_range_test_min_lr),
        step_size_(static_cast<double>(p.lr_range_test_step_size)),
        step_rate_(p.lr_range_test_step_rate),
        staircase_(p.lr_range_test_staircase) {
    if (last_batch_iteration_ == -1) write_lrs(std::vector<double>(groups_.size(), min_lr_));
  }
  SchedulerType type() const override { return SchedulerType::LRRangeTest; }

 protected:
  std::vector<double> lr_at(std::int64_t it) const override {
    double interval = static_cast<double>(it + 1) / step_size_;
    if (staircase_) interval = std::floor(interval);
    return std::vector<double>(groups_.size(), min_lr_ * (1.0 + step_rate_ * interval));
  }

 private:
  double min_lr_, step_size_, step_rate_;
  bool staircase_;
};

// What the JSON loader already checks, checked again for structs built in code: these values make
// DeepSpeed's formulas divide by zero (or need an argument without a default).
void validate(const SchedulerConfig& cfg) {
  const SchedulerParams& p = cfg.params;
  const std::string name = to_string(cfg.type);
  require(p.last_batch_iteration >= -1, "last_batch_iteration",
          "must be -1 (start) or a batch index >= 0, got " + std::to_string(p.last_batch_iteration));
  switch (cfg.type) {
    case SchedulerType::WarmupDecayLR:
    case SchedulerType::WarmupCosineLR: {
      require(p.total_num_steps > 0, "total_num_steps",
              "missing or not positive (" + std::to_string(p.total_num_steps) + "); " + name +
                  " requires the total number of training steps");
      const std::int64_t w = std::max<std::int64_t>(2, p.warmup_num_steps);
      if (p.total_num_steps < w) {
        log::warn("total_num_steps {} is less than warmup_num_steps {}", p.total_num_steps, p.warmup_num_steps);
      }
      break;
    }
    case SchedulerType::OneCycle:
      require(p.cycle_first_step_size > 0, "cycle_first_step_size",
              "must be positive, got " + std::to_string(p.cycle_first_step_size));
      require(!p.cycle_second_step_size || *p.cycle_second_step_size >= 0, "cycle_second_step_size",
              "must not be negative");
      require(p.decay_step_size >= 0, "decay_step_size", "must not be negative (0 disables the post-cycle decay)");
      break;
    case SchedulerType::LRRangeTest:
      require(p.lr_range_test_step_size > 0, "lr_range_test_step_size",
              "must be positive, got " + std::to_string(p.lr_range_test_step_size));
      break;
    case SchedulerType::WarmupLR:
      break;
  }
}

}  // namespace

std::unique_ptr<LrScheduler> LrScheduler::create(const SchedulerConfig& cfg, std::vector<GroupLr> base,
                                                 bool optimizer_has_betas) {
  validate(cfg);
  switch (cfg.type) {
    case SchedulerType::WarmupLR:
      return std::make_unique<WarmupLr>(cfg.params, std::move(base));
    case SchedulerType::WarmupDecayLR:
      return std::make_unique<WarmupDecayLr>(cfg.params, std::move(base));
    case SchedulerType::WarmupCosineLR:
      return std::make_unique<WarmupCosineLr>(cfg.params, std::move(base));
    case SchedulerType::OneCycle:
      return std::make_unique<OneCycle>(cfg.params, std::move(base), optimizer_has_betas);
    case SchedulerType::LRRangeTest:
      return std::make_unique<LrRangeTest>(cfg.params, std::move(base));
  }
  DS_ASSERT(false, "unhandled scheduler type");
  return nullptr;
}

}  // namespace ds::optim
