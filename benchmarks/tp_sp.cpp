// tp_sp: data parallelism vs AutoTP tensor parallelism vs Ulysses sequence parallelism at one world
// size (real MPI ranks): tokens/s, per-rank model-state bytes, activation bytes and peak RSS, GPT-2
// with 16 heads, fp32, Adam, ZeRO stage 0 by default (the parallelism's own saving; --stage 1-3 adds
// ZeRO over the data-parallel group). Then the longest sequence each of DP and SP=2 trains within
// the tensor bytes DP needs at --long-seq tokens (micro-batch 1, the --long-seqs ladder).
//
//   ./build/benchmarks/tp_sp                     # drives: mpirun -np W <self> --worker --tp T --sp S
//   ./build/benchmarks/tp_sp --world 4 --layers 8 --embd 512 --vocab 50257
//
// Ends with
//   BENCH tp2_state_bytes ours=<TP=2 x DP=W/2, vocab-parallel, bytes/rank> ref=<DP=W bytes/rank> unit=bytes ratio=..
//   BENCH tp2_step_vs_dp ours=<TP=2 tokens/s> ref=<DP tokens/s> unit=tokens_per_s ratio=..
//   BENCH sp2_activation_bytes ours=<SP=2 bytes/token/rank> ref=<DP bytes/token/rank> unit=bytes_per_token ratio=..
//   BENCH sp2_step_vs_dp ours=<SP=2 tokens/s> ref=<DP tokens/s> unit=tokens_per_s ratio=..
//   BENCH sp2_max_seq ours=<SP=2 tokens> ref=<DP tokens> unit=tokens ratio=..
// Tokens/s counts distinct tokens: a tensor- or sequence-parallel group shares its batch, so it
// trains on half as many per step. On one machine the ranks share its cores: tokens/s measures the
// cost of the collectives, not scaling. TP runs twice: with the embedding and tied LM head whole on
// every rank (DeepSpeed's AutoTP), where a large vocabulary bounds the state ratio from below, and
// with tensor_parallel.vocab_parallel (the BENCH line), where they split too.
// Bytes are exact CPU tensor bytes (cpu_tensor_bytes.h). "step peak" is one forward + backward's
// peak above what was live before it; at short sequences with GPT-2's vocabulary it is the tied
// embedding's gradients (3 x V x C fp32), the same in every mode. Activation bytes per token are the
// peak's growth per added token along the ladder, which is what sequence parallelism divides.
#include <deepspeed/deepspeed.h>

#include <CLI/CLI.hpp>
#include <fmt/ranges.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench_engine.h"
#include "cpu_tensor_bytes.h"
#include "comm/comm.h"
#include "models/gpt2.h"
#include "parallel/topology.h"
#include "util/memory_ledger.h"
#include "util/system_info.h"
#include "zero/model_states.h"

namespace {

struct Options {
  int world = 4;
  int tp = 1, sp = 1;  // worker: this run's autotp_size and sequence_parallel_size
  bool vocab_parallel = false;  // worker: tensor_parallel.vocab_parallel
  int64_t layers = 8, embd = 512, heads = 16, vocab = 50257, seq = 128, micro = 2;
  int steps = 4, warmup = 1, stage = 0;
  std::vector<int64_t> long_seqs = {512, 640, 768, 896, 1024, 1152, 1280};  // the first is DP's budget
  bool ladder = false;  // worker: climb long_seqs instead of the timed run
};

struct Result {
  int tp = 0, sp = 0, vocab_parallel = 0;
  double tokens_per_s = 0, state_bytes = 0, psi = 0, peak_rss = 0, step_peak = 0;
};

auto make_engine(const Options& o, int64_t n_positions, int64_t micro) {
  ds::models::GPT2Config c;
  c.vocab_size = o.vocab;
  c.n_positions = n_positions;
  c.n_embd = o.embd;
  c.n_layer = o.layers;
  c.n_head = o.heads;
  torch::manual_seed(1234);
  auto model = ds::models::GPT2(c);
  return ds::initialize(model, nlohmann::json::parse(fmt::format(R"({{
      "train_micro_batch_size_per_gpu": {}, "gradient_clipping": 1.0, "tensor_parallel": {{"autotp_size": {}, "vocab_parallel": {}}},
      "sequence_parallel_size": {}, "optimizer": {{"type": "Adam", "params": {{"lr": 1e-4}}}},
      "zero_optimization": {{"stage": {}}} }})",
                                                                 micro, o.tp == 1 ? 0 : o.tp, o.tp > 1 && o.vocab_parallel,
                                                                 o.sp, o.stage)));
}

