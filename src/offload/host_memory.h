// Host (CPU-tier) buffers for ZeRO-Offload: where the fp32 master weights, optimizer state and
// gradient partitions live when `offload_optimizer.device` is "cpu". With a GPU they are pinned
// (page-locked) when `pin_memory` asks for it and the locked-memory limit allows, so copies to and
// from the device run at full speed and overlap; otherwise they are pageable, with one warning
// that says why. On a CPU-only machine the device and host tiers are the same RAM, but the engine
// still keeps separate host buffers and copies explicitly — the same code path a GPU takes.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "config/zero_config.h"

namespace ds::offload {

struct HostMemoryPlan {
  bool pinned = false;
  std::string note;  // why not pinned (empty when pinned or not requested)
};

// Decides pinning for `bytes` of host buffers: needs pin_memory, an accelerator to pin for, and
// RLIMIT_MEMLOCK (`memlock_limit`, UINT64_MAX = unlimited) of at least `bytes`.
HostMemoryPlan plan_host_memory(bool pin_memory, bool has_accelerator, std::uint64_t bytes,
                                std::uint64_t memlock_limit);

// ZeRO-Offload's host buffers for `numel` trainable elements partitioned over `ranks` (fp32
// gradients, master and optimizer state: 16 bytes per element), as offload_optimizer.pin_memory
// asks; logs why they are not pinned (a warning where pinning could have worked).
HostMemoryPlan plan_offload_host_memory(const OffloadOptimizerConfig& off, std::int64_t numel, int ranks,
                                        bool has_accelerator);

// offload_param.pin_memory: the parameter shards in host memory are pageable either way; says why
// (info on a CPU-only machine, where there is nothing to pin for; a warning with a GPU).
void note_offload_param_pin_memory(const OffloadParamConfig& off, bool has_accelerator);

// A zero-filled host tensor [numel] of `dtype`, pinned if the plan says so.
torch::Tensor host_zeros(std::int64_t numel, torch::ScalarType dtype, const HostMemoryPlan& plan);

}  // namespace ds::offload
