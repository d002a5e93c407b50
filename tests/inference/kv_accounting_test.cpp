// KV block accounting never leaks: 1,000 random requests (random prompt lengths, shared prefixes,
// sampling settings, stop tokens, aborts) through a pool small enough to force preemptions, with
// prefix caching on; afterwards every request finished exactly once and every block is free.
#include <gtest/gtest.h>

#include <set>

#include "inference_test_util.h"

namespace {

using namespace ds::inference;
using namespace ds::inference::testing;

TEST(KvAccounting, ThousandRandomRequestsLeaveEveryBlockFree) {
  auto model = tiny_gpt2(7, /*embd=*/16, /*layers=*/1);
  EngineOptions o;
  o.kv_block_size = 4;
  o.num_kv_blocks = 24;
  o.scheduler.max_ragged_batch_size = 32;
  o.scheduler.max_ragged_sequence_count = 12;
  o.scheduler.prefix_caching = true;
  InferenceEngine engine(model, o);

  std::mt19937_64 rng(11);
  auto shared = random_prompts(rng, {12})[0];
  std::set<int64_t> open, finished;
  int64_t added = 0;
  int64_t max_used = 0;
  while (added < 1000 || engine.has_unfinished()) {
    for (int k = 0; k < 3 && added < 1000; ++k, ++added) {
      auto prompt = random_prompts(rng, {1 + static_cast<int64_t>(rng() % 14)})[0];
      if (rng() % 3 == 0) prompt.insert(prompt.begin(), shared.begin(), shared.begin() + 4 + rng() % 8);
      SamplingParams p;
      p.max_tokens = 1 + static_cast<int64_t>(rng() % 6);
      p.temperature = (rng() % 2) ? 0.0 : 0.8;
      p.top_k = static_cast<int64_t>(rng() % 5);
      p.seed = rng();
      if (rng() % 4 == 0) p.stop_token_ids = {static_cast<int64_t>(rng() % 256)};
      open.insert(engine.add_request(prompt, p));
    }
    if (rng() % 10 == 0 && !open.empty()) engine.abort(*open.begin());
    for (const auto& out : engine.step()) {
      if (!out.finished) continue;
      EXPECT_TRUE(finished.insert(out.id).second) << "request " << out.id << " finished twice";
      open.erase(out.id);
    }
    max_used = std::max(max_used, engine.cache().allocator().num_used());
  }
  EXPECT_EQ(finished.size(), 1000u);
  EXPECT_TRUE(open.empty());
  const auto& alloc = engine.cache().allocator();
  EXPECT_EQ(alloc.num_used(), 0);
  EXPECT_EQ(alloc.num_free(), alloc.num_blocks());
  for (int32_t b = 0; b < alloc.num_blocks(); ++b) EXPECT_EQ(alloc.ref_count(b), 0) << "block " << b;
  EXPECT_EQ(max_used, alloc.num_blocks()) << "the pool was never full: the test did not exercise preemption";
  EXPECT_GT(engine.stats().preemptions, 0);
  EXPECT_GT(engine.stats().prefix_hit_tokens, 0);
}

}  // namespace
