// Sampling: the processed distribution (top-k and top-p restrict the support, repetition penalty
// divides positive and multiplies negative logits of seen tokens; frequency and presence penalties
// subtract per generated occurrence and once per generated token), seeded reproducibility through
// the engine whatever else shares the batch, stop tokens and stop sequences, max_tokens, logprobs
// against the model's own log-softmax (before temperature and penalties), and parameter errors naming the field.
#include <gtest/gtest.h>

#include <cmath>

#include "inference/pipeline.h"
#include "inference_test_util.h"
#include "util/error.h"

namespace {

using namespace ds::inference;
using namespace ds::inference::testing;

torch::Tensor logits_of(std::vector<float> v) { return torch::tensor(v, torch::kFloat); }

int64_t support(const torch::Tensor& probs) { return (probs > 0).sum().item<int64_t>(); }

TEST(Sampling, TopKKeepsTheKMostLikely) {
  SamplingParams p;
  p.top_k = 3;
  auto probs = sampling_distribution(logits_of({0.1f, 3.0f, 2.0f, -1.0f, 2.5f, 0.0f}), {}, p);
  EXPECT_EQ(support(probs), 3);
  EXPECT_GT(probs[1].item<float>(), 0);
  EXPECT_GT(probs[2].item<float>(), 0);
  EXPECT_GT(probs[4].item<float>(), 0);
  EXPECT_NEAR(probs.sum().item<float>(), 1.0, 1e-6);
}

TEST(Sampling, TopPKeepsTheSmallestSetReachingP) {
  // softmax of log([0.5, 0.3, 0.15, 0.05]) = those probabilities.
  auto logits = torch::log(torch::tensor({0.5f, 0.3f, 0.15f, 0.05f}));
  SamplingParams p;
  p.top_p = 0.75;  // 0.5 < 0.75 ≤ 0.8: tokens 0 and 1
  auto probs = sampling_distribution(logits, {}, p);
  EXPECT_EQ(support(probs), 2);
  EXPECT_NEAR(probs[0].item<float>(), 0.5 / 0.8, 1e-5);
  p.top_p = 0.4;  // the top token alone
  EXPECT_EQ(support(sampling_distribution(logits, {}, p)), 1);
  p.top_p = 1.0;
  EXPECT_EQ(support(sampling_distribution(logits, {}, p)), 4);
}

TEST(Sampling, DrawsStayInsideTheSupport) {
  SamplingParams p;
  p.top_k = 2;
  std::mt19937_64 rng(3);
  auto logits = logits_of({1.0f, 0.9f, 0.8f, 0.7f});
  std::set<int64_t> seen;
  for (int i = 0; i < 200; ++i) seen.insert(sample_token(logits, {}, p, rng).token);
  EXPECT_EQ(seen, (std::set<int64_t>{0, 1}));
}

TEST(Sampling, RepetitionPenaltyChangesTheGreedyChoice) {
  SamplingParams p;
  p.temperature = 0.0;
  std::mt19937_64 rng(0);
  auto logits = logits_of({2.0f, 1.9f, -0.5f, -0.45f});
  std::vector<int64_t> history = {0, 3};
  EXPECT_EQ(sample_token(logits, history, p, rng).token, 0);
  p.repetition_penalty = 1.2;  // 2.0 / 1.2 = 1.67 < 1.9
  EXPECT_EQ(sample_token(logits, history, p, rng).token, 1);
  SamplingParams doubled;
  doubled.repetition_penalty = 2.0;
  auto probs = sampling_distribution(logits, history, doubled);
  auto expected = torch::softmax(logits_of({1.0f, 1.9f, -0.5f, -0.9f}), 0);  // seen: 2.0/2, -0.45·2
  EXPECT_TRUE(torch::allclose(probs, expected, 1e-6, 1e-6));
}

// Greedy output of a tiny model that loops, with and without `penalized`'s penalties: fewer repeated
// tokens with them; the engine and the naive loop agree on the penalized output (prompt excluded).
void expect_fewer_repeats(const SamplingParams& penalized) {
  auto model = tiny_gpt2(3);
  Pipeline pipe(model);
  std::vector<std::vector<int64_t>> prompts = {{10, 20, 30}};
  auto repeats = [](const std::vector<int64_t>& t) {
    return static_cast<int64_t>(t.size()) - static_cast<int64_t>(std::set<int64_t>(t.begin(), t.end()).size());
  };
  auto plain = pipe.generate(prompts, greedy(penalized.max_tokens))[0].tokens;
  auto got = pipe.generate(prompts, penalized)[0].tokens;
  EXPECT_GT(repeats(plain), 0) << "the tiny model should loop without a penalty";
  EXPECT_LT(repeats(got), repeats(plain));
  EXPECT_EQ(naive_generate(*model, prompts[0], penalized, 64), got);
}

TEST(Sampling, RepetitionPenaltyReducesRepeatsOfAModel) {
  auto p = greedy(40);
  p.repetition_penalty = 10.0;
  expect_fewer_repeats(p);
}

TEST(Sampling, FrequencyAndPresencePenaltiesFollowOpenAIsFormula) {
  // history: prompt {0, 3} (not counted), output {1, 1, 2}: c = [0, 2, 1, 0].
  const auto logits = logits_of({2.0f, 1.9f, 1.0f, -0.5f});
  const std::vector<int64_t> history = {0, 3, 1, 1, 2};
  SamplingParams p;
  p.frequency_penalty = 0.5;
  p.presence_penalty = 0.25;
  auto got = penalized_logits(logits, history, p, /*prompt_len=*/2);
  // logit[j] -= c[j]·0.5 + (c[j] > 0)·0.25
  EXPECT_TRUE(torch::allclose(got, logits_of({2.0f, 1.9f - 1.0f - 0.25f, 1.0f - 0.5f - 0.25f, -0.5f}), 1e-6, 1e-6)) << got;
  // Negative values reward repeats; the prompt never counts.
  p.frequency_penalty = -1.0;
  p.presence_penalty = 0.0;
  EXPECT_TRUE(torch::allclose(penalized_logits(logits, history, p, 5), logits, 0, 0));
  EXPECT_NEAR(penalized_logits(logits, history, p, 2)[1].item<float>(), 1.9f + 2.0f, 1e-6);
  // They change the greedy choice and the distribution sampled from.
  std::mt19937_64 rng(0);
  SamplingParams greedy_p;
  greedy_p.temperature = 0.0;
  const std::vector<int64_t> repeated = {0, 0, 0};  // token 0 generated three times
  EXPECT_EQ(sample_token(logits, repeated, greedy_p, rng, 0).token, 0);
  greedy_p.presence_penalty = 0.2;  // 2.0 - 0.2 = 1.8 < 1.9
  EXPECT_EQ(sample_token(logits, repeated, greedy_p, rng, 0).token, 1);
  EXPECT_EQ(sample_token(logits, repeated, greedy_p, rng, 3).token, 0) << "the prompt counted";
  SamplingParams sampled;
  sampled.frequency_penalty = 0.1;  // 3 · 0.1 off token 0
  auto probs = sampling_distribution(logits, repeated, sampled, 0);
  EXPECT_TRUE(torch::allclose(probs, torch::softmax(logits_of({1.7f, 1.9f, 1.0f, -0.5f}), 0), 1e-6, 1e-6));
}

TEST(Sampling, FrequencyPenaltyReducesRepeatsOfAModel) {
  auto p = greedy(40);
  p.frequency_penalty = 2.0;
  p.presence_penalty = 2.0;
  expect_fewer_repeats(p);
}

TEST(Sampling, SeededRequestsReproduceWhateverShareTheBatch) {
  auto model = tiny_gpt2(4);
  SamplingParams p;
  p.temperature = 1.0;
  p.top_p = 0.9;
  p.max_tokens = 20;
  p.seed = 1234;
  Pipeline pipe(model);
  std::vector<int64_t> prompt = {1, 2, 3, 4, 5};
  auto alone = pipe.generate({prompt}, p)[0].tokens;
  std::mt19937_64 rng(9);
  auto rest = random_prompts(rng, {3, 17, 8});
  const std::vector<std::vector<int64_t>> others = {rest[0], prompt, rest[1], rest[2]};
  auto batched = pipe.generate(others, p)[1].tokens;
  EXPECT_EQ(alone, batched);
  EXPECT_EQ(alone.size(), 20u);
  p.seed = 99;
  EXPECT_NE(pipe.generate({prompt}, p)[0].tokens, alone);
  // The engine matches the naive loop's draws for the same seed.
  p.seed = 1234;
  EXPECT_EQ(naive_generate(*model, prompt, p, 64), alone);
}

TEST(Sampling, StopTokensAndStopSequencesEndGeneration) {
  auto model = tiny_gpt2(5);
  Pipeline pipe(model);
  std::vector<int64_t> prompt = {7, 8, 9};
  auto full = pipe.generate({prompt}, greedy(16))[0];
  ASSERT_EQ(full.tokens.size(), 16u);
  EXPECT_EQ(full.finish, FinishReason::kLength);
  const auto first_at = [&](int64_t tok) { return std::find(full.tokens.begin(), full.tokens.end(), tok) - full.tokens.begin(); };

  auto p = greedy(16);
  p.stop_token_ids = {full.tokens[5]};
  auto stopped = pipe.generate({prompt}, p)[0];
  EXPECT_EQ(stopped.finish, FinishReason::kStop);
  EXPECT_EQ(stopped.tokens, std::vector<int64_t>(full.tokens.begin(), full.tokens.begin() + first_at(full.tokens[5])));

  p = greedy(16);
  p.stop_sequences = {{full.tokens[6], full.tokens[7], full.tokens[8]}};
  p.logprobs = 0;
  auto cut = pipe.generate({prompt}, p)[0];
  EXPECT_EQ(cut.finish, FinishReason::kStop);
  EXPECT_LE(cut.tokens.size(), 6u);
  EXPECT_EQ(cut.logprobs.size(), cut.tokens.size());
  EXPECT_TRUE(std::equal(cut.tokens.begin(), cut.tokens.end(), full.tokens.begin()));
}

TEST(Sampling, LogprobsAreTheModelsLogSoftmax) {
  auto model = tiny_gpt2(6);
  Pipeline pipe(model);
  std::vector<int64_t> prompt = {3, 1, 4, 1, 5};
  auto p = greedy(4);
  p.logprobs = 3;
  auto c = pipe.generate({prompt}, p)[0];
  ASSERT_EQ(c.logprobs.size(), 4u);
  std::vector<int64_t> seq = prompt;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    auto lp = torch::log_softmax(model->forward(torch::tensor(seq).unsqueeze(0))[0][-1], 0);
    EXPECT_EQ(c.logprobs[i].token, c.tokens[i]);
    EXPECT_NEAR(c.logprobs[i].logprob, lp[c.tokens[i]].item<double>(), 1e-4);
    ASSERT_EQ(c.logprobs[i].top.size(), 3u);
    EXPECT_EQ(c.logprobs[i].top[0].first, c.tokens[i]);  // greedy picks the most likely
    EXPECT_GE(c.logprobs[i].top[0].second, c.logprobs[i].top[1].second);
    seq.push_back(c.tokens[i]);
  }
}

