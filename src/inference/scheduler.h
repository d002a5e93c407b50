// ds::inference::Scheduler: continuous batching with Dynamic SplitFuse (DeepSpeed-FastGen). Each
// step it fills one forward with at most max_ragged_batch_size tokens from at most
// max_ragged_sequence_count sequences: first one decode token for every running sequence (oldest
// first), then prompt chunks — the rest of partly prefilled prompts, then new requests in arrival
// order — split to fit the remaining budget (split_prompts) or taken whole. Requests are admitted
// only while free KV blocks cover their chunk; when a running sequence needs a block and none is
// free, the newest running sequence is preempted (its blocks freed, its tokens recomputed later).
// With prefix_caching, full blocks are published by content and a new sequence starts from the
// longest run of cached blocks matching its prompt.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "inference/kv_cache.h"
#include "inference/sequence.h"

namespace ds::inference {

struct SchedulerConfig {
  int64_t max_ragged_batch_size = 768;      // tokens per forward (DeepSpeed-MII's default)
  int64_t max_ragged_sequence_count = 512;  // sequences per forward (DeepSpeed-MII's default)
  bool split_prompts = true;                // Dynamic SplitFuse: prompts in chunks fused with decodes
  bool prefix_caching = false;              // share full prompt blocks between sequences
  void validate() const;                    // ds::ConfigError naming the field
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t n = 0;  // new tokens: tokens[num_computed .. num_computed + n)
};

struct SchedulerStats {
  int64_t preemptions = 0;
  int64_t prefix_hit_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, KvCache& cache);

  const SchedulerConfig& config() const noexcept { return config_; }
  void add(Sequence* seq);  // joins the waiting queue
  // The next forward's chunks (blocks allocated for them); empty when nothing can run.
  std::vector<ScheduledChunk> schedule();
  // After the forward: `n` more tokens of `seq` are cached; publishes newly full blocks.
  void computed(Sequence& seq, int64_t n);
  // Frees a finished or aborted sequence's blocks and forgets it.
  void finish(Sequence& seq);

  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  const SchedulerStats& stats() const noexcept { return stats_; }

 private:
  int64_t blocks_needed(const Sequence& seq, int64_t n) const;
  bool grow(Sequence& seq, int64_t n);  // allocate blocks for n more tokens, or false (none taken)
  void preempt(Sequence& victim);
  void match_prefix(Sequence& seq);
  void release_blocks(Sequence& seq);
  int64_t chunk_size(const Sequence& seq, int64_t budget) const;

  SchedulerConfig config_;
  KvCache& cache_;
  std::deque<Sequence*> waiting_;   // by arrival (preempted sequences go back in order)
  std::vector<Sequence*> running_;  // by arrival
  SchedulerStats stats_;
};

}  // namespace ds::inference
