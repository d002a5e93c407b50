// Human and machine renderings of a resolved config: what ds-report --config prints and what the
// engine logs at startup.
#pragma once

#include <string>
#include <string_view>

#include "config/config.h"

namespace ds {

// "  <path> ....... <value>  (file|default|derived|auto)" per key, sorted by path, then warnings.
std::string render_config_report(const Config& cfg);

// {"config": {"<path>": {"value": <json>, "source": "<source>"}, ...}, "warnings": [...]}
std::string render_config_report_json(const Config& cfg);

// DeepSpeed's startup block: "DeepSpeedEngine configuration:", one "  <key> ..... <value>" line
// per key (dots fill to column 29), then "  json = {...}".
std::string render_engine_configuration(const Config& cfg);

// The resolved entry for `path`, or nullptr.
const ResolvedValue* find_resolved(const Config& cfg, std::string_view path);

}  // namespace ds
