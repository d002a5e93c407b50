// onebit: the 1-bit optimizers against their uncompressed counterparts at world 2 (real MPI ranks):
// GPT-2 tiny on the default corpus, the same samples for every run, and the bytes each rank sends
// for its data-parallel exchange, from the collective log (bandwidth-optimal "wire bytes").
//
//   ./build/benchmarks/onebit                   # drives: mpirun -np 2 <self> --worker --type T
//   ./build/benchmarks/onebit --world 4 --steps 300
//   ./build/benchmarks/onebit --seed 1             # another initialisation and sample order
//   ./build/benchmarks/onebit --lr 1e-3 --warmup 100  # the Adam family's lr, reached by DeepSpeed's WarmupLR
//   ./build/benchmarks/onebit --exchange-elems 0   # skip timing the bare exchange (124M floats)
//   ./build/benchmarks/onebit --slow-link 1gbit    # root: Adam vs 1-bit Adam on 2 test hosts over a 1 Gbit/s link
//
// Ends with
//   BENCH onebit_wire_bytes ours=<1-bit Adam bytes/step, compressed> ref=<Adam's fp32 gradient all-reduce bytes/step> unit=bytes ratio=..
//   BENCH onebit_adam_loss ours=<OneBitAdam final loss> ref=<the same, never compressing> unit=loss ratio=..
//   BENCH zero_one_adam_loss ours=<ZeroOneAdam final loss> ref=<OneBitAdam never compressing> unit=loss ratio=..
//   BENCH onebit_lamb_loss ours=<OneBitLamb final loss> ref=<the same, never compressing> unit=loss ratio=..
// or, with --slow-link, only
//   BENCH onebit_step_slow_link ours=<1-bit Adam s/step after freeze_step> ref=<Adam s/step> unit=s ratio=..
//   (2 test hosts, scripts/testhosts.sh, each host's link shaped to the rate with a token bucket; a
//   model of --vocab x --embd whose gradient exchange dominates the step)
// (DeepSpeed's fused Adam and Lamb run too and are printed beside them: the 1-bit family's warm-up is
// not bias-corrected, so with a short warm-up its frozen variance is small and its steps larger.)
// (final loss: the mean of the last 20 steps' losses over the ranks). On one machine the ranks talk
// through shared memory, where fewer bytes buy little time: the step times are printed, not claimed.
#include <deepspeed/deepspeed.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_engine.h"
#include "bench_testhosts.h"
#include "comm/comm.h"
#include "models/gpt2.h"
#include "models/token_data.h"
#include "zero/flat_optimizer.h"

namespace {

struct Options {
  int world = 2;
  int steps = 300, freeze = 100;  // freeze_step / var_freeze_step
  double lr = 5e-4;       // the Adam family's (at 1e-3 0/1 Adam's compressed gradients overshoot at world 2: docs/compression.md)
  double lamb_lr = 1e-2;  // the LAMB family's: its step is lr x |w|, so it needs ~20x Adam's to train at all
  int warmup = 0;  // WarmupLR steps (0: a constant lr)
  double beta2 = 0.99;            // every run's: the variance must be settled when it freezes (1 - 0.99^100 = 0.63)
  int64_t micro = 4, seq = 64, vocab = 256, embd = 64;
  std::string type = "Adam", corpus = "data/devils_dictionary.txt";
  std::string launch_prefix;  // how the driver starts a worker run (mpirun on one host, or on test hosts)
  int seed = 0;               // another model initialisation and sample order (0: the committed figures')
};

struct Result {
  std::string type;
  double final_loss = 0, onebit_bytes_per_step = 0, grad_bytes_per_step = 0, warm_s = 0, compressed_s = 0;
};

std::string optimizer_json(const Options& o) {
  const std::string common = fmt::format(R"("lr": {}, "weight_decay": 0.01, "betas": [0.9, {}])",
                                         o.type.find("Lamb") == std::string::npos ? o.lr : o.lamb_lr, o.beta2);
  if (o.type == "Adam" || o.type == "Lamb") return fmt::format(R"({{"type": "{}", "params": {{{}}}}})", o.type, common);
  if (o.type == "ZeroOneAdam")
    return fmt::format(R"({{"type": "ZeroOneAdam", "params": {{{}, "var_freeze_step": {}, "var_update_scaler": 16,
        "local_step_scaler": 1000, "local_step_clipper": 4}}}})", common, o.freeze);
  return fmt::format(R"({{"type": "{}", "params": {{{}, "freeze_step": {}}}}})", o.type, common, o.freeze);
}

