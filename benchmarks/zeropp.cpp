// zeropp: ZeRO++ (qwZ, qgZ, hpZ, all three) against plain stage 3 at world 4 on simulated nodes
// (DS_RANKS_PER_NODE, 2 ranks each by default): GPT-2 tiny on the default corpus, the same samples
// for every run, and the bytes each rank sends per step, summed over every communicator the stage
// uses (the data-parallel group, the node groups, the hpZ group), from the collective logs.
//
//   ./build/benchmarks/zeropp                     # drives: mpirun -np 4 <self> --worker --variant V
//   ./build/benchmarks/zeropp --world 2 --ranks-per-node 1 --steps 100
//
// Ends with
//   BENCH zeropp_qwz_wire_bytes ours=<qwZ parameter gathers, bytes/step> ref=<the same gathers in bf16> unit=bytes ratio=..
//   BENCH zeropp_qgz_wire_bytes ours=<qgZ gradient exchange, bytes/step> ref=<fp32 reduce-scatter> unit=bytes ratio=..
//   BENCH zeropp_wire_bytes ours=<all three: every stage-3 byte/step> ref=<plain stage 3 (fp32)> unit=bytes ratio=..
//   BENCH zeropp_{qwz,qgz,hpz,all}_loss ours=<final loss> ref=<plain stage 3's> unit=loss ratio=..
// (final loss: the mean of the last 20 steps' losses over the ranks). On one machine every "node"
// shares memory, so the step times are printed, not claimed.
#include <deepspeed/deepspeed.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench_engine.h"
#include "comm/comm.h"
#include "models/gpt2.h"
#include "models/token_data.h"
#include "zero/model_states.h"

namespace {

struct Options {
  int world = 4, ranks_per_node = 2, steps = 300;
  int64_t micro = 4, seq = 64;
  std::string variant = "plain", corpus = "data/devils_dictionary.txt";
};

const std::map<std::string, std::string>& variants() {
  static const std::map<std::string, std::string> v = {
      {"plain", ""},
      {"qwz", R"(, "zero_quantized_weights": true)"},
      {"qgz", R"(, "zero_quantized_gradients": true)"},
      {"hpz", R"(, "zero_hpz_partition_size": 2)"},
      {"all", R"(, "zero_quantized_weights": true, "zero_quantized_gradients": true, "zero_hpz_partition_size": 2)"}};
  return v;
}

struct Result {
  double final_loss = 0, gathers = 0, gradients = 0, total = 0, step_s = 0;  // bytes per step
};

// stage3_max_reuse_distance 0: every layer gathered again for backward (the traffic hpZ and qwZ
// act on; with DeepSpeed's default a model this small skips the backward gathers).
void run(const Options& o) {
  auto cfg = ds::load_config_text(
      fmt::format(R"({{"train_micro_batch_size_per_gpu": {}, "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
          "optimizer": {{"type": "AdamW", "params": {{"lr": 1e-3, "weight_decay": 0.01}}}},
          "zero_optimization": {{"stage": 3, "stage3_param_persistence_threshold": 0, "stage3_max_reuse_distance": 0{}}}}})",
                  o.micro, variants().at(o.variant)),
      o.world, "<zeropp bench>");
  auto engine = ds::initialize(ds::bench::seeded_tiny_gpt2(o.seq), std::move(cfg));
  auto data = ds::bench::corpus_or_filler(o.corpus);
  ds::models::BatchSampler sampler(data, o.seq, 7);
  auto& dp = engine.topology().data();
  const int d = dp.rank(), world = dp.size();
  std::vector<double> losses;
  const auto t0 = std::chrono::steady_clock::now();
  for (int step = 0; step < o.steps; ++step) {
    auto b = sampler.batch((int64_t{step} * world + d) * o.micro, o.micro);
    engine.backward(engine.forward(b.inputs, b.targets));
    engine.step();
    losses.push_back(engine.last_loss());
  }
  Result r;
  r.step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o.steps;
  r.final_loss = ds::bench::final_loss(losses, dp);
  std::vector<const ds::comm::Communicator*> comms = {&dp};
  for (const auto* own : engine.model_states().own_communicators()) comms.push_back(own);
  for (const auto* comm : comms)
    for (const auto& t : comm->collective_log().totals()) {
      if (t.tag.rfind("gather_parameters", 0) == 0) r.gathers += double(t.wire_bytes);
      if (t.tag == "reduce_scatter_gradients" || t.tag.rfind("qgz", 0) == 0) r.gradients += double(t.wire_bytes);
      if (t.tag.rfind("bench", 0) != 0) r.total += double(t.wire_bytes);
    }
  if (engine.rank() == 0)
    std::printf("RESULT %.6f %.1f %.1f %.1f %.6f\n", r.final_loss, r.gathers / o.steps, r.gradients / o.steps,
                r.total / o.steps, r.step_s);
}

