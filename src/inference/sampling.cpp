#include "inference/sampling.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace ds::inference {
namespace {

constexpr int64_t kMaxLogprobs = 20;  // OpenAI's limit

}  // namespace

torch::Tensor penalized_logits(const torch::Tensor& logits, std::span<const int64_t> history,
                               const SamplingParams& params, int64_t prompt_len) {
  auto out = logits.to(torch::kFloat).clone();
  const double penalty = params.repetition_penalty;
  if (penalty != 1.0 && !history.empty()) {
    std::vector<int64_t> seen(history.begin(), history.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    auto idx = torch::from_blob(seen.data(), {static_cast<int64_t>(seen.size())}, torch::kLong).clone();
    auto v = out.index_select(0, idx);
    out.index_copy_(0, idx, torch::where(v > 0, v / penalty, v * penalty));
  }
  const auto start = static_cast<size_t>(std::clamp<int64_t>(prompt_len, 0, static_cast<int64_t>(history.size())));
  if ((params.frequency_penalty != 0.0 || params.presence_penalty != 0.0) && start < history.size()) {
    auto counts = torch::zeros_like(out);  // c[j]: times token j was generated
    auto ids = torch::from_blob(const_cast<int64_t*>(history.data()) + start,
                                {static_cast<int64_t>(history.size() - start)}, torch::kLong)
                   .clone();
    counts.index_add_(0, ids, torch::ones({ids.size(0)}, torch::kFloat));
    out -= counts * params.frequency_penalty + (counts > 0).to(torch::kFloat) * params.presence_penalty;
  }
  return out;
}

void SamplingParams::validate() const {
  auto fail = [](const std::string& key, const std::string& msg) { throw ConfigError(key, msg); };
  if (max_tokens < 1) fail("max_tokens", "must be >= 1, got " + std::to_string(max_tokens));
  if (!(temperature >= 0.0 && std::isfinite(temperature)))
    fail("temperature", "must be a finite number >= 0 (0 is greedy), got " + std::to_string(temperature));
  if (top_k < 0) fail("top_k", "must be >= 0 (0 turns it off), got " + std::to_string(top_k));
  if (!(top_p > 0.0 && top_p <= 1.0)) fail("top_p", "must be in (0, 1] (1 turns it off), got " + std::to_string(top_p));
  if (!(repetition_penalty > 0.0 && std::isfinite(repetition_penalty)))
    fail("repetition_penalty", "must be a finite number > 0 (1 turns it off), got " + std::to_string(repetition_penalty));
  if (!(presence_penalty >= -2.0 && presence_penalty <= 2.0))
    fail("presence_penalty", "must be in [-2, 2] (0 turns it off), got " + std::to_string(presence_penalty));
  if (!(frequency_penalty >= -2.0 && frequency_penalty <= 2.0))
    fail("frequency_penalty", "must be in [-2, 2] (0 turns it off), got " + std::to_string(frequency_penalty));
  if (logprobs && (*logprobs < 0 || *logprobs > kMaxLogprobs))
    fail("logprobs", "must be in [0, 20], got " + std::to_string(*logprobs));
  for (const auto& s : stop_sequences)
    if (s.empty()) fail("stop", "a stop sequence is empty (remove it)");
}

torch::Tensor sampling_distribution(const torch::Tensor& logits, std::span<const int64_t> history,
                                    const SamplingParams& params, int64_t prompt_len) {
  auto x = penalized_logits(logits, history, params, prompt_len);  // [V] fp32
  if (params.temperature == 0.0) {
    auto probs = torch::zeros_like(x);
    probs[x.argmax().item<int64_t>()] = 1.0f;
    return probs;
  }
  x = x / params.temperature;
  const int64_t v = x.size(0);
  if (params.top_k > 0 && params.top_k < v) {
    auto kth = std::get<0>(x.topk(params.top_k)).min();
    x = x.masked_fill(x < kth, -std::numeric_limits<float>::infinity());
  }
  auto probs = torch::softmax(x, 0);
  if (params.top_p < 1.0) {
    auto [sorted, order] = probs.sort(0, /*descending=*/true);
    auto before = sorted.cumsum(0) - sorted;  // mass strictly above each token
    auto drop = before >= params.top_p;       // the smallest set reaching top_p is kept (≥ 1 token)
    probs = probs.index_fill(0, order.masked_select(drop), 0.0f);
    probs = probs / probs.sum();
  }
  return probs;
}

SampleResult sample_token(const torch::Tensor& logits, std::span<const int64_t> history, const SamplingParams& params,
                          std::mt19937_64& rng, int64_t prompt_len) {
  SampleResult r;
  if (params.temperature == 0.0) {
    r.token = penalized_logits(logits, history, params, prompt_len).argmax().item<int64_t>();
  } else {
    auto probs = sampling_distribution(logits, history, params, prompt_len).contiguous();
    const float* p = probs.data_ptr<float>();
    const int64_t v = probs.size(0);
    double total = 0.0;
    for (int64_t i = 0; i < v; ++i) total += p[i];
    const double u = std::uniform_real_distribution<double>(0.0, total)(rng);
    double acc = 0.0;
    r.token = -1;
    for (int64_t i = 0; i < v; ++i) {
      if (p[i] <= 0.0f) continue;
      acc += p[i];
      r.token = i;  // the last token with mass, should rounding leave u above the sum
      if (u < acc) break;
    }
    DS_ASSERT(r.token >= 0, "sampling distribution without mass");
  }
  if (params.logprobs) {
    auto lp = torch::log_softmax(logits.to(torch::kFloat), 0);
    TokenLogprob t{r.token, lp[r.token].item<double>(), {}};
    if (*params.logprobs > 0) {
      auto [vals, ids] = lp.topk(std::min<int64_t>(*params.logprobs, lp.size(0)));
      for (int64_t i = 0; i < vals.size(0); ++i) t.top.emplace_back(ids[i].item<int64_t>(), vals[i].item<double>());
    }
    r.logprob = std::move(t);
  }
  return r;
}

}  // namespace ds::inference
