// comm_bandwidth: GB/s of ds::comm collectives against the raw MPI calls on the same buffers, in one
// run under mpirun: 64 MiB fp32 all_reduce / reduce_scatter / all_gather, the MPI alternatives that
// chose the communicator's algorithms (blocking vs non-blocking calls, MPI_Reduce_scatter_block vs
// MPI_Reduce_scatter vs all_reduce + copy, MPI's call vs our ring), 16-bit payloads, and the size
// where the ring starts to pay. GB/s = the collective's full buffer (all_gather: its output) / time.
// Run: mpirun -np 2 ./build/benchmarks/comm_bandwidth   (as root: OMPI_ALLOW_RUN_AS_ROOT=1
// OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; more ranks than cores: --oversubscribe). docs/comm.md has results.
#include <mpi.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "comm/mpi_runtime.h"

namespace {

using namespace ds::comm;
using Fn = std::function<void()>;

// Median over ranks-max of `iters` timed runs (after `warmup`) of each candidate; the candidates run
// interleaved, so machine noise hits all of them alike.
std::vector<double> time_all(const std::vector<Fn>& fns, int warmup, int iters) {
  std::vector<std::vector<double>> t(fns.size());
  for (int i = 0; i < warmup + iters; ++i)
    for (size_t k = 0; k < fns.size(); ++k) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      fns[k]();
      double dt = MPI_Wtime() - t0, worst = 0;
      MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (i >= warmup) t[k].push_back(worst);
    }
  std::vector<double> med;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

struct Row {
  std::string op, impl;
  double bytes, seconds;
};

struct Bench {
  int rank, world, warmup, iters;
  std::vector<Row> rows;
  // Times the candidates of one comparison and records one row each; returns their GB/s.
  std::vector<double> compare(const std::string& op, double bytes, const std::vector<std::pair<std::string, Fn>>& c) {
    std::vector<Fn> fns;
    for (auto& [name, fn] : c) fns.push_back(fn);
    const auto secs = time_all(fns, warmup, iters);
    std::vector<double> gbs;
    for (size_t k = 0; k < c.size(); ++k) {
      rows.push_back({op, c[k].first, bytes, secs[k]});
      gbs.push_back(bytes / secs[k] / 1e9);
    }
    return gbs;
  }
};


std::string size_label(int64_t kib) {
  return (kib >= 1024 ? std::to_string(kib / 1024) + " MiB" : std::to_string(kib) + " KiB") + " fp32";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"comm_bandwidth: ds::comm collectives vs raw MPI (run under mpirun)"};
  int size_mib = 64, iters = 10, warmup = 2;
  bool quick = false;
  std::string only;
  app.add_option("--size-mib", size_mib, "buffer size of the main comparisons")->capture_default_str();
  app.add_option("--iters", iters, "timed runs per candidate (median reported)")->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  app.add_flag("--quick", quick, "skip the 16-bit and size-sweep sections");
  app.add_option("--only", only, "run one collective's 64 MiB comparison (sweeps of Open MPI settings)")
      ->check(CLI::IsMember({"all_reduce", "reduce_scatter", "all_gather"}));
  CLI11_PARSE(app, argc, argv);

