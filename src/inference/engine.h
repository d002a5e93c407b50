// ds::inference::InferenceEngine: the FastGen-style generation loop. add_request queues a prompt;
// each step() asks the Scheduler for one ragged batch (decodes and prompt chunks of many
// sequences), runs the model's ragged forward over the blocked KV cache once, samples the next
// token of every sequence whose pending tokens all ran, and reports what each request produced.
// One thread drives it (a server runs step() in a loop and feeds add_request/abort from its queue).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "inference/kv_cache.h"
#include "inference/ragged_model.h"
#include "inference/scheduler.h"
#include "inference/sequence.h"
#include "models/causal_lm.h"

namespace ds::comm {
class Communicator;
}

namespace ds::inference {

class TpLeader;

struct EngineOptions {
  SchedulerConfig scheduler;
  int64_t kv_block_size = 16;     // tokens per KV block
  int64_t num_kv_blocks = 0;      // > 0: exactly this many; 0: as many as kv_cache_mib holds, at most
                                  // what max_ragged_sequence_count full-length sequences use
  int64_t kv_cache_mib = 256;
  uint64_t seed = 0;              // seeds of requests that give none are drawn from this
  std::vector<int64_t> eos_token_ids;  // end generation unless a request sets ignore_eos
  // A group of > 1 ranks: tensor-parallel inference over it (tensor_parallel.h). Every rank of the
  // group constructs the engine with the same options and model weights; rank 0 runs it, the others
  // follow(). Not owned; must outlive the engine.
  comm::Communicator* tensor_parallel = nullptr;
};

// What one request produced in one step. Tokens are handed out once, in order; while a request has
// stop sequences, its last (longest stop sequence − 1) tokens are held back until they cannot be
// the start of a stop sequence, so streamed text never has to be taken back.
struct RequestOutput {
  int64_t id = 0;
  std::vector<int64_t> new_tokens;
  std::vector<TokenLogprob> new_logprobs;  // with params.logprobs
  bool finished = false;
  FinishReason finish = FinishReason::kNone;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;  // total so far
};

struct EngineStats {
  int64_t steps = 0;
  int64_t forward_tokens = 0;   // tokens run through the model (prompt chunks, decodes, recompute)
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;
  int64_t waiting = 0;
  int64_t running = 0;
};

class InferenceEngine {
 public:
  // With options.tensor_parallel: collective over the group (the model is cut into this rank's share).
  InferenceEngine(std::shared_ptr<models::CausalLM> model, EngineOptions options);
  ~InferenceEngine();

  // Tensor parallelism: rank 0 of the group leads (add_request, step; the others' calls of those are
  // errors). Each follow() on the other ranks runs the leader's forwards until the leader calls
  // release_followers() once; it returns the forwards run. An idle leader calls keep_alive() now and
  // then so its followers' waits stay within the communicator's watchdog. No-ops without a group.
  bool is_follower() const noexcept { return follower_; }
  int64_t follow();
  void release_followers();
  void keep_alive();

  // Queues a request; returns its id. ds::ConfigError for bad parameters, ds::Error for a prompt
  // that is empty, has ids outside the vocabulary, leaves no room to generate within the model's
  // positions, or could never fit the KV cache (each message names the limit and the fix).
  int64_t add_request(std::vector<int64_t> prompt, SamplingParams params);
  // Stops a request now; its blocks are freed and the next step() reports it finished ("abort").
  void abort(int64_t id);

  // One forward (or none, when nothing is queued) → what each request produced.
  std::vector<RequestOutput> step();
  bool has_unfinished() const { return !sequences_.empty(); }

  EngineStats stats() const;
  const KvCache& cache() const { return *cache_; }
  const RaggedModel& model() const { return *model_; }
  const EngineOptions& options() const { return options_; }

 private:
  void sample_next(Sequence& seq, const torch::Tensor& logits);
  bool check_stop(Sequence& seq);
  RequestOutput take_output(Sequence& seq);

  EngineOptions options_;
  std::unique_ptr<RaggedModel> model_;
  TpLeader* leader_ = nullptr;  // model_ itself, on rank 0 of a tensor-parallel group
  bool follower_ = false;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Scheduler> scheduler_;
  std::map<int64_t, std::unique_ptr<Sequence>> sequences_;
  std::vector<int64_t> aborted_;
  std::mt19937_64 seed_rng_;
  int64_t next_id_ = 0;
  EngineStats counters_;
};

}  // namespace ds::inference
