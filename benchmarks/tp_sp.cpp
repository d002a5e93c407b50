// tp_sp: data parallelism vs AutoTP tensor parallelism at one world size (real MPI ranks): tokens/s,
// per-rank model-state bytes and peak RSS, GPT-2 with 16 heads, fp32, Adam, ZeRO stage 0 by default
// (TP's own saving; --stage 1-3 adds ZeRO over the data-parallel group, which then has fewer ranks).
//
//   ./build/benchmarks/tp_sp                     # drives: mpirun -np W <self> --worker --tp T
//   ./build/benchmarks/tp_sp --world 4 --layers 8 --embd 512 --vocab 50257
//
// Ends with
//   BENCH tp2_state_bytes ours=<TP=2 x DP=W/2 bytes/rank> ref=<DP=W bytes/rank> unit=bytes ratio=..
//   BENCH tp2_step_vs_dp ours=<TP=2 tokens/s> ref=<DP tokens/s> unit=tokens_per_s ratio=..
// Tokens/s counts every rank's tokens, and a tensor-parallel group shares its batch, so TP=2 trains
// on half as many tokens per step. On one machine the ranks share its cores: tokens/s measures the
// cost of TP's collectives, not scaling. Embeddings and the LM head stay whole on every rank (no
// vocab-parallel embedding yet), so a large vocabulary bounds the state ratio from below.
#include <deepspeed/deepspeed.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "bench_engine.h"
#include "comm/comm.h"
#include "models/gpt2.h"
#include "parallel/topology.h"
#include "util/memory_ledger.h"
#include "util/system_info.h"
#include "zero/model_states.h"

namespace {

struct Options {
  int world = 4;
  int tp = 1;  // worker: this run's autotp_size
  int64_t layers = 8, embd = 512, heads = 16, vocab = 50257, seq = 128, micro = 2;
  int steps = 4, warmup = 1, stage = 0;
};

struct Result {
  int tp = 0;
  double tokens_per_s = 0, state_bytes = 0, psi = 0, peak_rss = 0;
};

Result run(const Options& o) {
  ds::models::GPT2Config c;
  c.vocab_size = o.vocab;
  c.n_positions = o.seq;
  c.n_embd = o.embd;
  c.n_layer = o.layers;
  c.n_head = o.heads;
  torch::manual_seed(1234);
  auto model = ds::models::GPT2(c);
  auto engine = ds::initialize(model, nlohmann::json::parse(fmt::format(R"({{
      "train_micro_batch_size_per_gpu": {}, "gradient_clipping": 1.0, "tensor_parallel": {{"autotp_size": {}}},
      "optimizer": {{"type": "Adam", "params": {{"lr": 1e-4}}}}, "zero_optimization": {{"stage": {}}} }})",
                                                                        o.micro, o.tp, o.stage)));
  const int dp_rank = engine.topology().data_parallel().rank(), dp = engine.topology().data_parallel().size();
  auto batch = [&](int s) {  // by data-parallel rank: the ranks of a tensor-parallel group share it
    torch::manual_seed(99 + s * 131 + dp_rank);
    return torch::randint(0, o.vocab, {o.micro, o.seq}, torch::kLong);
  };
  const double secs = ds::bench::timed_steps(engine, o.warmup, o.steps, batch);
  const auto& m = engine.memory();
  Result r;
  r.tp = o.tp;
  r.tokens_per_s = double(o.steps) * o.micro * o.seq * dp / secs;  // distinct tokens trained on
  r.state_bytes = ds::bench::model_state_bytes(m);
  r.psi = double(engine.model_states().numel());
  r.peak_rss = double(ds::peak_rss_bytes());
  return r;
}

Result launch(const Options& o, int tp, const std::string& self) {
  const std::string cmd =
      ds::bench::mpirun_prefix(o.world) +
      fmt::format("{} --worker --tp {} --layers {} --embd {} --heads {} --vocab {} --seq {} --micro {} --steps {} "
                  "--warmup {} --stage {} 2>&1",
                  self, tp, o.layers, o.embd, o.heads, o.vocab, o.seq, o.micro, o.steps, o.warmup, o.stage);
  Result r;
  std::sscanf(ds::bench::result_lines(cmd, 1).front().c_str(), "RESULT %d %lf %lf %lf %lf", &r.tp, &r.tokens_per_s,
              &r.state_bytes, &r.psi, &r.peak_rss);
  std::fprintf(stderr, "  world %d, TP=%d: %.1f tokens/s\n", o.world, tp, r.tokens_per_s);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool worker_mode = false;
  CLI::App app{"tp_sp: data parallelism vs AutoTP at one world size — tokens/s, model-state bytes and peak RSS per rank"};
  app.add_option("--world", o.world)->capture_default_str();
  app.add_option("--tp", o.tp, "worker: autotp_size")->capture_default_str();
  app.add_option("--layers", o.layers)->capture_default_str();
  app.add_option("--embd", o.embd)->capture_default_str();
  app.add_option("--heads", o.heads)->capture_default_str();
  app.add_option("--vocab", o.vocab)->capture_default_str();
  app.add_option("--seq", o.seq)->capture_default_str();
  app.add_option("--micro", o.micro, "micro-batch per rank")->capture_default_str();
  app.add_option("--steps", o.steps, "measured steps")->capture_default_str();
  app.add_option("--warmup", o.warmup)->capture_default_str();
  app.add_option("--stage", o.stage, "ZeRO stage over the data-parallel group")->capture_default_str();
  app.add_flag("--worker", worker_mode, "internal: one run at this process's world size");
  CLI11_PARSE(app, argc, argv);
  if (worker_mode) {
    auto comm = ds::comm::make_communicator(ds::comm::Backend::Auto);
    const Result r = run(o);
    if (comm->rank() == 0)
      std::printf("RESULT %d %.6f %.0f %.0f %.0f\n", r.tp, r.tokens_per_s, r.state_bytes, r.psi, r.peak_rss);
    return 0;
  }
  // One process group per mode, so peak RSS belongs to that mode alone.
  const Result dp = launch(o, 1, argv[0]);
  const Result tp = launch(o, 2, argv[0]);
  fmt::print("\nTP vs DP — world {}, GPT-2 {} layers × {} wide, {} heads, vocab {} (Ψ = {:.1f}M), micro-batch {} × {} "
             "tokens, fp32, Adam, ZeRO {} over the data-parallel group\n",
             o.world, o.layers, o.embd, o.heads, o.vocab, dp.psi / 1e6, o.micro, o.seq, o.stage);
  fmt::print("{:>12} {:>12} {:>16} {:>12} {:>12}\n", "mode", "tokens/s", "state B/rank", "Ψ/rank", "peak RSS");
  for (const Result* r : {&dp, &tp})
    fmt::print("{:>12} {:>12.1f} {:>16.0f} {:>11.1f}M {:>8.0f} MiB\n",
               r->tp == 1 ? fmt::format("DP={}", o.world) : fmt::format("TP=2 x DP={}", o.world / 2), r->tokens_per_s,
               r->state_bytes, r->psi / 1e6, r->peak_rss / 1048576.0);
  fmt::print("BENCH tp2_state_bytes ours={:.0f} ref={:.0f} unit=bytes ratio={:.4f}\n", tp.state_bytes, dp.state_bytes,
             tp.state_bytes / dp.state_bytes);
  fmt::print("BENCH tp2_step_vs_dp ours={:.1f} ref={:.1f} unit=tokens_per_s ratio={:.3f}\n", tp.tokens_per_s,
             dp.tokens_per_s, tp.tokens_per_s / dp.tokens_per_s);
  return 0;
}
