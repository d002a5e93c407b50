#include "config/zero_plan.h"

#include <fmt/format.h>

namespace ds::zero {

std::string to_string(Placement p) {
  switch (p) {
    case Placement::Device: return "device";
    case Placement::Cpu: return "cpu";
    case Placement::Nvme: return "nvme";
  }
  return "?";
}

namespace {

Placement placement_of(OffloadDevice d) {
  return d == OffloadDevice::Nvme ? Placement::Nvme : d == OffloadDevice::Cpu ? Placement::Cpu : Placement::Device;
}

// Why the offloaded optimizer step cannot overlap backward ("" when it can).
std::string why_no_overlap(const Config& c, const ZeroPlan& p) {
  if (p.stage < 2) return "stage 1 reduces gradients only at the boundary";
  if (c.gradient_clipping > 0) return "gradient_clipping needs the global norm of every gradient first";
  if (c.fp16.enabled) return "fp16 checks every gradient for overflow first (and skips the step if one did)";
  if (!c.optimizer) return "no optimizer";
  if (!c.zero_optimization.ignore_unused_parameters)
    return "ignore_unused_parameters false checks that every parameter got a gradient first";
  if (p.optimizer == Placement::Nvme) return "NVMe swapping streams the sub-groups through its buffers in order";
  return "";
}

}  // namespace

ZeroPlan resolve_zero_plan(const Config& c) {
  const ZeroConfig& z = c.zero_optimization;
  ZeroPlan p;
  p.stage = z.stage;
  p.kernel_calls = p.stage == 0 ? KernelCalls::PerTensor : KernelCalls::PerPartition;
  if (p.stage > 0) {
    p.optimizer = placement_of(z.offload_optimizer.device);
    if (p.offloaded()) p.gradients = Placement::Cpu;
  }
  // Below stage 3 offload_param is ignored, as in DeepSpeed; the loader warns once (parse_zero.cpp).
  if (p.stage == 3) p.params = placement_of(z.offload_param.device);
  if (p.optimizer == Placement::Nvme && p.stage < 3)
    p.notes.push_back(fmt::format("zero_optimization.offload_optimizer.device \"nvme\" at stage {}: the master weights "
                                  "and optimizer state are swapped to files under nvme_path (DeepSpeed keeps them in "
                                  "CPU memory below stage 3; the numbers are the same)",
                                  p.stage));
  // Sub-groups: offloaded stage 3 and NVMe swapping step (and swap) sub_group_size elements at a time.
  if ((p.offloaded() && p.stage == 3) || p.optimizer == Placement::Nvme) p.sub_group_size = z.sub_group_size;
  if (p.offloaded()) {
    p.no_overlap_reason = why_no_overlap(c, p);
    p.overlap_step = p.no_overlap_reason.empty();
    if (p.overlap_step) p.overlap_sub_group_size = z.sub_group_size;
  }
  return p;
}

std::vector<std::string> ZeroPlan::describe() const {
  std::vector<std::string> out;
  out.push_back(fmt::format("ZeRO stage {}: parameters on {}, gradients {} on {}, master weights and optimizer state "
                            "on {}{}",
                            stage, stage == 3 ? to_string(params) + " (sharded)" : "device",
                            stage >= 2 ? "partitioned" : "full", to_string(gradients), to_string(optimizer),
                            stage > 0 ? " (partitioned)" : ""));
  out.push_back(fmt::format("optimizer kernel: once per {}{}", kernel_calls == KernelCalls::PerTensor ? "tensor" : "partition",
                            sub_group_size > 0 ? fmt::format(", in sub-groups of {} elements", sub_group_size) : ""));
  if (offloaded())
    out.push_back(overlap_step ? fmt::format("ZeRO-Offload: each optimizer sub-group ({} elements) steps on the CPU as "
                                             "soon as its gradients are reduced, overlapping the rest of backward",
                                             overlap_sub_group_size)
                               : "ZeRO-Offload: the CPU step runs after backward (" + no_overlap_reason + ")");
  for (const auto& n : notes) out.push_back(n);
  return out;
}

}  // namespace ds::zero
