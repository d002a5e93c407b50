// cpu_adam: the flat-span Adam (ZeRO-Offload's CPU optimizer) against torch::optim::Adam and
// against a bandwidth reference, in one run: params/s for 100M and 10M fp32 parameters.
// The bandwidth reference moves Adam's exact memory traffic (reads p, g, m, v; writes p, m, v =
// 28 bytes/param) with one add or max per array instead of Adam's math, under the same thread
// split and with the widest ISA the CPU has: the speed Adam would have if its math were free.
// Variants run interleaved (one of each per round, in a random order) so machine noise hits all
// alike; medians.
#include <CLI/CLI.hpp>
#include <immintrin.h>
#include <malloc.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "optim/adam.h"
#include "optim/simd_path.h"
#include "optim/tiles.h"

namespace {

using ds::optim::SimdPath;
constexpr double kBytesPerParam = 28.0;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Bandwidth reference bodies: p += g, m += g, v = max(v, g): real stores the compiler cannot
// elide, one cheap op each, and v stays >= 0 so the Adam runs that share the buffers see sane data.
// GCC 12 warns inside its own _mm512_undefined_* intrinsics (PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

inline void stream_one(float* p, const float* g, float* m, float* v, std::int64_t i) {
  p[i] += g[i];
  m[i] += g[i];
  v[i] = std::max(v[i], g[i]);
}

__attribute__((target("avx512f"))) void stream_avx512(float* p, const float* g, float* m, float* v, std::int64_t b,
                                                      std::int64_t e) {
  std::int64_t i = b;
  for (; i + 16 <= e; i += 16) {
    const __m512 gi = _mm512_loadu_ps(g + i);
    _mm512_storeu_ps(p + i, _mm512_add_ps(_mm512_loadu_ps(p + i), gi));
    _mm512_storeu_ps(m + i, _mm512_add_ps(_mm512_loadu_ps(m + i), gi));
    _mm512_storeu_ps(v + i, _mm512_max_ps(_mm512_loadu_ps(v + i), gi));
  }
  for (; i < e; ++i) stream_one(p, g, m, v, i);
}

__attribute__((target("avx2"))) void stream_avx2(float* p, const float* g, float* m, float* v, std::int64_t b,
                                                 std::int64_t e) {
  std::int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    const __m256 gi = _mm256_loadu_ps(g + i);
    _mm256_storeu_ps(p + i, _mm256_add_ps(_mm256_loadu_ps(p + i), gi));
    _mm256_storeu_ps(m + i, _mm256_add_ps(_mm256_loadu_ps(m + i), gi));
    _mm256_storeu_ps(v + i, _mm256_max_ps(_mm256_loadu_ps(v + i), gi));
  }
  for (; i < e; ++i) stream_one(p, g, m, v, i);
}

#pragma GCC diagnostic pop

void stream_scalar(float* p, const float* g, float* m, float* v, std::int64_t b, std::int64_t e) {
  for (std::int64_t i = b; i < e; ++i) stream_one(p, g, m, v, i);
}

struct Variant {
  std::string name;
  std::function<void()> run;
  std::vector<double> secs;
};

struct Result {
  double ours = 0, torch_ref = 0, bandwidth = 0;  // params/s
};

