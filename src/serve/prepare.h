// From a parsed request to what the engine runs: the prompt ids (text encoded, or the chat
// rendered by the template), and SamplingParams with max_tokens checked against the context the
// way OpenAI words it (prompt + max_tokens over the context → 400 naming both numbers and the fix).
#pragma once

#include <cstdint>
#include <vector>

#include "inference/sampling.h"
#include "serve/request.h"
#include "data/text_codec.h"

namespace ds::serve {

struct PromptLimits {
  int64_t context = 0;            // the model's positions (prompt + output)
  int64_t max_prompt_tokens = 0;  // 0: context − 1
  int64_t vocab_size = 0;         // token ids given in "prompt" must be below this
};

struct PreparedRequest {
  std::vector<int64_t> prompt;
  inference::SamplingParams params;  // choice 0's; choice_params gives each choice its own seed
};

// The parameters of each of the request's n choices: with a seed, choice i draws from seed + i (each
// choice reproducible, the choices different); without, every choice gets a seed from the engine.
std::vector<inference::SamplingParams> choice_params(const inference::SamplingParams& params, int64_t n);

// ApiError (400) naming the field: prompt too long, max_tokens over the context, bad token ids.
PreparedRequest prepare_request(const GenerationRequest& r, const data::TextCodec& codec,
                                const PromptLimits& limits);

}  // namespace ds::serve
