// serve_bench: ds-serve's effective throughput and latency (FastGen-blog style) with C clients in a
// closed loop (each sends its next request when the last one is answered), against (a) one request
// at a time and (b) static batching with padding, same model, same ragged kernels and KV cache.
//   ours    the real server (ServingLoop + HTTP, streaming) on 127.0.0.1, C client threads;
//   serial  the engine with one sequence per forward; each request timed, the C-client FIFO queue
//           computed from those times (request k answers at the sum of the first k durations);
//   static  batches of C requests: prompts left-padded to the batch's longest, every sequence
//           generating the batch's longest output, the next batch starting when this one ends.
// Requests: random prompts and output lengths (ignore_eos), the same list for all three. Ours and
// static run --repeats times per level and keep their best (the machine may be shared).
// Prints a table, then `BENCH serve_throughput_vs_static` (tokens/s at --bench-clients, higher is
// better) and `BENCH serve_ttft_p95` (ms at --bench-clients vs static, lower is better).
//
//   OPENBLAS_CORETYPE=SkylakeX ./build/benchmarks/serve_bench --clients 1,4,16,64
//   ./build/benchmarks/serve_bench --write-model DIR   (the random model as a folder ds-serve loads;
//                                                       benchmarks/serve_load.sh uses it)
#include <CLI/CLI.hpp>

#include <httplib.h>
#include <malloc.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "inference/engine.h"
#include "models/gpt2.h"
#include "models/pretrained.h"
#include "serve/server.h"
#include "util/blas_core_select.h"

