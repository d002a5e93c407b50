#include "serve/best_of.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace ds::serve {

void CandidateScore::add(const std::vector<inference::TokenLogprob>& logprobs, int64_t taken) {
  const auto k = std::min(static_cast<size_t>(std::max<int64_t>(taken, 0)), logprobs.size());
  for (size_t i = 0; i < k; ++i) logprob_sum += logprobs[i].logprob;
  tokens += static_cast<int64_t>(k);
}

std::vector<size_t> best_candidates(const std::vector<CandidateScore>& scores, int64_t n) {
  auto mean = [](const CandidateScore& s) {
    return s.tokens > 0 ? s.logprob_sum / static_cast<double>(s.tokens) : -std::numeric_limits<double>::infinity();
  };
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return mean(scores[a]) > mean(scores[b]); });
  order.resize(std::min(order.size(), static_cast<size_t>(std::max<int64_t>(n, 0))));
  return order;
}

}  // namespace ds::serve
