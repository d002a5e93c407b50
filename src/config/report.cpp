// Renderings of a resolved config: the ds-report table, its JSON twin, and DeepSpeed's startup block.
#include "config/report.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace ds {

const ResolvedValue* find_resolved(const Config& cfg, std::string_view path) {
  auto it = std::lower_bound(cfg.resolved.begin(), cfg.resolved.end(), path,
                             [](const ResolvedValue& v, std::string_view p) { return v.path < p; });
  return it != cfg.resolved.end() && it->path == path ? &*it : nullptr;
}

std::string render_config_report(const Config& cfg) {
  size_t width = 0;
  for (const auto& v : cfg.resolved) width = std::max(width, v.path.size());
  std::string out = "DeepSpeed config " + cfg.origin + " (world size " + std::to_string(cfg.world_size) + "):\n";
  out += "semantics: " + std::string(kDeepSpeedSemantics) + " (keys, defaults and batch arithmetic; "
         "docs/config-defaults.md)\n";
  for (const auto& v : cfg.resolved) {
    out += "  " + v.path + " " + std::string(width + 3 - v.path.size(), '.') + " " + v.value + "  (" +
           to_string(v.source) + ")\n";
  }
  out += "warnings: " + std::to_string(cfg.warnings.size()) + "\n";
  for (const auto& w : cfg.warnings) out += "  " + w + "\n";
  return out;
}

std::string render_config_report_json(const Config& cfg) {
  nlohmann::json config = nlohmann::json::object();
  for (const auto& v : cfg.resolved) {
    config[v.path] = {{"value", nlohmann::json::parse(v.value)}, {"source", to_string(v.source)}};
  }
  nlohmann::json out = {{"semantics", kDeepSpeedSemantics}, {"config", config}, {"warnings", cfg.warnings}};
  return out.dump(2);
}

std::string render_engine_configuration(const Config& cfg) {
  // DeepSpeedConfig.print: dots = "." * (29 - len(key)), Python's "" when the key is longer.
  std::string out = "DeepSpeedEngine configuration:\n";
  for (const auto& v : cfg.resolved) {
    const size_t dots = v.path.size() < 29 ? 29 - v.path.size() : 0;
    out += "  " + v.path + " " + std::string(dots, '.') + " " + v.value + "\n";
  }
  out += "  json = " + nlohmann::json::parse(cfg.json_text).dump(4) + "\n";
  return out;
}

}  // namespace ds
