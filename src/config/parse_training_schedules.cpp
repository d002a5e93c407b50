// "curriculum_learning" (DeepSpeed's legacy curriculum) and "progressive_layer_drop"
// (config/training_schedules_config.h): DeepSpeed's keys, its required ones named when missing, and
// the values its arithmetic cannot use (a zero step, a zero total) refused before training starts.
#include <fmt/format.h>

#include "config/parse_sections.h"
#include "util/error.h"

namespace ds::config_detail {

namespace {

std::vector<int64_t> read_integer_list(SectionReader& s, std::string_view key) {
  std::vector<int64_t> out;
  const Json* v = s.take(key);
  if (v == nullptr || v->is_null()) return out;
  if (!v->is_array()) type_error(s.key_path(key), "a list of integers", *v);
  for (const Json& e : *v) {
    const std::optional<int64_t> i = as_integer(e);
    if (!i) type_error(s.key_path(key), "a list of integers", *v);
    out.push_back(*i);
  }
  s.ctx().record(s.key_path(key), *v, Source::File);
  return out;
}

// DeepSpeed asserts each of these is in the section when the curriculum is on.
void require_key(SectionReader& s, std::string_view key, const std::string& why) {
  if (!s.given(key)) throw ConfigError(s.key_path(key), "is required " + why);
}

void read_schedule_config(SectionReader& top, CurriculumLearningConfig& c) {
  SectionReader s(top.ctx(), top.raw("schedule_config"), top.key_path("schedule_config"), UnknownKeys::Warn);
  const std::string schedule_key = top.key_path("schedule_type");
  switch (c.schedule_type) {
    case CurriculumSchedule::FixedDiscrete:
      if (c.enabled) {
        require_key(s, "difficulty", "by " + schedule_key + " \"fixed_discrete\"");
        require_key(s, "max_step", "by " + schedule_key + " \"fixed_discrete\"");
      }
      c.difficulty = read_integer_list(s, "difficulty");
      c.max_step = read_integer_list(s, "max_step");
      if (c.enabled && (c.max_step.empty() || c.difficulty.size() != c.max_step.size() + 1))
        throw ConfigError(s.key_path("difficulty"),
                          fmt::format("{} difficulties for {} max_step entries: fixed_discrete needs one difficulty "
                                      "per max_step plus the last one, which holds after the last max_step",
                                      c.difficulty.size(), c.max_step.size()));
      break;
    case CurriculumSchedule::FixedRoot:
    case CurriculumSchedule::FixedLinear: {
      const std::string why =
          fmt::format("by {} \"{}\"", schedule_key, c.schedule_type == CurriculumSchedule::FixedRoot ? "fixed_root" : "fixed_linear");
      if (c.enabled) {
        require_key(s, "total_curriculum_step", why);
        require_key(s, "difficulty_step", why);
        if (c.schedule_type == CurriculumSchedule::FixedRoot) require_key(s, "root_degree", why);
      }
      s.read("total_curriculum_step", c.total_curriculum_step, kPositive);
      s.read("difficulty_step", c.difficulty_step, kPositive);
      if (c.schedule_type == CurriculumSchedule::FixedRoot) s.read("root_degree", c.root_degree, RealRange{0.0, kFp32Max, true});
      if (c.enabled && c.difficulty_step % 8 != 0)  // DeepSpeed's warning, kept as it words the reason
        s.ctx().warn(s.key_path("difficulty_step") + ": " + std::to_string(c.difficulty_step) +
                     " is not a multiple of 8; with the seqlen metric, multiples of 8 (fp16) or 16 (int8) keep "
                     "matrix shapes tensor-core friendly (disregard on CPUs or for other metrics)");
      break;
    }
    case CurriculumSchedule::Custom:  // the function comes from engine.curriculum_scheduler()->set_custom_get_difficulty
      break;
  }
  s.finish();
}

void parse_curriculum(SectionReader& top, Config& cfg) {
  SectionReader s(top.ctx(), top.raw("curriculum_learning"), "curriculum_learning", UnknownKeys::Warn);
  CurriculumLearningConfig& c = cfg.curriculum_learning;
  s.read("enabled", c.enabled);
  if (c.enabled)
    for (const char* key : {"curriculum_type", "min_difficulty", "max_difficulty", "schedule_type"})
      require_key(s, key, "when curriculum_learning is enabled");
  s.read("curriculum_type", c.curriculum_type);
  s.read("min_difficulty", c.min_difficulty);
  s.read("max_difficulty", c.max_difficulty);
  if (c.enabled && c.min_difficulty > c.max_difficulty)
    s.ctx().warn(fmt::format("curriculum_learning: min_difficulty {} is above max_difficulty {}; the difficulty "
                             "stays at min_difficulty (as in DeepSpeed)",
                             c.min_difficulty, c.max_difficulty));
  s.read_enum("schedule_type", c.schedule_type,
              {{"fixed_linear", CurriculumSchedule::FixedLinear},
               {"fixed_root", CurriculumSchedule::FixedRoot},
               {"fixed_discrete", CurriculumSchedule::FixedDiscrete},
               {"custom", CurriculumSchedule::Custom}});
  read_schedule_config(s, c);
  s.finish();
}

void parse_progressive_layer_drop(SectionReader& top, Config& cfg) {
  SectionReader s(top.ctx(), top.raw("progressive_layer_drop"), "progressive_layer_drop", UnknownKeys::Warn);
  ProgressiveLayerDropConfig& c = cfg.progressive_layer_drop;
  s.read("enabled", c.enabled);
  s.read("theta", c.theta, RealRange{0.0, 1.0, true});  // a keep probability: 0 would drop every layer
  s.read("gamma", c.gamma, kNonNegativeReal);
  s.finish();
}

}  // namespace

void parse_training_schedules(SectionReader& top, Config& cfg) {
  parse_curriculum(top, cfg);
  parse_progressive_layer_drop(top, cfg);
}

}  // namespace ds::config_detail
