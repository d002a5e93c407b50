// The JSON OpenAI's clients read: a whole completion / chat completion, the server-sent-event
// chunks of a streamed one (`data: {...}\n\n`, ended by `data: [DONE]\n\n`), and the model list.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "serve/choice_stream.h"
#include "serve/request.h"

namespace ds::serve {

struct ResponseContext {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;     // "cmpl-…" / "chatcmpl-…"
  std::string model;
  int64_t created = 0;  // Unix seconds
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

struct ChoiceResult {
  int64_t index = 0;
  std::string text;
  std::string finish_reason;  // "stop", "length", or "abort" (cancelled at shutdown)
  std::optional<std::vector<LogprobEntry>> logprobs;  // set when the request asked for logprobs
};

std::string full_response(const ResponseContext& ctx, const std::vector<ChoiceResult>& choices, const Usage& usage);
// One chunk of choice `index`: `delta` text and, when asked for, its tokens' logprobs;
// finish_reason set on the choice's last; chat's first chunk of a choice carries the role.
std::string stream_chunk(const ResponseContext& ctx, int64_t index, const std::string& delta,
                         const std::vector<LogprobEntry>* logprobs, const std::optional<std::string>& finish_reason,
                         bool first);
// A choice's `logprobs` object. Completions: {tokens, token_logprobs, top_logprobs (token → logprob),
// text_offset}; chat: {content: [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
// Tokens are shown by token_text.
// A token's text in logprobs: the token when its bytes are whole UTF-8, else "bytes:\xNN...".
std::string token_text(const std::string& bytes);
nlohmann::json logprobs_json(Endpoint endpoint, const std::vector<LogprobEntry>& entries);
// The extra last chunk of stream_options.include_usage: no choices, the usage.
std::string usage_chunk(const ResponseContext& ctx, const Usage& usage);
std::string models_response(const std::string& model, int64_t created);

// One server-sent event carrying `data`.
inline std::string sse_event(const std::string& data) { return "data: " + data + "\n\n"; }
inline const char* sse_done() { return "data: [DONE]\n\n"; }

}  // namespace ds::serve