namespace {

using namespace ds::inference;
using Clock = std::chrono::steady_clock;

struct Req {
  std::vector<int64_t> prompt;
  int64_t max_tokens = 0;
};

struct Level {
  double tokens_per_s = 0;
  std::vector<double> latency, ttft;  // seconds per request
};

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

SamplingParams params_for(int64_t max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

int64_t useful_tokens(const std::vector<Req>& reqs, size_t n) {
  int64_t t = 0;
  for (size_t i = 0; i < n; ++i) t += reqs[i].max_tokens;
  return t;
}

// (a) one at a time: each request's duration and time to first token, then the closed loop of C
// clients in front of one FIFO server.
Level serial_level(const std::vector<double>& dur, const std::vector<double>& first, const std::vector<Req>& reqs,
                   size_t n, int64_t c) {
  Level l;
  std::vector<double> finish(n);
  double t = 0;
  for (size_t k = 0; k < n; ++k) {
    const double issued = k >= static_cast<size_t>(c) ? finish[k - static_cast<size_t>(c)] : 0.0;
    const double start = std::max(t, issued);
    l.ttft.push_back(start + first[k] - issued);
    t = start + dur[k];
    finish[k] = t;
    l.latency.push_back(t - issued);
  }
  l.tokens_per_s = static_cast<double>(useful_tokens(reqs, n)) / t;
  return l;
}

std::pair<std::vector<double>, std::vector<double>> time_serial(std::shared_ptr<ds::models::CausalLM> model,
                                                                const std::vector<Req>& reqs, EngineOptions o) {
  o.scheduler.max_ragged_sequence_count = 1;
  InferenceEngine engine(std::move(model), o);
  std::vector<double> dur, first;
  for (const auto& r : reqs) {
    const auto t0 = Clock::now();
    engine.add_request(r.prompt, params_for(r.max_tokens));
    double f = -1;
    while (engine.has_unfinished())
      for (const auto& out : engine.step())
        if (f < 0 && !out.new_tokens.empty()) f = secs(Clock::now() - t0);
    dur.push_back(secs(Clock::now() - t0));
    first.push_back(f);
  }
  return {dur, first};
}

// (b) static batching with padding.
Level static_level(std::shared_ptr<ds::models::CausalLM> model, const std::vector<Req>& reqs, size_t n, int64_t c,
                   EngineOptions o) {
  o.scheduler.max_ragged_sequence_count = c;
  o.scheduler.max_ragged_batch_size = std::max<int64_t>(o.scheduler.max_ragged_batch_size, c * 256);
  InferenceEngine engine(std::move(model), o);
  Level l;
  double t = 0;
  for (size_t b = 0; b < n; b += static_cast<size_t>(c)) {
    const size_t e = std::min(n, b + static_cast<size_t>(c));
    size_t pad = 0;
    int64_t out = 0;
    for (size_t i = b; i < e; ++i) {
      pad = std::max(pad, reqs[i].prompt.size());
      out = std::max(out, reqs[i].max_tokens);
    }
    const auto t0 = Clock::now();
    for (size_t i = b; i < e; ++i) {
      std::vector<int64_t> p(pad - reqs[i].prompt.size(), 0);
      p.insert(p.end(), reqs[i].prompt.begin(), reqs[i].prompt.end());
      engine.add_request(std::move(p), params_for(out));
    }
    double first = -1;
    while (engine.has_unfinished())
      for (const auto& o2 : engine.step())
        if (first < 0 && !o2.new_tokens.empty()) first = secs(Clock::now() - t0);
    const double d = secs(Clock::now() - t0);
    for (size_t i = b; i < e; ++i) {
      l.latency.push_back(d);  // the batch answers together
      l.ttft.push_back(first);
    }
    t += d;
  }
  l.tokens_per_s = static_cast<double>(useful_tokens(reqs, n)) / t;
  return l;
}

// Ours: C client threads streaming from the real server.
Level server_level(int port, const std::vector<Req>& reqs, size_t n, int64_t c) {
  Level l;
  std::atomic<size_t> next{0};
  std::mutex mu;
  int64_t tokens = 0;  // of answered requests only
  const auto t0 = Clock::now();
  std::vector<std::thread> clients;
  for (int64_t i = 0; i < c; ++i)
    clients.emplace_back([&] {
      httplib::Client cli("127.0.0.1", port);
      cli.set_read_timeout(600);
      for (size_t k; (k = next++) < n;) {
        const nlohmann::json body = {{"prompt", reqs[k].prompt}, {"max_tokens", reqs[k].max_tokens},
                                     {"temperature", 0},         {"ignore_eos", true},
                                     {"stream", true}};
        httplib::Request q;
        q.method = "POST";
        q.path = "/v1/completions";
        q.body = body.dump();
        q.set_header("Content-Type", "application/json");
        const auto sent = Clock::now();
        double first = -1;
        q.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
          if (first < 0) first = secs(Clock::now() - sent);
          return true;
        };
        auto res = cli.send(q);
        const double lat = secs(Clock::now() - sent);
        if (!res || res->status != 200) {
          std::fprintf(stderr, "serve_bench: request %zu failed (%s)\n", k,
                       res ? std::to_string(res->status).c_str() : httplib::to_string(res.error()).c_str());
          continue;
        }
        std::lock_guard lock(mu);
        tokens += reqs[k].max_tokens;
        l.latency.push_back(lat);
        l.ttft.push_back(first);
      }
    });
  for (auto& t : clients) t.join();
  l.tokens_per_s = static_cast<double>(tokens) / secs(Clock::now() - t0);
  if (l.latency.size() != n) std::fprintf(stderr, "serve_bench: %zu of %zu requests failed\n", n - l.latency.size(), n);
  return l;
}

void row(const char* name, int64_t c, const Level& l) {
  std::printf("%-7s %4lld clients %9.1f tokens/s   latency p50 %7.1f p95 %7.1f ms   ttft p50 %7.1f p95 %7.1f ms\n",
              name, static_cast<long long>(c), l.tokens_per_s, 1e3 * pct(l.latency, 0.5), 1e3 * pct(l.latency, 0.95),
              1e3 * pct(l.ttft, 0.5), 1e3 * pct(l.ttft, 0.95));
}

}  // namespace