// A batch by data-parallel rank: the ranks of a tensor- or sequence-parallel group share it.
torch::Tensor batch_for(const Options& o, const ds::Engine& engine, int step, int64_t micro, int64_t seq) {
  torch::manual_seed(99 + step * 131 + engine.topology().data().rank());
  return torch::randint(0, o.vocab, {micro, seq}, torch::kLong);
}

// One forward + backward: the tensor bytes it held at its peak above what was live before it.
template <class Engine>
double step_peak_bytes(Engine& engine, const torch::Tensor& idx) {
  auto& bytes = ds::bench::CpuTensorBytes::install();
  bytes.reset_peak();
  const int64_t before = bytes.live();
  engine.backward(engine.forward(idx, idx));
  const int64_t peak = bytes.peak();
  engine.step();
  return double(peak - before);
}

Result run(const Options& o) {
  ds::bench::CpuTensorBytes::install();
  auto engine = make_engine(o, o.seq, o.micro);
  const int dp = engine.topology().data().size();
  auto batch = [&](int s) { return batch_for(o, engine, s, o.micro, o.seq); };
  const double secs = ds::bench::timed_steps(engine, o.warmup, o.steps, batch);
  const auto& m = engine.memory();
  Result r;
  r.tp = o.tp;
  r.sp = o.sp;
  r.tokens_per_s = double(o.steps) * o.micro * o.seq * dp / secs;  // distinct tokens trained on
  r.state_bytes = ds::bench::model_state_bytes(m);
  r.psi = double(engine.model_states().numel());
  r.step_peak = step_peak_bytes(engine, batch(o.warmup + o.steps));
  r.peak_rss = double(ds::peak_rss_bytes());
  return r;
}

// Every rank's tensor bytes at the peak of one step at each length of the ladder (micro-batch 1):
// "RESULT <seq> <bytes>" lines from rank 0 (the ranks hold the same amounts).
void climb(const Options& o, int rank) {
  auto& bytes = ds::bench::CpuTensorBytes::install();
  auto engine = make_engine(o, o.long_seqs.back(), 1);
  const torch::Tensor first = batch_for(o, engine, 0, 1, o.long_seqs.front());
  engine.backward(engine.forward(first, first));
  engine.step();  // the optimizer's state exists from here on
  for (size_t i = 0; i < o.long_seqs.size(); ++i) {
    bytes.reset_peak();
    auto idx = batch_for(o, engine, int(i) + 1, 1, o.long_seqs[i]);
    engine.backward(engine.forward(idx, idx));
    engine.step();
    if (rank == 0) std::printf("RESULT %lld %lld\n", static_cast<long long>(o.long_seqs[i]), static_cast<long long>(bytes.peak()));
  }
}

std::string worker_args(const Options& o, int tp, int sp, bool vocab_parallel = false) {
  return fmt::format("--worker{} --tp {} --sp {} --layers {} --embd {} --heads {} --vocab {} --seq {} --micro {} --steps {} "
                     "--warmup {} --stage {} --long-seqs {}",
                     vocab_parallel ? " --vocab-parallel" : "", tp, sp, o.layers, o.embd, o.heads, o.vocab, o.seq, o.micro, o.steps, o.warmup, o.stage,
                     fmt::join(o.long_seqs, " "));
}

