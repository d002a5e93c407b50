// inference_throughput: tokens/s of the ragged engine (continuous batching, Dynamic SplitFuse, blocked
// KV cache) with C requests in flight, against one-request-at-a-time generation with the same model,
// kernels and KV cache (the engine limited to one sequence per forward). The naive full-recompute loop
// (no KV cache) is printed for scale. Each setting runs --repeats times and keeps its best. Ends with one BENCH line per concurrency level (higher is better).
//
//   inference_throughput --preset tiny --requests 64 --concurrency 1,4,16,64
#include <CLI/CLI.hpp>

#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "inference/engine.h"
#include "inference/naive_generate.h"
#include "models/gpt2.h"

namespace {

using namespace ds::inference;
using Clock = std::chrono::steady_clock;

struct Result {
  double tokens_per_s = 0;
  double seconds = 0;
  int64_t tokens = 0;
  int64_t forwards = 0;
};

// Keeps `concurrency` requests in flight (a new one joins as one finishes) until all are done.
Result run_engine(std::shared_ptr<ds::models::CausalLM> model, const std::vector<std::vector<int64_t>>& prompts,
                  const SamplingParams& params, int64_t concurrency, EngineOptions options) {
  options.scheduler.max_ragged_sequence_count = concurrency;
  InferenceEngine engine(std::move(model), options);
  std::deque<size_t> queue;
  for (size_t i = 0; i < prompts.size(); ++i) queue.push_back(i);
  int64_t in_flight = 0;
  Result r;
  const auto t0 = Clock::now();
  while (!queue.empty() || engine.has_unfinished()) {
    while (in_flight < concurrency && !queue.empty()) {
      engine.add_request(prompts[queue.front()], params);
      queue.pop_front();
      ++in_flight;
    }
    for (const auto& o : engine.step()) {
      r.tokens += static_cast<int64_t>(o.new_tokens.size());
      if (o.finished) --in_flight;
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.tokens_per_s = r.tokens / r.seconds;
  r.forwards = engine.stats().steps;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "tiny";
  int64_t requests = 64, prompt_len = 16, max_tokens = 32, naive_requests = 4, repeats = 3;
  std::vector<int64_t> levels = {1, 4, 16, 64};
  EngineOptions options;
  options.kv_block_size = 16;
  options.scheduler.max_ragged_batch_size = 768;
  CLI::App app{"inference_throughput: ragged engine tokens/s vs one request at a time"};
  app.add_option("--preset", preset, "GPT-2 preset (random weights)")->capture_default_str();
  app.add_option("--requests", requests, "requests per run")->capture_default_str();
  app.add_option("--prompt-len", prompt_len, "prompt tokens per request")->capture_default_str();
  app.add_option("--max-tokens", max_tokens, "generated tokens per request")->capture_default_str();
  app.add_option("--concurrency", levels, "requests in flight")->delimiter(',')->capture_default_str();
  app.add_option("--max-ragged-batch-size", options.scheduler.max_ragged_batch_size, "tokens per forward")
      ->capture_default_str();
  app.add_option("--naive-requests", naive_requests, "requests for the full-recompute loop (0: skip)")
      ->capture_default_str();
  app.add_option("--repeats", repeats, "runs per setting, the best kept (the machine is shared and noisy)")
      ->capture_default_str();
  bool keep_heap = true;
  app.add_option("--keep-heap", keep_heap, "keep freed heap memory mapped (glibc mallopt) so the per-forward "
                                           "temporaries do not page-fault afresh each step")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (keep_heap) {
    // A server would set this once at start: on a VM each first touch of a fresh 4 KiB page is a fault.
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
  }

  torch::manual_seed(0);
  auto model = std::make_shared<ds::models::GPT2Impl>(ds::models::GPT2Config::preset(preset));
  model->eval();
  const int64_t vocab = model->config().vocab_size;
  std::mt19937_64 rng(1);
  std::vector<std::vector<int64_t>> prompts(static_cast<size_t>(requests));
  for (auto& p : prompts)
    for (int64_t i = 0; i < prompt_len; ++i) p.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab)));
  SamplingParams params;
  params.temperature = 0.0;
  params.max_tokens = max_tokens;
  params.ignore_eos = true;
  std::printf("model: %s; %lld requests of %lld prompt + %lld generated tokens; %d threads\n",
              model->describe().c_str(), static_cast<long long>(requests), static_cast<long long>(prompt_len),
              static_cast<long long>(max_tokens), torch::get_num_threads());

  auto best = [&](int64_t c) {
    Result b;
    for (int64_t i = 0; i < repeats; ++i) {
      Result r = run_engine(model, prompts, params, c, options);
      if (r.tokens_per_s > b.tokens_per_s) b = r;
    }
    return b;
  };
  run_engine(model, {prompts.front()}, params, 1, options);  // warm-up
  const Result serial = best(1);
  std::printf("%-34s %10.1f tokens/s  (%.2f s, %lld forwards)\n", "one request at a time (KV cache)",
              serial.tokens_per_s, serial.seconds, static_cast<long long>(serial.forwards));
  if (naive_requests > 0) {
    const auto t0 = Clock::now();
    int64_t tokens = 0;
    for (int64_t i = 0; i < naive_requests && i < requests; ++i)
      tokens += static_cast<int64_t>(naive_generate(*model, prompts[static_cast<size_t>(i)], params, 1 << 30).size());
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("%-34s %10.1f tokens/s  (%lld requests)\n", "naive loop (no KV cache)", tokens / s,
                static_cast<long long>(naive_requests));
  }
  std::vector<Result> results;
  for (int64_t c : levels) {
    results.push_back(best(c));
    const auto& r = results.back();
    std::printf("ragged engine, %3lld in flight       %10.1f tokens/s  (%.2f s, %lld forwards, x%.2f)\n",
                static_cast<long long>(c), r.tokens_per_s, r.seconds, static_cast<long long>(r.forwards),
                r.tokens_per_s / serial.tokens_per_s);
  }
  for (size_t i = 0; i < levels.size(); ++i)
    std::printf("BENCH inference_throughput_c%lld ours=%.1f ref=%.1f unit=tokens_per_s ratio=%.3f\n",
                static_cast<long long>(levels[i]), results[i].tokens_per_s, serial.tokens_per_s,
                results[i].tokens_per_s / serial.tokens_per_s);
  return 0;
}
