// ZeroPlan: every decision the ZeRO stage and the offload keys imply, made once, from the config
// alone. The engine builder, config validation, `ds-report --config`, `ds-estimate` and the memory
// estimate all read the plan; nothing else reads zero_optimization.stage or the offload devices.
//
// It lives in config/ (namespace ds::zero, ZeRO's vocabulary) because validation needs it and
// config/ is below zero/ in the layer order.
//
// What the offload keys mean here (docs/offload.md):
//   offload_optimizer.device cpu   stages 1-3: fp32 gradients, master and optimizer state in host memory
//   offload_optimizer.device nvme  stages 1-3: as cpu, and the master and optimizer state are swapped
//                                  to files under nvme_path. DeepSpeed itself swaps only at stage 3 and
//                                  keeps stages 1-2 in CPU memory; we swap at every stage (same numbers,
//                                  less RAM) and say so once at startup.
//   offload_param.device           stage 3 only; below it DeepSpeed ignores the key, and so do we.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"

namespace ds::zero {

enum class Placement { Device, Cpu, Nvme };
std::string to_string(Placement p);  // "device", "cpu", "nvme"

// How the optimizer kernel is called: once per tensor (stage 0, as DeepSpeed's unfused optimizers)
// or once per flat partition span (ZeRO). It decides beta^t rounding (reference §19).
enum class KernelCalls { PerTensor, PerPartition };

struct ZeroPlan {
  int stage = 0;
  Placement optimizer = Placement::Device;  // fp32 master weights and optimizer state
  Placement gradients = Placement::Device;  // the fp32 gradient partition the optimizer reads
  Placement params = Placement::Device;     // stage 3 parameter shards
  KernelCalls kernel_calls = KernelCalls::PerTensor;
  // Elements per optimizer kernel call and swap unit (0: the whole span at once).
  int64_t sub_group_size = 0;
  // ZeRO-Offload: step each sub-group on the CPU as soon as its gradients are reduced, overlapping
  // the rest of backward; when false and offloaded, `no_overlap_reason` says why not.
  bool overlap_step = false;
  std::string no_overlap_reason;
  int64_t overlap_sub_group_size = 0;  // elements per overlapped step (zero_optimization.sub_group_size)
  // Notes for the user about how a key was read (the NVMe-at-stages-1-2 extension, ignored keys).
  std::vector<std::string> notes;

  bool partitioned() const { return stage > 0; }
  bool offloaded() const { return optimizer != Placement::Device; }
  // Lines for ds-report --config and the engine's startup log.
  std::vector<std::string> describe() const;
};

ZeroPlan resolve_zero_plan(const Config& config);

}  // namespace ds::zero
