#include "offload/host_memory.h"

#include <fmt/format.h>

#include "util/logging.h"
#include "util/system_info.h"

namespace ds::offload {

HostMemoryPlan plan_host_memory(bool pin_memory, bool has_accelerator, std::uint64_t bytes,
                                std::uint64_t memlock_limit) {
  HostMemoryPlan plan;
  if (!pin_memory) return plan;
  if (!has_accelerator) {
    plan.note = "pin_memory: no GPU on this machine, so there is nothing to pin for; host buffers are pageable";
    return plan;
  }
  if (memlock_limit != UINT64_MAX && memlock_limit < bytes) {
    plan.note = fmt::format("pin_memory: the locked-memory limit (ulimit -l) is {} but the offloaded states need {}; "
                            "host buffers are pageable (slower copies). Raise the limit (e.g. `ulimit -l unlimited`, "
                            "or memlock in /etc/security/limits.conf) to pin them",
                            format_bytes(memlock_limit), format_bytes(bytes));
    return plan;
  }
  plan.pinned = true;
  return plan;
}

void note_offload_param_pin_memory(const OffloadParamConfig& off, bool has_accelerator) {
  if (!off.pin_memory) return;
  if (has_accelerator)
    log::warn("zero_optimization.offload_param.pin_memory: pinning the offloaded parameter shards is not implemented "
              "yet; they are pageable (slower copies to the GPU)");
  else
    log::info("zero_optimization.offload_param.pin_memory: no GPU on this machine, so there is nothing to pin for; "
              "the parameter shards are pageable");
}

torch::Tensor host_zeros(std::int64_t numel, torch::ScalarType dtype, const HostMemoryPlan& plan) {
  auto options = torch::TensorOptions().dtype(dtype).device(torch::kCPU).pinned_memory(plan.pinned);
  return torch::zeros({numel}, options);
}

HostMemoryPlan plan_offload_host_memory(const OffloadOptimizerConfig& off, std::int64_t numel, int ranks,
                                        bool has_accelerator) {
  const auto bytes = static_cast<std::uint64_t>(numel) * 16u / static_cast<std::uint64_t>(std::max(1, ranks));
  HostMemoryPlan plan = plan_host_memory(off.pin_memory, has_accelerator, bytes, memlock_limit_bytes());
  if (!plan.note.empty()) {
    if (has_accelerator) log::warn("zero_optimization.offload_optimizer.{}", plan.note);
    else log::info("zero_optimization.offload_optimizer.{}", plan.note);
  }
  return plan;
}

}  // namespace ds::offload
