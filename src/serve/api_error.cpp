#include "serve/api_error.h"

#include <nlohmann/json.hpp>

namespace ds::serve {

std::string error_body(const ApiError& e) {
  auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  nlohmann::json j = {{"error", {{"message", e.what()}, {"type", e.type}, {"param", or_null(e.param)},
                                 {"code", or_null(e.code)}}}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ds::serve
