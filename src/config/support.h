// What deepspeed.cpp runs, decided from the config alone. The loader applies these rules (so
// `ds-report --config` refuses exactly what the engine would refuse at start), and the engine applies
// them again to configs built in code. Rules that need the model or the file system (buffer_size
// against the largest shard, nvme_path, free RAM and disk) stay with the engine.
#pragma once

#include <cstdint>

#include "config/config.h"

namespace ds {

// Throws ds::NotSupported for a feature this build does not implement (partial optimizer offload,
// Lamb under ZeRO, fp16 master weights) and ds::ConfigError for values the engine cannot run with
// (an LR schedule without an optimizer, too few NVMe swap buffers, aio settings the NVMe engine
// refuses).
void check_engine_support(const Config& c);

// Rules that depend on the machine: fp16 compute needs an accelerator (LibTorch 1.13 has no CPU
// fp16 GEMM). The engine checks its device; ds-report calls this for the machine it runs on.
void check_device_support(const Config& c, bool has_accelerator);

// Swap buffers NVMe optimizer offload needs: (sub-groups in flight) x (fp32 master + optimizer
// states). In flight: 1, +1 with pipeline_read, +1 with pipeline_write (offload/optimizer_swapper.h);
// states: Adam/AdamW/Lamb 2, Adagrad/Lion 1, SGD 1 with momentum else 0 (zero/flat_optimizer.cpp).
int64_t nvme_optimizer_buffers_needed(const OffloadOptimizerConfig& offload, const OptimizerConfig& optimizer);

}  // namespace ds
