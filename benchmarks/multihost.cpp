// multihost: ZeRO-2 on GPT-2 small across 2 test hosts (scripts/testhosts.sh, network namespaces
// joined by real TCP links) against 2 ranks on one host, and over a rate-limited link: step time,
// bytes on the wire, and whether communication overlaps compute (docs/multihost.md).
//   sudo ./build/benchmarks/multihost                 # root: needs network namespaces
//   sudo ./build/benchmarks/multihost --rate 1gbit --steps 3 --seq 64
// Runs, each a separate mpirun of this program in --worker mode:
//   one host     2 ranks through shared memory;
//   2 hosts      1 rank per test host, links unshaped;
//   2 hosts slow the same with both links shaped to --rate (tc tbf) and zero_overlap_param_gather
//                (the parameter all-gather behind the next forward), and there, after training, the
//                step's collectives replayed alone (ZeRO-2's gradient reduces to each bucket's owner
//                and parameter all-gather, same sizes and buckets): the communication time;
//   variants     the slow run again with the all-gather inside the step (streamed with the
//                optimizer, no zero_overlap_param_gather), and with round_robin_gradients (each
//                rank's partition every world-th parameter: backward's buckets feed both ranks,
//                both link directions at once) (--no-variants skips them);
//   compute      1 rank on one test host, the same micro-batch: the computation time (it steps the
//                optimizer over all parameters, where each of 2 ranks steps half: a slight over-count).
// Ends with
//   BENCH multihost_step_2hosts ours=<s/step, 2 hosts> ref=<s/step, one host> unit=s ratio=..
//   BENCH multihost_overlap ours=<s/step at --rate> ref=<compute + communication, measured apart> unit=s ratio=..
//   BENCH multihost_gather_in_step ours=<s/step at --rate, the all-gather in the step> ref=<s/step at --rate> unit=s ratio=..
//   BENCH multihost_round_robin ours=<s/step at --rate, round_robin_gradients> ref=<s/step at --rate> unit=s ratio=..
// (target: multihost_overlap <= 0.85, communication hidden under compute).
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
#include <string>
#include <vector>

#include "bench_engine.h"
#include "bench_testhosts.h"
#include "comm/communicator.h"
#include "models/gpt2.h"

namespace {

struct Options {
  int steps = 3, warmup = 1;
  int64_t seq = 64, micro = 1;
  double bucket = 1e7;  // reduce_bucket_size and allgather_bucket_size: 40 MB, so backward's first reduce starts early
  std::string model = "small", rate = "1gbit";
  bool replay_comm = false;  // worker: time the step's collectives alone after training
  bool overlap_gather = false;  // worker: zero_overlap_param_gather
  bool no_variants = false;       // driver: skip the slow runs with the gather in the step / round_robin_gradients
  bool round_robin = false;  // round_robin_gradients
  bool breakdown = false;  // worker: wall_clock_breakdown every step (by hand: where the step's time goes)
};

std::string config_json(const Options& o) {
  return fmt::format(R"({{"train_micro_batch_size_per_gpu": {}, "gradient_accumulation_steps": 1,
      "optimizer": {{"type": "AdamW", "params": {{"lr": 1e-4, "weight_decay": 0.01}}}},
      "zero_optimization": {{"stage": 2, "overlap_comm": true, "contiguous_gradients": true,
                             "reduce_bucket_size": {}, "allgather_bucket_size": {}, "round_robin_gradients": {}}},
      "zero_overlap_param_gather": {}, "wall_clock_breakdown": {}, "steps_per_print": 1}})",
                     o.micro, o.bucket, o.bucket, o.round_robin, o.overlap_gather, o.breakdown);
}

// ZeRO-2's per-step collectives, alone, as the engine issues them: the gradients in
// reduce_bucket_size buckets from the end of the flat buffer (backward order), each bucket inside
// one rank's partition reduced to that rank, a bucket across a partition edge reduce-scattered;
// then the updated parameters all-gathered in allgather_bucket_size buckets. Seconds per step.
struct ReplayTimes {
  double grads_s = 0, params_s = 0;  // per step: the gradient reduces, the parameter all-gather
  double total() const { return grads_s + params_s; }
};

