#include "serve/prepare.h"

#include <algorithm>

#include "serve/api_error.h"

namespace ds::serve {

PreparedRequest prepare_request(const GenerationRequest& r, const data::TextCodec& codec,
                                const PromptLimits& limits) {
  PreparedRequest p;
  const bool chat = r.endpoint == Endpoint::kChat;
  if (chat && !codec.has_chat())
    throw ApiError(400, "this model has no chat template ds-serve can render (" + codec.chat_error() +
                            "); use /v1/completions with a prompt you format yourself",
                   "invalid_request_error", "messages", "no_chat_template");
  if (chat) p.prompt = codec.encode_chat(r.messages);
  else if (r.prompt_ids) p.prompt = *r.prompt_ids;
  else p.prompt = codec.encode(r.prompt, /*add_special_tokens=*/true);
  const char* prompt_field = chat ? "messages" : "prompt";

  const auto n = static_cast<int64_t>(p.prompt.size());
  if (n == 0) throw bad_request("the prompt is empty: give at least one token of text", prompt_field);
  for (int64_t t : p.prompt)
    if (t < 0 || t >= limits.vocab_size)
      throw bad_request("token id " + std::to_string(t) + " is outside the model's vocabulary [0, " +
                            std::to_string(limits.vocab_size) + ")",
                        prompt_field);
  const int64_t max_prompt = limits.max_prompt_tokens > 0 ? std::min(limits.max_prompt_tokens, limits.context - 1)
                                                          : limits.context - 1;
  if (n > max_prompt)
    throw bad_request("the prompt has " + std::to_string(n) + " tokens, more than the " + std::to_string(max_prompt) +
                          " this server accepts (the model's maximum context length is " +
                          std::to_string(limits.context) + " tokens); shorten the prompt",
                      prompt_field, "context_length_exceeded");
  const int64_t room = limits.context - n;
  if (r.max_tokens && *r.max_tokens > room)
    throw bad_request("this model's maximum context length is " + std::to_string(limits.context) +
                          " tokens, but you requested " + std::to_string(n + *r.max_tokens) + " (" + std::to_string(n) +
                          " in the prompt, " + std::to_string(*r.max_tokens) +
                          " for the completion); lower max_tokens to at most " + std::to_string(room),
                      "max_tokens", "context_length_exceeded");

  auto& sp = p.params;
  // OpenAI's defaults: 16 tokens for completions, the rest of the context for chat.
  sp.max_tokens = r.max_tokens.value_or(chat ? room : std::min<int64_t>(16, room));
  sp.temperature = r.temperature;
  sp.top_p = r.top_p;
  sp.top_k = r.top_k;
  sp.repetition_penalty = r.repetition_penalty;
  sp.presence_penalty = r.presence_penalty;
  sp.frequency_penalty = r.frequency_penalty;
  sp.logprobs = r.logprobs;
  sp.seed = r.seed;
  sp.ignore_eos = r.ignore_eos;
  // Stop strings are matched on the decoded text (ChoiceStream), not as token sequences: a stop
  // string may end inside a token or be spelled by other tokens than its own encoding.
  if (chat && !r.ignore_eos) sp.stop_token_ids = codec.chat_stop_ids();
  return p;
}

std::vector<inference::SamplingParams> choice_params(const inference::SamplingParams& params, int64_t n) {
  std::vector<inference::SamplingParams> out(static_cast<size_t>(n), params);
  if (params.seed)
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)].seed = *params.seed + static_cast<uint64_t>(i);
  return out;
}

}  // namespace ds::serve
