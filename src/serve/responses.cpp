#include "serve/responses.h"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

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

// A token's text: itself when it is whole UTF-8, else OpenAI's "bytes:\xNN..." (a byte of a
// character cut between tokens; distinct tokens stay distinct keys of top_logprobs).
std::string token_text(const std::string& bytes) {
  if (is_valid_utf8(bytes)) return bytes;
  std::string s = "bytes:";
  for (unsigned char c : bytes) s += fmt::format("\\x{:02x}", c);
  return s;
}

json logprobs_json(Endpoint endpoint, const std::vector<LogprobEntry>& entries) {
  auto text = [](const std::string& bytes) { return token_text(bytes); };
  if (endpoint == Endpoint::kCompletions) {
    json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
    for (const auto& e : entries) {
      tokens.push_back(text(e.token));
      lps.push_back(e.logprob);
      json top = json::object();
      for (const auto& [t, v] : e.top) top[text(t)] = v;
      tops.push_back(top);
      offsets.push_back(e.text_offset);
    }
    return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
  }
  auto byte_list = [](const std::string& bytes) {
    json b = json::array();
    for (unsigned char c : bytes) b.push_back(static_cast<int>(c));
    return b;
  };
  json content = json::array();
  for (const auto& e : entries) {
    json top = json::array();
    for (const auto& [t, v] : e.top) top.push_back({{"token", text(t)}, {"logprob", v}, {"bytes", byte_list(t)}});
    content.push_back({{"token", text(e.token)}, {"logprob", e.logprob}, {"bytes", byte_list(e.token)}, {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

std::string full_response(const ResponseContext& ctx, const std::vector<ChoiceResult>& choices, const Usage& usage) {
  json j = envelope(ctx, false);
  j["choices"] = json::array();
  for (const auto& c : choices) {
    json choice = {{"index", c.index},
                   {"logprobs", c.logprobs ? logprobs_json(ctx.endpoint, *c.logprobs) : json(nullptr)},
                   {"finish_reason", c.finish_reason}};
    if (ctx.endpoint == Endpoint::kChat) choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    else choice["text"] = c.text;
    j["choices"].push_back(std::move(choice));
  }
  j["usage"] = usage_json(usage);
  return dump(j);
}

std::string stream_chunk(const ResponseContext& ctx, int64_t index, const std::string& delta,
                         const std::vector<LogprobEntry>* logprobs, const std::optional<std::string>& finish_reason,
                         bool first) {
  json j = envelope(ctx, true);
  json choice = {{"index", index},
                 {"logprobs", logprobs ? logprobs_json(ctx.endpoint, *logprobs) : json(nullptr)},
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
