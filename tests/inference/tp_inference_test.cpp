// Tensor-parallel inference (src/inference/tensor_parallel.h) across real MPI ranks: a Pipeline
// whose model AutoTP cut over a group of ranks generates what one process generates with the whole
// model — the same greedy tokens and logprobs within fp32 rounding — for GPT-2, the Llama family
// (GQA: the kv heads split too) and OPT, with SplitFuse chunks, joins and preemption; every rank
// gets the completions; each rank's KV cache holds its heads only; rank 0's errors reach everyone.
// Runs in distributed_tests: at world 1 the group is one rank (the plain path); at 2 the world; at 4
// the world where the heads divide by 4, else two groups of 2 side by side.
#include <gtest/gtest.h>

#include <random>

#include "comm/comm.h"
#include "inference/pipeline.h"
#include "inference_test_util.h"
#include "util/error.h"

namespace {

using namespace ds::inference;
using namespace ds::inference::testing;

std::shared_ptr<ds::models::CausalLM> tp_test_model(const std::string& name) {
  if (name == "gpt2") return tiny_gpt2();
  return name.starts_with("opt") ? tiny_opt(name) : tiny_llama(name);
}

// The tensor-parallel group for a model with `kv_heads`: the whole world when they divide by it,
// else consecutive pairs.
std::unique_ptr<ds::comm::Communicator> tp_group(ds::comm::Communicator& world, int64_t kv_heads) {
  const int size = kv_heads % world.size() == 0 ? world.size() : 2;
  return world.split(world.rank() / size, world.rank(), "tp_inference_test.group");
}

EngineOptions tp_engine_options(int64_t budget, int64_t blocks) {
  EngineOptions o;
  o.scheduler.max_ragged_batch_size = budget;  // small: prompts split into chunks fused with decodes
  o.kv_block_size = 4;
  o.num_kv_blocks = blocks;
  return o;
}

SamplingParams greedy_with_logprobs(int64_t max_tokens) {
  SamplingParams p = greedy(max_tokens);
  p.logprobs = 3;
  return p;
}

void expect_same_completions(const std::vector<Completion>& got, const std::vector<Completion>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "prompt " << i;
    EXPECT_EQ(got[i].finish, want[i].finish) << "prompt " << i;
    ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size()) << "prompt " << i;
    for (size_t t = 0; t < got[i].logprobs.size(); ++t) {
      EXPECT_NEAR(got[i].logprobs[t].logprob, want[i].logprobs[t].logprob, 1e-4) << "prompt " << i << " token " << t;
      ASSERT_EQ(got[i].logprobs[t].top.size(), want[i].logprobs[t].top.size());
      for (size_t k = 0; k < got[i].logprobs[t].top.size(); ++k)
        EXPECT_NEAR(got[i].logprobs[t].top[k].second, want[i].logprobs[t].top[k].second, 1e-4);
    }
  }
}

class TpInference : public ::testing::TestWithParam<std::string> {};