// vLLM's default and OpenAI's: the logprobs are the model's, before temperature and penalties.
TEST(Sampling, LogprobsIgnoreTemperatureAndPenalties) {
  const auto logits = logits_of({2.0f, 1.9f, 1.0f, -0.5f});
  const auto raw = torch::log_softmax(logits, 0);
  SamplingParams p;
  p.temperature = 0.3;
  p.top_k = 2;
  p.repetition_penalty = 1.5;
  p.frequency_penalty = 1.0;
  p.presence_penalty = 1.0;
  p.logprobs = 4;
  std::mt19937_64 rng(5);
  const std::vector<int64_t> history = {0, 1, 1};
  for (int i = 0; i < 20; ++i) {
    const auto r = sample_token(logits, history, p, rng, 1);
    ASSERT_TRUE(r.logprob.has_value());
    EXPECT_EQ(r.logprob->token, r.token);
    EXPECT_NEAR(r.logprob->logprob, raw[r.token].item<double>(), 1e-6);
    ASSERT_EQ(r.logprob->top.size(), 4u);
    for (int64_t j = 0; j < 4; ++j) {  // the raw order: 0, 1, 2, 3
      EXPECT_EQ(r.logprob->top[static_cast<size_t>(j)].first, j);
      EXPECT_NEAR(r.logprob->top[static_cast<size_t>(j)].second, raw[j].item<double>(), 1e-6);
    }
  }
}