  // The communicator initializes MPI (with its transport defaults), as it does in training; the raw
  // MPI references then run in the same process on the same transport.
  auto world = make_communicator(Backend::Mpi);
  MpiOptions o;
  o.algorithm = MpiAlgorithmChoice::Native;
  MpiCommunicator native(o);
  o.algorithm = MpiAlgorithmChoice::Ring;
  MpiCommunicator ring(o);
  auto runtime = MpiRuntime::acquire({});
  Bench b{world->rank(), world->size(), warmup, iters, {}};
  const int n = b.world, r = b.rank;
  const int64_t count = (int64_t(size_mib) << 20) / 4 / n * n;  // fp32 elements, divisible by n
  const int64_t chunk = count / n;
  const double bytes = double(count) * 4;
  std::vector<float> in(static_cast<size_t>(count)), out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) in[size_t(i)] = float((i + r) % 13);
  float* ip = in.data();
  float* op = out.data();
  std::vector<int> counts(static_cast<size_t>(n), static_cast<int>(chunk));
  const std::string label = std::to_string(size_mib) + " MiB fp32";

  auto want = [&](const char* op) { return only.empty() || only == op; };
  std::vector<double> ar, rs, ag;
  if (want("all_reduce")) ar = b.compare("all_reduce " + label, bytes, {
      {"ours (auto: ring)", [&] { world->all_reduce(ConstBuffer(ip, count), Buffer(op, count)); }},
      {"MPI_Allreduce", [&] { MPI_Allreduce(ip, op, int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }},
      {"MPI_Iallreduce + MPI_Wait", [&] {
         MPI_Request q;
         MPI_Iallreduce(ip, op, int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
         MPI_Wait(&q, MPI_STATUS_IGNORE);
       }},
      {"ours forced native (MPI_Allreduce)", [&] { native.all_reduce(ConstBuffer(ip, count), Buffer(op, count)); }},
  });
  if (want("reduce_scatter")) rs = b.compare("reduce_scatter " + label, bytes, {
      {"ours (auto: ring)", [&] { world->reduce_scatter(ConstBuffer(ip, count), Buffer(op, chunk)); }},
      {"MPI_Reduce_scatter_block", [&] { MPI_Reduce_scatter_block(ip, op, int(chunk), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }},
      {"MPI_Reduce_scatter", [&] { MPI_Reduce_scatter(ip, op, counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }},
      {"MPI_Allreduce + copy of the chunk", [&] {
         MPI_Allreduce(ip, op, int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
         std::memmove(op, op + chunk * r, size_t(chunk) * 4);
       }},
      {"MPI_Ireduce_scatter_block + MPI_Wait", [&] {
         MPI_Request q;
         MPI_Ireduce_scatter_block(ip, op, int(chunk), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
         MPI_Wait(&q, MPI_STATUS_IGNORE);
       }},
  });
  if (want("all_gather")) ag = b.compare("all_gather " + label, bytes, {
      {"ours (auto: native)", [&] { world->all_gather(ConstBuffer(ip, chunk), Buffer(op, count)); }},
      {"MPI_Allgather", [&] { MPI_Allgather(ip, int(chunk), MPI_FLOAT, op, int(chunk), MPI_FLOAT, MPI_COMM_WORLD); }},
      {"MPI_Iallgather + MPI_Wait", [&] {
         MPI_Request q;
         MPI_Iallgather(ip, int(chunk), MPI_FLOAT, op, int(chunk), MPI_FLOAT, MPI_COMM_WORLD, &q);
         MPI_Wait(&q, MPI_STATUS_IGNORE);
       }},
      {"ours forced ring", [&] { ring.all_gather(ConstBuffer(ip, chunk), Buffer(op, count)); }},
  });

  if (!quick && only.empty()) {
    // 16-bit payloads: same bytes, twice the elements; MPI's reference uses our bf16 type and op.
    const int64_t hcount = count * 2, hchunk = hcount / n;
    std::vector<uint16_t> hin(static_cast<size_t>(hcount), uint16_t(0x3f80)), hout(static_cast<size_t>(hcount));  // bf16 1.0
    uint16_t* hi = hin.data();
    uint16_t* ho = hout.data();
    const MPI_Datatype bt = runtime->datatype(ElemType::Bf16);
    const MPI_Op bsum = runtime->op(ElemType::Bf16, ReduceOp::Sum);
    const std::string hl = std::to_string(size_mib) + " MiB bf16";
    b.compare("all_reduce " + hl, bytes, {
        {"ours (auto: ring)", [&] { world->all_reduce(ConstBuffer(hi, hcount, ElemType::Bf16), Buffer(ho, hcount, ElemType::Bf16)); }},
        {"MPI_Allreduce (bf16 type + op)", [&] { MPI_Allreduce(hi, ho, int(hcount), bt, bsum, MPI_COMM_WORLD); }},
    });
    b.compare("reduce_scatter " + hl, bytes, {
        {"ours (auto: ring)", [&] { world->reduce_scatter(ConstBuffer(hi, hcount, ElemType::Bf16), Buffer(ho, hchunk, ElemType::Bf16)); }},
        {"MPI_Reduce_scatter_block (bf16)", [&] { MPI_Reduce_scatter_block(hi, ho, int(hchunk), bt, bsum, MPI_COMM_WORLD); }},
    });
    b.compare("all_gather " + hl, bytes, {
        {"ours (auto: native)", [&] { world->all_gather(ConstBuffer(hi, hchunk, ElemType::Bf16), Buffer(ho, hcount, ElemType::Bf16)); }},
        {"MPI_Allgather (bf16)", [&] { MPI_Allgather(hi, int(hchunk), bt, ho, int(hchunk), bt, MPI_COMM_WORLD); }},
    });
    // Where the ring starts to beat MPI's own call (MpiOptions::ring_threshold_bytes).
    for (int64_t kib : {16, 64, 256, 1024, 4096, 16384, 32768}) {
      const int64_t c = kib * 1024 / 4 / n * n;
      b.compare("all_reduce " + size_label(kib), double(c) * 4, {
          {"ours forced ring", [&] { ring.all_reduce(ConstBuffer(ip, c), Buffer(op, c)); }},
          {"ours forced native", [&] { native.all_reduce(ConstBuffer(ip, c), Buffer(op, c)); }},
      });
      b.compare("reduce_scatter " + size_label(kib), double(c) * 4, {
          {"ours forced ring", [&] { ring.reduce_scatter(ConstBuffer(ip, c), Buffer(op, c / n)); }},
          {"ours forced native", [&] { native.reduce_scatter(ConstBuffer(ip, c), Buffer(op, c / n)); }},
      });
    }
  }

  if (r == 0) {
    std::printf("comm_bandwidth: world %d, median of %d runs (rank-max time), GB/s = buffer bytes / time\n", n, iters);
    std::printf("%-28s %-40s %10s %8s\n", "collective", "implementation", "ms", "GB/s");
    for (const Row& row : b.rows)
      std::printf("%-28s %-40s %10.2f %8.2f\n", row.op.c_str(), row.impl.c_str(), row.seconds * 1e3,
                  row.bytes / row.seconds / 1e9);
    auto bench = [&](const char* name, const std::vector<double>& gbs) {
      if (gbs.size() < 2) return;
      const double ours = gbs[0], ref = gbs[1];
      std::printf("BENCH %s ours=%.3f ref=%.3f unit=GB_per_s ratio=%.3f\n", name, ours, ref, ours / ref);
    };
    const std::string sz = std::to_string(size_mib) + "MiB";
    bench(("allreduce_" + sz).c_str(), ar);
    bench(("reduce_scatter_" + sz).c_str(), rs);
    bench(("allgather_" + sz).c_str(), ag);
  }
  return 0;
}
