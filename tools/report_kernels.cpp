#include "report_kernels.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>

#include "profiling/gemm_rate.h"
#include "util/blas_core_select.h"

namespace ds::tools {
namespace {

// Who set the core OpenBLAS runs: the user, a ds tool (this one's re-exec, or ds-run), or nobody.
std::string core_source() {
  const char* value = std::getenv(kOpenBlasCoreVar);
  const char* chosen = std::getenv(kCoreChosenVar);
  if (value == nullptr || *value == '\0') return "OpenBLAS's own detection";
  if (chosen != nullptr && std::strcmp(chosen, value) == 0) return fmt::format("{}={} set by ds", kOpenBlasCoreVar, value);
  return fmt::format("{}={} set by the user", kOpenBlasCoreVar, value);
}

}  // namespace

std::string running_blas_core() { return probe_loaded_blas().core; }

std::vector<std::pair<std::string, std::string>> kernel_rows() {
  const CpuFeatures cpu = detect_cpu_features();
  const BlasInfo blas = probe_loaded_blas();
  const std::string best = best_openblas_core(cpu);
  std::vector<std::pair<std::string, std::string>> rows = {
      {"cpu", cpu.describe()},
      {"blas", blas.name + (blas.library.empty() ? "" : " (" + blas.library + ")")},
  };
  if (blas.is_openblas()) {
    rows.emplace_back("blas config", blas.config);
    rows.emplace_back("blas core", fmt::format("{} ({}; best for this CPU: {})", blas.core, core_source(),
                                               best.empty() ? "generic, no AVX2" : best));
  } else {
    rows.emplace_back("blas core", fmt::format("not OpenBLAS: no {} set", kOpenBlasCoreVar));
  }
  rows.emplace_back("onednn isa", profiling::onednn_isa());
  const int threads = torch::get_num_threads();
  const double fp32 = profiling::measure_gemm_gflops(torch::kFloat, 1024, 0.25);
  const double bf16 = profiling::measure_gemm_gflops(torch::kBFloat16, 1024, 0.25);
  rows.emplace_back("gemm fp32 (1024^3, measured)", fmt::format("{:.0f} GF/s on {} thread(s)", fp32, threads));
  rows.emplace_back("gemm bf16 (1024^3, measured)", fmt::format("{:.0f} GF/s ({:.1f}x fp32)", bf16, fp32 > 0 ? bf16 / fp32 : 0.0));
  return rows;
}

}  // namespace ds::tools
