// The JSON OpenAI's clients read: a whole completion / chat completion, the server-sent-event
// chunks of a streamed one (`data: {...}\n\n`, ended by `data: [DONE]\n\n`), and the model list.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

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

// finish_reason: "stop", "length", or "abort" (cancelled at shutdown).
std::string full_response(const ResponseContext& ctx, const std::string& text, const std::string& finish_reason,
                          const Usage& usage);
// One chunk: `delta` text; finish_reason set on the last; chat's first chunk carries the role.
std::string stream_chunk(const ResponseContext& ctx, const std::string& delta,
                         const std::optional<std::string>& finish_reason, bool first);
// The extra last chunk of stream_options.include_usage: no choices, the usage.
std::string usage_chunk(const ResponseContext& ctx, const Usage& usage);
std::string models_response(const std::string& model, int64_t created);

// One server-sent event carrying `data`.
inline std::string sse_event(const std::string& data) { return "data: " + data + "\n\n"; }
inline const char* sse_done() { return "data: [DONE]\n\n"; }

}  // namespace ds::serve