Result run(const Options& o) {
  auto cfg = ds::load_config_text(fmt::format(R"({{"train_micro_batch_size_per_gpu": {}, "gradient_accumulation_steps": 1,
      "gradient_clipping": 1.0, "optimizer": {}{}}})", o.micro, optimizer_json(o),
      o.warmup ? fmt::format(R"(, "scheduler": {{"type": "WarmupLR", "params": {{"warmup_max_lr": {}, "warmup_num_steps": {}}}}})", o.lr, o.warmup) : std::string()),
      o.world, "<onebit bench>");
  auto engine = ds::initialize(ds::bench::seeded_tiny_gpt2(o.seq, o.vocab, o.embd, 1234 + o.seed), std::move(cfg));
  auto data = ds::bench::corpus_or_filler(o.corpus);
  ds::models::BatchSampler sampler(data, o.seq, 7 + o.seed);
  auto& dp = engine.topology().data();
  const int d = dp.rank(), world = dp.size();
  std::vector<double> losses;
  double warm_s = 0, compressed_s = 0;
  int warm_steps = 0, compressed_steps = 0;
  for (int step = 0; step < o.steps; ++step) {
    const bool compressed = !engine.optimizer()->wants_reduced_gradients();
    const auto t0 = std::chrono::steady_clock::now();
    auto b = sampler.batch((int64_t{step} * world + d) * o.micro, o.micro);
    engine.backward(engine.forward(b.inputs, b.targets));
    engine.step();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    (compressed ? compressed_s : warm_s) += s;
    (compressed ? compressed_steps : warm_steps) += 1;
    losses.push_back(engine.last_loss());
  }
  Result r;
  r.type = o.type;
  r.final_loss = ds::bench::final_loss(losses, dp);
  int64_t grad_calls_bytes = 0;
  for (const auto& t : dp.collective_log().totals())
    if (t.tag == "allreduce_gradients") grad_calls_bytes += t.wire_bytes;
  r.onebit_bytes_per_step = compressed_steps ? double(dp.collective_log().sum_wire_bytes("onebit_")) / compressed_steps : 0;
  r.grad_bytes_per_step = warm_steps ? double(grad_calls_bytes) / warm_steps : 0;
  r.warm_s = warm_steps ? warm_s / warm_steps : 0;
  r.compressed_s = compressed_steps ? compressed_s / compressed_steps : 0;
  if (engine.rank() == 0)
    std::printf("RESULT %s %.6f %.1f %.1f %.6f %.6f\n", r.type.c_str(), r.final_loss, r.onebit_bytes_per_step,
                r.grad_bytes_per_step, r.warm_s, r.compressed_s);
  return r;
}

// The exchange alone on N floats in `tensors` equal tensors (GPT-2 small: 124M in 148): the fp32
// all-reduce against the compressed one, seconds per call on this machine's shared memory.
void time_exchange(int64_t n, int tensors) {
  auto comm = ds::comm::make_communicator(ds::comm::Backend::Auto);
  std::vector<float> x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  const int64_t per = n / tensors;
  std::vector<int64_t> numels(size_t(tensors), per);
  ds::comm::CompressedAllReduce exchange(*comm, numels);
  std::vector<float*> ptrs;
  for (int t = 0; t < tensors; ++t) ptrs.push_back(x.data() + t * per);
  auto time = [&](auto&& f) {
    f();  // warm-up
    comm->barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < 3; ++k) f();
    comm->barrier();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 3;
  };
  const double plain = time([&] { comm->all_reduce(ds::comm::Buffer(x.data(), n)); });
  const double compressed = time([&] { exchange.run(ptrs); });
  if (comm->rank() == 0)
    std::printf("RESULT exchange %lld %.6f %.6f\n", (long long)n, plain, compressed);
}

