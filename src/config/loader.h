// Entry points: a DeepSpeed JSON config (file or text) → ds::Config, validated.
// Errors are ds::ConfigError naming the JSON path, the value and what is allowed.
#pragma once

#include <string>

#include "config/config.h"

namespace ds {

// Reads and loads `path`. A missing or unreadable file, malformed JSON (with line and column),
// a wrong type or value, or an inconsistent batch triple throws ds::ConfigError.
Config load_config_file(const std::string& path, int world_size);

// Same for JSON text; `origin` names the text in messages.
Config load_config_text(const std::string& text, int world_size, const std::string& origin = "<string>");

}  // namespace ds
