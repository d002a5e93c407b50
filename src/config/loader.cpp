// Loading entry points: file → text → JSON → ds::Config, section by section, then cross-checks.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/json_parse.h"
#include "config/loader.h"
#include "config/parse_sections.h"
#include "util/error.h"

namespace ds {

using config_detail::Json;

Config load_config_json(const Json& root, int world_size, const std::string& origin) {
  if (!root.is_object()) {
    throw ConfigError("", origin + ": a DeepSpeed config must be a JSON object, got " + config_detail::show(root));
  }
  config_detail::ParseContext ctx;
  config_detail::SectionReader top(ctx, &root, "", config_detail::UnknownKeys::Warn);
  Config cfg;
  cfg.origin = origin;
  config_detail::parse_batch(top, world_size, cfg);
  config_detail::parse_top_scalars(top, cfg);
  config_detail::parse_precision(top, cfg);
  config_detail::parse_optimizer(top, cfg);
  config_detail::parse_scheduler(top, cfg);
  config_detail::parse_zero(top, cfg);
  config_detail::parse_aio(top, cfg);
  config_detail::parse_activation_checkpointing(top, cfg);
  config_detail::parse_flops_profiler(top, cfg);
  config_detail::parse_monitors(top, cfg);
  config_detail::parse_logging(top, cfg);
  config_detail::parse_checkpoint(top, cfg);
  config_detail::parse_autotuning(top, cfg);
  config_detail::parse_training_schedules(top, cfg);
  config_detail::parse_unsupported(top);
  top.finish();
  config_detail::validate_config(ctx, cfg);
  config_detail::warn_about_auto_values(ctx);

  cfg.warnings = std::move(ctx.warnings);
  cfg.resolved.reserve(ctx.resolved.size());
  for (auto& [path, value] : ctx.resolved) cfg.resolved.push_back(std::move(value));  // map: sorted
  cfg.json_text = root.dump();
  return cfg;
}

Config load_config_text(const std::string& text, int world_size, const std::string& origin) {
  return load_config_json(parse_config_json(text, origin), world_size, origin);
}

Config load_config_file(const std::string& path, int world_size) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError("", "cannot read config file '" + path + "': " + std::strerror(EISDIR));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError("", "cannot read config file '" + path + "': " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError("", "cannot read config file '" + path + "': " + std::strerror(errno));
  return load_config_text(text.str(), world_size, path);
}

}  // namespace ds