// Two generate calls on one Pipeline (the followers follow each), the second with a pool so small
// that sequences are preempted and recomputed.
TEST_P(TpInference, GreedyEqualsOneProcessOnEveryRank) {
  auto world = ds::comm::make_communicator();
  auto probe = tp_test_model(GetParam());
  auto tp = tp_group(*world, make_ragged_model(probe)->cache_shape().kv_heads);
  std::mt19937_64 rng(7);
  const auto prompts = random_prompts(rng, {1, 3, 7, 12, 20, 25, 33, 5});
  for (int64_t blocks : {64, 14}) {
    Pipeline one(tp_test_model(GetParam()), tp_engine_options(16, blocks));
    const auto want = one.generate(prompts, greedy_with_logprobs(12));
    EngineOptions o = tp_engine_options(16, blocks);
    o.tensor_parallel = tp.get();
    Pipeline split(tp_test_model(GetParam()), o);
    const auto got = split.generate(prompts, greedy_with_logprobs(12));
    expect_same_completions(got, want);
    if (blocks == 14 && tp->rank() == 0) {
      EXPECT_GT(split.engine().stats().preemptions, 0) << "the small pool was meant to force preemption";
    }
    const auto again = split.generate({prompts[2], prompts[6]}, greedy_with_logprobs(12));
    expect_same_completions(again, {want[2], want[6]});
    EXPECT_EQ(split.engine().cache().allocator().num_used(), 0) << "KV blocks leaked";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TpInference, ::testing::Values("gpt2", "llama", "qwen2", "opt", "opt_post_ln"));

// Each rank caches its own heads (kv heads / tp) in as many blocks as one process would, and keeps a
// slice of every projection.
TEST(TpInferenceShards, CacheAndProjectionsHoldThisRanksHeads) {
  auto world = ds::comm::make_communicator();
  auto tp = tp_group(*world, 2);  // tiny llama: 4 heads over 2 kv heads
  EngineOptions o = tp_engine_options(32, 40);
  InferenceEngine whole(tiny_llama(), o);
  o.tensor_parallel = tp.get();
  auto model = tiny_llama();
  InferenceEngine split(model, o);
  EXPECT_EQ(split.cache().shape().kv_heads, 2 / tp->size());
  EXPECT_EQ(split.cache().shape().num_blocks, whole.cache().shape().num_blocks);
  EXPECT_EQ(split.cache().bytes() * tp->size(), whole.cache().bytes());
  for (const auto& p : model->named_parameters())
    if (p.key().ends_with("q_proj.weight")) {
      EXPECT_EQ(p.value().size(0), 32 / tp->size()) << p.key();
    }
  EXPECT_EQ(split.is_follower(), tp->rank() != 0);
}

// A prompt with a token outside the vocabulary: rank 0's engine refuses it, and every rank throws
// its message (none is left waiting); the pipeline serves the next call.
TEST(TpInferenceShards, RankZerosErrorReachesEveryRank) {
  auto world = ds::comm::make_communicator();
  auto tp = tp_group(*world, 2);
  EngineOptions o = tp_engine_options(32, 40);
  o.tensor_parallel = tp.get();
  Pipeline pipe(tiny_gpt2(), o);
  try {
    pipe.generate({{1, 2, 3}, {999}}, greedy(4));
    ADD_FAILURE() << "a token outside the vocabulary was accepted";
  } catch (const ::ds::Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside [0, vocab_size = 256)"), std::string::npos) << e.what();
  }
  Pipeline one(tiny_gpt2(), tp_engine_options(32, 40));
  expect_same_completions(pipe.generate({{1, 2, 3}}, greedy(4)), one.generate({{1, 2, 3}}, greedy(4)));
}

// generate_text across the group: the same text, cut at the same stop string, as one process.
TEST(TpInferenceShards, TextWithAStopStringEqualsOneProcess) {
  auto world = ds::comm::make_communicator();
  auto tp = tp_group(*world, 2);
  Pipeline one(tiny_gpt2(), tp_engine_options(32, 40));
  const auto whole = one.generate_text({"Hello", "ab"}, greedy(16));
  ASSERT_GE(whole[0].text.size(), 6u);
  const std::string stop = whole[0].text.substr(3, 2);
  const auto want = one.generate_text({"Hello", "ab"}, greedy(16), {stop});
  EngineOptions o = tp_engine_options(32, 40);
  o.tensor_parallel = tp.get();
  Pipeline split(tiny_gpt2(), o);
  const auto got = split.generate_text({"Hello", "ab"}, greedy(16), {stop});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].text, want[i].text) << i;
    EXPECT_EQ(got[i].tokens, want[i].tokens) << i;
    EXPECT_EQ(got[i].finish, want[i].finish) << i;
  }
  EXPECT_EQ(got[0].finish, FinishReason::kStop);
}

// Heads that do not divide by the group: ConfigError naming tensor_parallel (3 heads over 2 ranks).
TEST(TpInferenceShards, RefusesHeadsThatDoNotDivide) {
  auto world = ds::comm::make_communicator();
  if (world->size() == 1) GTEST_SKIP() << "needs a group of 2 (mpirun -np 2 or 4)";
  auto tp = tp_group(*world, 2);
  torch::manual_seed(0);
  auto model = std::make_shared<ds::models::GPT2Impl>(
      ds::models::GPT2Config{.vocab_size = 256, .n_positions = 64, .n_embd = 48, .n_layer = 1, .n_head = 3});
  EngineOptions o = tp_engine_options(32, 40);
  o.tensor_parallel = tp.get();
  try {
    InferenceEngine engine(model, o);
    ADD_FAILURE() << "3 heads were cut over 2 ranks";
  } catch (const ::ds::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor_parallel"), std::string::npos) << e.what();
  }
}

}  // namespace
