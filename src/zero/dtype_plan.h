// Which dtype each piece of training state uses (the engine prints this table at start):
// parameters are stored and communicated in `model`, the module computes in `compute`, gradients
// accumulate across micro-steps in `grad_accum`, and the optimizer keeps fp32 master weights and
// state. On a CPU without fast 16-bit GEMM, `compute` is fp32 while storage stays 16-bit.
#pragma once

#include <torch/torch.h>

#include <string>

namespace ds::zero {

struct DtypePlan {
  torch::ScalarType model = torch::kFloat32;          // parameter storage (and gradient rounding)
  torch::ScalarType compute = torch::kFloat32;        // module parameters during forward/backward
  torch::ScalarType grad_accum = torch::kFloat32;     // accumulation across micro-steps
  torch::ScalarType communication = torch::kFloat32;  // gradient reduction (multi-rank)
  torch::ScalarType master = torch::kFloat32;
  torch::ScalarType optimizer_state = torch::kFloat32;
  std::string compute_reason;                          // why `compute` was chosen

  bool mixed() const { return model != torch::kFloat32; }
  // "parameters ........ bf16 (storage)\n..." — one row per piece of state.
  std::string table() const;
};

}  // namespace ds::zero
