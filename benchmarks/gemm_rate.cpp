// gemm_rate: fp32 GEMM GF/s as the tools run out of the box (a child started without
// OPENBLAS_CORETYPE goes through the same start as ds-train: util/blas_core_select.h, re-exec
// included) against the best OpenBLAS core for this CPU set explicitly; and bf16 (oneDNN) against
// fp32 in the same process. Target: gemm_fp32_vs_best >= 0.95. Also a table of fp32 GF/s per core
// and one run from a generic start (OPENBLAS_CORETYPE=Prescott chosen by a ds program, as
// OpenBLAS 0.3.21 itself falls back to on Intel family 6 model 207), which must end at the best core.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "profiling/gemm_rate.h"
#include "util/blas_core_select.h"
#include "util/system_info.h"

namespace {

struct Measured {
  std::string core;
  double fp32 = 0, bf16 = 0;
};

std::string self_exe() {
  std::array<char, 4096> buf{};
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  return n > 0 ? std::string(buf.data(), static_cast<size_t>(n)) : "gemm_rate";
}

// Runs this program in --measure mode under `env_prefix` (an `env ...` word list) and parses its line.
Measured measure_child(const std::string& env_prefix, const std::string& args) {
  const std::string cmd = "env -u OPENBLAS_CORETYPE -u DS_OPENBLAS_CORETYPE_CHOSEN -u DS_OPENBLAS_REEXEC " + env_prefix +
                          " " + self_exe() + " --measure " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  Measured m;
  if (p == nullptr) return m;
  std::array<char, 1024> line{};
  std::array<char, 64> core{};
  while (std::fgets(line.data(), line.size(), p) != nullptr) {
    if (std::sscanf(line.data(), "MEASURED core=%63s fp32=%lf bf16=%lf", core.data(), &m.fp32, &m.bf16) == 3) {
      m.core = core.data();
    } else if (std::string(line.data()).find("keeping OPENBLAS_CORETYPE") == std::string::npos) {
      std::fputs(line.data(), stderr);  // the child's own lines, less the value this program set for it
    }
  }
  pclose(p);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  ds::select_blas_core_or_reexec(argv, "gemm_rate");  // ds-train's start, so --measure children run as it does
  CLI::App app{"gemm_rate: fp32 GEMM out of the box vs the best OpenBLAS core; bf16 vs fp32"};
  int64_t n = 2048;
  double seconds = 0.5;
  int rounds = 3;
  int threads = ds::cpu_cores();  // as ds-train's engine sets them (runtime/host_setup.h), one rank
  bool measure = false, bf16 = false;
  std::vector<std::string> cores = {"Prescott", "Haswell", "SkylakeX", "Cooperlake"};
  app.add_option("--n", n, "matrix size (n x n x n)")->capture_default_str();
  app.add_option("--seconds", seconds, "time per measurement")->capture_default_str();
  app.add_option("--rounds", rounds, "interleaved ours/ref measurements (best of each)")->capture_default_str();
  app.add_option("--threads", threads, "intra-op threads")->capture_default_str();
  app.add_option("--cores", cores, "OpenBLAS cores for the per-core table (empty: none)");
  app.add_flag("--measure", measure, "internal: measure in this process and print one MEASURED line");
  app.add_flag("--bf16", bf16, "internal: with --measure, measure bf16 too");
  CLI11_PARSE(app, argc, argv);

  torch::set_num_threads(threads);
  if (measure) {
    const double fp32 = ds::profiling::measure_gemm_gflops(torch::kFloat, n, seconds);
    const double b = bf16 ? ds::profiling::measure_gemm_gflops(torch::kBFloat16, n, seconds) : 0.0;
    const auto blas = ds::probe_loaded_blas();
    fmt::print("MEASURED core={} fp32={:.2f} bf16={:.2f}\n", blas.is_openblas() ? blas.core : "none", fp32, b);
    return 0;
  }

  const std::string args = fmt::format("--n {} --seconds {} --threads {}", n, seconds, threads);
  const auto cpu = ds::detect_cpu_features();
  const std::string best = ds::best_openblas_core(cpu);
  fmt::print("{}; {} threads; {}^3 GEMM, best of {:.1f} s per row\n", cpu.describe(), threads, n, seconds);
  for (const auto& core : cores) {
    const Measured m = measure_child("OPENBLAS_CORETYPE=" + core, args);
    fmt::print("  fp32 with OPENBLAS_CORETYPE={:<11} {:8.1f} GF/s (OpenBLAS ran {})\n", core, m.fp32, m.core);
  }
  const Measured generic = measure_child("OPENBLAS_CORETYPE=Prescott DS_OPENBLAS_CORETYPE_CHOSEN=Prescott", args);
  fmt::print("  fp32 from a generic start (Prescott) {:8.1f} GF/s (ended on {})\n", generic.fp32, generic.core);
  // Interleaved rounds, best of each: machine noise hits both alike.
  Measured ours, ref;
  for (int r = 0; r < rounds; ++r) {
    const Measured o = measure_child("", args + " --bf16");
    const Measured b = best.empty() ? o : measure_child("OPENBLAS_CORETYPE=" + best, args);
    if (o.fp32 > ours.fp32) ours.fp32 = o.fp32, ours.core = o.core;
    ours.bf16 = std::max(ours.bf16, o.bf16);
    ref.fp32 = std::max(ref.fp32, b.fp32);
  }
  fmt::print("  out of the box (as ds-train runs)    {:8.1f} GF/s fp32 on {}, {:.1f} GF/s bf16\n", ours.fp32, ours.core,
             ours.bf16);
  fmt::print("  best core set explicitly ({})  {:8.1f} GF/s fp32\n", best.empty() ? "none" : best, ref.fp32);
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  fmt::print("BENCH gemm_fp32_vs_best ours={:.1f} ref={:.1f} unit=GF_per_s ratio={:.3f}\n", ours.fp32, ref.fp32,
             ratio(ours.fp32, ref.fp32));
  fmt::print("BENCH gemm_bf16_vs_fp32 ours={:.1f} ref={:.1f} unit=GF_per_s ratio={:.3f}\n", ours.bf16, ours.fp32,
             ratio(ours.bf16, ours.fp32));
  return 0;
}