Result launch(const Options& o, const std::string& variant, const std::string& self) {
  const std::string cmd = fmt::format("DS_RANKS_PER_NODE={} ", o.ranks_per_node) + ds::bench::mpirun_prefix(o.world) +
                          "-x DS_RANKS_PER_NODE " + self +
                          fmt::format(" --worker --world {} --variant {} --steps {} --micro {} --seq {} --corpus {} 2>&1",
                                      o.world, variant, o.steps, o.micro, o.seq, o.corpus);
  Result r;
  std::sscanf(ds::bench::result_lines(cmd, 1).front().c_str(), "RESULT %lf %lf %lf %lf %lf", &r.final_loss, &r.gathers,
              &r.gradients, &r.total, &r.step_s);
  std::fprintf(stderr, "  %-6s final loss %.4f | bytes/step: gathers %.0f, gradients %.0f, all %.0f | %.4f s/step\n",
               variant.c_str(), r.final_loss, r.gathers, r.gradients, r.total, r.step_s);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool worker_mode = false;
  CLI::App app{"zeropp: ZeRO++ qwZ, qgZ, hpZ vs plain ZeRO stage 3 — final loss and wire bytes"};
  app.add_option("--world", o.world)->capture_default_str();
  app.add_option("--ranks-per-node", o.ranks_per_node, "simulated node size (DS_RANKS_PER_NODE)")->capture_default_str();
  app.add_option("--steps", o.steps)->capture_default_str();
  app.add_option("--micro", o.micro)->capture_default_str();
  app.add_option("--seq", o.seq)->capture_default_str();
  app.add_option("--corpus", o.corpus)->capture_default_str();
  app.add_option("--variant", o.variant, "worker: plain, qwz, qgz, hpz or all")->capture_default_str();
  app.add_flag("--worker", worker_mode, "internal: one run at this process's world size");
  CLI11_PARSE(app, argc, argv);
  if (worker_mode) {
    run(o);
    return 0;
  }
  std::fprintf(stderr, "zeropp: GPT-2 tiny, ZeRO stage 3, world %d as nodes of %d ranks, %d steps, micro-batch %lld x %lld tokens\n",
               o.world, o.ranks_per_node, o.steps, (long long)o.micro, (long long)o.seq);
  const Result plain = launch(o, "plain", argv[0]), qwz = launch(o, "qwz", argv[0]), qgz = launch(o, "qgz", argv[0]),
               hpz = launch(o, "hpz", argv[0]), all = launch(o, "all", argv[0]);
  auto bench = [](const char* name, double ours, double ref, const char* unit) {
    std::printf("BENCH %s ours=%.6g ref=%.6g unit=%s ratio=%.4f\n", name, ours, ref, unit, ref != 0 ? ours / ref : 0.0);
  };
  bench("zeropp_qwz_wire_bytes", qwz.gathers, plain.gathers / 2, "bytes");  // the fp32 gathers' bytes, halved: bf16
  bench("zeropp_qgz_wire_bytes", qgz.gradients, plain.gradients, "bytes");
  bench("zeropp_wire_bytes", all.total, plain.total, "bytes");
  bench("zeropp_qwz_loss", qwz.final_loss, plain.final_loss, "loss");
  bench("zeropp_qgz_loss", qgz.final_loss, plain.final_loss, "loss");
  bench("zeropp_hpz_loss", hpz.final_loss, plain.final_loss, "loss");
  bench("zeropp_all_loss", all.final_loss, plain.final_loss, "loss");
  return 0;
}
