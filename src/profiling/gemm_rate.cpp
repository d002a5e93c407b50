#include "profiling/gemm_rate.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>

namespace ds::profiling {

double measure_gemm_gflops(torch::ScalarType dtype, int64_t n, double seconds) {
  torch::NoGradGuard no_grad;
  const auto opts = torch::TensorOptions().dtype(dtype);
  const auto a = torch::randn({n, n}).to(opts);
  const auto b = torch::randn({n, n}).to(opts);
  auto c = torch::mm(a, b);  // warm-up: packing buffers, oneDNN primitive creation
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  double best = 0;
  for (int r = 0; r < 3 || std::chrono::duration<double>(Clock::now() - start).count() < seconds; ++r) {
    const auto t0 = Clock::now();
    c = torch::mm(a, b);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > 0) best = std::max(best, 2.0 * static_cast<double>(n) * n * n / s / 1e9);
  }
  return best;
}

std::string onednn_isa() {
  using IsaFn = int (*)();
  using Isa2StrFn = const char* (*)(int);
  const auto effective = reinterpret_cast<IsaFn>(dlsym(RTLD_DEFAULT, "dnnl_get_effective_cpu_isa"));
  const auto to_str = reinterpret_cast<Isa2StrFn>(dlsym(RTLD_DEFAULT, "dnnl_cpu_isa2str"));
  if (effective == nullptr) return "oneDNN not loaded (no dnnl_get_effective_cpu_isa)";
  const int isa = effective();
  const char* name = to_str != nullptr ? to_str(isa) : nullptr;
  return name != nullptr ? std::string(name) : "isa 0x" + std::to_string(isa);
}

}  // namespace ds::profiling
