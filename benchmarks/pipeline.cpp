// pipeline: pipeline parallelism vs data parallelism at world 4 (real MPI ranks): the measured
// bubble of DeepSpeed's 1F1B schedule against its theory (p - 1) / (m + p - 1) for m = 4, 8, 16
// micro-batches, per-rank model-state bytes, tokens/s. GPT-2 8 layers, fp32, Adam, ZeRO 0.
//
//   ./build/benchmarks/pipeline                  # drives: mpirun -np 4 <self> --worker --stages S --gas M
//   ./build/benchmarks/pipeline --vocab 4096     # a small vocabulary (the embedding no longer dominates)
//
// Ends with
//   BENCH pipe_bubble_vs_theory ours=<measured bubble> ref=<theory> unit=fraction ratio=..  (the worst m)
// (the bubble measured on the busiest stage, whose idle time is the schedule's fill and drain; the
// idle time averaged over the stages, imbalance included, is printed beside it)
//   BENCH pipe4_state_bytes ours=<PP=4: the heaviest stage's bytes> ref=<DP=4 bytes/rank> unit=bytes ratio=..
//   BENCH pipe4_step_vs_dp ours=<PP=4 tokens/s> ref=<DP=4 tokens/s> unit=tokens_per_s ratio=..
//   BENCH pipe4_peak_rss ours=<PP=4: the largest rank's peak RSS> ref=<DP=4's> unit=bytes ratio=..
//   BENCH pipe4_build_rss ours=<PP=4: the lightest rank's peak RSS once the engine is built> ref=<the
//         same, every rank building the whole model first> unit=bytes ratio=..
// The stages are built as ds-train builds them: each rank materialises only its stage's layers
// (initialize_pipeline with a model builder); one more PP=4 run cut from the whole model that every
// rank builds first shows what that saves in peak RSS.
// A stage's idle share is its batch time (the optimizer step left out) not spent in forward and
// backward passes. On one machine the ranks share its cores:
// a stage's passes run slower while all four compute (the steady 1F1B phase) than while two do, so
// the wall-clock bubble is only an approximation of the schedule's. Bytes are the engine ledger's.
#include <deepspeed/deepspeed.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_engine.h"
#include "comm/comm.h"
#include "models/causal_lm.h"
#include "models/gpt2.h"
#include "util/system_info.h"

namespace {

struct Options {
  int world = 4;
  int stages = 1, gas = 8;  // worker: pipeline.stages and micro-batches per step
  int64_t layers = 8, embd = 512, heads = 16, vocab = 50257, seq = 128, micro = 1;
  int steps = 3, warmup = 1;
  bool whole = false;  // worker: every rank builds the whole model, then cuts its stage
};

struct Result {
  int stages = 0, gas = 0;
  double tokens_per_s = 0, state_bytes = 0, bubble = 0, busiest_bubble = 0, peak_rss = 0, build_rss = 0;
};

ds::Config config_for(const Options& o) {
  return ds::load_config_text(fmt::format(R"({{"train_micro_batch_size_per_gpu": {}, "gradient_accumulation_steps": {},
      "pipeline": {{"stages": {}}}, "optimizer": {{"type": "Adam", "params": {{"lr": 1e-4}}}},
      "zero_optimization": {{"stage": 0}} }})",
                                          o.micro, o.gas, o.stages),
                              o.world, "<pipeline bench>");
}

ds::models::GPT2Config model_config(const Options& o) {
  ds::models::GPT2Config c;
  c.vocab_size = o.vocab;
  c.n_positions = o.seq;
  c.n_embd = o.embd;
  c.n_layer = o.layers;
  c.n_head = o.heads;
  return c;
}

ds::PipelineEngine make_engine(const Options& o) {
  const ds::models::GPT2Config c = model_config(o);
  torch::manual_seed(1234);
  const ds::parallel::PipelineModuleOptions pipe{"parameters", ds::models::lm_loss};
  if (o.whole) return ds::initialize_pipeline(ds::models::GPT2(c).ptr(), config_for(o), pipe);
  return ds::initialize_pipeline(
      [&c](const ds::nn::LayerSelection& selection) {
        auto m = std::make_shared<ds::models::GPT2Impl>(c, selection);
        return ds::parallel::BuiltModel{m, &m->layers()};
      },
      config_for(o), pipe);
}

torch::Tensor batch(const Options& o, int step, int micro, int dp_rank) {
  torch::manual_seed(99 + step * 131 + micro * 7 + dp_rank);
  return torch::randint(0, o.vocab, {o.micro, o.seq}, torch::kLong);
}