Result bench_size(std::int64_t n, int threads, int iters, int warmup, bool verbose) {
  torch::manual_seed(0);
  // 64-byte aligned (LibTorch's CPU allocator), as the engine's flat buffers are.
  torch::Tensor p = torch::randn({n}), g = torch::randn({n}) * 1e-3, m = torch::zeros({n}), v = torch::zeros({n});
  torch::Tensor out16 = torch::empty({n}, torch::kBFloat16);
  torch::Tensor tp = p.clone().requires_grad_(true);
  tp.mutable_grad() = g.clone();
  torch::optim::Adam torch_adam({tp}, torch::optim::AdamOptions(1e-3));

  float *pp = p.data_ptr<float>(), *gp = g.data_ptr<float>(), *mp = m.data_ptr<float>(), *vp = v.data_ptr<float>();
  auto* op = reinterpret_cast<std::uint16_t*>(out16.data_ptr());
  ds::optim::AdamHyperparams h;  // lr 1e-3, wd 0: the same update as torch's Adam
  ds::optim::AdamStepState state;
  std::int64_t step = 0;
  const SimdPath active = ds::optim::active_simd_path();
  auto ours = [&](std::optional<SimdPath> path) {
    state.advance(++step, h.beta1, h.beta2);
    ds::optim::adam_update(pp, gp, mp, vp, n, h, state, ds::optim::KernelOptions{path, threads});
  };
  auto stream = ds::optim::cpu_supports(SimdPath::Avx512) ? stream_avx512
                : ds::optim::cpu_supports(SimdPath::Avx2) ? stream_avx2
                                                          : stream_scalar;

  std::vector<Variant> vs;
  vs.push_back({std::string("ours (") + to_string(active) + ")", [&] { ours(std::nullopt); }, {}});
  if (ds::optim::cpu_supports(SimdPath::Avx2)) vs.push_back({"ours (avx2)", [&] { ours(SimdPath::Avx2); }, {}});
  vs.push_back({"ours (scalar reference)", [&] { ours(SimdPath::Scalar); }, {}});
  vs.push_back({"ours + bf16 copy-out", [&] {
                  state.advance(++step, h.beta1, h.beta2);
                  ds::optim::adam_update_copy_out(pp, gp, mp, vp, n, h, state,
                                                  {op, ds::optim::HalfType::Bf16}, {std::nullopt, threads});
                }, {}});
  vs.push_back({"torch::optim::Adam", [&] { torch_adam.step(); }, {}});
  vs.push_back({"bandwidth reference", [&] {
                  ds::optim::for_each_tile(n, threads,
                                           [&](std::int64_t b, std::int64_t e) { stream(pp, gp, mp, vp, b, e); });
                }, {}});

  // Each round runs the variants in a fresh (seeded) random order: torch's step allocates and
  // frees ~n*4-byte temporaries, and whichever kernel follows it can pay for that (page faults,
  // TLB); a fixed or rotated order would make one variant follow torch every round.
  std::mt19937 order_rng(12345);
  std::vector<size_t> order(vs.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  for (int it = 0; it < warmup + iters; ++it) {
    std::shuffle(order.begin(), order.end(), order_rng);
    for (size_t k : order) {
      Variant& var = vs[k];
      const auto t0 = std::chrono::steady_clock::now();
      var.run();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (it >= warmup) var.secs.push_back(s);
    }
  }

  if (verbose) {
    for (auto& var : vs) {
      std::printf("  %-26s", var.name.c_str());
      for (double t : var.secs) std::printf(" %8.2f", t * 1e3);
      std::printf("  ms\n");
    }
  }
  Result r;
  for (auto& var : vs) {
    const double rate = double(n) / median(var.secs);
    if (&var == &vs.front()) r.ours = rate;
    if (var.name == "torch::optim::Adam") r.torch_ref = rate;
    if (var.name == "bandwidth reference") r.bandwidth = rate;
  }
  for (auto& var : vs) {
    const double ms = median(var.secs) * 1e3, rate = double(n) / median(var.secs);
    std::printf("%-12lld %-26s %10.2f %12.1f %10.2f %9.2f %9.2f\n", static_cast<long long>(n), var.name.c_str(), ms,
                rate / 1e6, rate * kBytesPerParam / 1e9, rate / r.torch_ref, rate / r.bandwidth);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cpu_adam: flat-span Adam vs torch::optim::Adam vs a memory-bandwidth reference"};
  std::vector<std::int64_t> sizes{100'000'000, 10'000'000};
  int iters = 7, warmup = 2, threads = 0;
  bool verbose = false, plain_malloc = false;
  app.add_option("--sizes", sizes, "parameter counts (the first is the one the BENCH lines report)")
      ->capture_default_str();
  app.add_option("--iters", iters, "timed rounds (median)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed rounds first")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--threads", threads, "threads for every variant (0: every logical CPU)")->capture_default_str();
  app.add_flag("--verbose", verbose, "print every timed round per variant");
  app.add_flag("--plain-malloc", plain_malloc,
               "leave glibc malloc as it is (torch's step then page-faults fresh temporaries every step)");
  CLI11_PARSE(app, argc, argv);
  if (!plain_malloc) {
    // torch::optim::Adam allocates n-element temporaries every step; glibc serves those from
    // fresh mmaps and unmaps them on free, so each step page-faults them in again (on a VM that
    // can dominate the step). Keeping freed memory in the heap measures LibTorch's kernels instead,
    // as a caching allocator (jemalloc, tcmalloc) would. Our kernels allocate nothing.
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
  }

  // LibTorch's own default is the physical core count; the offloaded optimizer gets the whole host.
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(threads);  // torch's intra-op pool (OpenMP) gets the same count as ours
  std::printf("cpu_adam: %d threads, active kernel path %s (DS_SIMD overrides), %d rounds after %d warmup, %s\n",
              threads, to_string(ds::optim::active_simd_path()), iters, warmup,
              plain_malloc ? "plain glibc malloc" : "freed memory kept in the heap");
  std::printf("%-12s %-26s %10s %12s %10s %9s %9s\n", "params", "kernel", "ms/step", "Mparams/s", "GB/s@28B",
              "vs torch", "vs bw");
  std::vector<Result> results;
  for (std::int64_t n : sizes) results.push_back(bench_size(n, threads, iters, warmup, verbose));
  const Result& r = results.front();
  std::printf("BENCH cpu_adam_vs_torch ours=%.4g ref=%.4g unit=params_per_s ratio=%.3f\n", r.ours, r.torch_ref,
              r.ours / r.torch_ref);
  std::printf("BENCH cpu_adam_vs_bandwidth ours=%.4g ref=%.4g unit=params_per_s ratio=%.3f\n", r.ours, r.bandwidth,
              r.ours / r.bandwidth);
  return 0;
}
