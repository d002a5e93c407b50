// zero_scaling: step throughput and per-rank model-state bytes of ZeRO stages 0-3 at world sizes
// 1, 2, 4 (real MPI ranks), for one GPT-2 configuration, bf16 parameters with bf16 gradient
// accumulation (so the DESIGN §5 formulas with K = 12 apply), Adam.
//
//   ./build/benchmarks/zero_scaling                       # drives: mpirun -np W <self> --worker --stages S
//   ./build/benchmarks/zero_scaling --worlds 1,2 --layers 4 --embd 256
//   ./build/benchmarks/zero_scaling --zero3-vs-zero1        # issue 15's stage-3 overhead check
//
// Ends with
//   BENCH zero3_step_vs_stage0 ours=<stage-3 tokens/s> ref=<stage-0 tokens/s> unit=tokens_per_s ratio=..
//   BENCH zero3_state_bytes ours=<stage-3 bytes/rank> ref=<(4+K)Ψ/N> unit=bytes ratio=..
// both at the largest world measured; with --zero3-vs-zero1 (world 2, stages 1 and 3, fp32, GPT 6
// layers x 384, vocab 50257) instead
//   BENCH zero3_vs_zero1 ours=<stage-3 tokens/s> ref=<stage-1 tokens/s> unit=tokens_per_s ratio=..  (target >= 0.85)
//   BENCH zero3_step_peak_vs_rest ours=<peak RSS during a step> ref=<RSS between steps> unit=bytes ratio=..
// On one machine the ranks share its cores, so tokens/s is a
// measure of ZeRO's overhead (communication, gathers), not of scaling.
#include <deepspeed/deepspeed.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_engine.h"
#include "comm/comm.h"
#include "models/gpt2.h"
#include "util/memory_ledger.h"
#include "util/system_info.h"
#include "zero/model_states.h"
#include "zero/sharded_states.h"

namespace {

struct Options {
  std::vector<int> worlds{1, 2, 4};
  std::vector<int> stages{0, 1, 2, 3};
  int64_t layers = 4, embd = 256, heads = 4, vocab = 50257, seq = 128, micro = 2;
  int steps = 4, warmup = 1;
  std::string dtype = "bf16";  // bf16 (with bf16 gradient accumulation) or fp32
  int64_t reuse_distance = -1;  // stage3_max_reuse_distance; -1: DeepSpeed's default
};

struct Result {
  int world = 0, stage = 0;
  double tokens_per_s = 0, state_bytes = 0, psi = 0, peak_rss = 0;
  double rest_rss = 0, step_peak_rss = 0;  // between steps; the peak during one step after them
  double live_peak = 0;  // stage 3: the most parameter elements gathered at once (persistent ones aside)
};

ds::models::GPT2Config model_config(const Options& o) {
  ds::models::GPT2Config c;
  c.vocab_size = o.vocab;
  c.n_positions = o.seq;
  c.n_embd = o.embd;
  c.n_layer = o.layers;
  c.n_head = o.heads;
  return c;
}

// One stage at this process's world size; every rank runs it, rank 0's figures are returned.
Result run_stage(const Options& o, int stage) {
  torch::manual_seed(1234);
  auto model = ds::models::GPT2(model_config(o));
  const bool bf16 = o.dtype == "bf16";
  auto engine = ds::initialize(model, nlohmann::json::parse(fmt::format(R"({{
      "train_micro_batch_size_per_gpu": {}, "gradient_clipping": 0.0, "bf16": {{"enabled": {}}},
      "data_types": {{"grad_accum_dtype": "{}"}}, "optimizer": {{"type": "Adam", "params": {{"lr": 1e-4}}}},
      "zero_optimization": {{"stage": {}{}}} }})", o.micro, bf16, bf16 ? "bf16" : "fp32", stage,
      o.reuse_distance < 0 ? "" : fmt::format(R"(, "stage3_max_reuse_distance": {})", o.reuse_distance))));
  auto batch = [&](int s) {
    torch::manual_seed(99 + s * 131 + engine.rank());
    return torch::randint(0, o.vocab, {o.micro, o.seq}, torch::kLong);
  };
  const double secs = ds::bench::timed_steps(engine, o.warmup, o.steps, batch);
  const auto& m = engine.memory();
  Result r;
  r.rest_rss = double(ds::current_rss_bytes());
  if (ds::reset_peak_rss()) {  // one more step, its peak alone
    auto idx = batch(o.warmup + o.steps);
    engine.backward(engine.forward(idx, idx));
    engine.step();
    r.step_peak_rss = double(ds::peak_rss_bytes());
  }
  if (const auto* z3 = dynamic_cast<const ds::zero::ShardedStates*>(&engine.model_states()))
    r.live_peak = double(z3->parameters().peak_live_numel());
  r.world = engine.world_size();
  r.stage = stage;
  r.tokens_per_s = double(o.steps) * o.micro * o.seq * engine.world_size() / secs;
  r.state_bytes = ds::bench::model_state_bytes(m);
  r.psi = double(engine.model_states().numel());
  r.peak_rss = double(ds::peak_rss_bytes());
  return r;
}

