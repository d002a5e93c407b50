#include "serve/serving_loop.h"

#include <spdlog/spdlog.h>

namespace ds::serve {

using inference::FinishReason;

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

void declare_serve_metrics(Metrics& m) {
  const std::vector<double> latency = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  m.counter("ds_serve_requests_total", "HTTP generation requests answered, by endpoint and status code");
  m.gauge("ds_serve_requests_in_flight", "generation requests being answered now");
  m.gauge("ds_serve_queue_length", "requests waiting for admission to the engine");
  m.gauge("ds_serve_requests_running", "requests the engine is generating for");
  m.gauge("ds_serve_kv_blocks_in_use", "KV cache blocks held by requests");
  m.gauge("ds_serve_kv_blocks_total", "KV cache blocks in the pool");
  m.counter("ds_serve_prompt_tokens_total", "prompt tokens of admitted requests");
  m.counter("ds_serve_generated_tokens_total", "tokens generated");
  m.counter("ds_serve_preemptions_total", "sequences preempted for KV blocks (recomputed later)");
  m.gauge("ds_serve_tokens_per_second", "generated tokens per second over the last 10 seconds");
  m.histogram("ds_serve_time_to_first_token_seconds", "arrival to first generated token", latency);
  m.histogram("ds_serve_inter_token_latency_seconds", "time between successive tokens of a request", latency);
  m.histogram("ds_serve_request_latency_seconds", "arrival to last token", latency);
}

std::optional<RequestEvent> RequestHandle::next(std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, wait, [&] { return !events_.empty(); })) return std::nullopt;
  RequestEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

void RequestHandle::cancel() {
  if (!cancelled_.exchange(true) && wake_) wake_();
}

void RequestHandle::cancel_choice(int64_t index) {
  if (index < 0 || index >= num_choices()) return;
  if (!choice_cancelled_[static_cast<size_t>(index)].exchange(true) && wake_) wake_();
}

