#include "inference/engine.h"

#include <algorithm>
#include <string>

#include "comm/communicator.h"
#include "inference/ragged_batch.h"
#include "inference/tensor_parallel.h"
#include "util/error.h"

namespace ds::inference {
namespace {

KvCacheShape cache_shape_for(const RaggedModel& model, const EngineOptions& o) {
  KvCacheShape shape = model.cache_shape();
  shape.block_size = o.kv_block_size;
  if (o.kv_block_size <= 0) throw ConfigError("kv_block_size", "must be > 0, got " + std::to_string(o.kv_block_size));
  if (o.num_kv_blocks > 0) {
    shape.num_blocks = o.num_kv_blocks;
  } else {
    if (o.kv_cache_mib <= 0)
      throw ConfigError("kv_cache_mib", "must be > 0 when num_kv_blocks is 0, got " + std::to_string(o.kv_cache_mib));
    shape.num_blocks = (o.kv_cache_mib << 20) / shape.block_bytes(model.dtype());
    // No more blocks than the batch could ever hold: every sequence at the model's full length.
    const int64_t per_seq = (model.max_positions() + o.kv_block_size - 1) / o.kv_block_size;
    shape.num_blocks = std::min(shape.num_blocks, per_seq * o.scheduler.max_ragged_sequence_count);
    if (shape.num_blocks < 1)
      throw ConfigError("kv_cache_mib", std::to_string(o.kv_cache_mib) + " MiB holds no block of " +
                                            std::to_string(shape.block_bytes(model.dtype())) + " bytes (raise it)");
  }
  return shape;
}

}  // namespace

InferenceEngine::InferenceEngine(std::shared_ptr<models::CausalLM> model, EngineOptions options)
    : options_(std::move(options)), seed_rng_(options_.seed) {
  options_.scheduler.validate();
  comm::Communicator* tp = options_.tensor_parallel;
  if (tp != nullptr && tp->size() > 1) {
    DS_CHECK(model != nullptr, Error, "InferenceEngine: no model given");
    shard_for_inference(*model, *tp);
  }
  model_ = make_ragged_model(std::move(model));
  if (tp != nullptr && tp->size() > 1) {
    if (tp->rank() == 0) {
      auto leader = std::make_unique<TpLeader>(std::move(model_), *tp);
      leader_ = leader.get();
      model_ = std::move(leader);
    } else {
      follower_ = true;
      model_->set_compute_logits(false);
    }
  }
  cache_ = std::make_unique<KvCache>(cache_shape_for(*model_, options_), model_->dtype(), model_->device());
  scheduler_ = std::make_unique<Scheduler>(options_.scheduler, *cache_);
  counters_.kv_blocks_total = cache_->shape().num_blocks;
}

InferenceEngine::~InferenceEngine() = default;

int64_t InferenceEngine::follow() {
  if (!follower_) return 0;
  return follow_tp_leader(*model_, *cache_, *options_.tensor_parallel);
}

void InferenceEngine::release_followers() {
  if (leader_ != nullptr) leader_->release();
}

void InferenceEngine::keep_alive() {
  if (leader_ != nullptr) leader_->keep_alive();
}

int64_t InferenceEngine::add_request(std::vector<int64_t> prompt, SamplingParams params) {
  DS_CHECK(!follower_, Error, "inference: tensor-parallel rank " + std::to_string(options_.tensor_parallel->rank()) +
                                  " follows rank 0, which takes the requests (call follow() here)");
  params.validate();
  const int64_t len = static_cast<int64_t>(prompt.size()), vocab = model_->vocab_size();
  const int64_t max_pos = model_->max_positions();
  DS_CHECK(len >= 1, Error, "inference: the prompt is empty (give at least one token)");
  for (int64_t t : prompt)
    DS_CHECK(t >= 0 && t < vocab, Error,
             "inference: prompt token id " + std::to_string(t) + " outside [0, vocab_size = " + std::to_string(vocab) + ")");
  DS_CHECK(len < max_pos, Error,
           "inference: the prompt has " + std::to_string(len) + " tokens; the model takes " + std::to_string(max_pos) +
               " positions in all, prompt and output (shorten the prompt)");
  const int64_t max_length = std::min(len + params.max_tokens, max_pos);
  const int64_t bs = cache_->block_size();
  const int64_t blocks = (max_length + bs - 1) / bs;
  DS_CHECK(blocks <= cache_->shape().num_blocks, Error,
           "inference: a request of " + std::to_string(max_length) + " tokens needs " + std::to_string(blocks) +
               " KV blocks; the cache has " + std::to_string(cache_->shape().num_blocks) +
               " (raise num_kv_blocks / kv_cache_mib or lower max_tokens)");
  DS_CHECK(options_.scheduler.split_prompts || max_length <= options_.scheduler.max_ragged_batch_size, Error,
           "inference: without split_prompts a request of up to " + std::to_string(max_length) +
               " tokens (recomputed whole after a preemption) must fit max_ragged_batch_size = " +
               std::to_string(options_.scheduler.max_ragged_batch_size) +
               " (turn split_prompts on, raise max_ragged_batch_size, or lower max_tokens)");

  auto seq = std::make_unique<Sequence>();
  seq->id = next_id_++;
  seq->arrival = seq->id;
  seq->prompt_len = len;
  seq->tokens = std::move(prompt);
  seq->max_length = max_length;
  seq->rng.seed(params.seed ? *params.seed : seed_rng_());
  seq->params = std::move(params);
  Sequence* raw = seq.get();
  sequences_.emplace(raw->id, std::move(seq));
  scheduler_->add(raw);
  return raw->id;
}

void InferenceEngine::abort(int64_t id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end() || it->second->finish != FinishReason::kNone) return;
  scheduler_->finish(*it->second);
  it->second->finish = FinishReason::kAborted;
  aborted_.push_back(id);
}

