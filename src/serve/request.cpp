#include "serve/request.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "data/unicode.h"
#include "serve/api_error.h"

namespace ds::serve {

namespace {

using nlohmann::json;

std::string type_name(const json& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

ApiError wrong_type(const std::string& field, const std::string& want, const json& got) {
  return bad_request("'" + field + "' must be " + want + ", got " + type_name(got), field, "invalid_type");
}

// The value of `field` when present and not null.
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number(const json& body, const char* name, double def, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return def;
  if (!v->is_number()) throw wrong_type(name, "a number", *v);
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    throw bad_request("'" + std::string(name) + "' must be in [" + json(lo).dump() + ", " + json(hi).dump() +
                          "], got " + v->dump(),
                      name);
  return x;
}

std::optional<int64_t> integer(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() && std::abs(v->get<double>()) < 9e15)
    return static_cast<int64_t>(v->get<double>());
  if (!v->is_number_integer()) throw wrong_type(name, "an integer", *v);
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw bad_request("'" + std::string(name) + "' is too large: " + v->dump(), name);
  return v->get<int64_t>();
}

bool boolean(const json& body, const char* name, bool def) {
  const json* v = field(body, name);
  if (!v) return def;
  if (!v->is_boolean()) throw wrong_type(name, "a boolean", *v);
  return v->get<bool>();
}

// A field ds-serve does not implement: refused unless absent or at its default.
void refuse_unless_default(const json& body, const char* name, const json& def, const char* why) {
  const json* v = field(body, name);
  if (v && *v != def)
    throw bad_request("'" + std::string(name) + "' is not supported by ds-serve (" + why + "); leave it out", name,
                      "unsupported_parameter");
}

std::vector<int64_t> token_ids(const json& arr, const std::string& name) {
  std::vector<int64_t> ids;
  for (const auto& t : arr) {
    if (!t.is_number_integer()) throw wrong_type(name, "a string or an array of token ids (integers)", t);
    ids.push_back(t.get<int64_t>());
  }
  return ids;
}

void parse_prompt(const json& body, GenerationRequest& r) {
  const json* p = field(body, "prompt");
  if (!p) throw bad_request("'prompt' is required", "prompt", "missing_required_parameter");
  if (p->is_string()) {
    r.prompt = p->get<std::string>();
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    r.prompt = (*p)[0].get<std::string>();
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_array()) {
    r.prompt_ids = token_ids((*p)[0], "prompt");
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    r.prompt_ids = token_ids(*p, "prompt");
  } else if (p->is_array() && p->size() > 1) {
    throw bad_request("'prompt' holds " + std::to_string(p->size()) +
                          " prompts; ds-serve answers one prompt per request (send one request each)",
                      "prompt", "unsupported_parameter");
  } else {
    throw wrong_type("prompt", "a string or an array of token ids", *p);
  }
  if (r.prompt_ids && r.prompt_ids->empty()) throw bad_request("'prompt' is empty", "prompt");
}

std::string message_content(const json& m, size_t i) {
  const std::string name = "messages[" + std::to_string(i) + "].content";
  auto c = m.find("content");
  if (c == m.end() || c->is_null()) return "";
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) throw wrong_type(name, "a string or an array of text parts", *c);
  std::string text;
  for (const auto& part : *c) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") || !part["text"].is_string())
      throw bad_request("'" + name + "' parts must be {\"type\": \"text\", \"text\": string} (ds-serve is text-only)",
                        name, "invalid_type");
    text += part["text"].get<std::string>();
  }
  return text;
}

void parse_messages(const json& body, GenerationRequest& r) {
  const json* ms = field(body, "messages");
  if (!ms) throw bad_request("'messages' is required", "messages", "missing_required_parameter");
  if (!ms->is_array()) throw wrong_type("messages", "an array of messages", *ms);
  if (ms->empty()) throw bad_request("'messages' is empty: give at least one message", "messages");
  for (size_t i = 0; i < ms->size(); ++i) {
    const json& m = (*ms)[i];
    const std::string name = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw wrong_type(name, "an object", m);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) throw wrong_type(name + ".role", "a string", role == m.end() ? json() : *role);
    const std::string rs = role->get<std::string>();
    if (rs != "system" && rs != "user" && rs != "assistant" && rs != "developer")
      throw bad_request("'" + name + ".role' must be system, developer, user or assistant, got '" + rs + "'",
                        name + ".role");
    r.messages.push_back({rs == "developer" ? "system" : rs, message_content(m, i)});
  }
}

void parse_stop(const json& body, GenerationRequest& r) {
  const json* s = field(body, "stop");
  if (!s) return;
  if (s->is_string()) {
    r.stop.push_back(s->get<std::string>());
  } else if (s->is_array()) {
    if (s->size() > 4) throw bad_request("'stop' holds at most 4 sequences, got " + std::to_string(s->size()), "stop");
    for (const auto& x : *s) {
      if (!x.is_string()) throw wrong_type("stop", "a string or an array of strings", x);
      r.stop.push_back(x.get<std::string>());
    }
  } else {
    throw wrong_type("stop", "a string or an array of strings", *s);
  }
  for (const auto& x : r.stop)
    if (x.empty()) throw bad_request("'stop' holds an empty string", "stop");
}

