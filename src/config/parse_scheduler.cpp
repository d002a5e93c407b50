// The "scheduler" section (reference §9.2): DeepSpeed's five schedules with their constructor
// arguments; required arguments without a default are errors, as the Python constructor's are.
#include <cmath>

#include "config/parse_sections.h"
#include "util/error.h"

namespace ds::config_detail {
namespace {

constexpr const char* kAllowedSchedules = "WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest (exact case)";

SchedulerType parse_scheduler_type(const Json* v, Source src) {
  const std::string path = "scheduler.type";
  if (v == nullptr) {
    throw ConfigError(path, std::string(src == Source::Auto ? "\"auto\" has no default here" : "missing") +
                                "; name the schedule: " + kAllowedSchedules);
  }
  if (!v->is_string()) type_error(path, std::string("a schedule name (") + kAllowedSchedules + ")", *v);
  const std::string name = v->get<std::string>();
  static const std::pair<const char*, SchedulerType> kTypes[] = {
      {"WarmupLR", SchedulerType::WarmupLR},         {"WarmupDecayLR", SchedulerType::WarmupDecayLR},
      {"WarmupCosineLR", SchedulerType::WarmupCosineLR}, {"OneCycle", SchedulerType::OneCycle},
      {"LRRangeTest", SchedulerType::LRRangeTest}};
  for (const auto& [n, t] : kTypes) {
    if (name == n) return t;
  }
  for (const char* n : {"LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
                        "ExponentialLR", "SequentialLR", "CosineAnnealingLR", "ChainedScheduler", "ReduceLROnPlateau",
                        "CyclicLR", "CosineAnnealingWarmRestarts", "OneCycleLR", "PolynomialLR"}) {
    if (name == n) {
      throw ConfigError(path, "\"" + name + "\" (torch.optim.lr_scheduler." + name +
                                  ") is not implemented in deepspeed.cpp yet; use one of " + kAllowedSchedules);
    }
  }
  throw ConfigError(path, "unknown schedule \"" + name + "\"; allowed: " + kAllowedSchedules);
}

void require(SectionReader& p, const char* key, const std::string& type) {
  if (!p.given(key)) {
    throw ConfigError(p.key_path(key), std::string(p.source_of(key) == Source::Auto
                                                       ? "\"auto\" has no default (Hugging Face's Trainer fills it in; "
                                                         "without it, set the value)"
                                                       : "missing") +
                                           "; " + type + " requires it (DeepSpeed's constructor has no default)");
  }
}

// DeepSpeed warns about an unknown warmup_type and falls back to log; so do we.
void read_warmup_type(SectionReader& p, WarmupType& out) {
  const Json* v = p.take("warmup_type");
  if (v != nullptr && v->is_string() && *v != "log" && *v != "linear") {
    p.ctx().warn(p.key_path("warmup_type") + ": unknown value " + show(*v) + "; using \"log\" (as DeepSpeed)");
    p.ctx().record(p.key_path("warmup_type"), "log", Source::Default);
    return;
  }
  p.read_enum("warmup_type", out, {{"log", WarmupType::Log}, {"linear", WarmupType::Linear}});
}

void read_lr(SectionReader& p, const char* key, double& out) {
  const Json* v = p.take(key);
  if (v != nullptr && v->is_array()) {
    throw ConfigError(p.key_path(key), "per-parameter-group lists are not supported by deepspeed.cpp yet; give one "
                                       "number");
  }
  p.read(key, out, kNonNegativeReal);
}

void read_scheduler_params(SectionReader& p, SchedulerType type, SchedulerParams& s) {
  using T = SchedulerType;
  const std::string name = to_string(type);
  p.read("last_batch_iteration", s.last_batch_iteration, IntRange{-1});
  if (type == T::WarmupLR || type == T::WarmupDecayLR) {
    read_lr(p, "warmup_min_lr", s.warmup_min_lr);
    read_lr(p, "warmup_max_lr", s.warmup_max_lr);
  }
  if (type == T::WarmupLR || type == T::WarmupDecayLR || type == T::WarmupCosineLR) {
    // DeepSpeed 0.19: "warmup_num_steps must be a positive integer, got 0" (ValueError).
    if (const Json* n = p.take("warmup_num_steps"); n != nullptr && as_integer(*n) && *as_integer(*n) <= 0) {
      throw ConfigError(p.key_path("warmup_num_steps"),
                        "warmup_num_steps must be a positive integer, got " + show(*n) + " (as DeepSpeed's " + name + ")");
    }
    p.read("warmup_num_steps", s.warmup_num_steps, kPositive);
    read_warmup_type(p, s.warmup_type);
  }
  if (type == T::WarmupDecayLR || type == T::WarmupCosineLR) {
    require(p, "total_num_steps", name);
    p.read("total_num_steps", s.total_num_steps, kPositive);
    if (s.total_num_steps < s.warmup_num_steps) {
      p.ctx().warn(p.key_path("total_num_steps") + ": total_num_steps " + std::to_string(s.total_num_steps) +
                   " is less than warmup_num_steps " + std::to_string(s.warmup_num_steps));
    }
  }
  if (type == T::WarmupCosineLR) {
    p.read("warmup_min_ratio", s.warmup_min_ratio, kUnitInterval);
    p.read("cos_min_ratio", s.cos_min_ratio, kUnitInterval);
  }
  if (type == T::OneCycle) {
    require(p, "cycle_min_lr", name);
    require(p, "cycle_max_lr", name);
    read_lr(p, "cycle_min_lr", s.cycle_min_lr);
    read_lr(p, "cycle_max_lr", s.cycle_max_lr);
    p.read("decay_lr_rate", s.decay_lr_rate, kNonNegativeReal);
    p.read("cycle_first_step_size", s.cycle_first_step_size, kPositive);
    p.read("cycle_second_step_size", s.cycle_second_step_size, kPositive);
    p.read("cycle_first_stair_count", s.cycle_first_stair_count, kNonNegative);
    p.read("cycle_second_stair_count", s.cycle_second_stair_count, kNonNegative);
    p.read("decay_step_size", s.decay_step_size, kNonNegative);
    p.read("cycle_momentum", s.cycle_momentum);
    p.read("cycle_min_mom", s.cycle_min_mom, kUnitInterval);
    p.read("cycle_max_mom", s.cycle_max_mom, kUnitInterval);
    p.read("decay_mom_rate", s.decay_mom_rate, kNonNegativeReal);
  }
  if (type == T::LRRangeTest) {
    p.read("lr_range_test_min_lr", s.lr_range_test_min_lr, kNonNegativeReal);
    p.read("lr_range_test_step_size", s.lr_range_test_step_size, kPositive);
    p.read("lr_range_test_step_rate", s.lr_range_test_step_rate, kNonNegativeReal);
    p.read("lr_range_test_staircase", s.lr_range_test_staircase);
  }
}

}  // namespace

void parse_scheduler(SectionReader& top, Config& cfg) {
  SectionReader sec(top.ctx(), top.raw("scheduler"), "scheduler", UnknownKeys::Warn);
  if (!sec.present()) {
    top.ctx().record("scheduler", nullptr, sec.section_source());
    return;
  }
  SchedulerConfig sc;
  sc.type = parse_scheduler_type(sec.take("type"), sec.source_of("type"));
  top.ctx().record("scheduler.type", to_string(sc.type), Source::File);
  SectionReader p(top.ctx(), sec.raw("params"), "scheduler.params", UnknownKeys::Error);
  read_scheduler_params(p, sc.type, sc.params);
  if (sc.type == SchedulerType::WarmupLR || sc.type == SchedulerType::WarmupDecayLR) {
    // "auto" as Hugging Face's integration fills it: warmup_min_lr 0, warmup_max_lr the optimizer's lr.
    top.ctx().auto_meaningful.insert(p.key_path("warmup_min_lr"));
    const Source max_src = p.source_of("warmup_max_lr");
    if (max_src == Source::Auto && cfg.optimizer) {
      sc.params.warmup_max_lr = cfg.optimizer->params.lr;
      top.ctx().record(p.key_path("warmup_max_lr"), sc.params.warmup_max_lr, Source::Auto);
      top.ctx().auto_meaningful.insert(p.key_path("warmup_max_lr"));
    } else if (max_src == Source::Default && sc.type == SchedulerType::WarmupLR && cfg.optimizer) {
      // DeepSpeed 0.19's WarmupLR: warmup_max_lr=None warms up to the optimizer's lr (WarmupDecayLR
      // still passes its own default, 0.001).
      sc.params.warmup_max_lr = cfg.optimizer->params.lr;
      top.ctx().record(p.key_path("warmup_max_lr"), sc.params.warmup_max_lr, Source::Derived);
    }
  }
  p.finish("not a parameter of the " + to_string(sc.type) +
           " schedule (DeepSpeed passes params to its constructor, which rejects unknown ones)");
  sec.finish();
  cfg.scheduler = sc;
}

}  // namespace ds::config_detail
