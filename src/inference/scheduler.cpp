#include "inference/scheduler.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace ds::inference {

std::string to_string(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAborted: return "abort";
    case FinishReason::kNone: break;
  }
  return "";
}

void SchedulerConfig::validate() const {
  if (max_ragged_batch_size < 1)
    throw ConfigError("max_ragged_batch_size", "must be >= 1 token per forward, got " + std::to_string(max_ragged_batch_size));
  if (max_ragged_sequence_count < 1)
    throw ConfigError("max_ragged_sequence_count",
                      "must be >= 1 sequence per forward, got " + std::to_string(max_ragged_sequence_count));
}

Scheduler::Scheduler(SchedulerConfig config, KvCache& cache) : config_(config), cache_(cache) { config_.validate(); }

void Scheduler::add(Sequence* seq) {
  seq->state = SequenceState::kWaiting;
  waiting_.push_back(seq);
}

int64_t Scheduler::blocks_needed(const Sequence& seq, int64_t n) const {
  const int64_t bs = cache_.block_size();
  return (seq.num_computed + n + bs - 1) / bs - static_cast<int64_t>(seq.blocks.size());
}

bool Scheduler::grow(Sequence& seq, int64_t n) {
  const int64_t need = blocks_needed(seq, n);
  if (need <= 0) return true;
  auto& alloc = cache_.allocator();
  if (alloc.num_free() < need) return false;
  for (int64_t i = 0; i < need; ++i) seq.blocks.push_back(*alloc.allocate());
  return true;
}

int64_t Scheduler::chunk_size(const Sequence& seq, int64_t budget) const {
  const int64_t pending = seq.num_pending();
  if (pending <= budget) return pending;
  return config_.split_prompts ? budget : 0;
}

void Scheduler::release_blocks(Sequence& seq) {
  for (int32_t b : seq.blocks) cache_.allocator().release(b);
  seq.blocks.clear();
  seq.num_computed = 0;
  seq.num_published = 0;
  seq.last_content = 0;
}

void Scheduler::preempt(Sequence& victim) {
  release_blocks(victim);
  running_.erase(std::find(running_.begin(), running_.end(), &victim));
  victim.state = SequenceState::kWaiting;
  ++victim.num_preemptions;
  ++stats_.preemptions;
  auto at = std::find_if(waiting_.begin(), waiting_.end(), [&](Sequence* s) { return s->arrival > victim.arrival; });
  waiting_.insert(at, &victim);
}

void Scheduler::match_prefix(Sequence& seq) {
  // Cached blocks cover whole prompts' blocks; at least one token is left to compute, since the
  // next token's logits come from running the last one.
  const int64_t bs = cache_.block_size();
  const int64_t limit = static_cast<int64_t>(seq.tokens.size()) - 1;
  auto& alloc = cache_.allocator();
  for (int64_t b = 0; (b + 1) * bs <= limit; ++b) {
    BlockKey key{seq.last_content, {seq.tokens.begin() + b * bs, seq.tokens.begin() + (b + 1) * bs}};
    auto hit = alloc.lookup(key);
    if (!hit) break;
    seq.blocks.push_back(hit->first);
    seq.last_content = hit->second;
    seq.num_published = b + 1;
    seq.num_computed = (b + 1) * bs;
  }
  stats_.prefix_hit_tokens += seq.num_computed;
}

std::vector<ScheduledChunk> Scheduler::schedule() {
  std::vector<ScheduledChunk> plan;
  int64_t budget = config_.max_ragged_batch_size, slots = config_.max_ragged_sequence_count;

  // Running sequences, oldest first: decodes and the rest of partly prefilled prompts.
  for (size_t i = 0; i < running_.size() && budget > 0 && slots > 0; ++i) {
    Sequence* s = running_[i];
    const int64_t n = chunk_size(*s, budget);
    if (n == 0) continue;
    bool preempted_self = false;
    while (!grow(*s, n)) {
      Sequence* victim = running_.back();  // the newest
      auto in_plan = std::find_if(plan.begin(), plan.end(), [&](const ScheduledChunk& c) { return c.seq == victim; });
      if (in_plan != plan.end()) {
        budget += in_plan->n;
        ++slots;
        plan.erase(in_plan);
      }
      preempt(*victim);
      if (victim == s) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;  // s was the newest running sequence: none is left after it
    plan.push_back({s, n});
    budget -= n;
    --slots;
  }

  // New (and preempted) sequences in arrival order, while the budget and free blocks allow.
  while (!waiting_.empty() && budget > 0 && slots > 0) {
    Sequence* s = waiting_.front();
    if (config_.prefix_caching && s->blocks.empty()) match_prefix(*s);
    const int64_t n = chunk_size(*s, budget);
    if (n == 0 || !grow(*s, n)) {
      release_blocks(*s);  // a waiting sequence holds no blocks
      break;
    }
    waiting_.pop_front();
    s->state = SequenceState::kRunning;
    auto at = std::find_if(running_.begin(), running_.end(), [&](Sequence* r) { return r->arrival > s->arrival; });
    running_.insert(at, s);
    plan.push_back({s, n});
    budget -= n;
    --slots;
  }
  return plan;
}

void Scheduler::computed(Sequence& seq, int64_t n) {
  seq.num_computed += n;
  if (!config_.prefix_caching) return;
  const int64_t bs = cache_.block_size();
  auto& alloc = cache_.allocator();
  while ((seq.num_published + 1) * bs <= seq.num_computed) {
    const int64_t b = seq.num_published;
    BlockKey key{seq.last_content, {seq.tokens.begin() + b * bs, seq.tokens.begin() + (b + 1) * bs}};
    seq.last_content = alloc.publish(seq.blocks[static_cast<size_t>(b)], std::move(key));
    ++seq.num_published;
  }
}

void Scheduler::finish(Sequence& seq) {
  release_blocks(seq);
  if (auto it = std::find(running_.begin(), running_.end(), &seq); it != running_.end()) running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), &seq); it != waiting_.end()) waiting_.erase(it);
  seq.state = SequenceState::kFinished;
}

}  // namespace ds::inference
