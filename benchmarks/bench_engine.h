// Shared by the multi-rank engine benchmarks (zero_scaling, tp_sp): the timed training loop, the
// model-state bytes the engine's ledger holds, and running a worker under mpirun for its RESULT lines.
#pragma once

#include <deepspeed/deepspeed.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "models/gpt2.h"
#include "models/token_data.h"
#include "util/memory_ledger.h"

namespace ds::bench {

// Runs warmup + steps optimizer steps of `engine` on batch(step) (ids used as inputs and targets)
// and returns the seconds the measured steps took, between barriers over the world.
template <class Engine, class BatchFn>
double timed_steps(Engine& engine, int warmup, int steps, BatchFn batch) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point t0;
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup) {
      engine.communicator().barrier();
      t0 = Clock::now();
    }
    auto idx = batch(s);
    engine.backward(engine.forward(idx, idx));
    engine.step();
  }
  engine.communicator().barrier();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Parameters + gradients + fp32 master + optimizer state on every tier: DESIGN §5's model states.
inline double model_state_bytes(const MemoryLedger& m) {
  return double(m.kind_total(MemKind::Params) + m.kind_total(MemKind::Grads) + m.kind_total(MemKind::Master) +
                m.kind_total(MemKind::OptimizerState));
}

// The launcher prefix for a worker run at `world` ranks ("" at one rank: no launcher).
// The corpus at `path` as byte tokens; without it (not fetched) a repetitive text, which still
// shows how the runs' curves relate.
inline models::TokenDataset corpus_or_filler(const std::string& path) {
  std::ifstream f(path);
  std::stringstream text;
  if (f) text << f.rdbuf();
  else
    for (int i = 0; i < 4000; ++i) text << "a stitch in time saves nine " << (i * 37 % 101) << ". ";
  return models::TokenDataset::from_text(text.str());
}

// GPT-2 "tiny" with seeded weights (the same on every run), `vocab` x `embd`, positions for `seq`.
inline auto seeded_tiny_gpt2(int64_t seq, int64_t vocab = 256, int64_t embd = 64, uint64_t seed = 1234) {
  torch::manual_seed(seed);
  auto c = models::GPT2Config::preset("tiny");
  c.vocab_size = vocab;
  c.n_embd = embd;
  c.n_positions = seq;
  return models::GPT2(c).ptr();
}

// The final loss of a data-parallel run: the mean of the last 20 steps' losses, averaged over the ranks.
inline double final_loss(const std::vector<double>& losses, comm::Communicator& dp) {
  const int last = std::min<int>(20, int(losses.size()));
  double tail = 0;
  for (int i = int(losses.size()) - last; i < int(losses.size()); ++i) tail += losses[size_t(i)];
  tail /= std::max(1, last);
  dp.all_reduce(comm::Buffer(&tail, 1), comm::ReduceOp::Sum, "bench_loss");
  return tail / dp.size();
}

inline std::string mpirun_prefix(int world) {
  if (world == 1) return "";
  std::string cmd = geteuid() == 0 ? "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " : "";
  return cmd + "mpirun -np " + std::to_string(world) + " --oversubscribe --bind-to none ";
}

// Runs `cmd` (a worker run, stderr merged) and returns the lines its rank 0 printed as "RESULT ...".
// Fewer than `expected` of them, or a failed run, prints the rest of the output and throws.
inline std::vector<std::string> result_lines(const std::string& cmd, size_t expected) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run: " + cmd);
  char line[4096];
  std::string log;
  std::vector<std::string> results;
  while (std::fgets(line, sizeof line, p)) {
    if (std::string(line).rfind("RESULT ", 0) == 0) results.emplace_back(line);
    else log += line;
  }
  const int rc = pclose(p);
  if (rc != 0 || results.size() < expected) {
    std::fprintf(stderr, "%s\n", log.c_str());
    throw std::runtime_error("run failed (exit " + std::to_string(rc) + "): " + cmd);
  }
  return results;
}

}  // namespace ds::bench
