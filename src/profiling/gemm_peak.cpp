// measure_gemm_peak_flops: a measured peak for the MFU line when no datasheet number is given.
// A large square fp32 matmul is the best case of the hardware's BLAS, so MFU against it says how
// far the model's mix of operators is from that best case.
#include <algorithm>
#include <chrono>
#include <limits>

#include "profiling/flops_profiler.h"
#include "util/error.h"

namespace ds::profiling {

double measure_gemm_peak_flops(int64_t n, int repeats, torch::Device device) {
  DS_CHECK(n > 0 && repeats > 0, Error,
           "measure_gemm_peak_flops: n and repeats must be positive (got n=" + std::to_string(n) +
               ", repeats=" + std::to_string(repeats) + ")");
  torch::NoGradGuard no_grad;
  const auto opts = torch::TensorOptions().dtype(torch::kFloat).device(device);
  auto a = torch::randn({n, n}, opts);
  auto b = torch::randn({n, n}, opts);
  auto c = torch::mm(a, b);
  // Reading one element waits for the device (a CUDA matmul is asynchronous).
  auto sync = [&] { (void)c.index({0, 0}).item<float>(); };
  sync();
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    c = torch::mm(a, b);
    sync();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const double work = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  return best > 0 ? work / best : 0.0;
}

}  // namespace ds::profiling