void RequestHandle::push(RequestEvent e) {
  {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

ServingLoop::ServingLoop(std::unique_ptr<inference::InferenceEngine> engine, Metrics& metrics, LoopOptions options)
    : engine_(std::move(engine)), metrics_(metrics), options_(options) {
  max_positions_ = engine_->model().max_positions();
  kv_blocks_total_ = engine_->stats().kv_blocks_total;
  kv_block_size_ = engine_->options().kv_block_size;
  vocab_size_ = engine_->model().vocab_size();
  metrics_.set("ds_serve_kv_blocks_total", static_cast<double>(kv_blocks_total_));
  thread_ = std::thread([this] { run(); });
}

ServingLoop::~ServingLoop() { stop(); }

std::shared_ptr<RequestHandle> ServingLoop::submit(std::vector<int64_t> prompt,
                                                   std::vector<inference::SamplingParams> choices,
                                                   Clock::time_point arrival, Clock::time_point deadline) {
  auto h = std::make_shared<RequestHandle>();
  h->prompt_ = std::move(prompt);
  h->params_ = std::move(choices);
  h->choice_cancelled_ = std::make_unique<std::atomic<bool>[]>(h->params_.size());
  for (size_t i = 0; i < h->params_.size(); ++i) h->choice_cancelled_[i] = false;
  h->arrival_ = arrival;
  h->deadline_ = deadline;
  h->wake_ = [this] { wake(); };
  {
    std::lock_guard lock(mu_);
    if (stop_) {
      h->push({.error = "the server is shutting down"});
      return h;
    }
    incoming_.push_back(h);
  }
  cv_.notify_one();
  return h;
}

void ServingLoop::wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  cv_.notify_one();
}

void ServingLoop::cancel_all() {
  {
    std::lock_guard lock(mu_);
    cancel_all_ = true;
  }
  cv_.notify_one();
}

void ServingLoop::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ServingLoop::admit(std::vector<std::shared_ptr<RequestHandle>>& incoming) {
  for (auto& h : incoming) {
    if (h->cancelled()) {
      h->push({.error = "cancelled before admission", .finished = true, .finish = FinishReason::kAborted});
      continue;
    }
    if (h->params_.empty()) {
      h->push({.error = "a request needs at least one choice"});
      continue;
    }
    try {
      const int64_t n = static_cast<int64_t>(h->prompt_.size());
      // Every choice is its own sequence; all are admitted or none (a refusal aborts the others).
      for (const auto& p : h->params_) h->ids_.push_back(engine_->add_request(h->prompt_, p));
      h->prompt_.clear();
      h->last_token_.assign(h->params_.size(), h->arrival_);
      h->unfinished_ = static_cast<int64_t>(h->ids_.size());
      for (size_t i = 0; i < h->ids_.size(); ++i) active_[h->ids_[i]] = {h, static_cast<int64_t>(i)};
      metrics_.add("ds_serve_prompt_tokens_total", static_cast<double>(n));
      h->push({.accepted = true});
    } catch (const std::exception& e) {
      for (int64_t id : h->ids_) engine_->abort(id);  // reported finished at the next step; nobody listens
      h->ids_.clear();
      h->push({.error = e.what()});
    }
  }
  incoming.clear();
}

void ServingLoop::abort_cancelled(Clock::time_point now) {
  bool all;
  {
    std::lock_guard lock(mu_);
    all = cancel_all_ || stop_;
    woken_ = false;
  }
  for (auto& [id, a] : active_) {
    const RequestHandle& h = *a.handle;
    if (all || h.cancelled() || h.choice_cancelled_[static_cast<size_t>(a.index)] || now >= h.deadline_)
      engine_->abort(id);
  }
}

void ServingLoop::dispatch(const std::vector<inference::RequestOutput>& outputs, Clock::time_point now) {
  int64_t generated = 0;
  for (const auto& out : outputs) {
    auto it = active_.find(out.id);
    if (it == active_.end()) continue;
    RequestHandle& h = *it->second.handle;
    const int64_t index = it->second.index;
    auto& last = h.last_token_[static_cast<size_t>(index)];
    const auto k = static_cast<int64_t>(out.new_tokens.size());
    if (k > 0) {
      if (!h.got_first_) {
        metrics_.observe("ds_serve_time_to_first_token_seconds", seconds(now - h.arrival_));
        h.got_first_ = true;
      } else {
        for (int64_t i = 0; i < k; ++i)
          metrics_.observe("ds_serve_inter_token_latency_seconds", seconds(now - last) / static_cast<double>(k));
      }
      last = now;
      generated += k;
    }
    RequestEvent e{.index = index, .tokens = out.new_tokens, .logprobs = out.new_logprobs, .finished = out.finished,
                   .finish = out.finish, .prompt_tokens = out.prompt_tokens, .output_tokens = out.output_tokens};
    if (out.finished) {
      e.timed_out = out.finish == FinishReason::kAborted && !h.cancelled() && now >= h.deadline_;
      if (--h.unfinished_ == 0) metrics_.observe("ds_serve_request_latency_seconds", seconds(now - h.arrival_));
    }
    if (k > 0 || out.finished) h.push(std::move(e));
    if (out.finished) active_.erase(it);
  }
  if (generated > 0) {
    metrics_.add("ds_serve_generated_tokens_total", static_cast<double>(generated));
    token_times_.emplace_back(now, generated);
  }
}

void ServingLoop::publish_stats(Clock::time_point now) {
  while (!token_times_.empty() && now - token_times_.front().first > std::chrono::seconds(10)) token_times_.pop_front();
  int64_t recent = 0;
  for (const auto& [t, n] : token_times_) recent += n;
  const double window = token_times_.empty() ? 10.0 : std::max(1.0, std::min(10.0, seconds(now - token_times_.front().first)));
  const auto st = engine_->stats();
  size_t queued;
  {
    std::lock_guard lock(mu_);
    queued = incoming_.size();
  }
  metrics_.set("ds_serve_tokens_per_second", static_cast<double>(recent) / window);
  metrics_.set("ds_serve_queue_length", static_cast<double>(st.waiting + static_cast<int64_t>(queued)));
  metrics_.set("ds_serve_requests_running", static_cast<double>(st.running));
  metrics_.set("ds_serve_kv_blocks_in_use", static_cast<double>(st.kv_blocks_used));
  metrics_.set("ds_serve_preemptions_total", static_cast<double>(st.preemptions));
}

void ServingLoop::run() {
  std::vector<std::shared_ptr<RequestHandle>> incoming;
  while (true) {
    bool stopping;
    {
      std::unique_lock lock(mu_);
      // Idle: sleep until a request, a cancel or stop arrives (wake each second for tokens/s).
      if (!engine_->has_unfinished())
        cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_ || woken_ || cancel_all_ || !incoming_.empty(); });
      incoming.swap(incoming_);
      stopping = stop_;
    }
    try {
      if (stopping)
        for (auto& h : incoming) h->push({.error = "the server is shutting down"});
      else
        admit(incoming);
      incoming.clear();
      abort_cancelled(Clock::now());
      if (engine_->has_unfinished()) {
        auto outputs = engine_->step();
        dispatch(outputs, Clock::now());
        if (options_.step_delay.count() > 0) std::this_thread::sleep_for(options_.step_delay);
      } else {
        engine_->keep_alive();  // tensor-parallel followers wait on a watched collective
      }
      publish_stats(Clock::now());
    } catch (const std::exception& e) {
      // A failed forward leaves the engine unusable: every request gets the error.
      spdlog::error("ds-serve: the engine failed: {}", e.what());
      for (auto& [id, a] : active_)
        a.handle->push({.error = e.what(), .index = a.index, .finished = true, .finish = FinishReason::kAborted});
      active_.clear();
      std::lock_guard lock(mu_);
      stop_ = true;
      for (auto& h : incoming_) h->push({.error = e.what()});
      incoming_.clear();
      break;
    }
    if (stopping && !engine_->has_unfinished()) break;
  }
  try {
    engine_->release_followers();  // tensor-parallel ranks 1.. return from follow() and exit
  } catch (const std::exception& e) {
    spdlog::error("ds-serve: releasing the tensor-parallel ranks failed: {}", e.what());
  }
}

}  // namespace ds::serve
