#include "runtime/host_setup.h"

#include <fmt/format.h>

#include <sched.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "runtime/world.h"
#include "util/blas_core_select.h"
#include "util/error.h"
#include "util/logging.h"
#include "util/system_info.h"

namespace ds {
namespace {

void bind_cores_to_rank(int share) {
  const char* v = std::getenv("DS_BIND_CORES_TO_RANK");
  if (v == nullptr || std::string(v) == "0") return;
  const int first = (local_rank() * share) % std::max(1, cpu_cores());
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c = first; c < first + share && c < cpu_cores(); ++c) CPU_SET(c, &set);
  DS_CHECK(sched_setaffinity(0, sizeof set, &set) == 0, Error,
           fmt::format("DS_BIND_CORES_TO_RANK: cannot bind local rank {} to cores {}-{}", local_rank(), first,
                       first + share - 1));
  log::info("DS_BIND_CORES_TO_RANK: local rank {} bound to cores {}-{}", local_rank(), first, first + share - 1);
}

// A library user's program loads OpenBLAS before any of our code runs, so it cannot be fixed here:
// say once per process what the variable would gain (the tools set it themselves, blas_core_select.h).
void warn_if_slow_blas_core() {
  static std::once_flag once;
  std::call_once(once, [] {
    const BlasCoreDecision d = current_blas_core_decision();
    if (d.action != BlasCoreAction::kSet) return;
    log::warn("{}; set it in the environment before the program starts (the ds tools and ds-run do this "
              "themselves; docs/cpu-kernels.md)", d.message);
  });
}

}  // namespace

torch::Device pick_device() {
  if (torch::cuda::is_available()) return torch::Device(torch::kCUDA, local_rank() % torch::cuda::device_count());
  return torch::kCPU;
}

void configure_cpu_threads() {
  const int share = std::max(1, cpu_cores() / std::max(1, local_world_size()));
  bind_cores_to_rank(share);
  warn_if_slow_blas_core();
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return;
  if (torch::get_num_threads() < share) {
    torch::set_num_threads(share);
    log::info("intra-op threads: {} (set OMP_NUM_THREADS to choose another count)", share);
  }
}

void place_module(torch::nn::Module& module, torch::Device device, torch::ScalarType compute) {
  torch::NoGradGuard no_grad;
  for (auto& t : module.parameters(/*recurse=*/true)) {
    const bool keep = !t.requires_grad() && (t.scalar_type() == torch::kBFloat16 || t.scalar_type() == torch::kHalf);
    t.set_data(t.data().to(device, keep ? t.scalar_type() : compute));
  }
  for (auto& b : module.buffers(/*recurse=*/true)) b.set_data(b.data().to(device, compute));
}

}  // namespace ds
