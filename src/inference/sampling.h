// Sampling: how the next token is chosen from a sequence's logits. Order as in Hugging Face and
// vLLM: penalties (repetition over prompt and output; frequency and presence, OpenAI's, over the
// output only) → temperature → top-k → top-p → draw.
// temperature 0 is greedy (argmax after the penalty). Draws come from the request's own
// std::mt19937_64 seeded by `seed`, so a seeded request gives the same tokens whatever else is in
// the batch (up to float ties). logprobs are the raw model's (log-softmax of the logits before
// any processing), as OpenAI reports them.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace ds::inference {

struct SamplingParams {
  int64_t max_tokens = 16;          // generated tokens at most (≥ 1)
  double temperature = 1.0;         // 0: greedy
  int64_t top_k = 0;                // 0: off
  double top_p = 1.0;               // (0, 1]; 1: off
  double repetition_penalty = 1.0;  // > 0; 1: off. Seen tokens: logit > 0 ? logit / p : logit · p
  // OpenAI's, in [-2, 2]; 0: off. With c[j] = times token j was generated so far (the prompt does
  // not count): logit[j] -= c[j] · frequency_penalty + (c[j] > 0) · presence_penalty.
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::vector<int64_t> stop_token_ids;               // generation ends; the token is not output
  std::vector<std::vector<int64_t>> stop_sequences;  // ends when the output ends with one; it is cut off
  bool ignore_eos = false;          // keep going past the model's eos token
  std::optional<uint64_t> seed;     // unset: one drawn from the engine's seed
  std::optional<int64_t> logprobs;  // set: each token's logprob and this many top alternatives (≤ 20)

  // ds::ConfigError naming the field ("temperature", ...) and its allowed range.
  void validate() const;
};

struct TokenLogprob {
  int64_t token = 0;
  double logprob = 0.0;
  std::vector<std::pair<int64_t, double>> top;  // the `logprobs` most likely tokens, best first
};

struct SampleResult {
  int64_t token = 0;
  std::optional<TokenLogprob> logprob;  // when params.logprobs is set
};

// Picks the next token from fp32 logits [V]. `history` = prompt + output so far; its first
// `prompt_len` tokens are the prompt (the repetition penalty sees all of history, the frequency and
// presence penalties only what follows the prompt).
SampleResult sample_token(const torch::Tensor& logits, std::span<const int64_t> history, const SamplingParams& params,
                          std::mt19937_64& rng, int64_t prompt_len = 0);

// The logits after the penalties (fp32 [V]); temperature and truncation come after. Exposed for tests.
torch::Tensor penalized_logits(const torch::Tensor& logits, std::span<const int64_t> history,
                               const SamplingParams& params, int64_t prompt_len = 0);

// The processed distribution sample_token draws from (probabilities [V], fp32, zero outside the
// top-k / top-p support); for temperature 0 a one-hot at the argmax. Exposed for tests.
torch::Tensor sampling_distribution(const torch::Tensor& logits, std::span<const int64_t> history,
                                    const SamplingParams& params, int64_t prompt_len = 0);

}  // namespace ds::inference