Result launch(Options o, const std::string& type, const std::string& self, int freeze = -1) {
  if (freeze >= 0) o.freeze = freeze;
  const std::string prefix = o.launch_prefix.empty() ? ds::bench::mpirun_prefix(o.world) : o.launch_prefix;
  const std::string cmd = prefix + self +
                          fmt::format(" --worker --world {} --type {} --steps {} --freeze {} --lr {} --lamb-lr {} --warmup {} --beta2 {} --micro {} --seq {} "
                                      "--vocab {} --embd {} --corpus {} --seed {} 2>&1",
                                      o.world, type, o.steps, o.freeze, o.lr, o.lamb_lr, o.warmup, o.beta2, o.micro, o.seq, o.vocab, o.embd,
                                      o.corpus, o.seed);
  Result r;
  char name[64] = {0};
  std::sscanf(ds::bench::result_lines(cmd, 1).front().c_str(), "RESULT %63s %lf %lf %lf %lf %lf", name, &r.final_loss,
              &r.onebit_bytes_per_step, &r.grad_bytes_per_step, &r.warm_s, &r.compressed_s);
  r.type = name;
  if (freeze >= 0) r.type += " (freeze " + std::to_string(freeze) + ")";
  std::fprintf(stderr, "  %-12s final loss %.4f | exchange bytes/step: gradients %.0f, 1-bit %.0f | s/step: %.4f "
               "warm-up, %.4f compressed\n",
               r.type.c_str(), r.final_loss, r.grad_bytes_per_step, r.onebit_bytes_per_step, r.warm_s, r.compressed_s);
  return r;
}

