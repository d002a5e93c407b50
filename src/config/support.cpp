// What deepspeed.cpp runs, from the config alone (see support.h). Messages name the key and the fix.
#include "config/support.h"

#include <fmt/format.h>

#include "config/zero_plan.h"
#include "util/error.h"

namespace ds {
namespace {

// The async I/O engine's limits (aio/aio_options.cpp, AioOptions::validate): O_DIRECT moves whole
// 4 KiB blocks; deeper queues and more threads than these are refused there too.
constexpr int64_t kAioBlockAlignment = 4096;
constexpr int64_t kAioMaxQueueDepth = 4096;
constexpr int64_t kAioMaxThreads = 64;

void check_aio(const AioConfig& a) {
  if (a.block_size <= 0 || a.block_size % kAioBlockAlignment != 0)
    throw ConfigError("aio.block_size", fmt::format("{} must be a positive multiple of 4096 bytes for NVMe offload "
                                                    "(O_DIRECT moves whole 4 KiB blocks); DeepSpeed's default is 1048576",
                                                    a.block_size));
  if (a.queue_depth < 1 || a.queue_depth > kAioMaxQueueDepth)
    throw ConfigError("aio.queue_depth", fmt::format("{} must be in [1, {}]", a.queue_depth, kAioMaxQueueDepth));
  if (a.intra_op_parallelism < 1 || a.intra_op_parallelism > kAioMaxThreads)
    throw ConfigError("aio.intra_op_parallelism",
                      fmt::format("{} must be in [1, {}]", a.intra_op_parallelism, kAioMaxThreads));
}

void check_nvme_swap_buffers(const OffloadOptimizerConfig& off, const OptimizerConfig& opt) {
  const int64_t needed = nvme_optimizer_buffers_needed(off, opt);
  if (off.buffer_count >= needed) return;
  const char* mode = off.pipeline_read && off.pipeline_write ? "pipeline_read and pipeline_write"
                     : off.pipeline_read                      ? "pipeline_read"
                     : off.pipeline_write                     ? "pipeline_write"
                                                              : "swapping without pipelining";
  const int64_t in_flight = 1 + (off.pipeline_read ? 1 : 0) + (off.pipeline_write ? 1 : 0);
  throw ConfigError("zero_optimization.offload_optimizer.buffer_count",
                    fmt::format("{} swap buffers are too few: {} keeps {} sub-group(s) in flight, each in {} buffers "
                                "(the fp32 master and {}'s {} state(s)): {} buffers (raise buffer_count to {} or turn "
                                "pipelining off)",
                                off.buffer_count, mode, in_flight, needed / in_flight, to_string(opt.type),
                                needed / in_flight - 1, needed, needed));
}

}  // namespace

int64_t nvme_optimizer_buffers_needed(const OffloadOptimizerConfig& off, const OptimizerConfig& opt) {
  int64_t states = 0;
  switch (opt.type) {
    case OptimizerType::Adam:
    case OptimizerType::AdamW:
    case OptimizerType::Lamb:
    case OptimizerType::OneBitAdam:
    case OptimizerType::ZeroOneAdam:
    case OptimizerType::OneBitLamb: states = 2; break;
    case OptimizerType::Adagrad:
    case OptimizerType::Lion: states = 1; break;
    case OptimizerType::SGD: states = opt.params.momentum != 0.0 ? 1 : 0; break;
  }
  const int64_t in_flight = 1 + (off.pipeline_read ? 1 : 0) + (off.pipeline_write ? 1 : 0);
  return in_flight * (1 + states);
}

void check_engine_support(const Config& c) {
  const ZeroConfig& z = c.zero_optimization;
  const zero::ZeroPlan plan = zero::resolve_zero_plan(c);
  const OffloadOptimizerConfig& off = z.offload_optimizer;
  if (plan.offloaded() && off.ratio < 1.0)
    throw NotSupported(fmt::format("zero_optimization.offload_optimizer.ratio: {} asks for partial offload (part of "
                                   "the optimizer on the device), which deepspeed.cpp does not do; use 1.0 (all on "
                                   "the CPU) or remove offload_optimizer",
                                   off.ratio));
  if (plan.partitioned() && c.optimizer && c.optimizer->type == OptimizerType::Lamb)
    throw NotSupported("optimizer.type: Lamb needs each parameter's whole gradient and weights for its trust "
                       "ratio, which ZeRO partitions split across ranks (DeepSpeed refuses it too); use stage 0 "
                       "or Adam/AdamW/Lion/Adagrad/SGD");
  if (c.fp16.enabled && c.fp16.fp16_master_weights_and_grads)
    throw NotSupported("fp16.fp16_master_weights_and_grads: fp16 master weights is not implemented in deepspeed.cpp "
                       "yet; remove it from the config or set it to its default");
  if (c.scheduler && !c.optimizer)
    throw ConfigError("scheduler", "an LR schedule needs an optimizer; add an \"optimizer\" section");
  const bool optimizer_on_nvme = plan.optimizer == zero::Placement::Nvme && c.optimizer;
  if (optimizer_on_nvme) check_nvme_swap_buffers(off, *c.optimizer);
  if (optimizer_on_nvme || plan.params == zero::Placement::Nvme) check_aio(c.aio);
}

void check_device_support(const Config& c, bool has_accelerator) {
  if (!has_accelerator && c.data_types.compute_dtype == DType::Fp16)
    throw NotSupported("data_types.compute_dtype: fp16 compute needs a GPU (LibTorch 1.13 has no fp16 GEMM on CPU); "
                       "remove the key (fp16 training computes in fp32 on CPU) or use \"bf16\"/\"fp32\"");
}

}  // namespace ds