ReplayTimes replay_step_collectives(ds::comm::Communicator& comm, int64_t numel, int64_t bucket) {
  const int world = comm.size();
  const int64_t per_bucket = bucket / world * world;
  const int64_t partition = (numel + world - 1) / world;
  std::vector<float> full(static_cast<size_t>(per_bucket), 1.0f), part(static_cast<size_t>(per_bucket / world), 0.0f);
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  ReplayTimes times;
  auto one_step = [&] {
    comm.barrier();
    auto t = Clock::now();
    for (int64_t hi = numel; hi > 0; hi -= per_bucket) {
      const int64_t lo = std::max<int64_t>(0, hi - per_bucket), n = hi - lo;
      const int owner = static_cast<int>(lo / partition);
      if (owner == static_cast<int>((hi - 1) / partition)) {
        comm.reduce(ds::comm::Buffer(full.data(), n), owner, ds::comm::ReduceOp::Sum, "replay_grads");
      } else if (n / world > 0) {
        comm.reduce_scatter(ds::comm::ConstBuffer(full.data(), n / world * world, ds::comm::ElemType::Fp32),
                            ds::comm::Buffer(part.data(), n / world), ds::comm::ReduceOp::Sum, "replay_grads");
      }
    }
    comm.barrier();
    times.grads_s += since(t);
    t = Clock::now();
    for (int64_t done = 0; done < numel; done += per_bucket) {
      const int64_t n = std::min(per_bucket, numel - done) / world * world;
      if (n == 0) break;
      comm.all_gather(ds::comm::ConstBuffer(part.data(), n / world, ds::comm::ElemType::Fp32),
                      ds::comm::Buffer(full.data(), n), "replay_params");
    }
    comm.barrier();
    times.params_s += since(t);
  };
  one_step();  // warm-up
  times = {};
  const int reps = 2;
  for (int r = 0; r < reps; ++r) one_step();
  return {times.grads_s / reps, times.params_s / reps};
}

int worker(const Options& o) {
  const int world = ds::comm::launcher_world_size();
  auto cfg = ds::load_config_text(config_json(o), world, "<multihost bench>");
  torch::manual_seed(1234);
  auto model_cfg = ds::models::GPT2Config::preset(o.model);
  model_cfg.n_positions = std::max(model_cfg.n_positions, o.seq);
  auto model = ds::models::GPT2(model_cfg);
  int64_t numel = 0;
  for (const auto& p : model->parameters()) numel += p.numel();
  auto engine = ds::initialize(model, std::move(cfg));
  const int64_t vocab = model_cfg.vocab_size;
  auto batch = [&](int s) {
    return torch::remainder(torch::arange(o.micro * o.seq, torch::kLong) * 7919 + s * 31 + engine.rank() * 17, vocab)
        .reshape({o.micro, o.seq});
  };
  const double total = ds::bench::timed_steps(engine, o.warmup, o.steps, batch);
  const double step_s = total / o.steps;
  auto& comm = engine.communicator();
  const double wire = double(comm.collective_log().sum_wire_bytes()) / (o.warmup + o.steps);
  const ReplayTimes comm_s = o.replay_comm && comm.size() > 1
                                 ? replay_step_collectives(comm, numel, static_cast<int64_t>(o.bucket))
                                 : ReplayTimes{};
  if (engine.rank() == 0)
    std::printf("RESULT %.6f %.0f %.6f %lld %.6f %.6f\n", step_s, wire, comm_s.total(), static_cast<long long>(numel),
                comm_s.grads_s, comm_s.params_s);
  return 0;
}

struct Result {
  double step_s = 0, wire_bytes = 0, comm_s = 0;
  long long params = 0;
  double grads_s = 0, params_s = 0;  // comm_s's two parts
};

Result launch(const std::string& prefix, const std::string& self, const Options& o, bool replay,
              const std::string& variant = "") {
  const std::string cmd = prefix + self + fmt::format(" --worker --steps {} --warmup {} --seq {} --micro {} --model {} "
                                                      "--bucket {}{} {} 2>&1",
                                                      o.steps, o.warmup, o.seq, o.micro, o.model, o.bucket,
                                                      replay ? " --replay-comm" : "", variant);
  Result r;
  std::sscanf(ds::bench::result_lines(cmd, 1).front().c_str(), "RESULT %lf %lf %lf %lld %lf %lf", &r.step_s,
              &r.wire_bytes, &r.comm_s, &r.params, &r.grads_s, &r.params_s);
  return r;
}

