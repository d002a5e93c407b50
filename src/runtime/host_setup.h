// The process's compute resources before an engine is built: the device this rank uses and, on
// CPUs, its share of the cores (intra-op threads, optional pinning to a core slice).
#pragma once

#include <torch/torch.h>

namespace ds {

// The local rank's GPU when LibTorch has CUDA, else the CPU.
torch::Device pick_device();

// LibTorch 1.13 sizes its intra-op pool from physical cores as cpuinfo sees them, which on many
// VMs is 1. Unless the user set OMP_NUM_THREADS, each local rank gets its share of the online CPUs.
// DS_BIND_CORES_TO_RANK=1 (our launcher-free form of DeepSpeed's `--bind_cores_to_rank`) also pins
// each local rank to its own slice of the cores.
void configure_cpu_threads();

// module.to(device, compute), except that a frozen 16-bit parameter keeps its dtype: it has no
// optimizer state and computes in its own precision (a LoRA base kept in bf16, models/lora.h), as
// DeepSpeed leaves the module's dtypes alone unless bf16/fp16 is enabled.
void place_module(torch::nn::Module& module, torch::Device device, torch::ScalarType compute);

}  // namespace ds
