// OpenAI's error answer: an HTTP status and {"error":{"message","type","param","code"}}. Every
// refusal of ds-serve (bad JSON, wrong types, limits, shutdown) is one ApiError.
#pragma once

#include <stdexcept>
#include <string>

namespace ds::serve {

struct ApiError : std::runtime_error {
  int status;
  std::string type;   // "invalid_request_error", "rate_limit_error", "server_error", ...
  std::string param;  // the request field at fault ("" → null)
  std::string code;   // a short machine-readable cause ("" → null)
  ApiError(int status, const std::string& message, std::string type = "invalid_request_error", std::string param = "",
           std::string code = "")
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}
};

// 400 invalid_request_error naming the field.
inline ApiError bad_request(const std::string& message, std::string param = "", std::string code = "invalid_value") {
  return ApiError(400, message, "invalid_request_error", std::move(param), std::move(code));
}

// The JSON body OpenAI sends with an error status.
std::string error_body(const ApiError& e);

}  // namespace ds::serve