TEST(Sampling, BadParametersAndRequestsNameTheCause) {
  auto model = tiny_gpt2(0);
  EngineOptions o;
  o.num_kv_blocks = 4;
  o.kv_block_size = 4;
  InferenceEngine engine(model, o);
  auto field_of = [&](auto set) {
    SamplingParams p;
    set(p);
    try {
      engine.add_request({1, 2}, p);
    } catch (const ds::ConfigError& e) {
      return e.path();
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(field_of([](SamplingParams& p) { p.max_tokens = 0; }), "max_tokens");
  EXPECT_EQ(field_of([](SamplingParams& p) { p.temperature = -1; }), "temperature");
  EXPECT_EQ(field_of([](SamplingParams& p) { p.top_k = -2; }), "top_k");
  EXPECT_EQ(field_of([](SamplingParams& p) { p.top_p = 0.0; }), "top_p");
  EXPECT_EQ(field_of([](SamplingParams& p) { p.repetition_penalty = 0.0; }), "repetition_penalty");
  EXPECT_EQ(field_of([](SamplingParams& p) { p.logprobs = 21; }), "logprobs");
  EXPECT_EQ(field_of([](SamplingParams& p) { p.presence_penalty = 2.5; }), "presence_penalty");
  EXPECT_EQ(field_of([](SamplingParams& p) { p.frequency_penalty = -2.1; }), "frequency_penalty");
  EXPECT_THROW(engine.add_request(std::vector<int64_t>(), SamplingParams()), ds::Error);
  EXPECT_THROW(engine.add_request({300}, {}), ds::Error);
  EXPECT_THROW(engine.add_request(std::vector<int64_t>(64, 1), {}), ds::Error);  // no room to generate
  try {
    SamplingParams p;
    p.max_tokens = 30;
    engine.add_request({1, 2}, p);  // 32 tokens need 8 blocks of 4
    ADD_FAILURE() << "a request larger than the KV cache was accepted";
  } catch (const ds::Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_kv_blocks"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(engine.has_unfinished());
}

}  // namespace
