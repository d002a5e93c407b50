// The typed form of a POST /v1/completions or /v1/chat/completions body. parse_request checks the
// body as OpenAI does: not UTF-8 or not JSON → 400; a known field of the wrong type or out of range
// → 400 naming it; unknown fields are ignored; fields ds-serve does not implement (suffix, echo
// together with logprobs) are refused by name when set to anything but their default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat_template.h"

namespace ds::serve {

enum class Endpoint { kCompletions, kChat };

struct GenerationRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  std::string prompt;                       // completions, as text
  std::optional<std::vector<int64_t>> prompt_ids;  // completions, given as token ids
  std::vector<data::ChatMessage> messages;  // chat
  std::optional<int64_t> max_tokens;        // unset: the endpoint's default
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;                        // vLLM's extension; 0 is off
  double repetition_penalty = 1.0;          // vLLM's extension; 1 is off
  double presence_penalty = 0.0;            // [-2, 2]
  double frequency_penalty = 0.0;           // [-2, 2]
  int64_t n = 1;                            // choices, each its own sequence
  // Candidates generated server-side (≥ n); the n with the highest mean token logprob are returned.
  // Unset or equal to n: every candidate is a choice.
  int64_t best_of = 1;
  // Set: report each token's logprob and this many top alternatives (completions' integer
  // `logprobs` 0..5; chat's `logprobs: true` with `top_logprobs` 0..20).
  std::optional<int64_t> logprobs;
  bool echo = false;                        // completions: the prompt text opens each choice
  std::vector<std::string> stop;            // at most 4 strings, matched on the decoded text
  std::optional<uint64_t> seed;
  bool ignore_eos = false;                  // vLLM's extension
  bool stream = false;
  bool include_usage = false;               // stream_options.include_usage
};

constexpr int64_t kMaxChoices = 128;  // OpenAI's limit on n
constexpr int64_t kMaxBestOf = 20;    // OpenAI's limit on best_of

// Throws ApiError (400) naming the field and the fix.
GenerationRequest parse_request(std::string_view body, Endpoint endpoint);

// True when `s` is well-formed UTF-8.
bool is_valid_utf8(std::string_view s);

}  // namespace ds::serve
