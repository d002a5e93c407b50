// tp_inference: tensor-parallel inference (Pipeline / ds-generate / ds-serve --tensor-parallel)
// against one process with the same model, requests, cache blocks and kernels: bytes each rank holds
// (parameters + KV cache) and generated tokens/s with --requests sequences in flight, greedy. The
// two runs must produce the same tokens (a checksum is compared). On one machine the ranks share its
// cores: TP=2 runs cores/2 threads per rank against one process with all of them, so tokens/s
// measures what the split and its all-reduces cost, not what more devices would add.
//
//   ./build/benchmarks/tp_inference           # drives: <self> --worker --tp 1, mpirun -np 2 <self> --worker --tp 2
//   ./build/benchmarks/tp_inference --preset medium --requests 16 --prompt 64 --tokens 64
//
// Ends with
//   BENCH tp2_inference_rank_bytes ours=<bytes/rank at TP=2> ref=<bytes at TP=1> unit=bytes ratio=..
//   BENCH tp2_inference_tokens_per_s ours=<TP=2> ref=<TP=1> unit=tokens_per_s ratio=..
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>

#include "bench_engine.h"
#include "comm/comm.h"
#include "inference/pipeline.h"
#include "models/gpt2.h"

namespace {

using namespace ds::inference;

struct Options {
  std::string preset = "small";
  int64_t requests = 16, prompt = 64, tokens = 64, blocks = 1024;
  uint64_t seed = 0;
};

struct Result {
  int tp = 1;
  double rank_bytes = 0, tokens_per_s = 0, seconds = 0;
  unsigned long long checksum = 0;
};

// One run at this process's world size (the tensor-parallel group): prints a RESULT line on rank 0.
int worker(const Options& o) {
  auto world = ds::comm::make_communicator();
  const int tp = world->size();
  torch::set_num_threads(std::max<int>(1, static_cast<int>(std::thread::hardware_concurrency()) / tp));
  torch::manual_seed(static_cast<int64_t>(o.seed));
  auto model = std::make_shared<ds::models::GPT2Impl>(ds::models::GPT2Config::preset(o.preset));
  model->eval();
  EngineOptions eo;
  eo.num_kv_blocks = o.blocks;
  eo.tensor_parallel = world.get();
  Pipeline pipe(model, eo);

  std::mt19937_64 rng(o.seed + 1);
  std::vector<std::vector<int64_t>> prompts(static_cast<size_t>(o.requests));
  for (auto& p : prompts)
    for (int64_t i = 0; i < o.prompt; ++i) p.push_back(static_cast<int64_t>(rng() % 50000));
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = o.tokens;
  sp.ignore_eos = true;
  pipe.generate({prompts[0]}, sp);  // warm-up: first-touch of the cache and the weights' pages

  const auto t0 = std::chrono::steady_clock::now();
  const auto out = pipe.generate(prompts, sp);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Result r;
  r.tp = tp;
  r.seconds = secs;
  int64_t generated = 0;
  for (const auto& c : out) {
    generated += static_cast<int64_t>(c.tokens.size());
    for (int64_t t : c.tokens) r.checksum = r.checksum * 1000003ULL + static_cast<unsigned long long>(t);
  }
  r.tokens_per_s = static_cast<double>(generated) / secs;
  double bytes = static_cast<double>(pipe.engine().cache().bytes());
  for (const auto& p : model->parameters()) bytes += static_cast<double>(p.numel() * p.element_size());
  r.rank_bytes = bytes;
  if (world->rank() == 0)
    std::printf("RESULT %d %.0f %.3f %.3f %llu\n", r.tp, r.rank_bytes, r.tokens_per_s, r.seconds, r.checksum);
  std::fflush(stdout);
  return 0;
}

Result drive(const Options& o, const std::string& self, int tp) {
  const std::string cmd = ds::bench::mpirun_prefix(tp) + self +
                          fmt::format(" --worker --preset {} --requests {} --prompt {} --tokens {} --blocks {} --seed {} 2>&1",
                                      o.preset, o.requests, o.prompt, o.tokens, o.blocks, o.seed);
  Result r;
  std::sscanf(ds::bench::result_lines(cmd, 1).front().c_str(), "RESULT %d %lf %lf %lf %llu", &r.tp, &r.rank_bytes,
              &r.tokens_per_s, &r.seconds, &r.checksum);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool worker_mode = false;
  CLI::App app{"tp_inference: tensor-parallel inference vs one process (bytes per rank, tokens/s)"};
  app.add_option("--preset", o.preset, "GPT-2 preset (random weights)")->capture_default_str();
  app.add_option("--requests", o.requests, "sequences in flight")->capture_default_str();
  app.add_option("--prompt", o.prompt, "prompt tokens each")->capture_default_str();
  app.add_option("--tokens", o.tokens, "tokens generated each")->capture_default_str();
  app.add_option("--blocks", o.blocks, "KV blocks of 16 tokens (the same count at every size)")->capture_default_str();
  app.add_option("--seed", o.seed, "weights and prompts")->capture_default_str();
  app.add_flag("--worker", worker_mode, "internal: one run at this process's world size");
  CLI11_PARSE(app, argc, argv);
  mallopt(M_MMAP_THRESHOLD, 64 << 20);  // as ds-generate: keep the forward's temporaries mapped
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  try {
    if (worker_mode) return worker(o);
    const std::string self = argv[0];
    const Result one = drive(o, self, 1), two = drive(o, self, 2);
    std::printf("GPT-2 %s, %lld requests x (%lld prompt + %lld generated) tokens, greedy, fp32, %lld KV blocks of 16\n",
                o.preset.c_str(), static_cast<long long>(o.requests), static_cast<long long>(o.prompt),
                static_cast<long long>(o.tokens), static_cast<long long>(o.blocks));
    for (const Result* r : {&one, &two})
      std::printf("  TP=%d: %.1f MiB per rank (parameters + KV cache), %.1f tokens/s (%.2f s)\n", r->tp,
                  r->rank_bytes / (1 << 20), r->tokens_per_s, r->seconds);
    if (one.checksum != two.checksum) {
      std::printf("ERROR: TP=2 generated other tokens than TP=1 (checksums %llu vs %llu)\n", two.checksum, one.checksum);
      return 1;
    }
    std::printf("  same tokens at TP=1 and TP=2\n");
    std::printf("BENCH tp2_inference_rank_bytes ours=%.0f ref=%.0f unit=bytes ratio=%.4f\n", two.rank_bytes,
                one.rank_bytes, two.rank_bytes / one.rank_bytes);
    std::printf("BENCH tp2_inference_tokens_per_s ours=%.1f ref=%.1f unit=tokens_per_s ratio=%.3f\n", two.tokens_per_s,
                one.tokens_per_s, two.tokens_per_s / one.tokens_per_s);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tp_inference: %s\n", e.what());
    return 1;
  }
}