// One worker run: PP over o.stages (o.stages = 1: plain data parallelism through the same engine).
Result run(const Options& o) {
  auto engine = make_engine(o);
  const double build_rss = double(ds::peak_rss_bytes());  // the model built, the engine ready
  const int dp = engine.topology().data().size(), d = engine.topology().data().rank();
  double total = 0, compute = 0, secs = 0;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    if (s == o.warmup) engine.communicator().barrier();
    const auto t0 = std::chrono::steady_clock::now();
    int m = 0;
    engine.train_batch([&] {
      auto idx = batch(o, s, m++, d);
      return ds::PipeBatch{idx, idx};
    });
    if (s < o.warmup) continue;
    secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto& t = engine.last_batch_times();
    total += t.total_s - t.step_s;
    compute += t.compute_s;
  }
  // Idle share: averaged over the ranks (imbalance between stages included) and on the busiest
  // stage (the schedule's fill and drain alone); the heaviest rank's states; the slowest rank's time.
  const double idle = 1.0 - compute / total;
  double v[4] = {idle, ds::bench::model_state_bytes(engine.memory()), secs, double(ds::peak_rss_bytes())},
         busiest = idle, lightest_build = build_rss;
  auto& world = engine.communicator();
  world.all_reduce(ds::comm::Buffer(&v[0], 1), ds::comm::ReduceOp::Sum, "bench_bubble");
  world.all_reduce(ds::comm::Buffer(&v[1], 3), ds::comm::ReduceOp::Max, "bench_bytes");
  // The heaviest rank's build peak is its training states' (the embedding's stage); the lightest
  // rank's shows what building the whole model first costs every stage.
  world.all_reduce(ds::comm::Buffer(&lightest_build, 1), ds::comm::ReduceOp::Min, "bench_build");
  world.all_reduce(ds::comm::Buffer(&busiest, 1), ds::comm::ReduceOp::Min, "bench_busiest");
  Result r;
  r.stages = o.stages;
  r.gas = o.gas;
  r.bubble = v[0] / world.size();
  r.busiest_bubble = busiest;
  r.state_bytes = v[1];
  r.tokens_per_s = double(o.steps) * o.gas * o.micro * o.seq * dp / v[2];
  r.peak_rss = v[3];
  r.build_rss = lightest_build;
  if (engine.rank() == 0)
    std::printf("RESULT %d %d %.6f %.0f %.6f %.6f %.0f %.0f\n", r.stages, r.gas, r.tokens_per_s, r.state_bytes, r.bubble,
                r.busiest_bubble, r.peak_rss, r.build_rss);
  return r;
}

