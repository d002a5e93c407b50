// ds::serve::ServingLoop: one engine thread that owns an InferenceEngine and serves requests from
// many HTTP threads. submit() queues a prompt with the parameters of each of its choices (OpenAI's
// n: one engine sequence per choice) and returns a RequestHandle; the engine thread admits it (or
// reports why the engine refused it), runs step() while anything is unfinished, and pushes each
// choice's new tokens to the handle. A handle that is cancelled (client gone) or past its
// deadline is aborted at the next step, so its KV blocks return to the pool. Metrics: queue
// length, running requests, KV blocks, tokens/s, time to first token, inter-token latency. With a
// tensor-parallel engine (rank 0's) the loop keeps the followers alive while idle and releases them
// when it ends.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "inference/engine.h"
#include "serve/metrics.h"

namespace ds::serve {

using Clock = std::chrono::steady_clock;

// What the engine thread hands a request: first `accepted` (or `error`), then token deltas of its
// choices, then one event with `finished` per choice.
struct RequestEvent {
  bool accepted = false;
  std::string error{};  // the engine refused the request (the message names the limit)
  int64_t index = 0;    // the choice
  std::vector<int64_t> tokens{};
  std::vector<inference::TokenLogprob> logprobs{};  // one per token when the choice asked for logprobs
  bool finished = false;
  inference::FinishReason finish = inference::FinishReason::kNone;
  bool timed_out = false;  // finished because the request passed its deadline
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;  // of this choice
};

class RequestHandle {
 public:
  // The next event, waiting at most `wait`; nullopt on timeout.
  std::optional<RequestEvent> next(std::chrono::milliseconds wait);
  // Ask the engine thread to abort this request (idempotent; safe after it finished).
  void cancel();
  bool cancelled() const { return cancelled_.load(); }
  // Ask the engine thread to abort one choice (it met a stop string); the others go on.
  void cancel_choice(int64_t index);
  int64_t num_choices() const { return static_cast<int64_t>(params_.size()); }

 private:
  friend class ServingLoop;
  void push(RequestEvent e);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestEvent> events_;
  std::atomic<bool> cancelled_{false};
  std::unique_ptr<std::atomic<bool>[]> choice_cancelled_;  // [num_choices]
  std::function<void()> wake_;
  // Engine-thread state.
  std::vector<int64_t> prompt_;
  std::vector<inference::SamplingParams> params_;  // one per choice
  Clock::time_point arrival_, deadline_;
  std::vector<Clock::time_point> last_token_;      // per choice
  std::vector<int64_t> ids_;                       // engine sequence of each choice
  int64_t unfinished_ = 0;
  bool got_first_ = false;
};

struct LoopOptions {
  std::chrono::milliseconds step_delay{0};  // sleep after every step (tests of limits and timeouts)
};

class ServingLoop {
 public:
  ServingLoop(std::unique_ptr<inference::InferenceEngine> engine, Metrics& metrics, LoopOptions options = {});
  ~ServingLoop();  // stop()

  // One choice per element of `choices` (at least one).
  std::shared_ptr<RequestHandle> submit(std::vector<int64_t> prompt, std::vector<inference::SamplingParams> choices,
                                        Clock::time_point arrival, Clock::time_point deadline);
  // Aborts every request now (shutdown past its grace period).
  void cancel_all();
  // Aborts what is left, ends the engine thread and joins it.
  void stop();

  int64_t max_positions() const { return max_positions_; }
  int64_t kv_blocks_total() const { return kv_blocks_total_; }
  int64_t kv_block_size() const { return kv_block_size_; }
  int64_t vocab_size() const { return vocab_size_; }

 private:
  void run();
  void admit(std::vector<std::shared_ptr<RequestHandle>>& incoming);
  void abort_cancelled(Clock::time_point now);
  void dispatch(const std::vector<inference::RequestOutput>& outputs, Clock::time_point now);
  void publish_stats(Clock::time_point now);
  void wake();

  std::unique_ptr<inference::InferenceEngine> engine_;
  Metrics& metrics_;
  LoopOptions options_;
  int64_t max_positions_, kv_blocks_total_, kv_block_size_, vocab_size_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<RequestHandle>> incoming_;
  bool stop_ = false, cancel_all_ = false, woken_ = false;
  struct Active {
    std::shared_ptr<RequestHandle> handle;
    int64_t index = 0;  // the choice this engine sequence computes
  };
  std::map<int64_t, Active> active_;  // engine sequence id → its request; engine thread only
  std::deque<std::pair<Clock::time_point, int64_t>> token_times_;  // for tokens/s over the last seconds
  std::thread thread_;
};

// Declares the metrics ServingLoop and the server update (names start with ds_serve_).
void declare_serve_metrics(Metrics& m);

}  // namespace ds::serve
