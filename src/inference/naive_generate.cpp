#include "inference/naive_generate.h"

#include <algorithm>
#include <random>

namespace ds::inference {

std::vector<int64_t> naive_generate(models::CausalLM& model, const std::vector<int64_t>& prompt,
                                    const SamplingParams& params, int64_t max_positions) {
  torch::NoGradGuard no_grad;
  std::mt19937_64 rng(params.seed.value_or(0));
  std::vector<int64_t> tokens = prompt;
  std::vector<int64_t> out;
  const auto& stops = params.stop_token_ids;
  while (static_cast<int64_t>(out.size()) < params.max_tokens && static_cast<int64_t>(tokens.size()) < max_positions) {
    auto idx = torch::tensor(tokens, torch::kLong).unsqueeze(0);  // [1,T]
    auto logits = model.forward(idx)[0][-1].to(torch::kFloat);     // [V]
    const int64_t next = sample_token(logits, tokens, params, rng, static_cast<int64_t>(prompt.size())).token;
    if (std::find(stops.begin(), stops.end(), next) != stops.end()) break;
    tokens.push_back(next);
    out.push_back(next);
  }
  return out;
}

}  // namespace ds::inference