Result launch(Options o, int stages, int gas, const std::string& self, bool whole = false) {
  const std::string cmd =
      ds::bench::mpirun_prefix(o.world) + self +
      fmt::format(" --worker --world {} --stages {} --gas {} --layers {} --embd {} --heads {} --vocab {} --seq {} "
                  "--micro {} --steps {} --warmup {}{} 2>&1",
                  o.world, stages, gas, o.layers, o.embd, o.heads, o.vocab, o.seq, o.micro, o.steps, o.warmup,
                  whole ? " --whole" : "");
  Result r;
  std::sscanf(ds::bench::result_lines(cmd, 1).front().c_str(), "RESULT %d %d %lf %lf %lf %lf %lf %lf", &r.stages,
              &r.gas, &r.tokens_per_s, &r.state_bytes, &r.bubble, &r.busiest_bubble, &r.peak_rss, &r.build_rss);
  std::fprintf(stderr, "  world %d, PP=%d%s, %d micro-batches: %.1f tokens/s, idle %.3f (busiest stage %.3f), peak RSS %.0f MB (lightest "
               "rank %.0f MB once built)\n",
               o.world, stages, whole ? " (whole model built first)" : "", gas, r.tokens_per_s, r.bubble,
               r.busiest_bubble, r.peak_rss / 1e6, r.build_rss / 1e6);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool worker_mode = false;
  CLI::App app{"pipeline: 1F1B pipeline parallelism vs data parallelism — bubble, model-state bytes, tokens/s"};
  app.add_option("--world", o.world)->capture_default_str();
  app.add_option("--stages", o.stages, "worker: pipeline.stages")->capture_default_str();
  app.add_option("--gas", o.gas, "worker: micro-batches per step")->capture_default_str();
  app.add_option("--layers", o.layers)->capture_default_str();
  app.add_option("--embd", o.embd)->capture_default_str();
  app.add_option("--heads", o.heads)->capture_default_str();
  app.add_option("--vocab", o.vocab)->capture_default_str();
  app.add_option("--seq", o.seq)->capture_default_str();
  app.add_option("--micro", o.micro, "micro-batch size")->capture_default_str();
  app.add_option("--steps", o.steps, "measured steps")->capture_default_str();
  app.add_option("--warmup", o.warmup)->capture_default_str();
  app.add_flag("--whole", o.whole, "worker: build the whole model on every rank, then cut the stage");
  app.add_flag("--worker", worker_mode, "internal: one run at this process's world size");
  CLI11_PARSE(app, argc, argv);
  if (worker_mode) {
    run(o);
    return 0;
  }
  const int p = o.world;
  const Result dp = launch(o, 1, 8, argv[0]);
  std::vector<Result> pp;
  for (int m : {4, 8, 16}) pp.push_back(launch(o, p, m, argv[0]));
  const Result pp_whole = launch(o, p, 8, argv[0], /*whole=*/true);
  fmt::print("\nPP={} vs DP={} — GPT-2 {} layers x {} wide, {} heads, vocab {}, micro-batch {} x {} tokens, fp32, Adam, "
             "ZeRO 0\n",
             p, o.world, o.layers, o.embd, o.heads, o.vocab, o.micro, o.seq);
  fmt::print("{:>22} {:>10} {:>10} {:>14} {:>8} {:>8} {:>16} {:>14} {:>14}\n", "mode", "tokens/s", "idle",
             "busiest idle", "theory", "ratio", "state B/rank", "peak RSS MB", "built, min MB");
  fmt::print("{:>22} {:>10.1f} {:>10} {:>14} {:>8} {:>8} {:>16.0f} {:>14.0f} {:>14.0f}\n",
             fmt::format("DP={}, m=8", o.world), dp.tokens_per_s, "-", "-", "-", "-", dp.state_bytes, dp.peak_rss / 1e6,
             dp.build_rss / 1e6);
  double worst = 0;
  const Result* worst_r = &pp.front();
  for (const Result& r : pp) {
    const double theory = double(p - 1) / double(r.gas + p - 1);
    fmt::print("{:>22} {:>10.1f} {:>10.3f} {:>14.3f} {:>8.3f} {:>8.3f} {:>16.0f} {:>14.0f} {:>14.0f}\n",
               fmt::format("PP={}, m={}", p, r.gas), r.tokens_per_s, r.bubble, r.busiest_bubble, theory,
               r.busiest_bubble / theory, r.state_bytes, r.peak_rss / 1e6, r.build_rss / 1e6);
    if (r.busiest_bubble / theory > worst) worst = r.busiest_bubble / theory, worst_r = &r;
  }
  fmt::print("{:>22} {:>10.1f} {:>10.3f} {:>14.3f} {:>8} {:>8} {:>16.0f} {:>14.0f} {:>14.0f}\n",
             fmt::format("PP={}, m=8, whole built", p), pp_whole.tokens_per_s, pp_whole.bubble, pp_whole.busiest_bubble,
             "-", "-", pp_whole.state_bytes, pp_whole.peak_rss / 1e6, pp_whole.build_rss / 1e6);
  const double theory = double(p - 1) / double(worst_r->gas + p - 1);
  fmt::print("(idle: share of a stage's batch time outside its forward and backward passes, the optimizer step left "
             "out, averaged over the stages; busiest idle: the stage with the most compute, whose idle time is the "
             "schedule's fill and drain; the others' extra idle is imbalance between stages)\n");
  fmt::print("BENCH pipe_bubble_vs_theory ours={:.4f} ref={:.4f} unit=fraction ratio={:.3f}\n", worst_r->busiest_bubble,
             theory, worst);
  fmt::print("BENCH pipe4_state_bytes ours={:.0f} ref={:.0f} unit=bytes ratio={:.4f}\n", pp[1].state_bytes,
             dp.state_bytes, pp[1].state_bytes / dp.state_bytes);
  fmt::print("BENCH pipe4_peak_rss ours={:.0f} ref={:.0f} unit=bytes ratio={:.4f}\n", pp[1].peak_rss, dp.peak_rss,
             pp[1].peak_rss / dp.peak_rss);
  fmt::print("BENCH pipe4_build_rss ours={:.0f} ref={:.0f} unit=bytes ratio={:.4f}\n", pp[1].build_rss,
             pp_whole.build_rss, pp[1].build_rss / pp_whole.build_rss);
  fmt::print("BENCH pipe4_step_vs_dp ours={:.1f} ref={:.1f} unit=tokens_per_s ratio={:.3f}\n", pp[1].tokens_per_s,
             dp.tokens_per_s, pp[1].tokens_per_s / dp.tokens_per_s);
  return 0;
}
