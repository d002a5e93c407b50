// ds::inference::Sequence: one request's state inside the engine — its tokens (prompt, then
// output), how many of them have keys and values in the KV cache, the blocks holding them (its
// block table), its sampling parameters and random stream, and why it finished.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "inference/sampling.h"

namespace ds::inference {

enum class FinishReason { kNone, kStop, kLength, kAborted };
// "stop", "length", "abort" (OpenAI's finish_reason words); "" while running.
std::string to_string(FinishReason r);

enum class SequenceState { kWaiting, kRunning, kFinished };

struct Sequence {
  int64_t id = 0;
  int64_t arrival = 0;  // admission order: lower is older; preemption takes the highest
  std::vector<int64_t> tokens;  // prompt then output
  int64_t prompt_len = 0;
  int64_t num_computed = 0;     // tokens[0 .. num_computed) have keys/values in the cache
  std::vector<int32_t> blocks;  // block table: blocks[i] holds positions [i·bs, (i+1)·bs)
  int64_t max_length = 0;       // prompt_len + max_tokens, capped at the model's positions

  // Prefix caching: the first num_published blocks are findable; last_content is the content id of
  // the last one (the parent of the next block's key).
  int64_t num_published = 0;
  uint64_t last_content = 0;

  SamplingParams params;
  std::mt19937_64 rng;
  std::vector<TokenLogprob> logprobs;  // one per output token when params.logprobs
  SequenceState state = SequenceState::kWaiting;
  FinishReason finish = FinishReason::kNone;
  int64_t num_emitted = 0;       // output tokens already handed out by step()
  int64_t num_preemptions = 0;

  int64_t num_output() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }
  // Tokens still to run through the model before the next token can be sampled.
  int64_t num_pending() const { return static_cast<int64_t>(tokens.size()) - num_computed; }
};

}  // namespace ds::inference
