// The JSON side of the config layer. Only the parser, the loader and the report include this.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"

namespace ds {

// Parses config text as DeepSpeed's hjson loader takes a JSON config: // /* */ and # comments and
// trailing commas allowed; a key repeated in one object is an error (as DeepSpeed); a syntax error
// names `origin`, the line, the column and the parser's reason.
nlohmann::json parse_config_json(const std::string& text, const std::string& origin);

// Loads an already-parsed config (for ds::initialize(model, nlohmann::json)).
Config load_config_json(const nlohmann::json& root, int world_size, const std::string& origin = "<json>");

}  // namespace ds