Result launch(const Options& o, int tp, int sp, const std::string& self, bool vocab_parallel = false) {
  const std::string cmd = ds::bench::mpirun_prefix(o.world) + self + " " + worker_args(o, tp, sp, vocab_parallel) + " 2>&1";
  Result r;
  r.vocab_parallel = vocab_parallel;
  std::sscanf(ds::bench::result_lines(cmd, 1).front().c_str(), "RESULT %d %d %lf %lf %lf %lf %lf", &r.tp, &r.sp,
              &r.tokens_per_s, &r.state_bytes, &r.psi, &r.peak_rss, &r.step_peak);
  std::fprintf(stderr, "  world %d, TP=%d, SP=%d: %.1f tokens/s\n", o.world, tp, sp, r.tokens_per_s);
  return r;
}

// (seq, peak tensor bytes per rank) along the ladder.
std::vector<std::pair<int64_t, double>> launch_ladder(const Options& o, int sp, const std::string& self) {
  const std::string cmd = ds::bench::mpirun_prefix(o.world) + self + " " + worker_args(o, 1, sp) + " --ladder 2>&1";
  std::vector<std::pair<int64_t, double>> out;
  for (const std::string& line : ds::bench::result_lines(cmd, o.long_seqs.size())) {
    long long seq = 0;
    double b = 0;
    std::sscanf(line.c_str(), "RESULT %lld %lf", &seq, &b);
    out.emplace_back(seq, b);
  }
  std::fprintf(stderr, "  world %d, SP=%d: ladder done\n", o.world, sp);
  return out;
}

// The longest length whose peak fits `budget`: between the last ladder length that fits and the
// first that does not, the peak grows linearly (activations are per token), so the crossing is
// interpolated; 0 when none fits.
double longest_within(const std::vector<std::pair<int64_t, double>>& ladder, double budget) {
  double best = 0;
  for (size_t i = 0; i < ladder.size(); ++i) {
    if (ladder[i].second > budget) break;
    best = double(ladder[i].first);
    if (i + 1 < ladder.size() && ladder[i + 1].second > budget) {
      const auto [t0, b0] = ladder[i];
      const auto [t1, b1] = ladder[i + 1];
      best = double(t0) + (budget - b0) / (b1 - b0) * double(t1 - t0);
    }
  }
  return best;
}

// Activation bytes per token: how fast the step's peak grows with the sequence over the ladder's
// upper half (below it a mode's peak can sit on a floor set by the tied embedding's gradients).
double bytes_per_token(const std::vector<std::pair<int64_t, double>>& ladder) {
  const auto& lo = ladder[ladder.size() / 2];
  const auto& hi = ladder.back();
  return (hi.second - lo.second) / double(hi.first - lo.first);
}