void InferenceEngine::sample_next(Sequence& seq, const torch::Tensor& logits) {
  auto r = sample_token(logits, seq.tokens, seq.params, seq.rng, seq.prompt_len);
  const auto& stops = seq.params.stop_token_ids;
  const auto& eos_ids = options_.eos_token_ids;
  const bool eos = !seq.params.ignore_eos && std::find(eos_ids.begin(), eos_ids.end(), r.token) != eos_ids.end();
  if (eos || std::find(stops.begin(), stops.end(), r.token) != stops.end()) {
    seq.finish = FinishReason::kStop;  // the stop token itself is not output
    return;
  }
  seq.tokens.push_back(r.token);
  if (r.logprob) seq.logprobs.push_back(std::move(*r.logprob));
  ++counters_.generated_tokens;
  if (check_stop(seq)) return;
  if (static_cast<int64_t>(seq.tokens.size()) >= seq.max_length) seq.finish = FinishReason::kLength;
}

bool InferenceEngine::check_stop(Sequence& seq) {
  const int64_t out = seq.num_output();
  for (const auto& stop : seq.params.stop_sequences) {
    const int64_t n = static_cast<int64_t>(stop.size());
    if (n > out || !std::equal(stop.begin(), stop.end(), seq.tokens.end() - n)) continue;
    seq.tokens.resize(seq.tokens.size() - static_cast<size_t>(n));  // cut the stop sequence off
    if (!seq.logprobs.empty()) seq.logprobs.resize(seq.logprobs.size() - static_cast<size_t>(n));
    seq.finish = FinishReason::kStop;
    return true;
  }
  return false;
}

RequestOutput InferenceEngine::take_output(Sequence& seq) {
  RequestOutput o;
  o.id = seq.id;
  o.finished = seq.finish != FinishReason::kNone;
  o.finish = seq.finish;
  o.prompt_tokens = seq.prompt_len;
  o.output_tokens = seq.num_output();
  int64_t hold = 0;
  for (const auto& s : seq.params.stop_sequences) hold = std::max<int64_t>(hold, static_cast<int64_t>(s.size()) - 1);
  const int64_t ready = o.finished ? seq.num_output() : std::max<int64_t>(seq.num_output() - hold, seq.num_emitted);
  for (int64_t i = seq.num_emitted; i < ready; ++i) {
    o.new_tokens.push_back(seq.tokens[static_cast<size_t>(seq.prompt_len + i)]);
    if (!seq.logprobs.empty()) o.new_logprobs.push_back(seq.logprobs[static_cast<size_t>(i)]);
  }
  seq.num_emitted = ready;
  return o;
}

std::vector<RequestOutput> InferenceEngine::step() {
  DS_CHECK(!follower_, Error, "inference: tensor-parallel rank " + std::to_string(options_.tensor_parallel->rank()) +
                                  " follows rank 0, which runs the steps (call follow() here)");
  std::vector<RequestOutput> outputs;
  for (int64_t id : aborted_) {
    auto it = sequences_.find(id);
    outputs.push_back(take_output(*it->second));
    sequences_.erase(it);
  }
  aborted_.clear();

  auto plan = scheduler_->schedule();
  if (plan.empty()) return outputs;
  std::vector<ChunkView> views;
  views.reserve(plan.size());
  for (const auto& c : plan)
    views.push_back({std::span<const int64_t>(c.seq->tokens).subspan(static_cast<size_t>(c.seq->num_computed),
                                                                      static_cast<size_t>(c.n)),
                     c.seq->num_computed, c.seq->blocks});
  RaggedBatch batch(views, cache_->block_size(), model_->device());
  auto logits = model_->forward(batch, *cache_).cpu();  // [S,V] fp32
  ++counters_.steps;
  counters_.forward_tokens += batch.num_tokens();

  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& seq = *plan[i].seq;
    scheduler_->computed(seq, plan[i].n);
    if (seq.num_pending() > 0) continue;  // a prompt chunk short of the prompt's end
    sample_next(seq, logits[static_cast<int64_t>(i)]);
    RequestOutput o = take_output(seq);
    if (seq.finish != FinishReason::kNone) scheduler_->finish(seq);
    if (o.finished || !o.new_tokens.empty()) outputs.push_back(std::move(o));
    if (seq.finish != FinishReason::kNone) sequences_.erase(seq.id);
  }
  return outputs;
}

EngineStats InferenceEngine::stats() const {
  EngineStats s = counters_;
  s.preemptions = scheduler_->stats().preemptions;
  s.prefix_hit_tokens = scheduler_->stats().prefix_hit_tokens;
  s.kv_blocks_used = cache_->allocator().num_used();
  s.waiting = scheduler_->num_waiting();
  s.running = scheduler_->num_running();
  return s;
}

}  // namespace ds::inference
