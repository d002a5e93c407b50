// "auto" values (Hugging Face's convention): the ones with a meaning outside the Trainer are
// resolved where they are read (the batch triple as micro x GAS x world, overlap_comm by stage,
// WarmupLR's warmup_min_lr 0 and warmup_max_lr = the optimizer's lr). Every other "auto" took a
// default that the Trainer would have replaced from its arguments or the model, so one warning
// lists them all with the value used.
#include <algorithm>
#include <string>
#include <vector>

#include "config/parse_sections.h"

namespace ds::config_detail {

void warn_about_auto_values(ParseContext& ctx) {
  auto under = [](const std::string& path, const std::string& section) {
    return path.size() > section.size() && path.compare(0, section.size(), section) == 0 && path[section.size()] == '.';
  };
  std::string listed;
  auto add = [&](const std::string& item) { listed += (listed.empty() ? "" : ", ") + item; };
  std::vector<std::string> sections_listed;
  for (const auto& [path, value] : ctx.resolved) {
    if (value.source != Source::Auto || ctx.auto_meaningful.count(path) != 0) continue;
    std::string section;
    for (const auto& s : ctx.auto_sections) {
      if (path == s || under(path, s)) section = s;  // the innermost "auto" section holding it
    }
    if (section.empty() || path == section) {  // a key, or a section that records itself ("optimizer": null)
      add(path + " = " + value.value);
      if (!section.empty()) sections_listed.push_back(section);
    } else if (std::find(sections_listed.begin(), sections_listed.end(), section) == sections_listed.end()) {
      sections_listed.push_back(section);
      add(section + " = every key at its default");
    }
  }
  if (listed.empty()) return;
  ctx.warn("\"auto\" values are filled in by Hugging Face's Trainer, which is not running here, so these took "
           "deepspeed.cpp's defaults: " + listed + ". Set each to the value you want to silence this warning");
}

}  // namespace ds::config_detail
