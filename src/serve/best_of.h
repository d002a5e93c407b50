// OpenAI's best_of: a request generates best_of candidates server-side and returns the n "best",
// the ones with the highest log probability per token (the mean of their tokens' logprobs under the
// raw model). CandidateScore adds up one candidate's logprobs as its tokens arrive; best_candidates
// ranks them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "inference/sampling.h"

namespace ds::serve {

struct CandidateScore {
  double logprob_sum = 0.0;
  int64_t tokens = 0;

  // The first `taken` of `logprobs` (tokens past a stop string do not count).
  void add(const std::vector<inference::TokenLogprob>& logprobs, int64_t taken);
};

// The indexes of the `n` best of `scores`, best first: highest mean token logprob; ties keep the
// earlier candidate; candidates without tokens (the first token was eos) rank after all others.
std::vector<size_t> best_candidates(const std::vector<CandidateScore>& scores, int64_t n);

}  // namespace ds::serve