// Completions: `logprobs` is an integer 0..5 (null: off). Chat: `logprobs` a boolean and
// `top_logprobs` 0..20, which needs `logprobs: true` (OpenAI's rules).
void parse_logprobs(const json& body, GenerationRequest& r) {
  if (r.endpoint == Endpoint::kCompletions) {
    const json* v = field(body, "logprobs");
    if (!v) return;
    if (v->is_boolean()) throw wrong_type("logprobs", "an integer in [0, 5] (completions)", *v);
    const auto k = integer(body, "logprobs");
    if (*k < 0 || *k > 5) throw bad_request("'logprobs' must be in [0, 5], got " + std::to_string(*k), "logprobs");
    r.logprobs = k;
    return;
  }
  const bool on = boolean(body, "logprobs", false);
  const auto top = integer(body, "top_logprobs");
  if (top && (*top < 0 || *top > 20))
    throw bad_request("'top_logprobs' must be in [0, 20], got " + std::to_string(*top), "top_logprobs");
  if (top && !on)
    throw bad_request("'top_logprobs' needs 'logprobs' set to true", "top_logprobs");
  if (on) r.logprobs = top.value_or(0);
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto cp = data::decode_utf8(s, i);
    if (!cp.valid) return false;
    i += cp.len;
  }
  return true;
}

GenerationRequest parse_request(std::string_view body, Endpoint endpoint) {
  if (!is_valid_utf8(body)) throw bad_request("the request body is not valid UTF-8", "", "invalid_encoding");
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    throw bad_request(std::string("the request body is not valid JSON: ") + e.what(), "", "invalid_json");
  }
  if (!j.is_object()) throw bad_request("the request body must be a JSON object, got " + type_name(j), "", "invalid_json");

  GenerationRequest r;
  r.endpoint = endpoint;
  if (const json* m = field(j, "model")) {
    if (!m->is_string()) throw wrong_type("model", "a string", *m);
    r.model = m->get<std::string>();
  }
  if (endpoint == Endpoint::kCompletions) parse_prompt(j, r);
  else parse_messages(j, r);

  // max_completion_tokens is the chat API's newer name for max_tokens.
  r.max_tokens = integer(j, "max_tokens");
  if (auto mct = integer(j, "max_completion_tokens"); mct && endpoint == Endpoint::kChat) r.max_tokens = mct;
  if (r.max_tokens && *r.max_tokens < 1)
    throw bad_request("'max_tokens' must be at least 1, got " + std::to_string(*r.max_tokens), "max_tokens");
  r.temperature = number(j, "temperature", 1.0, 0.0, 2.0);
  r.top_p = number(j, "top_p", 1.0, 0.0, 1.0);
  if (r.top_p <= 0.0) throw bad_request("'top_p' must be > 0, got 0", "top_p");
  if (auto k = integer(j, "top_k")) {
    if (*k < -1) throw bad_request("'top_k' must be -1 or 0 (off) or a positive count", "top_k");
    r.top_k = *k < 0 ? 0 : *k;
  }
  r.repetition_penalty = number(j, "repetition_penalty", 1.0, 1e-3, 1e3);
  if (auto seed = integer(j, "seed")) r.seed = static_cast<uint64_t>(*seed);
  r.stream = boolean(j, "stream", false);
  r.ignore_eos = boolean(j, "ignore_eos", false);
  if (const json* so = field(j, "stream_options")) {
    if (!so->is_object()) throw wrong_type("stream_options", "an object", *so);
    r.include_usage = boolean(*so, "include_usage", false);
  }
  parse_stop(j, r);

  r.presence_penalty = number(j, "presence_penalty", 0.0, -2.0, 2.0);
  r.frequency_penalty = number(j, "frequency_penalty", 0.0, -2.0, 2.0);
  if (auto n = integer(j, "n")) {
    if (*n < 1 || *n > kMaxChoices)
      throw bad_request("'n' must be in [1, " + std::to_string(kMaxChoices) + "], got " + std::to_string(*n), "n");
    r.n = *n;
  }
  r.best_of = r.n;
  if (auto b = integer(j, "best_of")) {
    if (*b != r.n && (*b < r.n || *b > kMaxBestOf))
      throw bad_request("'best_of' must be in [n, " + std::to_string(kMaxBestOf) + "] (n = " + std::to_string(r.n) +
                            ": the candidates the n choices are picked from), got " + std::to_string(*b),
                        "best_of");
    r.best_of = *b;
  }
  // The best candidates are known only when all are done, so they cannot be streamed.
  if (r.stream && r.best_of > r.n)
    throw bad_request("'best_of' larger than 'n' cannot be streamed (the best candidates are known only at the end); "
                      "drop 'stream' or set best_of to n",
                      "best_of");
  parse_logprobs(j, r);
  if (endpoint == Endpoint::kCompletions) r.echo = boolean(j, "echo", false);
  if (r.echo && r.logprobs)
    throw bad_request("'echo' together with 'logprobs' would need the prompt's logprobs, which ds-serve does not "
                      "compute; drop one of them",
                      "echo", "unsupported_parameter");
  refuse_unless_default(j, "suffix", json(nullptr), "no insertion");
  return r;
}

}  // namespace ds::serve
