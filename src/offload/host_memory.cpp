#include "offload/host_memory.h"

#include <fmt/format.h>

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

torch::Tensor host_zeros(std::int64_t numel, torch::ScalarType dtype, const HostMemoryPlan& plan) {
  auto options = torch::TensorOptions().dtype(dtype).device(torch::kCPU).pinned_memory(plan.pinned);
  return torch::zeros({numel}, options);
}

}  // namespace ds::offload
