#include "serve/responses.h"

#include <nlohmann/json.hpp>

namespace ds::serve {

namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens}, {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json envelope(const ResponseContext& ctx, bool chunk) {
  const bool chat = ctx.endpoint == Endpoint::kChat;
  return {{"id", ctx.id},
          {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", ctx.created},
          {"model", ctx.model}};
}

}  // namespace

std::string full_response(const ResponseContext& ctx, const std::string& text, const std::string& finish_reason,
                          const Usage& usage) {
  json j = envelope(ctx, false);
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  if (ctx.endpoint == Endpoint::kChat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(usage);
  return dump(j);
}

std::string stream_chunk(const ResponseContext& ctx, const std::string& delta,
                         const std::optional<std::string>& finish_reason, bool first) {
  json j = envelope(ctx, true);
  json choice = {{"index", 0}, {"logprobs", nullptr},
                 {"finish_reason", finish_reason ? json(*finish_reason) : json(nullptr)}};
  if (ctx.endpoint == Endpoint::kChat) {
    json d = json::object();
    if (first) d["role"] = "assistant";
    if (!delta.empty() || (first && !finish_reason)) d["content"] = delta;
    choice["delta"] = d;
  } else {
    choice["text"] = delta;
  }
  j["choices"] = json::array({choice});
  return dump(j);
}

std::string usage_chunk(const ResponseContext& ctx, const Usage& usage) {
  json j = envelope(ctx, true);
  j["choices"] = json::array();
  j["usage"] = usage_json(usage);
  return dump(j);
}

std::string models_response(const std::string& model, int64_t created) {
  json j = {{"object", "list"},
            {"data", json::array({{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "ds-serve"}}})}};
  return dump(j);
}

}  // namespace ds::serve