int driver(const Options& o, const std::string& self) {
  std::unique_ptr<ds::bench::TestHosts> hosts;
  try {
    hosts = std::make_unique<ds::bench::TestHosts>(2, "/tmp/ds_testhosts_bench");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "multihost: %s\n", e.what());
    return 1;
  }
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  std::fprintf(stderr, "multihost: GPT-2 %s, seq %lld, micro %lld, ZeRO-2 (overlap_comm, buckets of %.3g), %d steps after "
               "%d warm-up; OPENBLAS_CORETYPE=%s; 1 thread per rank\n",
               o.model.c_str(), (long long)o.seq, (long long)o.micro, o.bucket, o.steps, o.warmup, core ? core : "(unset)");
  // Both sides with one thread per rank, as each test host gets (2 cores / 2 hosts).
  const Result local =
      launch(std::string(ds::bench::TestHosts::kRoot) + "OMP_NUM_THREADS=1 mpirun -np 2 --bind-to none ", self, o, false);
  std::fprintf(stderr, "  one host, 2 ranks:  %.3f s/step, %.1f MB on the wire per step and rank (%lld parameters)\n",
               local.step_s, local.wire_bytes / 1e6, local.params);
  const Result two = launch(hosts->mpirun_all(), self, o, false);
  std::fprintf(stderr, "  2 test hosts:       %.3f s/step, %.1f MB on the wire per step and rank\n", two.step_s,
               two.wire_bytes / 1e6);
  const Result compute = launch(hosts->mpirun_on("worker-0", 1), self, o, false);
  std::fprintf(stderr, "  compute (1 rank):   %.3f s/step\n", compute.step_s);
  try {
    hosts->shape_links(o.rate);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "multihost: %s\n", e.what());
    return 1;
  }
  const Result slow = launch(hosts->mpirun_all(), self, o, true, "--overlap-gather");
  std::fprintf(stderr, "  2 hosts at %s:   %.3f s/step (zero_overlap_param_gather); the step's collectives alone %.3f s "
               "(gradients %.3f s, parameter all-gather %.3f s)\n",
               o.rate.c_str(), slow.step_s, slow.comm_s, slow.grads_s, slow.params_s);
  Result in_step = slow, round_robin = slow;
  if (!o.no_variants) {
    in_step = launch(hosts->mpirun_all(), self, o, false);
    round_robin = launch(hosts->mpirun_all(), self, o, false, "--round-robin --overlap-gather");
    std::fprintf(stderr, "  2 hosts at %s, the all-gather inside the step: %.3f s/step; round_robin_gradients: %.3f s/step\n",
                 o.rate.c_str(), in_step.step_s, round_robin.step_s);
  }
  hosts.reset();
  std::printf("BENCH multihost_step_2hosts ours=%.6g ref=%.6g unit=s ratio=%.4f\n", two.step_s, local.step_s,
              two.step_s / local.step_s);
  const double apart = compute.step_s + slow.comm_s;
  std::printf("BENCH multihost_overlap ours=%.6g ref=%.6g unit=s ratio=%.4f\n", slow.step_s, apart, slow.step_s / apart);
  if (!o.no_variants) {
    std::printf("BENCH multihost_gather_in_step ours=%.6g ref=%.6g unit=s ratio=%.4f\n", in_step.step_s, slow.step_s,
                in_step.step_s / slow.step_s);
    std::printf("BENCH multihost_round_robin ours=%.6g ref=%.6g unit=s ratio=%.4f\n", round_robin.step_s, slow.step_s,
                round_robin.step_s / slow.step_s);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool worker_mode = false;
  CLI::App app{"multihost: ZeRO-2 across 2 test hosts vs one host, and overlap over a rate-limited link"};
  app.add_option("--steps", o.steps)->capture_default_str();
  app.add_option("--warmup", o.warmup)->capture_default_str();
  app.add_option("--seq", o.seq)->capture_default_str();
  app.add_option("--micro", o.micro)->capture_default_str();
  app.add_option("--model", o.model, "GPT-2 preset")->capture_default_str();
  app.add_option("--bucket", o.bucket, "reduce_bucket_size and allgather_bucket_size (elements)")->capture_default_str();
  app.add_option("--rate", o.rate, "the shaped links' rate (tc tbf)")->capture_default_str();
  app.add_flag("--replay-comm", o.replay_comm, "worker: time the step's collectives alone after training");
  app.add_flag("--overlap-gather", o.overlap_gather, "worker: zero_overlap_param_gather");
  app.add_flag("--no-variants", o.no_variants, "skip the slow runs with the gather in the step / round_robin_gradients");
  app.add_flag("--round-robin", o.round_robin, "round_robin_gradients (every world-th parameter per partition)");
  app.add_flag("--breakdown", o.breakdown, "worker: print wall_clock_breakdown every step");
  app.add_flag("--worker", worker_mode, "internal: one rank of a measured run");
  CLI11_PARSE(app, argc, argv);
  try {
    if (worker_mode) return worker(o);
    return driver(o, std::filesystem::absolute(argv[0]).string());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "multihost: %s\n", e.what());
    return 1;
  }
}
