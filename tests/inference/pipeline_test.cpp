// Pipeline: results come back in prompt order with per-prompt parameters, and a model saved with
// save_pretrained generates the same tokens after Pipeline::from_pretrained; eos_token_id from
// config.json (an id or a list) ends generation.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "inference/pipeline.h"
#include "inference_test_util.h"

namespace {

using namespace ds::inference;
using namespace ds::inference::testing;
namespace fs = std::filesystem;

TEST(Pipeline, ResultsInPromptOrderWithTheirOwnParameters) {
  auto model = tiny_gpt2(8);
  Pipeline pipe(model);
  std::mt19937_64 rng(2);
  auto prompts = random_prompts(rng, {9, 1, 4});
  std::vector<SamplingParams> params = {greedy(3), greedy(7), greedy(5)};
  auto out = pipe.generate(prompts, params);
  ASSERT_EQ(out.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].tokens, naive_generate(*model, prompts[i], params[i], 64));
    EXPECT_EQ(out[i].prompt_tokens, static_cast<int64_t>(prompts[i].size()));
    EXPECT_EQ(out[i].finish, FinishReason::kLength);
  }
}

TEST(Pipeline, FromPretrainedGeneratesAsTheSavedModel) {
  auto model = tiny_llama("llama", 3);
  const fs::path dir = fs::temp_directory_path() / ("ds_inference_" + std::to_string(::getpid()));
  ds::models::save_pretrained(*model, dir.string());
  std::vector<std::vector<int64_t>> prompts = {{5, 6, 7, 8}};
  auto want = Pipeline(model).generate(prompts, greedy(8))[0].tokens;
  auto got = Pipeline::from_pretrained(dir.string()).generate(prompts, greedy(8))[0].tokens;
  fs::remove_all(dir);
  EXPECT_EQ(got, want);
}

TEST(Pipeline, EosTokenIdsFromConfig) {
  EXPECT_EQ(eos_token_ids({{"eos_token_id", 7}}, 10), std::vector<int64_t>{7});
  EXPECT_EQ(eos_token_ids({{"eos_token_id", {7, 8, 50}}}, 10), (std::vector<int64_t>{7, 8}));
  EXPECT_TRUE(eos_token_ids({{"eos_token_id", nullptr}}, 10).empty());
  auto model = tiny_gpt2(5);
  std::vector<std::vector<int64_t>> prompts = {{7, 8, 9}};
  auto full = Pipeline(model).generate(prompts, greedy(10))[0].tokens;
  EngineOptions o;
  o.eos_token_ids = {full[3]};
  auto cut = Pipeline(model, o).generate(prompts, greedy(10))[0];
  EXPECT_EQ(cut.finish, FinishReason::kStop);
  EXPECT_LE(cut.tokens.size(), 3u);
  auto p = greedy(10);
  p.ignore_eos = true;
  EXPECT_EQ(Pipeline(model, o).generate(prompts, p)[0].tokens, full);
}

}  // namespace