std::string mode_name(const Result& r, int world) {
  if (r.tp > 1) return fmt::format("TP={} x DP={}{}", r.tp, world / r.tp, r.vocab_parallel ? " vocab" : "");
  if (r.sp > 1) return fmt::format("SP={} x DP={}", r.sp, world / r.sp);
  return fmt::format("DP={}", world);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool worker_mode = false;
  CLI::App app{"tp_sp: data parallelism vs AutoTP vs Ulysses at one world size — tokens/s, model-state and activation bytes, peak RSS per rank, longest sequence"};
  app.add_option("--world", o.world)->capture_default_str();
  app.add_option("--tp", o.tp, "worker: autotp_size")->capture_default_str();
  app.add_option("--sp", o.sp, "worker: sequence_parallel_size")->capture_default_str();
  app.add_option("--long-seqs", o.long_seqs, "the max-sequence ladder (the first is DP's budget)")->capture_default_str();
  app.add_flag("--ladder", o.ladder, "worker: climb the ladder");
  app.add_flag("--vocab-parallel", o.vocab_parallel, "worker: tensor_parallel.vocab_parallel");
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
    if (o.ladder) {
      climb(o, comm->rank());
      return 0;
    }
    const Result r = run(o);
    if (comm->rank() == 0)
      std::printf("RESULT %d %d %.6f %.0f %.0f %.0f %.0f\n", r.tp, r.sp, r.tokens_per_s, r.state_bytes, r.psi,
                  r.peak_rss, r.step_peak);
    return 0;
  }
  // One process group per mode, so peak RSS belongs to that mode alone.
  const Result dp = launch(o, 1, 1, argv[0]);
  const Result tp_whole = launch(o, 2, 1, argv[0]);
  const Result tp = launch(o, 2, 1, argv[0], /*vocab_parallel=*/true);
  const Result sp = launch(o, 1, 2, argv[0]);
  const auto dp_ladder = launch_ladder(o, 1, argv[0]);
  const auto sp_ladder = launch_ladder(o, 2, argv[0]);
  fmt::print("\nDP vs TP vs SP — world {}, GPT-2 {} layers × {} wide, {} heads, vocab {} (Ψ = {:.1f}M), micro-batch {} × {} "
             "tokens, fp32, Adam, ZeRO {} over the data-parallel group\n",
             o.world, o.layers, o.embd, o.heads, o.vocab, dp.psi / 1e6, o.micro, o.seq, o.stage);
  fmt::print("{:>18} {:>12} {:>16} {:>12} {:>16} {:>12}\n", "mode", "tokens/s", "state B/rank", "Ψ/rank",
             "step peak B/rank", "peak RSS");
  for (const Result* r : {&dp, &tp_whole, &tp, &sp})
    fmt::print("{:>18} {:>12.1f} {:>16.0f} {:>11.1f}M {:>16.0f} {:>8.0f} MiB\n", mode_name(*r, o.world),
               r->tokens_per_s, r->state_bytes, r->psi / 1e6, r->step_peak, r->peak_rss / 1048576.0);
  const double budget = dp_ladder.front().second;  // what DP needs at the ladder's first length
  fmt::print("\nPeak tensor bytes per rank of one step at micro-batch 1 (budget: DP at {} tokens = {:.0f} MiB)\n",
             dp_ladder.front().first, budget / 1048576.0);
  fmt::print("{:>8} {:>14} {:>14}\n", "tokens", "DP MiB", "SP=2 MiB");
  for (size_t i = 0; i < dp_ladder.size(); ++i)
    fmt::print("{:>8} {:>14.1f} {:>14.1f}\n", dp_ladder[i].first, dp_ladder[i].second / 1048576.0,
               sp_ladder[i].second / 1048576.0);
  const double dp_max = longest_within(dp_ladder, budget), sp_max = longest_within(sp_ladder, budget);
  const double dp_per_token = bytes_per_token(dp_ladder), sp_per_token = bytes_per_token(sp_ladder);
  fmt::print("activation bytes per token (peak growth, {}..{} tokens): DP {:.0f}, SP=2 {:.0f}\n",
             dp_ladder[dp_ladder.size() / 2].first, dp_ladder.back().first, dp_per_token, sp_per_token);
  fmt::print("longest sequence within the budget (interpolated): DP {:.0f}, SP=2 {:.0f} tokens\n", dp_max, sp_max);
  fmt::print("BENCH tp2_state_bytes ours={:.0f} ref={:.0f} unit=bytes ratio={:.4f}\n", tp.state_bytes, dp.state_bytes,
             tp.state_bytes / dp.state_bytes);
  fmt::print("BENCH tp2_step_vs_dp ours={:.1f} ref={:.1f} unit=tokens_per_s ratio={:.3f}\n", tp.tokens_per_s,
             dp.tokens_per_s, tp.tokens_per_s / dp.tokens_per_s);
  fmt::print("BENCH sp2_activation_bytes ours={:.0f} ref={:.0f} unit=bytes_per_token ratio={:.4f}\n", sp_per_token,
             dp_per_token, sp_per_token / dp_per_token);
  fmt::print("BENCH sp2_step_vs_dp ours={:.1f} ref={:.1f} unit=tokens_per_s ratio={:.3f}\n", sp.tokens_per_s,
             dp.tokens_per_s, sp.tokens_per_s / dp.tokens_per_s);
  fmt::print("BENCH sp2_max_seq ours={:.0f} ref={:.0f} unit=tokens ratio={:.3f}\n", sp_max, dp_max,
             dp_max > 0 ? sp_max / dp_max : 0.0);
  return 0;
}