int worker(const Options& o) {
  auto comm = ds::comm::make_communicator(ds::comm::Backend::Auto);  // one MPI session for all stages
  for (int stage : o.stages) {
    Result r = run_stage(o, stage);
    if (comm->rank() == 0)
      std::printf("RESULT %d %d %.6f %.0f %.0f %.0f %.0f %.0f %.0f\n", r.world, r.stage, r.tokens_per_s, r.state_bytes,
                  r.psi, r.peak_rss, r.rest_rss, r.step_peak_rss, r.live_peak);
    std::fflush(stdout);
  }
  return 0;
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

std::vector<Result> launch(const Options& o, int world, const std::string& self) {
  const std::string cmd =
      ds::bench::mpirun_prefix(world) +
      fmt::format("{} --worker --stages {} --layers {} --embd {} --heads {} --vocab {} --seq {} --micro {} "
                  "--steps {} --warmup {} --dtype {} --reuse-distance {} 2>&1",
                  self, join(o.stages), o.layers, o.embd, o.heads, o.vocab, o.seq, o.micro, o.steps, o.warmup, o.dtype,
                  o.reuse_distance);
  std::vector<Result> out;
  for (const std::string& line : ds::bench::result_lines(cmd, o.stages.size())) {
    Result r;
    std::sscanf(line.c_str(), "RESULT %d %d %lf %lf %lf %lf %lf %lf %lf", &r.world, &r.stage, &r.tokens_per_s,
                &r.state_bytes, &r.psi, &r.peak_rss, &r.rest_rss, &r.step_peak_rss, &r.live_peak);
    out.push_back(r);
    std::fprintf(stderr, "  world %d stage %d: %.1f tokens/s\n", r.world, r.stage, r.tokens_per_s);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool worker_mode = false;
  CLI::App app{"zero_scaling: ZeRO stages 0-3 at world sizes 1, 2, 4 — tokens/s and model-state bytes per rank"};
  app.add_option("--worlds", o.worlds)->delimiter(',')->capture_default_str();
  app.add_option("--stages", o.stages)->delimiter(',')->capture_default_str();
  app.add_option("--layers", o.layers)->capture_default_str();
  app.add_option("--embd", o.embd)->capture_default_str();
  app.add_option("--heads", o.heads)->capture_default_str();
  app.add_option("--vocab", o.vocab)->capture_default_str();
  app.add_option("--seq", o.seq)->capture_default_str();
  app.add_option("--micro", o.micro, "micro-batch per rank")->capture_default_str();
  app.add_option("--steps", o.steps, "measured steps")->capture_default_str();
  app.add_option("--warmup", o.warmup)->capture_default_str();
  app.add_option("--reuse-distance", o.reuse_distance, "stage3_max_reuse_distance (-1: DeepSpeed's default)")
      ->capture_default_str();
  app.add_option("--dtype", o.dtype)->check(CLI::IsMember({"bf16", "fp32"}))->capture_default_str();
  bool z3_vs_z1 = false;
  app.add_flag("--zero3-vs-zero1", z3_vs_z1, "world 2, stages 1 and 3, fp32, 6 layers x 384: the stage-3 overhead check");
  app.add_flag("--worker", worker_mode, "internal: run the stages at this process's world size");
  CLI11_PARSE(app, argc, argv);
  if (worker_mode) return worker(o);
  if (z3_vs_z1) {
    o.worlds = {2};
    o.stages = {1, 3};
    o.layers = 6;
    o.embd = 384;
    o.heads = 6;
    o.dtype = "fp32";
  }

  std::vector<Result> all;
  // One process group per (world, stage), so peak RSS belongs to that stage alone.
  for (int w : o.worlds)
    for (int stage : o.stages) {
      Options one = o;
      one.stages = {stage};
      auto rs = launch(one, w, argv[0]);
      all.insert(all.end(), rs.begin(), rs.end());
    }
  std::optional<Result> lean;  // --zero3-vs-zero1: stage 3 again with stage3_max_reuse_distance 0
  if (z3_vs_z1) {
    Options one = o;
    one.stages = {3};
    one.reuse_distance = 0;
    auto rs = launch(one, 2, argv[0]);
    if (!rs.empty()) lean = rs.front();
  }
  std::map<int, double> stage0;  // world → stage-0 tokens/s
  for (const auto& r : all)
    if (r.stage == 0) stage0[r.world] = r.tokens_per_s;
  const double k = 12.0;
  auto formula = [&](const Result& r) {
    const double n = r.world, psi = r.psi;
    switch (r.stage) {
      case 0: return (2 + 2 + k) * psi;
      case 1: return 4 * psi + k * psi / n;
      case 2: return 2 * psi + (2 + k) * psi / n;
      default: return (4 + k) * psi / n;
    }
  };
  fmt::print("\nZeRO scaling — GPT-2 {} layers × {} wide, vocab {} (Ψ = {:.1f}M), micro-batch {} × {} tokens per rank, {}, Adam, "
             "OPENBLAS_CORETYPE={}\n",
             o.layers, o.embd, o.vocab, all.empty() ? 0.0 : all[0].psi / 1e6, o.micro, o.seq, o.dtype,
             std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "(unset)");
  fmt::print("{:>5} {:>5} {:>12} {:>10} {:>16} {:>16} {:>8} {:>12} {:>12} {:>12}\n", "world", "stage", "tokens/s", "vs stage0",
             "state B/rank", "DESIGN §5", "ratio", "peak RSS", "rest RSS", "step peak");
  for (const auto& r : all) {
    const double base = stage0.count(r.world) ? stage0[r.world] : 0.0;
    fmt::print("{:>5} {:>5} {:>12.1f} {:>10.3f} {:>16.0f} {:>16.0f} {:>8.3f} {:>9.0f} MiB {:>8.0f} MiB {:>8.0f} MiB\n",
               r.world, r.stage, r.tokens_per_s, base > 0 ? r.tokens_per_s / base : 0.0, r.state_bytes, formula(r),
               r.state_bytes / formula(r), r.peak_rss / 1048576.0, r.rest_rss / 1048576.0, r.step_peak_rss / 1048576.0);
  }
  if (z3_vs_z1) {
    const Result* z1 = nullptr;
    const Result* z3 = nullptr;
    for (const auto& r : all) (r.stage == 1 ? z1 : z3) = &r;
    if (z1 && z3) {
      fmt::print("BENCH zero3_vs_zero1 ours={:.1f} ref={:.1f} unit=tokens_per_s ratio={:.3f}\n", z3->tokens_per_s,
                 z1->tokens_per_s, z3->tokens_per_s / z1->tokens_per_s);
      fmt::print("BENCH zero3_step_peak_vs_rest ours={:.0f} ref={:.0f} unit=bytes ratio={:.3f}\n", z3->step_peak_rss,
                 z3->rest_rss, z3->step_peak_rss / z3->rest_rss);
    }
    // One layer: a transformer block (12·C² + 13·C elements); the embedding layer holds the
    // vocabulary matrix (V·C, tied with the head) and the positions.
    const double block = 12.0 * o.embd * o.embd + 13.0 * o.embd, embed = double(o.vocab + o.seq) * o.embd;
    if (z3)
      fmt::print("stage 3 (stage3_max_reuse_distance default): at most {:.2f}M parameter elements gathered (a block is "
                 "{:.2f}M, the embedding {:.2f}M, the model {:.2f}M)\n",
                 z3->live_peak / 1e6, block / 1e6, embed / 1e6, z3->psi / 1e6);
    if (lean && z1) {  // the memory-lean setting: every layer released after its forward
      fmt::print("stage 3 with stage3_max_reuse_distance 0: {:.1f} tokens/s, rest RSS {:.0f} MiB, step peak {:.0f} MiB, "
                 "at most {:.2f}M parameter elements gathered\n",
                 lean->tokens_per_s, lean->rest_rss / 1048576.0, lean->step_peak_rss / 1048576.0, lean->live_peak / 1e6);
      fmt::print("BENCH zero3_reuse0_vs_zero1 ours={:.1f} ref={:.1f} unit=tokens_per_s ratio={:.3f}\n", lean->tokens_per_s,
                 z1->tokens_per_s, lean->tokens_per_s / z1->tokens_per_s);
      fmt::print("BENCH zero3_reuse0_step_peak_vs_rest ours={:.0f} ref={:.0f} unit=bytes ratio={:.3f}\n",
                 lean->step_peak_rss, lean->rest_rss, lean->step_peak_rss / lean->rest_rss);
    }
    return 0;
  }
  const Result* z3 = nullptr;
  for (const auto& r : all)
    if (r.stage == 3 && (!z3 || r.world > z3->world)) z3 = &r;
  if (z3 && stage0.count(z3->world)) {
    const double ref = stage0[z3->world];
    fmt::print("BENCH zero3_step_vs_stage0 ours={:.1f} ref={:.1f} unit=tokens_per_s ratio={:.3f}\n", z3->tokens_per_s,
               ref, z3->tokens_per_s / ref);
  }
  if (z3)
    fmt::print("BENCH zero3_state_bytes ours={:.0f} ref={:.0f} unit=bytes ratio={:.4f}\n", z3->state_bytes, formula(*z3),
               z3->state_bytes / formula(*z3));
  return 0;
}
