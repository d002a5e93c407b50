// Scheduler on its own (no model): the token budget and sequence count per forward, decodes before
// prompt chunks, prompts split to the budget (Dynamic SplitFuse) or taken whole, admission only
// while free blocks cover the chunk, and preemption of the newest running sequence.
#include <gtest/gtest.h>

#include <memory>

#include "inference/scheduler.h"

namespace {

using namespace ds::inference;

struct Fixture {
  KvCache cache;
  Scheduler sched;
  std::vector<std::unique_ptr<Sequence>> seqs;

  Fixture(SchedulerConfig c, int64_t blocks)
      : cache({.num_layers = 1, .kv_heads = 1, .head_dim = 2, .block_size = 4, .num_blocks = blocks}, torch::kFloat,
              torch::kCPU),
        sched(c, cache) {}

  Sequence& add(int64_t prompt_len) {
    auto s = std::make_unique<Sequence>();
    s->id = s->arrival = static_cast<int64_t>(seqs.size());
    s->tokens.assign(static_cast<size_t>(prompt_len), 1);
    s->prompt_len = prompt_len;
    sched.add(s.get());
    seqs.push_back(std::move(s));
    return *seqs.back();
  }
  // Runs the plan as the engine would: marks chunks computed; a finished prompt "samples" a token.
  std::vector<ScheduledChunk> step() {
    auto plan = sched.schedule();
    for (auto& c : plan) {
      sched.computed(*c.seq, c.n);
      if (c.seq->num_pending() == 0) c.seq->tokens.push_back(2);
    }
    return plan;
  }
};

SchedulerConfig config(int64_t budget, int64_t count, bool split = true) {
  SchedulerConfig c;
  c.max_ragged_batch_size = budget;
  c.max_ragged_sequence_count = count;
  c.split_prompts = split;
  return c;
}

int64_t tokens(const std::vector<ScheduledChunk>& plan) {
  int64_t n = 0;
  for (const auto& c : plan) n += c.n;
  return n;
}

TEST(Scheduler, SplitsPromptsToTheBudgetAndFusesThemWithDecodes) {
  Fixture f(config(8, 4), 64);
  auto& a = f.add(5);
  auto& b = f.add(13);
  auto p1 = f.step();  // a whole (5), b's first 3
  ASSERT_EQ(p1.size(), 2u);
  EXPECT_EQ(p1[0].seq, &a);
  EXPECT_EQ(p1[0].n, 5);
  EXPECT_EQ(p1[1].n, 3);
  auto p2 = f.step();  // a's decode first, then 7 more of b
  ASSERT_EQ(p2.size(), 2u);
  EXPECT_EQ(p2[0].seq, &a);
  EXPECT_EQ(p2[0].n, 1);
  EXPECT_EQ(p2[1].seq, &b);
  EXPECT_EQ(p2[1].n, 7);
  auto p3 = f.step();  // a decode, b's last 3 tokens
  EXPECT_EQ(tokens(p3), 4);
  EXPECT_EQ(b.num_pending(), 1);  // b sampled: now decoding
  for (int i = 0; i < 5; ++i) EXPECT_LE(tokens(f.step()), 8);
}

TEST(Scheduler, WithoutSplittingAPromptWaitsForRoomInTheBudget) {
  Fixture f(config(8, 4, false), 64);
  f.add(6);
  f.add(5);  // 6 + 5 > 8: waits one step
  auto p1 = f.step();
  ASSERT_EQ(p1.size(), 1u);
  auto p2 = f.step();
  ASSERT_EQ(p2.size(), 2u);  // the decode and the whole second prompt
  EXPECT_EQ(p2[1].n, 5);
}

TEST(Scheduler, SequenceCountLimitsTheBatch) {
  Fixture f(config(100, 2), 64);
  for (int i = 0; i < 5; ++i) f.add(2);
  EXPECT_EQ(f.step().size(), 2u);
  EXPECT_EQ(f.sched.num_waiting(), 3);
}

TEST(Scheduler, AdmitsOnlyWhatFreeBlocksCover) {
  Fixture f(config(100, 8), 4);
  f.add(9);  // 3 blocks
  f.add(6);  // 2 blocks: does not fit beside the first
  EXPECT_EQ(f.step().size(), 1u);
  EXPECT_EQ(f.sched.num_waiting(), 1);
  EXPECT_EQ(f.cache.allocator().num_used(), 3);
}

TEST(Scheduler, PreemptsTheNewestWhenARunningSequenceNeedsABlock) {
  Fixture f(config(100, 8), 4);
  auto& old = f.add(8);    // 2 blocks, full after its prompt
  auto& young = f.add(7);  // 2 blocks
  f.step();                // both prefilled; all 4 blocks used
  EXPECT_EQ(f.cache.allocator().num_free(), 0);
  auto plan = f.step();    // old's decode needs a 3rd block: young is preempted
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].seq, &old);
  EXPECT_EQ(young.state, SequenceState::kWaiting);
  EXPECT_EQ(young.num_computed, 0);
  EXPECT_TRUE(young.blocks.empty());
  EXPECT_EQ(young.num_preemptions, 1);
  EXPECT_EQ(f.sched.stats().preemptions, 1);
  f.sched.finish(old);
  auto again = f.step();   // young recomputes prompt + its sampled token
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].n, 8);
  f.sched.finish(young);
  EXPECT_EQ(f.cache.allocator().num_used(), 0);
}

}  // namespace