int main(int argc, char** argv) {
  ds::select_blas_core_or_reexec(argv, "serve_bench");  // before any BLAS call (docs/cpu-kernels.md)
  std::vector<int64_t> levels = {1, 4, 16, 64};
  int64_t bench_clients = 16, embd = 128, layers = 4, positions = 256, min_prompt = 8, max_prompt = 96, min_out = 16,
          max_out = 128, per_client = 4, min_requests = 32, repeats = 3;
  EngineOptions options;
  CLI::App app{"serve_bench: ds-serve throughput and latency vs one-at-a-time and static batching"};
  app.add_option("--clients", levels, "concurrent clients")->delimiter(',')->capture_default_str();
  app.add_option("--bench-clients", bench_clients, "the level the BENCH lines report")->capture_default_str();
  app.add_option("--embd", embd, "GPT-2 width (random weights, 256-token vocabulary)")->capture_default_str();
  app.add_option("--layers", layers, "GPT-2 layers")->capture_default_str();
  app.add_option("--positions", positions, "GPT-2 context")->capture_default_str();
  app.add_option("--min-prompt", min_prompt, "shortest prompt")->capture_default_str();
  app.add_option("--max-prompt", max_prompt, "longest prompt")->capture_default_str();
  app.add_option("--min-out", min_out, "fewest generated tokens")->capture_default_str();
  app.add_option("--max-out", max_out, "most generated tokens")->capture_default_str();
  app.add_option("--requests-per-client", per_client, "requests per level = max(this x clients, --min-requests)")
      ->capture_default_str();
  app.add_option("--min-requests", min_requests, "fewest requests per level")->capture_default_str();
  std::string write_model;
  app.add_option("--write-model", write_model, "save the random GPT-2 (--embd, --layers, --positions) to this folder and exit");
  app.add_option("--repeats", repeats, "runs of ours and static per level, the best kept (the machine is shared)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);

  torch::manual_seed(0);
  ds::models::GPT2Config cfg{.vocab_size = 256, .n_positions = positions, .n_embd = embd, .n_layer = layers,
                             .n_head = std::max<int64_t>(1, embd / 32)};
  auto model = std::make_shared<ds::models::GPT2Impl>(cfg);
  model->eval();
  if (!write_model.empty()) {
    ds::models::save_pretrained(*model, write_model);
    std::printf("serve_bench: wrote %s to %s\n", model->describe().c_str(), write_model.c_str());
    return 0;
  }
  const int64_t max_c = *std::max_element(levels.begin(), levels.end());
  const size_t pool = static_cast<size_t>(std::max(per_client * max_c, min_requests));
  std::mt19937_64 rng(1);
  auto uniform = [&](int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1)); };
  std::vector<Req> reqs(pool);
  for (auto& r : reqs) {
    r.prompt.resize(static_cast<size_t>(uniform(min_prompt, max_prompt)));
    for (auto& t : r.prompt) t = uniform(0, 255);
    r.max_tokens = uniform(min_out, max_out);
  }
  std::printf("model: %s; %zu requests, prompts %lld-%lld, outputs %lld-%lld tokens; %d threads\n",
              model->describe().c_str(), pool, static_cast<long long>(min_prompt), static_cast<long long>(max_prompt),
              static_cast<long long>(min_out), static_cast<long long>(max_out), torch::get_num_threads());

  // The server, as ds-serve runs it.
  ds::serve::Metrics metrics;
  ds::serve::declare_serve_metrics(metrics);
  ds::serve::ServingLoop loop(std::make_unique<InferenceEngine>(model, options), metrics);
  ds::serve::ServerOptions so;
  so.port = 0;
  so.model_name = "bench";
  so.max_concurrent = static_cast<int>(max_c);
  const auto codec = ds::data::TextCodec::bytes();
  ds::serve::Server server(so, loop, codec, metrics);
  const int port = server.bind();
  std::thread http([&] { server.serve(); });

  server_level(port, reqs, 2, 1);  // warm-up
  const auto [dur, first] = time_serial(model, reqs, options);
  Level at_bench_ours, at_bench_static;
  for (int64_t c : levels) {
    const size_t n = static_cast<size_t>(std::max(per_client * c, min_requests));
    auto best = [&](auto run) {
      Level b;
      for (int64_t i = 0; i < repeats; ++i)
        if (Level l = run(); l.tokens_per_s > b.tokens_per_s) b = std::move(l);
      return b;
    };
    const Level ours = best([&] { return server_level(port, reqs, n, c); });
    const Level stat = best([&] { return static_level(model, reqs, n, c, options); });
    const Level ser = serial_level(dur, first, reqs, n, c);
    row("ours", c, ours);
    row("static", c, stat);
    row("serial", c, ser);
    std::printf("        %4lld clients: x%.2f vs static, x%.2f vs one at a time\n", static_cast<long long>(c),
                ours.tokens_per_s / stat.tokens_per_s, ours.tokens_per_s / ser.tokens_per_s);
    if (c == bench_clients) {
      at_bench_ours = ours;
      at_bench_static = stat;
    }
  }
  server.shutdown();
  http.join();
  loop.stop();
  if (at_bench_ours.tokens_per_s > 0) {
    std::printf("BENCH serve_throughput_vs_static ours=%.1f ref=%.1f unit=tokens_per_s ratio=%.3f\n",
                at_bench_ours.tokens_per_s, at_bench_static.tokens_per_s,
                at_bench_ours.tokens_per_s / at_bench_static.tokens_per_s);
    const double o = 1e3 * pct(at_bench_ours.ttft, 0.95), r = 1e3 * pct(at_bench_static.ttft, 0.95);
    std::printf("BENCH serve_ttft_p95 ours=%.1f ref=%.1f unit=ms ratio=%.3f\n", o, r, o / r);
  }
  return 0;
}