// Adam against 1-bit Adam on 2 test hosts whose links are shaped to `rate` (tc tbf): seconds per step
// once 1-bit Adam compresses. Returns 1 (and says why) where test hosts cannot be made.
int slow_link(Options o, const std::string& rate, const std::string& self) {
  std::unique_ptr<ds::bench::TestHosts> hosts;
  try {
    hosts = std::make_unique<ds::bench::TestHosts>(2, "/tmp/ds_testhosts_onebit");
    hosts->shape_links(rate);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onebit --slow-link: %s\n", e.what());
    return 1;
  }
  o.world = 2;
  o.launch_prefix = hosts->mpirun_all();
  const int64_t params = o.vocab * o.embd;
  std::fprintf(stderr, "onebit --slow-link: 2 test hosts, links at %s, GPT-2 (vocab %lld x embd %lld: ~%.1f M parameters), "
               "%d steps, freeze_step %d\n", rate.c_str(), (long long)o.vocab, (long long)o.embd, params / 1e6, o.steps,
               o.freeze);
  const Result adam = launch(o, "Adam", self);
  const Result onebit = launch(o, "OneBitAdam", self);
  hosts.reset();
  std::printf("BENCH onebit_step_slow_link ours=%.6g ref=%.6g unit=s ratio=%.4f\n", onebit.compressed_s, adam.warm_s,
              adam.warm_s > 0 ? onebit.compressed_s / adam.warm_s : 0.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool worker_mode = false;
  CLI::App app{"onebit: 1-bit Adam, 0/1 Adam and 1-bit LAMB vs Adam and LAMB — final loss and wire bytes"};
  app.add_option("--world", o.world)->capture_default_str();
  app.add_option("--steps", o.steps)->capture_default_str();
  app.add_option("--seed", o.seed, "another model initialisation and sample order")->capture_default_str();
  app.add_option("--freeze", o.freeze, "freeze_step (var_freeze_step for ZeroOneAdam)")->capture_default_str();
  app.add_option("--beta2", o.beta2, "every optimizer's beta2")->capture_default_str();
  app.add_option("--lr", o.lr, "Adam, OneBitAdam and ZeroOneAdam's learning rate")->capture_default_str();
  app.add_option("--lamb-lr", o.lamb_lr, "Lamb and OneBitLamb's learning rate")->capture_default_str();
  app.add_option("--warmup", o.warmup, "WarmupLR's warmup_num_steps (0: constant lr)")->capture_default_str();
  app.add_option("--micro", o.micro)->capture_default_str();
  app.add_option("--seq", o.seq)->capture_default_str();
  app.add_option("--corpus", o.corpus)->capture_default_str();
  app.add_option("--type", o.type, "worker: the optimizer")->capture_default_str();
  app.add_option("--vocab", o.vocab, "the model's vocabulary (its embedding dominates the gradient)")->capture_default_str();
  app.add_option("--embd", o.embd, "the model's width")->capture_default_str();
  std::string slow_link_rate;
  app.add_option("--slow-link", slow_link_rate, "e.g. 1gbit: Adam vs 1-bit Adam on 2 test hosts over links at this rate (root)");
  int64_t exchange_elems = 124'000'000;
  app.add_option("--exchange-elems", exchange_elems, "floats in the exchange timing (0: skip it)")->capture_default_str();
  app.add_flag("--worker", worker_mode, "internal: one run at this process's world size");
  CLI11_PARSE(app, argc, argv);
  if (worker_mode) {
    if (o.type == "exchange") time_exchange(exchange_elems, 148);
    else run(o);
    return 0;
  }
  if (!slow_link_rate.empty()) return slow_link(o, slow_link_rate, argv[0]);
  std::fprintf(stderr, "onebit: GPT-2 tiny, world %d, %d steps, freeze at %d, lr %g (Lamb %g)%s, beta2 %g, micro-batch %lld x %lld tokens\n",
               o.world, o.steps, o.freeze, o.lr, o.lamb_lr, o.warmup ? fmt::format(" after {} WarmupLR steps", o.warmup).c_str() : "",
               o.beta2, (long long)o.micro, (long long)o.seq);
  // The uncompressed counterparts: the same optimizer never leaving its warm-up (DeepSpeed's
  // uncorrected Adam / Lamb on all-reduced gradients throughout), so the ratio isolates compression;
  // DeepSpeed's fused Adam and Lamb are printed beside them.
  const Result adam = launch(o, "Adam", argv[0]);
  const Result warm_adam = launch(o, "OneBitAdam", argv[0], o.steps + 1);
  const Result onebit = launch(o, "OneBitAdam", argv[0]);
  const Result zero_one = launch(o, "ZeroOneAdam", argv[0]);
  const Result lamb = launch(o, "Lamb", argv[0]);
  const Result warm_lamb = launch(o, "OneBitLamb", argv[0], o.steps + 1);
  const Result onebit_lamb = launch(o, "OneBitLamb", argv[0]);
  if (exchange_elems > 0) {
    const std::string cmd = ds::bench::mpirun_prefix(o.world) + argv[0] +
                            fmt::format(" --worker --world {} --type exchange --exchange-elems {} 2>&1", o.world, exchange_elems);
    long long n = 0;
    double plain = 0, compressed = 0;
    std::sscanf(ds::bench::result_lines(cmd, 1).front().c_str(), "RESULT exchange %lld %lf %lf", &n, &plain, &compressed);
    std::fprintf(stderr, "  exchange of %lld floats in 148 tensors, shared memory: fp32 all-reduce %.3f s, compressed %.3f s\n",
                 n, plain, compressed);
  }
  auto bench = [](const char* name, double ours, double ref, const char* unit) {
    std::printf("BENCH %s ours=%.6g ref=%.6g unit=%s ratio=%.4f\n", name, ours, ref, unit, ref != 0 ? ours / ref : 0.0);
  };
  bench("onebit_wire_bytes", onebit.onebit_bytes_per_step, adam.grad_bytes_per_step, "bytes");
  std::fprintf(stderr, "  vs DeepSpeed's fused optimizers: 1-bit Adam %.4f / Adam %.4f, 0/1 Adam %.4f, 1-bit Lamb %.4f / Lamb %.4f\n",
               onebit.final_loss, adam.final_loss, zero_one.final_loss, onebit_lamb.final_loss, lamb.final_loss);
  bench("onebit_adam_loss", onebit.final_loss, warm_adam.final_loss, "loss");
  bench("zero_one_adam_loss", zero_one.final_loss, warm_adam.final_loss, "loss");
  bench("onebit_lamb_loss", onebit_lamb.final_loss, warm_lamb.final_loss, "loss");
  return 0;
}
