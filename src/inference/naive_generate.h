// The reference generation loop: no KV cache, no batching — each new token re-runs the model's
// training forward over the whole sequence so far. What the ragged engine must match token for
// token under greedy decoding (tests), and the one-request-at-a-time baseline (benchmarks).
#pragma once

#include <cstdint>
#include <vector>

#include "inference/sampling.h"
#include "models/causal_lm.h"

namespace ds::inference {

// Output tokens of `prompt` (stop tokens end it and are not output; max_tokens and the model's
// `max_positions` bound it). Samples with sample_token and a generator seeded by params.seed (0 when unset).
std::vector<int64_t> naive_generate(models::CausalLM& model, const std::vector<int64_t>& prompt,
                                    const SamplingParams& params, int64_t max_positions);

}  // namespace ds::inference
